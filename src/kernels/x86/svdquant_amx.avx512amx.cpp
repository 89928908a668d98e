// The SVDQuant W4A4 linear's many-row blocks on AMX-INT8 tiles
// (svdquant_w4a4_impl.hpp, block_amx), compiled with the AMX flags so the
// tile instructions sit inline next to the vector epilogue they overlap.
#define MIXQ_SVDQUANT_AMX 1  // compiles block_amx / run_amx (svdquant_w4a4_impl.hpp)
#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void svdquant_amx_rows(const SvdquantPacked& pk, const SvdquantActs& acts, int64_t m_begin, int64_t m_end,
                       float* y) {
  amx::configure();
  run_amx<Avx512>(pk, acts, m_begin, m_end, y);
  amx::release();
}

}  // namespace mixq::kernels::x86
