// mixq.save_file(path, {name: array}, metadata=None): writes a safetensors
// file from NumPy arrays / DLPack tensors with mixq's atomic writer (so
// Python users can make float source checkpoints without other packages).
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/safetensors_writer.hpp"

namespace mixq::py {
namespace {

using nb::dlpack::dtype_code;

DType tensor_dtype(nb::dlpack::dtype t, const std::string& name) {
  if (t.lanes == 1) {
    switch (static_cast<dtype_code>(t.code)) {
      case dtype_code::Float:
        if (t.bits == 64) return DType::F64;
        if (t.bits == 32) return DType::F32;
        if (t.bits == 16) return DType::F16;
        break;
      case dtype_code::Bfloat:
        if (t.bits == 16) return DType::BF16;
        break;
      case dtype_code::Int:
        if (t.bits == 64) return DType::I64;
        if (t.bits == 32) return DType::I32;
        if (t.bits == 16) return DType::I16;
        if (t.bits == 8) return DType::I8;
        break;
      case dtype_code::UInt:
        if (t.bits == 8) return DType::U8;
        break;
      case dtype_code::Bool:
        if (t.bits == 8) return DType::BOOL;
        break;
      case dtype_code::Float8_E4M3FN:
        if (t.bits == 8) return DType::F8_E4M3;
        break;
      case dtype_code::Float8_E5M2:
        if (t.bits == 8) return DType::F8_E5M2;
        break;
      default:
        break;
    }
  }
  fail("save_file: tensor '{}' has a dtype safetensors (as mixq writes it) cannot hold "
       "(DLPack code {}, {} bits, {} lanes)", name, t.code, t.bits, t.lanes);
}

// The array's bytes in C order (a copy only when it is not C-contiguous).
std::vector<std::byte> c_order_bytes(const nb::ndarray<nb::ro>& a, size_t item, int64_t count,
                                     const std::byte*& contiguous) {
  int64_t expected = 1;
  bool c_order = true;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) c_order = false;
    expected *= static_cast<int64_t>(a.shape(i));
  }
  const auto* base = static_cast<const std::byte*>(a.data());
  if (c_order) {
    contiguous = base;
    return {};
  }
  std::vector<std::byte> out(static_cast<size_t>(count) * item);
  for (int64_t e = 0; e < count; ++e) {
    int64_t offset = 0, rest = e;
    for (size_t d = a.ndim(); d-- > 0;) {
      const int64_t extent = static_cast<int64_t>(a.shape(d));
      offset += (rest % extent) * a.stride(d);
      rest /= extent;
    }
    std::memcpy(out.data() + e * item, base + offset * static_cast<int64_t>(item), item);
  }
  contiguous = out.data();
  return out;
}

void save_file(nb::handle path, nb::dict tensors, std::map<std::string, std::string> metadata) {
  nb::object fspath = nb::module_::import_("os").attr("fspath")(path);
  if (!nb::isinstance<nb::str>(fspath)) fail("save_file: paths must be text, got bytes");
  const std::string target = nb::cast<std::string>(fspath);
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    nb::ndarray<nb::ro> array;
  };
  std::vector<Entry> entries;
  for (auto [key, value] : tensors) {
    if (!nb::isinstance<nb::str>(key)) fail("save_file: tensor names must be strings");
    Entry entry;
    entry.name = nb::cast<std::string>(key);
    // mixq.open refuses such a name (a NUL cuts it short for every C API).
    if (entry.name.find('\0') != std::string::npos)
      fail("save_file: tensor name '{}' holds a NUL byte", entry.name);
    if (!nb::try_cast(value, entry.array, /*convert=*/false))
      fail("save_file: tensor '{}' is not an array (NumPy or __dlpack__)", entry.name);
    if (entry.array.device_type() != nb::device::cpu::value)
      fail("save_file: tensor '{}' is not in CPU memory", entry.name);
    entry.dtype = tensor_dtype(entry.array.dtype(), entry.name);
    for (size_t i = 0; i < entry.array.ndim(); ++i)
      entry.shape.push_back(static_cast<int64_t>(entry.array.shape(i)));
    entries.push_back(std::move(entry));
  }
  nb::gil_scoped_release release;
  SafetensorsWriter writer(target, metadata);
  for (const Entry& e : entries) writer.declare(e.name, e.dtype, e.shape);
  for (const Entry& e : entries) {
    const size_t item = dtype_size(e.dtype);
    const int64_t count = shape_numel(e.shape);
    const std::byte* data = nullptr;
    std::vector<std::byte> copy = c_order_bytes(e.array, item, count, data);
    writer.write({data, static_cast<size_t>(count) * item});
  }
  writer.commit();
}

}  // namespace

void bind_save(nb::module_& m) {
  m.def("save_file", &save_file, nb::arg("path"), nb::arg("tensors"),
        nb::arg("metadata") = std::map<std::string, std::string>{},
        "Writes {name: array} (NumPy arrays or CPU tensors with __dlpack__) as one\n"
        "safetensors file, atomically. metadata: the header's __metadata__ (str -> str).");
}

}  // namespace mixq::py
