// The dot-pipe probe (support/dot_pipes.hpp): each variant is one asm block
// (operands set up, then a counted loop) on registers only, so that nothing
// but the instructions' pipes decides its speed.
#include "support/dot_pipes.hpp"

#include "kernels/cpu.hpp"

namespace mixq::bench {
namespace {

// zmm30 / zmm31: zero bytes (the dots' operands); zmm28 = zmm29 = 1.0f.
#define MIXQ_SETUP                                                                  \
  "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"        \
  "vpternlogd $0xff, %%zmm29, %%zmm29, %%zmm29\n\tvpsrld $25, %%zmm29, %%zmm29\n\t" \
  "vpslld $23, %%zmm29, %%zmm29\n\tvmovaps %%zmm29, %%zmm28\n\t"
#define MIXQ_DOT(i) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define MIXQ_DOTS12                                                                                             \
  MIXQ_DOT(0) MIXQ_DOT(1) MIXQ_DOT(2) MIXQ_DOT(3) MIXQ_DOT(4) MIXQ_DOT(5) MIXQ_DOT(6) MIXQ_DOT(7) MIXQ_DOT(8) \
  MIXQ_DOT(9) MIXQ_DOT(10) MIXQ_DOT(11)
#define MIXQ_THREE(op) \
  op " %%zmm29, %%zmm28, %%zmm12\n\t" op " %%zmm29, %%zmm28, %%zmm13\n\t" op " %%zmm29, %%zmm28, %%zmm14\n\t"
#define MIXQ_THREE1(op) op " %%zmm29, %%zmm12\n\t" op " %%zmm29, %%zmm13\n\t" op " %%zmm29, %%zmm14\n\t"
#define MIXQ_THREE_MASK(op) \
  op " %%zmm29, %%zmm28, %%k1\n\t" op " %%zmm29, %%zmm28, %%k2\n\t" op " %%zmm29, %%zmm28, %%k3\n\t"
#define MIXQ_CHAIN12                                                                                            \
  MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0) \
  MIXQ_DOT(0) MIXQ_DOT(0) MIXQ_DOT(0)
#define MIXQ_LOOP(body)                                                                                       \
  asm volatile(MIXQ_SETUP "1:\n\t" body "dec %0\n\tjnz 1b"                                                    \
               : "+r"(n)                                                                                      \
               :                                                                                              \
               : "cc", "k1", "k2", "k3", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",   \
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm28", "xmm29", "xmm30", "xmm31")

}  // namespace

std::vector<PipeShare> measure_dot_pipe_shares() {
  const double dots = best_pipe_time([](long n) { MIXQ_LOOP(MIXQ_DOTS12); });
  auto share = [&](const char* op, auto loop) { return PipeShare{op, best_pipe_time(loop) / dots}; };
  std::vector<PipeShare> shares = {
      share("vmulps", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vmulps")); }),
      share("vfmadd231ps", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vfmadd231ps")); }),
      share("vaddps", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vaddps")); }),
      share("vcvtdq2ps", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE1("vcvtdq2ps")); }),
      share("vscalefps", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vscalefps")); }),
      share("vpsubusw", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vpsubusw")); }),
      share("vpaddd", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vpaddd")); }),
      share("vptestmd", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE_MASK("vptestmd")); }),
      share("12 on one register", [](long n) { MIXQ_LOOP(MIXQ_CHAIN12); })};
  if (kernels::cpu_has_avx512_vbmi())  // the FP8 and NVFP4 decodes' byte lookups
    shares.push_back(share("vpermt2b", [](long n) { MIXQ_LOOP(MIXQ_DOTS12 MIXQ_THREE("vpermt2b")); }));
  return shares;
}

}  // namespace mixq::bench
