// The shift-pipe probe (support/shift_pipes.hpp): each variant is one asm
// block (operands set up, then a counted loop) on registers, and one cache
// line for the ops that load, so that nothing but the instructions' pipes
// decides its speed.
#include "support/shift_pipes.hpp"

namespace mixq::bench {
namespace {

alignas(64) const unsigned char kLine[64] = {};

// ymm8-ymm15: sources (zero, then 1.0f in ymm9 for the FMAs); ymm0-ymm7:
// the 8 shifts' destinations, ymm0-ymm7 again for the added ops (the FMAs
// accumulate into them: 8 chains, enough for a 4-cycle latency at 2 a cycle).
#define MIXQ_SETUP                                                                                      \
  "vpxor %%xmm8, %%xmm8, %%xmm8\n\tvpcmpeqd %%ymm9, %%ymm9, %%ymm9\n\tvpsrld $25, %%ymm9, %%ymm9\n\t" \
  "vpslld $23, %%ymm9, %%ymm9\n\t"
#define MIXQ_SHIFT(i) "vpsrad $4, %%ymm8, %%ymm" #i "\n\t"
#define MIXQ_SHIFTS8 \
  MIXQ_SHIFT(0) MIXQ_SHIFT(1) MIXQ_SHIFT(2) MIXQ_SHIFT(3) MIXQ_SHIFT(4) MIXQ_SHIFT(5) MIXQ_SHIFT(6) MIXQ_SHIFT(7)
#define MIXQ_EIGHT(op)                                                                                          \
  op " %%ymm8, %%ymm9, %%ymm0\n\t" op " %%ymm8, %%ymm9, %%ymm1\n\t" op " %%ymm8, %%ymm9, %%ymm2\n\t" op         \
     " %%ymm8, %%ymm9, %%ymm3\n\t" op " %%ymm8, %%ymm9, %%ymm4\n\t" op " %%ymm8, %%ymm9, %%ymm5\n\t" op          \
     " %%ymm8, %%ymm9, %%ymm6\n\t" op " %%ymm8, %%ymm9, %%ymm7\n\t"
#define MIXQ_EIGHT_IMM(op, imm)                                                                                    \
  op " $" #imm ", %%ymm8, %%ymm9, %%ymm0\n\t" op " $" #imm ", %%ymm8, %%ymm9, %%ymm1\n\t" op " $" #imm            \
     ", %%ymm8, %%ymm9, %%ymm2\n\t" op " $" #imm ", %%ymm8, %%ymm9, %%ymm3\n\t" op " $" #imm                        \
     ", %%ymm8, %%ymm9, %%ymm4\n\t" op " $" #imm ", %%ymm8, %%ymm9, %%ymm5\n\t" op " $" #imm                        \
     ", %%ymm8, %%ymm9, %%ymm6\n\t" op " $" #imm ", %%ymm8, %%ymm9, %%ymm7\n\t"
#define MIXQ_EIGHT_LOAD(op, to)                                                                                   \
  op " (%1), " to "0\n\t" op " 8(%1), " to "1\n\t" op " 16(%1), " to "2\n\t" op " 24(%1), " to "3\n\t" op         \
     " 32(%1), " to "4\n\t" op " 40(%1), " to "5\n\t" op " 48(%1), " to "6\n\t" op " 16(%1), " to "7\n\t"
#define MIXQ_LOOP(body)                                                                                       \
  asm volatile(MIXQ_SETUP "1:\n\t" body "dec %0\n\tjnz 1b"                                                    \
               : "+r"(n)                                                                                      \
               : "r"(kLine)                                                                                   \
               : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9")

}  // namespace

std::vector<PipeShare> measure_shift_pipe_shares() {
  best_pipe_time([](long n) { MIXQ_LOOP(MIXQ_SHIFTS8); });  // warm-up: the clock settles first
  const double shifts = best_pipe_time([](long n) { MIXQ_LOOP(MIXQ_SHIFTS8); });
  auto share = [&](const char* op, auto loop) { return PipeShare{op, best_pipe_time(loop) / shifts}; };
  return {share("vpshufb", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT("vpshufb")); }),
          share("vpunpckldq", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT("vpunpckldq")); }),
          share("vfmadd231ps", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT("vfmadd231ps")); }),
          share("vpand", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT("vpand")); }),
          share("vpmaxub", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT("vpmaxub")); }),
          share("vpblendd", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT_IMM("vpblendd", 0xF0)); }),
          share("vinserti128 m", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT_LOAD("vinserti128 $1,", "%%ymm9, %%ymm")); }),
          share("vbroadcasti128 m", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT_LOAD("vbroadcasti128", "%%ymm")); }),
          share("vpmovsxbd m", [](long n) { MIXQ_LOOP(MIXQ_SHIFTS8 MIXQ_EIGHT_LOAD("vpmovsxbd", "%%ymm")); })};
}

}  // namespace mixq::bench
