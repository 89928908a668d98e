// FP8 and MXFP8 weights read in place (the checkpoint's row-major codes,
// FloatPanels::in_place): the FMA cores' results bit for bit against the
// k-order FMA chain, whichever way they read the codes (transposed in
// registers under 5 rows on AVX-512 VBMI CPUs and, with scaled activations,
// on AVX2; packed per K chunk otherwise), and the panel layout the packing
// path writes, byte by byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/x86/float_gemm.hpp"
#include "support/float_kernel_paths.hpp"

namespace mixq {
namespace {

using namespace testing;  // mixq::testing: the paths, stored weights, expect_bits_equal

// The FMA cores: avx512_fma and avx2 (the vdpbf16ps core sums bf16 pairs).
class FmaInPlace : public OnPath {};
INSTANTIATE_TEST_SUITE_P(Paths, FmaInPlace, ::testing::Values(Path::avx512_fma, Path::avx2), path_name);

// FP8 (E4M3, E5M2) and MXFP8 read in place on the FMA cores (at most 4 rows
// on AVX-512 VBMI: the register transpose of
// fp8_rows_in_place.avx512vbmi.cpp; on AVX2, where every |x| < 2^16 as
// here, that of fp8_rows_in_place.avx2.cpp, whose groups of 8 rows run a
// line apart at rows 4 KiB apart; else the packing path) are the FMA chain
// in k order, bit for bit: every finite byte value as weights (subnormals,
// both zeros, the largest), MXFP8 block exponents 100-154 (every product
// stays a normal f32), rows padded past k, K tails under 64, a partial last
// panel, an odd panel count, rows 4 KiB apart (48 x 4032 padded by 64: the
// panels side by side run lagged, panels_lag) with and without a K tail,
// and with K a multiple of 256 (48 x 4096, 48 x 3840 padded by 256: the
// rows are staged, stage_rows), and 9 or 10 panels (144 x 1000 padded by
// 24, 160 x 2112: several groups of panels side by side per thread, and a
// panel left alone);
// once with FP8 activations (exact products: the plain sum) and once with
// raw f32 ones (std::fma chains). A second weight
// puts the special codes in some columns: E4M3 NaN, E5M2 inf and NaN.
TEST_P(FmaInPlace, Fp8IsBitExact) {
  struct Shape { int64_t n, k, pad; };
  using T = x86::PanelType;
  if (GetParam() == Path::avx512_fma)  // the register transpose, where this CPU has it
    kernel_path("float_gemm:fp8_rows_in_place_avx512vbmi", kernels::Isa::avx512,
                x86::fp8_table_decode_supported() ? "" : "AVX-512 VBMI");
  else
    kernel_path("float_gemm:fp8_rows_in_place_avx2", kernels::Isa::avx2);
  for (Shape s : {Shape{37, 600, 0}, Shape{64, 64, 0}, Shape{48, 127, 13}, Shape{80, 1031, 5}, Shape{16, 5, 0},
                  Shape{33, 200, 64}, Shape{48, 4032, 64}, Shape{48, 4090, 6}, Shape{48, 4096, 0},
                  Shape{48, 3840, 256}, Shape{144, 1000, 24}, Shape{160, 2112, 0}}) {
    for (T type : {T::e4m3, T::e5m2, T::mxfp8}) {
      const int64_t k = type == T::mxfp8 ? (s.k + 31) / 32 * 32 : s.k, blocks = k / 32;
      const int64_t row_bytes = k + s.pad;
      std::mt19937 rng(static_cast<uint32_t>(s.n * 1000 + k));
      std::vector<uint8_t> codes(static_cast<size_t>(s.n * row_bytes)), exponents(static_cast<size_t>(s.n * blocks));
      for (uint8_t& e : exponents) e = static_cast<uint8_t>(100 + rng() % 55);
      std::vector<float> value(static_cast<size_t>(s.n * k));
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t c = 0; c < row_bytes; ++c) {
          auto code = static_cast<uint8_t>(rng());
          if ((code & 0x7F) == 0x7F || (type == T::e5m2 && (code & 0x7C) == 0x7C)) code = 0x3F;  // no NaN / inf
          codes[r * row_bytes + c] = code;
          if (c >= k) continue;
          value[r * k + c] = type == T::e5m2    ? e5m2_to_f32(code)
                             : type == T::e4m3 ? e4m3_to_f32(code)
                                               : e4m3_to_f32(code) * e8m0_to_f32(exponents[r * blocks + c / 32]);
        }
      const uint8_t* block_scales = type == T::mxfp8 ? exponents.data() : nullptr;
      const x86::FloatPanels panels =
          x86::float_panels_in_place(type, codes.data(), row_bytes, s.n, k, block_scales);
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 9, 0.5f);
      const x86::ActPrep fp8_prep = type == T::e5m2 ? x86::ActPrep::e5m2
                                    : type == T::e4m3 ? x86::ActPrep::e4m3
                                                      : x86::ActPrep::mxfp8;
      for (int64_t m : {1, 2, 3, 4, 5, 9}) {
        for (bool fp8_acts : {true, false}) {
          const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 7 + m, 3.0f);
          std::vector<float> a(x.size()), want(static_cast<size_t>(m * s.n)), got(want.size());
          prepare_f32(x.data(), m, k, k, fp8_acts ? fp8_prep : x86::ActPrep::none, 1.0f, a.data());
          for (int64_t r = 0; r < m; ++r)
            for (int64_t c = 0; c < s.n; ++c) {
              float acc = 0.0f;
              for (int64_t i = 0; i < k; ++i) acc = std::fma(a[r * k + i], value[c * k + i], acc);
              want[r * s.n + c] = acc * 0.25f + bias[c];
            }
          gemm_f32(a.data(), k, m, panels, 0.25f, bias.data(), got.data());
          SCOPED_TRACE(::testing::Message() << type_name(type) << " n=" << s.n << " k=" << k << " pad=" << s.pad
                                            << " m=" << m << " fp8 activations " << fp8_acts);
          expect_bits_equal(want, got, "in place");
        }
      }
      // Special codes in columns 3, 21 and n - 1 at different k (rows 3, 5 and
      // 15 of their panels: three of the transposed registers' lanes): E4M3 NaN
      // (0x7F, 0xFF), E5M2 inf, -NaN and NaN (0x7C, 0xFD, 0x7F). Where the
      // chain gives NaN the kernel must too (E4M3: its NaN columns), else
      // the same bits (E5M2's infinities).
      const bool e5m2 = type == T::e5m2;
      const uint8_t special[3] = {e5m2 ? uint8_t{0x7C} : uint8_t{0x7F}, e5m2 ? uint8_t{0xFD} : uint8_t{0xFF}, 0x7F};
      std::vector<uint8_t> special_codes = codes;
      std::vector<float> special_value = value;
      const int64_t special_cols[] = {3, std::min<int64_t>(21, s.n - 1), s.n - 1};
      for (int64_t i = 0; i < 3; ++i) {
        const int64_t r = special_cols[i], c = (k - 1) * i / 2;
        special_codes[r * row_bytes + c] = special[i];
        const float v = type == T::e5m2 ? e5m2_to_f32(special[i]) : e4m3_to_f32(special[i]);
        special_value[r * k + c] = type == T::mxfp8 ? v * e8m0_to_f32(exponents[r * blocks + c / 32]) : v;
      }
      const x86::FloatPanels special_panels =
          x86::float_panels_in_place(type, special_codes.data(), row_bytes, s.n, k, block_scales);
      for (int64_t m : {1, 3}) {
        const std::vector<float> a = random_floats(static_cast<size_t>(m * k), 11, 1.0f);
        std::vector<float> got(static_cast<size_t>(m * s.n));
        gemm_f32(a.data(), k, m, special_panels, 1.0f, nullptr, got.data());
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            float want = 0.0f;
            for (int64_t i = 0; i < k; ++i) want = std::fma(a[r * k + i], special_value[c * k + i], want);
            const float y = got[r * s.n + c];
            SCOPED_TRACE(::testing::Message() << type_name(type) << " n=" << s.n << " k=" << k << " row " << r
                                              << " column " << c << ": want " << want << ", got " << y);
            if (std::isnan(want)) ASSERT_TRUE(std::isnan(y));
            else ASSERT_EQ(std::bit_cast<uint32_t>(y), std::bit_cast<uint32_t>(want));
          }
      }
    }
  }
}

