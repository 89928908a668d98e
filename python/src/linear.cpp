// Checkpoint.linear(prefix) -> Linear: forward (NumPy / DLPack in, float32
// out) and dequantize. The GIL is released while mixq works.
#include <time.h>

#include <chrono>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "input.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"

namespace mixq::py {

LinearOptions linear_options(const std::string& prefix, const std::string& kernel) {
  LinearOptions options;
  if (kernel == "auto")
    options.kernel = KernelChoice::automatic;
  else if (kernel == "ref")
    options.kernel = KernelChoice::reference;
  else
    fail("linear '{}': kernel must be 'auto' or 'ref', got '{}'", prefix, kernel);
  return options;
}

std::shared_ptr<PyLinear> make_linear(const std::shared_ptr<CheckpointState>& owner,
                                      const std::string& prefix, const std::string& kernel, int tp_rank,
                                      int tp_size, const std::string& profile) {
  const LinearOptions options = linear_options(prefix, kernel);
  auto result = std::make_shared<PyLinear>();
  result->owner = owner;
  nb::gil_scoped_release release;
  const LayerSet& set = owner->layers();
  for (const Layer& layer : set.layers)
    if (layer.prefix == prefix) result->layer = &layer;
  if (result->layer == nullptr) {
    std::string known;
    for (size_t i = 0; i < set.layers.size() && i < 5; ++i)
      known += (i ? ", " : "") + set.layers[i].prefix;
    fail("no linear layer '{}' in {} ({} layers{}{})", prefix,
         owner->paths.size() == 1 ? owner->paths[0] : fmt::format("{} files", owner->paths.size()),
         set.layers.size(), known.empty() ? "" : ", e.g. ", known);
  }
  if (tp_size != 1 || tp_rank != 0) {
    const Plan& plan = owner->plan(profile);
    const LayerPlan* entry = plan.find(prefix);
    if (entry == nullptr) fail("no linear layer '{}' in the plan", prefix);
    result->shard = std::make_unique<LayerShard>(shard_layer(plan, *entry, tp_rank, tp_size));
    result->tp = result->shard->spec();
    result->layer = &result->shard->layer();
  }
  result->linear = Linear::create(*result->layer, options);
  const FormatTraits* f = result->layer->format;
  result->method = f && f->method ? f->method(*result->layer) : std::string();
  result->stored_bytes = result->layer->bytes();
  return result;
}

namespace {

// A new NumPy float32 array of `shape` whose memory is owned by the array.
struct NewArray {
  nb::object array;
  float* data = nullptr;
};
NewArray new_float_array(const std::vector<size_t>& shape) {
  size_t count = 1;
  for (size_t d : shape) count *= d;
  float* data = new float[count > 0 ? count : 1];
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  nb::ndarray<nb::numpy, float> array(data, shape.size(), shape.data(), owner);
  return {nb::cast(array, nb::rv_policy::reference), data};
}

nb::object forward(const PyLinear& self, nb::handle x, nb::handle out) {
  const int64_t k = self.linear->in_features(), n = self.linear->out_features();
  const std::string where = fmt::format("linear '{}' forward", self.layer->prefix);
  Input input = read_input(x, k, where);

  std::vector<size_t> out_shape = input.leading;
  out_shape.push_back(static_cast<size_t>(n));
  nb::object result;
  // Held until forward returns: a DLPack producer may free out's buffer when
  // the managed tensor is released, so it must outlive the write.
  Output output;
  if (out.is_none()) {
    NewArray array = new_float_array(out_shape);
    result = std::move(array.array);
    output.data = array.data;
  } else {
    output = read_output(out, out_shape, where);
    result = nb::borrow(out);
  }
  if (input.rows == 0) return result;

  {
    // No Python object is touched in here; `input`, `output` and `result`
    // were made before and are released after, with the GIL held.
    nb::gil_scoped_release release;
    const float* xf = input.prepare(output.data, input.rows * n);
    self.linear->forward(xf, input.rows, output.data);
    output.finish();
  }
  return result;
}

// Seconds per call of the C++ Linear::forward alone (no Python in the loop):
// the baseline of the Python call-overhead benchmark (python/bench/).
// clock "wall" (steady clock) or "thread" (this thread's CPU time, which a
// loaded machine's descheduling does not inflate; meaningful with 1 thread).
double time_forward(const PyLinear& self, nb::handle x, int iterations, const std::string& clock) {
  if (clock != "wall" && clock != "thread") fail("_time_forward: clock must be 'wall' or 'thread'");
  if (iterations < 1) fail("_time_forward: iterations must be >= 1");
  Input input = read_input(x, self.linear->in_features(), "_time_forward");
  std::vector<float> y(static_cast<size_t>(std::max<int64_t>(1, input.rows * self.linear->out_features())));
  nb::gil_scoped_release release;
  const float* xf = input.prepare(y.data(), static_cast<int64_t>(y.size()));
  for (int i = 0; i < std::min(iterations, 100); ++i) self.linear->forward(xf, input.rows, y.data());
  auto now = [&] {
    if (clock == "wall")
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  const double start = now();
  for (int i = 0; i < iterations; ++i) self.linear->forward(xf, input.rows, y.data());
  return (now() - start) / iterations;
}

nb::object dequantize(const PyLinear& self, const std::string& basis_name) {
  Basis basis;
  if (basis_name == "original")
    basis = Basis::original;
  else if (basis_name == "stored")
    basis = Basis::stored;
  else
    fail("layer '{}': basis must be 'original' or 'stored', got '{}'", self.layer->prefix, basis_name);
  const Layer& layer = *self.layer;
  if (!self.owner)
    fail("layer '{}': this Linear keeps no checkpoint tensors (built from memory or detached), "
         "so it cannot dequantize", layer.prefix);
  if (layer.format == nullptr || layer.format->dequantize == nullptr)
    fail("layer '{}': its format cannot dequantize", layer.prefix);
  NewArray array = new_float_array(
      {static_cast<size_t>(layer.out_features), static_cast<size_t>(layer.in_features)});
  {
    nb::gil_scoped_release release;
    layer.format->dequantize(layer, basis, array.data);
  }
  // Moved out after the GIL is back: `return array.array;` would copy the
  // reference (a member is not moved implicitly), an incref.
  return std::move(array.array);
}

// Drops the reference to the checkpoint: the prepared weights belong to the
// Linear, so the mapping can be released once nothing else holds it.
void detach(PyLinear& self) {
  if (!self.owner) return;
  auto own = std::make_unique<Layer>(*self.layer);
  own->tensors.clear();
  self.own = std::move(own);
  self.layer = self.own.get();
  // A rank's share may hold packed copies of its bytes (a K band, re-laid
  // scales); the Linear has prepared its own weights from them.
  self.shard.reset();
  self.owner.reset();
}

nb::object format_name(const PyLinear& self) {
  const FormatTraits* f = self.layer->format;
  if (f == nullptr || !f->from_marker) return nb::none();
  return nb::str(f->name.data(), f->name.size());
}

}  // namespace

void bind_linear(nb::module_& m) {
  nb::class_<PyLinear>(m, "Linear", "One layer's quantized linear, y = x·Wᵀ + b.")
      .def_prop_ro("prefix", [](const PyLinear& s) { return s.layer->prefix; })
      .def_prop_ro("in_features", [](const PyLinear& s) { return s.linear->in_features(); })
      .def_prop_ro("out_features", [](const PyLinear& s) { return s.linear->out_features(); })
      .def_prop_ro("format", &format_name, "The marker's format name; None for an unquantized layer.")
      .def_prop_ro("params", [](const PyLinear& s) { return to_python(s.layer->params); },
                   "The marker's parameters with the format's defaults applied.")
      .def_prop_ro("method", [](const PyLinear& s) { return s.method; },
                   "The method that runs the layer, e.g. 'int8_convrot'.")
      .def_prop_ro("k_pad_unit", [](const PyLinear& s) { return s.layer->k_pad_unit; },
                   "> 0 when in_features is a stored K padded to a multiple of this unit\n"
                   "(NVFP4 16, MXFP8 32): the logical K may be up to k_pad_unit - 1 smaller.")
      .def("detach", &detach,
           "Releases this Linear's reference to its checkpoint (its prepared weights are\n"
           "its own; an in_place Linear keeps only the mapped file it reads); afterwards\n"
           "dequantize() raises mixq.Error.")
      .def_prop_ro("in_place", [](const PyLinear& s) { return s.linear->reads_file_in_place(); },
                   "True when forward reads the weight in place from the mapped checkpoint file\n"
                   "(INT8, ConvRot W4A4, NVFP4, FP8 and MXFP8 on AVX2 / AVX-512) instead of a\n"
                   "packed copy: the Linear keeps that file mapped while it lives.")
      .def_prop_ro("stored_bytes", [](const PyLinear& s) { return s.stored_bytes; },
                   "Bytes of the layer's tensors as the checkpoint stores them (this rank's\n"
                   "share under tp): what an in_place Linear reads from the file.")
      .def_prop_ro("tp_rank", [](const PyLinear& s) { return s.tp ? s.tp->rank : 0; })
      .def_prop_ro("tp_size", [](const PyLinear& s) { return s.tp ? s.tp->degree : 1; })
      .def_prop_ro("parallel", [](const PyLinear& s) {
            return s.tp ? std::string(parallel_name(s.tp->parallel)) : std::string("none");
          }, "How this rank's share was cut: 'column', 'row', 'replicated'; 'none' without tp.")
      .def_prop_ro("kernel", [](const PyLinear& s) { return std::string(s.linear->kernel_name()); },
                   "The kernel that runs it: 'ref', 'avx2', 'avx512_vnni', ...")
      .def("forward", &forward, nb::arg("x").none(), nb::arg("out").none() = nb::none(),
           "y = x·Wᵀ + b for x [..., in_features] (NumPy array or CPU tensor with\n"
           "__dlpack__; float32 is used without a copy when C-contiguous, float16,\n"
           "bfloat16 and float64 are converted). Returns a float32 NumPy array\n"
           "[..., out_features], or writes into `out` (float32 or bfloat16, C-contiguous;\n"
           "bfloat16 rounded to nearest even from the float32 result) and returns it.")
      .def("__call__", &forward, nb::arg("x").none(), nb::arg("out").none() = nb::none())
      .def("dequantize", &dequantize, nb::arg("basis") = "original",
           "The weight as float32 [out_features, in_features]; basis='original' undoes\n"
           "ConvRot rotations, 'stored' keeps the rotated basis.")
      .def("_time_forward", &time_forward, nb::arg("x"), nb::arg("iterations"), nb::arg("clock") = "wall",
           "Benchmark helper: seconds per C++ forward call, without Python.")
      .def("__repr__", [](const PyLinear& s) {
        const FormatTraits* f = s.layer->format;
        return fmt::format("mixq.Linear('{}', {}, out_features={}, in_features={})", s.layer->prefix,
                           f && f->from_marker ? std::string(f->name) : "unquantized",
                           s.linear->out_features(), s.linear->in_features());
      });
}

}  // namespace mixq::py
