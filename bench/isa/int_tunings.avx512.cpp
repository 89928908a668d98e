// Variations of the AVX-512 integer GEMM tuning (IntTile<16> in
// int_tile.hpp) for bench_int_tunings: each differs from the default in
// one member. On AMX machines the default is the AMX kernel's tuning (AmxTile,
// as int_gemm_amx.avx512.cpp defines it) and its variations.
#include <limits>

#include "kernels/x86/int_gemm_impl.hpp"
#include "support/int_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = IntTile<16>;
struct Block384K : Base {
  static constexpr int64_t kActBlockBytes = 384 * 1024;
};
struct Block1200K : Base {
  static constexpr int64_t kActBlockBytes = 1200 * 1024;
};
struct TwoPanels : Base {
  static constexpr int kTilePanels = 2;
};
template <int64_t K>
struct KChunk : Base {
  static constexpr int64_t kKChunk = K;
};
struct NoPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = 0;
};
struct Ahead1K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 1024;
};
struct Ahead4K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 4096;
};
template <int64_t Bytes>
struct OneStreamAhead : Base {
  static constexpr int64_t kOneStreamPrefetchBytes = Bytes;
};
struct AheadIntoL2 : Base {
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T1;
};

template <int64_t Rows>
struct CodesInRegisters : Base {  // 4-bit codes: decoded in registers up to Rows tokens, else to a tile
  static constexpr int64_t kCodesInRegistersRows = Rows;
};

struct CodesShuffled : Base {  // no VBMI lookup in codes_micro
  static constexpr bool kCodesVbmi = false;
};

struct Rows1 : Base {
  static constexpr int kRowStreams = 1;
};
struct RowsLong4 : Base {  // one stream for rows under 4 KiB (AVX2's choice)
  static constexpr int64_t kLongRowBytes = 4096;
  static constexpr bool kOneRowAtOneToken = false;
};
struct Rows8 : Base {
  static constexpr int kRowStreams = 8;
  static constexpr bool kOneRowAtOneToken = false;
};
struct Rows4AtOneToken : Base {
  static constexpr bool kOneRowAtOneToken = false;
};
struct Int8GemvTo24 : Base {
  static constexpr int64_t kInt8InPlaceGemvRows = kGemvRows;
};
struct SmallTo24 : Base {  // the panel split up to 24 tokens (before)
  static constexpr int64_t kSmallRows = 24;
};

// The many-row GEMM on AMX-INT8 tiles (above 24 rows; VNNI loops below).
struct AmxTile : Base {
  static constexpr bool kAmx = true;
  static constexpr int64_t kSmallRows = kGemvRows;  // as int_gemm_amx.avx512.cpp
};
struct AmxBlock384K : AmxTile {
  static constexpr int64_t kActBlockBytes = 384 * 1024;
};
struct AmxBlock1536K : AmxTile {
  static constexpr int64_t kActBlockBytes = 1536 * 1024;
};
struct AmxBlock3M : AmxTile {
  static constexpr int64_t kActBlockBytes = 3072 * 1024;
};
struct AmxNoNextTile : AmxTile {
  static constexpr bool kAmxNextTileToL2 = false;
};
struct AmxNoPrefetch : AmxTile {  // small M runs the VNNI loops on AMX machines too
  static constexpr int64_t kStreamPrefetchBytes = 0;
};

template <class T>
std::unique_ptr<IntKernel> make(const IntLayerDesc& d) {
  check_int_desc(d);
  return std::make_unique<SimdIntKernel<Avx512, T>>(d, T::kAmx ? "avx512_amx" : "avx512_vnni");
}

// The library's own build (what a layer runs), packed and in place, listed
// last: a variant must beat these rows, not only this file's build of the
// default (BENCHMARKS.md, "Zen 4, second session").
std::unique_ptr<IntKernel> layer_kernel(const IntLayerDesc& d) { return make_int_kernel_avx512(d); }
std::unique_ptr<IntKernel> layer_kernel_in_place(const IntLayerDesc& d) {
  IntLayerDesc in_place = d;
  in_place.weight_in_place = true;
  return make_int_kernel_avx512(in_place);
}