// The AVX2 kernel of few rows read in place (fp8_rows_in_place.avx2.cpp),
// called directly as the GEMM calls it, so that a change of dispatch cannot
// leave it untested: activations times 2^112, alpha times 2^8 for E4M3 and
// MXFP8 codes. Its outputs are the FMA chain in k order, bit for bit, for 1
// to 3 rows (3: two row groups), 1 to 4 groups of 8 rows side by side, K
// with a tail and rows 4 KiB apart (the lagged groups), and it reports what
// it saw: E4M3 NaN codes as their columns, an E5M2 inf or NaN as its panel
// once, nothing for finite codes.
TEST(KernelsFloat, Fp8RowsInPlaceAvx2ReportsCodesWithoutAValue) {
  using T = x86::PanelType;
  if (!testing::kernel_path("float_gemm:fp8_rows_in_place_avx2", kernels::Isa::avx2)) return;
  struct Shape { int64_t n, k, row_bytes; };
  for (Shape sh : {Shape{64, 200, 200}, Shape{48, 4032, 4096}})
    for (T type : {T::e4m3, T::e5m2, T::mxfp8}) {
      const bool e5m2 = type == T::e5m2;
      const int64_t n = sh.n, k = type == T::mxfp8 ? sh.k / 32 * 32 : sh.k, blocks = k / 32;
      std::mt19937 rng(static_cast<uint32_t>(n + k));
      std::vector<uint8_t> codes(static_cast<size_t>(n * sh.row_bytes)), exponents(static_cast<size_t>(n * blocks));
      for (uint8_t& b : codes) b = static_cast<uint8_t>(rng() % (e5m2 ? 0x7C : 0x7F)) | (rng() % 2 ? 0x80 : 0);
      for (uint8_t& e : exponents) e = static_cast<uint8_t>(110 + rng() % 30);
      // Columns 5 and 37 (panels 0 and 2) hold a code without a value, at k 3 and k - 1.
      codes[static_cast<size_t>(5 * sh.row_bytes + 3)] = e5m2 ? 0xFC : 0xFF;
      codes[static_cast<size_t>(37 * sh.row_bytes + k - 1)] = e5m2 ? 0x7E : 0x7F;
      const x86::FloatPanels w = x86::float_panels_in_place(type, codes.data(), sh.row_bytes, n, k,
                                                            type == T::mxfp8 ? exponents.data() : nullptr);
      for (int64_t m : {1, 2, 3})
        for (int groups : {1, 2, 3, 4}) {
          const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 5 + m, 2.0f);
          std::vector<float> scaled(x.size());
          for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * 0x1p112f;
          const std::vector<float> bias = random_floats(static_cast<size_t>(n), 3, 0.5f);
          std::vector<float> got(static_cast<size_t>(m * n));
          std::vector<int64_t> nan_columns, nonfinite_panels;
          const float alpha = e5m2 ? 0.5f : 0.5f * 256.0f;
          x86::fp8_rows_in_place_avx2(scaled.data(), k, m, w, 0, n / 16, {groups, 0, _MM_HINT_T0, false}, alpha,
                                      bias.data(), got.data(), nan_columns, nonfinite_panels);
          SCOPED_TRACE(::testing::Message() << type_name(type) << " k=" << k << " m=" << m << " groups " << groups);
          const std::vector<int64_t> none, columns = {5, 37}, panels = {0, 2};
          EXPECT_EQ(nan_columns, e5m2 ? none : columns);
          EXPECT_EQ(nonfinite_panels, e5m2 ? panels : none);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t c = 0; c < n; ++c) {
              if (c == 5 || c == 37) continue;  // the caller's to mend (NaN columns, f16 panels)
              if (e5m2 && c < 16) continue;     // panel 0 is computed again by the caller
              if (e5m2 && c >= 32 && c < 48) continue;
              float acc = 0.0f;
              for (int64_t i = 0; i < k; ++i) {
                const uint8_t code = codes[static_cast<size_t>(c * sh.row_bytes + i)];
                const float v = e5m2 ? e5m2_to_f32(code)
                                : type == T::e4m3 ? e4m3_to_f32(code)
                                                  : e4m3_to_f32(code) * e8m0_to_f32(exponents[c * blocks + i / 32]);
                acc = std::fma(x[r * k + i], v, acc);
              }
              const float want = acc * 0.5f + bias[c];
              ASSERT_EQ(std::bit_cast<uint32_t>(got[r * n + c]), std::bit_cast<uint32_t>(want))
                  << "row " << r << " column " << c << ": want " << want << ", got " << got[r * n + c];
            }
        }
    }
}

