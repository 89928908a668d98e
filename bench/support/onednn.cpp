#include "support/onednn.hpp"

#include <random>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace mixq::bench {

struct OnednnMatmul::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory src, dst;
  std::vector<dnnl::memory> weights;
  size_t next = 0;
  std::string impl;
  double weight_bytes = 0;
};

OnednnMatmul::OnednnMatmul(OnednnType type, int64_t m, int64_t k, int64_t n, int copies)
    : state_(std::make_unique<State>()) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  State& s = *state_;
  const bool integer = type == OnednnType::u8s8_f32;
  const bool f32 = type == OnednnType::f32_f32;
  const dt a_type = integer ? dt::u8 : f32 ? dt::f32 : dt::bf16;
  const dt b_type = integer ? dt::s8 : f32 ? dt::f32 : dt::bf16;
  dnnl::memory::desc a_md({m, k}, a_type, tag::ab);
  dnnl::memory::desc b_any({k, n}, b_type, tag::any);
  dnnl::memory::desc b_plain({k, n}, b_type, tag::ab);
  dnnl::memory::desc c_md({m, n}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  if (integer) attr.set_output_scales(0, {0.01f});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, s.engine);
  s.impl = pd.impl_info_str();
  s.prim = dnnl::matmul(pd);
  s.src = dnnl::memory(a_md, s.engine);
  s.dst = dnnl::memory(c_md, s.engine);
  s.weight_bytes = static_cast<double>(pd.weights_desc().get_size());

  std::mt19937 rng(7);
  const size_t elem = integer ? 1 : f32 ? 4 : 2;
  auto fill = [&](dnnl::memory& mem, size_t count, bool is_unsigned) {
    if (f32) {  // values in [-1, 1)
      auto* f = static_cast<float*>(mem.get_data_handle());
      for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(rng() % 2048) / 1024.0f - 1.0f;
      return;
    }
    auto* p = static_cast<uint8_t*>(mem.get_data_handle());
    for (size_t i = 0; i < count * elem; ++i) {
      uint8_t v = static_cast<uint8_t>(rng());
      // bf16: keep exponents small (bytes at odd positions are sign+exponent).
      if (!integer && (i & 1)) v = static_cast<uint8_t>(0x3F ^ (v & 0x80));
      else if (integer && !is_unsigned) v = static_cast<uint8_t>(v % 255);
      p[i] = v;
    }
  };
  fill(s.src, static_cast<size_t>(m * k), true);
  dnnl::memory plain(b_plain, s.engine);
  fill(plain, static_cast<size_t>(k * n), false);
  for (int c = 0; c < std::max(1, copies); ++c) {
    dnnl::memory w(pd.weights_desc(), s.engine);
    dnnl::reorder(plain, w).execute(s.stream, plain, w);
    s.weights.push_back(w);
  }
  s.stream.wait();
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run() {
  State& s = *state_;
  dnnl::memory& w = s.weights[s.next];
  s.next = (s.next + 1) % s.weights.size();
  s.prim.execute(s.stream, {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, s.dst}});
  s.stream.wait();
}

const char* OnednnMatmul::impl() const { return state_->impl.c_str(); }
double OnednnMatmul::weight_bytes() const { return state_->weight_bytes; }

}  // namespace mixq::bench
