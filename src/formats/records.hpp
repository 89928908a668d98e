#pragma once
// The format records of the core families, one accessor per record (each
// defined in its family's file). registry.cpp puts them in the table.
#include "mixq/format.hpp"

namespace mixq::formats {

const FormatTraits& unquantized_record();        // unquantized.cpp
const FormatTraits& float8_e4m3fn_format();      // fp8.cpp
const FormatTraits& float8_e5m2_format();        // fp8.cpp
const FormatTraits& nvfp4_format();              // nvfp4.cpp
const FormatTraits& mxfp8_format();              // mxfp8.cpp
const FormatTraits& int8_tensorwise_format();    // int8.cpp
const FormatTraits& convrot_w4a4_format();       // convrot_w4a4.cpp

}  // namespace mixq::formats