// The FP8 panel layout (float_gemm.hpp), byte by byte, on any CPU: element
// (row r, k c) of panel r/16 sits at step c, byte r%16; padding (columns past
// N, the row after an odd K) is 0. Shapes cover whole 16x16 blocks, a k
// tail, odd K, and a partial last panel. Also
// the codes without a finite value, inside a block and in the k tail:
// E4M3's NaN codes go to the NaN column list, E5M2's inf and NaN codes to
// the list of panels that hold one. The AVX-512 packer (64 k per zmm
// transpose) and the AVX2 one (32 k per ymm transpose) must give the same
// bytes and non-finite rows for every chunk, K from 48 / 130 covering whole
// blocks and their tail.
TEST(KernelsFloat, Fp8PanelLayoutIsByteExactPackedAndInPlace) {
  using T = x86::PanelType;
  const bool zmm = testing::kernel_path("float_gemm:pack_avx512", kernels::Isa::avx512);
  const bool ymm = testing::kernel_path("float_gemm:pack_avx2", kernels::Isa::avx2);
  for (T type : {T::e4m3, T::e5m2})
  for (int64_t n : {16, 37, 64})
    for (int64_t k : {16, 48, 41, 7, 130, 256}) {
      SCOPED_TRACE(type_name(type));
      const bool e5m2 = type == T::e5m2;
      std::vector<uint8_t> w(static_cast<size_t>(n * k));
      std::mt19937 rng(static_cast<uint32_t>(n * 1000 + k));
      // Finite codes only: 0x00-0x7E (E4M3), 0x00-0x7B (E5M2).
      for (uint8_t& b : w) b = static_cast<uint8_t>(rng() % (e5m2 ? 0x7C : 0x7F));
      const std::vector<int64_t> nan_rows = {3, 5, n - 1};
      w[static_cast<size_t>(3 * k + k / 2)] = e5m2 ? 0xFD : 0xFF;
      w[static_cast<size_t>(5 * k + std::min<int64_t>(10, k - 1))] = e5m2 ? 0x7C : 0x7F;
      w[static_cast<size_t>((n - 1) * k + k - 1)] = 0x7F;
      const x86::FloatPanels p = x86::pack_panels(type, w.data(), k, n, k);
      const int64_t row = p.row_bytes();
      ASSERT_EQ(row, 16);
      ASSERT_EQ(p.steps, k + k % 2);  // an odd K: one zero row more
      std::vector<uint8_t> want(static_cast<size_t>(p.panels * p.steps * row), 0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c)
          want[static_cast<size_t>(((r / 16) * p.steps + c) * row + r % 16)] = w[static_cast<size_t>(r * k + c)];
      ASSERT_EQ(p.data.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(p.data[i], want[i]) << "n=" << n << " k=" << k << " byte " << i;
      std::vector<int64_t> nonfinite_panels = {0, (n - 1) / 16};
      nonfinite_panels.erase(std::unique(nonfinite_panels.begin(), nonfinite_panels.end()), nonfinite_panels.end());
      EXPECT_EQ(p.nan_columns, e5m2 ? std::vector<int64_t>{} : nan_rows) << "n=" << n << " k=" << k;
      EXPECT_EQ(p.nonfinite_panels, e5m2 ? nonfinite_panels : std::vector<int64_t>{}) << "n=" << n << " k=" << k;
      // Read in place, every step range the GEMM packs (K chunks of any
      // length, from any step) comes out as the same bytes.
      // The NaN rows come back from the chunks that hold them.
      const x86::FloatPanels in_place = x86::float_panels_in_place(type, w.data(), k, n, k);
      EXPECT_TRUE(in_place.data.empty());
      EXPECT_TRUE(in_place.nan_columns.empty());
      using Packer = uint32_t (*)(const x86::FloatPanels&, int64_t, int64_t, int64_t, uint8_t*);
      const std::pair<const char*, Packer> packers[] = {
          {"sse2", x86::pack_panel_steps}, {"avx2", x86::pack_panel_steps_avx2}, {"avx512", x86::pack_panel_steps_avx512}};
      for (const auto& [packer, pack] : packers)
        for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{32}, int64_t{40}, int64_t{64}, int64_t{70}, k}) {
          if ((packer == std::string("avx512") && !zmm) || (packer == std::string("avx2") && !ymm)) continue;
          std::vector<int64_t> found;
          for (int64_t panel = 0; panel < p.panels; ++panel)
            for (int64_t s0 = 0; s0 < k; s0 += chunk) {
              const int64_t s1 = std::min(k, s0 + chunk);
              std::vector<uint8_t> got(static_cast<size_t>((s1 - s0) * row), 0xAA);
              // Asked past K, only rows below K are written.
              const uint32_t nan = pack(in_place, panel, s0, s1 == k ? k + 1 : s1, got.data());
              for (int64_t j = 0; j < 16; ++j)
                if (nan >> j & 1u) found.push_back(panel * 16 + j);
              ASSERT_EQ(std::memcmp(got.data(), want.data() + (panel * p.steps + s0) * row, got.size()), 0)
                  << "in place, " << packer << ": n=" << n << " k=" << k
                  << " panel " << panel << " steps " << s0 << ".." << s1;
            }
          std::sort(found.begin(), found.end());  // found chunk by chunk, in k order
          EXPECT_EQ(found, nan_rows) << "in place, " << packer << ", chunks of " << chunk << ": n=" << n
                                     << " k=" << k;
        }
    }
}
}  // namespace
}  // namespace mixq
