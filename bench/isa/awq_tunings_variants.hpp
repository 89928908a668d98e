#pragma once
// Prefetch variations of an AWQ tuning T (AwqTarget<V> of awq_w4a16_impl.hpp
// or AwqBf16Tile of awq_bf16_impl.hpp: both name their prefetch members
// alike) for bench/isa/awq_tunings.*.cpp; included only by those files, after
// the kernel headers.
#include <cstdint>

namespace mixq::kernels::x86 {
namespace {

template <class T>
struct NoPrefetch : T {
  static constexpr int64_t kStreamPrefetchBytes = 0, kParamGroupsAhead = 0;
};
template <class T, int64_t Bytes>  // 0: no code prefetch
struct CodeAhead : T {
  static constexpr int64_t kStreamPrefetchBytes = Bytes;
};
template <class T, int64_t Groups>  // 0: no scale / zero prefetch
struct ParamsAhead : T {
  static constexpr int64_t kParamGroupsAhead = Groups;
};

}  // namespace
}  // namespace mixq::kernels::x86