// The default tuning on rows read in place (IntLayerDesc::weight_in_place),
// as a mapped checkpoint's INT8 or ConvRot W4A4 layer runs.
template <class T = Base>
std::unique_ptr<IntKernel> make_in_place(const IntLayerDesc& d) {
  IntLayerDesc in_place = d;
  in_place.weight_in_place = true;
  return make<T>(in_place);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<IntTuning> int_tunings_avx512() {
  using namespace kernels::x86;
  return {{"default (4 panels, block 768 KiB, K chunks 3072, prefetch 2 KiB)", make<Base>},
          {"activation block 384 KiB", make<Block384K>},
          {"activation block 1200 KiB", make<Block1200K>},
          {"register tile 6 x 2 panels", make<TwoPanels>},
          {"large M: K chunks of 2048", make<KChunk<2048>>},
          {"large M: K chunks of 3072", make<KChunk<3072>>},
          {"large M: K chunks of 4096", make<KChunk<4096>>},
          {"large M: K chunks of 6144", make<KChunk<6144>>},
          {"large M: all of K at once (before)", make<KChunk<std::numeric_limits<int64_t>::max()>>},
          {"small M (panels split over the threads) up to 24 tokens (before)", make<SmallTo24>},
          {"no small-M prefetch", make<NoPrefetch>},
          {"small-M prefetch 1 KiB ahead", make<Ahead1K>},
          {"small-M prefetch 4 KiB ahead", make<Ahead4K>},
          {"small-M prefetch into L2 (T1)", make<AheadIntoL2>},
          {"4-bit codes decoded to a tile at every M (before)", make<CodesInRegisters<0>>},
          {"4-bit codes in registers up to 12 rows", make<CodesInRegisters<12>>},
          {"4-bit codes in registers, vpshufb lookups (no VBMI)", make<CodesShuffled>},
          {"rows read in place (no packed copy)", make_in_place<>},
          {"in place, 1 row stream", make_in_place<Rows1>},
          {"in place, 1 row stream under 4 KiB rows", make_in_place<RowsLong4>},
          {"in place, 8 row streams", make_in_place<Rows8>},
          {"in place, 4 row streams at M = 1 too (before)", make_in_place<Rows4AtOneToken>},
          {"in place, int8 GEMV up to 24 tokens (before)", make_in_place<Int8GemvTo24>},
          {"in place, small M up to 24 tokens (before)", make_in_place<SmallTo24>},
          {"in place, small-M prefetch into L2 (T1)", make_in_place<AheadIntoL2>},
          {"in place, one row stream prefetched 2 KiB ahead (before)", make_in_place<OneStreamAhead<2048>>},
          {"in place, one row stream prefetched 4 KiB ahead", make_in_place<OneStreamAhead<4096>>},
          {"the layer's kernel (the library's build)", layer_kernel},
          {"the layer's kernel, in place (the library's build)", layer_kernel_in_place}};
}

std::vector<IntTuning> int_tunings_amx() {
  using namespace kernels::x86;
  return {{"default on AMX (2x2 tiles, activation block 768 KiB)", make<AmxTile>},
          {"AMX, activation block 384 KiB", make<AmxBlock384K>},
          {"AMX, activation block 1536 KiB", make<AmxBlock1536K>},
          {"AMX, activation block 3 MiB", make<AmxBlock3M>},
          {"AMX, next tile not asked into L2", make<AmxNoNextTile>},
          {"AMX, no small-M prefetch", make<AmxNoPrefetch>},
          {"AVX-512 VNNI default (no tiles)", make<Base>},
          {"AMX, rows read in place (no packed copy)", make_in_place<AmxTile>}};
}

}  // namespace mixq::bench
