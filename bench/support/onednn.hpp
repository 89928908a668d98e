#pragma once
// oneDNN matmul baselines (libdnnl 2.6) on the same shapes as our kernels:
// C[M,N] = A[M,K]·B[K,N]. Weights are created with format_tag::any and
// reordered once (oneDNN's best layout), so only the matmul is timed.
#include <cstdint>
#include <memory>

namespace mixq::bench {

enum class OnednnType {
  u8s8_f32,    // u8 activations x s8 weights -> f32 with a common output scale
  bf16_f32,    // bf16 x bf16 -> f32
  f32_f32,     // f32 x f32 -> f32 (the float layer a quantized one replaces)
};

class OnednnMatmul {
 public:
  // Random operands; `copies` distinct weight matrices (> 1 makes weights come
  // from DRAM when their total exceeds the caches: run() cycles through them).
  OnednnMatmul(OnednnType type, int64_t m, int64_t k, int64_t n, int copies = 1);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;
  void run();                  // one matmul (next weight copy)
  const char* impl() const;    // oneDNN's implementation string
  double weight_bytes() const; // bytes of one weight copy as oneDNN stores it

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mixq::bench
