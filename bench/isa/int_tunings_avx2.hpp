#pragma once
// Variations of the AVX2 integer GEMM tuning (IntTile<8> in int_tile.hpp)
// for bench_int_tunings: each differs from the default in one member. The
// register tile stays 1 panel: 2 panels need 24 accumulators, more than the
// 16 ymm registers. Included by int_tunings.avx2.cpp (traits Avx2) and
// int_tunings.avxvnni.cpp (Avx2Vnni), each instantiating only its own.
#include <type_traits>

#include "kernels/x86/int_gemm_impl.hpp"
#include "support/int_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = IntTile<8>;
struct Block128K : Base {
  static constexpr int64_t kActBlockBytes = 128 * 1024;
};
struct Block256K : Base {
  static constexpr int64_t kActBlockBytes = 256 * 1024;
};
struct Block512K : Base {
  static constexpr int64_t kActBlockBytes = 512 * 1024;
};
struct Block2M : Base {
  static constexpr int64_t kActBlockBytes = 2048 * 1024;
};
struct NoPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = 0;
};
struct Ahead512 : Base {
  static constexpr int64_t kStreamPrefetchBytes = 512;
};
struct Ahead2K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 2048;
};
struct Ahead4K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 4096;
};

template <int64_t Bytes>
struct CodeBlocksAhead : Base {  // the k-block codes kernel's prefetch distance
  static constexpr int64_t kCodeBlocksPrefetchBytes = Bytes;
};

template <int64_t Rows>
struct CodesInRegisters : Base {  // 4-bit codes: looked up in registers up to Rows tokens, else a tile
  static constexpr int64_t kCodesInRegistersRows = Rows;
};

template <class V, class T>
std::unique_ptr<IntKernel> make(const IntLayerDesc& d) {
  check_int_desc(d);
  return std::make_unique<SimdIntKernel<V, T>>(d, std::is_same_v<V, Avx2Vnni> ? "avx2_vnni" : "avx2");
}

// The default tuning on rows read in place (IntLayerDesc::weight_in_place),
// as a mapped checkpoint's INT8 or ConvRot W4A4 layer runs.
struct Rows1 : Base {
  static constexpr int kRowStreams = 1;
};
struct Rows8 : Base {
  static constexpr int kRowStreams = 8;
};
template <class V, class T = Base>
std::unique_ptr<IntKernel> make_in_place(const IntLayerDesc& d) {
  IntLayerDesc in_place = d;
  in_place.weight_in_place = true;
  return make<V, T>(in_place);
}

// The library's own build for V (what a layer runs), packed and in place,
// listed last (int_tunings.avx512.cpp says why).
template <class V>
std::unique_ptr<IntKernel> layer_kernel(const IntLayerDesc& d) {
  if constexpr (std::is_same_v<V, Avx2Vnni>) return make_int_kernel_avx_vnni(d);
  else return make_int_kernel_avx2_novnni(d);
}
template <class V>
std::unique_ptr<IntKernel> layer_kernel_in_place(const IntLayerDesc& d) {
  IntLayerDesc in_place = d;
  in_place.weight_in_place = true;
  return layer_kernel<V>(in_place);
}

template <class V>
std::vector<bench::IntTuning> avx2_int_tunings() {
  return {{"default (act. block 1 MiB, prefetch 1 KiB, codes 4)", make<V, Base>},
          {"activation block 128 KiB", make<V, Block128K>},
          {"activation block 256 KiB (before)", make<V, Block256K>},
          {"activation block 512 KiB", make<V, Block512K>},
          {"activation block 2 MiB", make<V, Block2M>},
          {"no small-M prefetch (the default before)", make<V, NoPrefetch>},
          {"small-M prefetch 512 B ahead", make<V, Ahead512>},
          {"small-M prefetch 2 KiB ahead", make<V, Ahead2K>},
          {"small-M prefetch 4 KiB ahead", make<V, Ahead4K>},
          {"4-bit code blocks prefetched 1 KiB ahead", make<V, CodeBlocksAhead<1024>>},
          {"4-bit code blocks prefetched 2 KiB ahead", make<V, CodeBlocksAhead<2048>>},
          {"4-bit codes decoded to a tile at every M (before)", make<V, CodesInRegisters<0>>},
          {"4-bit codes in registers up to 12 rows", make<V, CodesInRegisters<12>>},
          {"rows read in place (no packed copy)", make_in_place<V>},
          {"in place, 1 row stream", make_in_place<V, Rows1>},
          {"in place, 8 row streams", make_in_place<V, Rows8>},
          {"the layer's kernel (the library's build)", layer_kernel<V>},
          {"the layer's kernel, in place (the library's build)", layer_kernel_in_place<V>}};
}

}  // namespace
}  // namespace mixq::kernels::x86
