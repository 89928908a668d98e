// Reading activations from NumPy / DLPack objects (see input.hpp).
#include "input.hpp"

#include <bit>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::py {
namespace {

using nb::dlpack::dtype_code;

std::string py_type_name(nb::handle h) {
  return nb::cast<std::string>(nb::str(h.type().attr("__name__")));
}

std::string dtype_text(nb::dlpack::dtype t) {
  const char* kind = "?";
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Int: kind = "int"; break;
    case dtype_code::UInt: kind = "uint"; break;
    case dtype_code::Float: kind = "float"; break;
    case dtype_code::Bfloat: kind = "bfloat"; break;
    case dtype_code::Complex: kind = "complex"; break;
    case dtype_code::Bool: kind = "bool"; break;
    default: return fmt::format("dlpack type code {} ({} bits)", t.code, t.bits);
  }
  return fmt::format("{}{}", kind, t.bits);
}

bool is(nb::dlpack::dtype t, dtype_code code, int bits) {
  return t.code == static_cast<uint8_t>(code) && t.bits == bits && t.lanes == 1;
}

// Row-major contiguity, ignoring the strides of size-1 dimensions.
template <class Array>
bool c_contiguous(const Array& a) {
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

float load(const std::byte* p, nb::dlpack::dtype t) {
  if (is(t, dtype_code::Float, 32)) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (is(t, dtype_code::Float, 64)) {
    double v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return is(t, dtype_code::Float, 16) ? f16_to_f32(bits) : bf16_to_f32(bits);
}

// A CPU torch.Tensor as a NumPy view of the same memory, or null. PyTorch's
// __dlpack__ costs about 3 µs a call, Tensor.numpy() (no copy) about 0.8 µs:
// this keeps the Python overhead of forward(tensor) small. Anything .numpy()
// refuses (bfloat16, requires_grad, other devices) takes the DLPack path.
nb::object torch_numpy_view(nb::handle x) {
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (torch == nullptr) return {};
  nb::object tensor_type = nb::steal(PyObject_GetAttrString(torch, "Tensor"));
  if (!tensor_type.is_valid()) {
    PyErr_Clear();
    return {};
  }
  if (!PyType_Check(tensor_type.ptr()) ||
      !PyObject_TypeCheck(x.ptr(), reinterpret_cast<PyTypeObject*>(tensor_type.ptr())))
    return {};
  PyObject* view = PyObject_CallMethod(x.ptr(), "numpy", nullptr);
  if (view == nullptr) {
    PyErr_Clear();
    return {};
  }
  return nb::steal(view);
}

}  // namespace

Input read_input(nb::handle x, int64_t k, const std::string& where) {
  Input in;
  nb::object view = torch_numpy_view(x);
  if (!nb::try_cast(view.is_valid() ? nb::handle(view) : x, in.array, /*convert=*/false))
    fail("{}: x must be a NumPy array or a tensor with __dlpack__, got {}", where, py_type_name(x));
  const nb::ndarray<nb::ro>& a = in.array;
  if (a.device_type() != nb::device::cpu::value)
    fail("{}: x must be in CPU memory (DLPack device type {}), move it with .cpu()", where,
         a.device_type());
  const auto t = a.dtype();
  if (!is(t, dtype_code::Float, 32) && !is(t, dtype_code::Float, 16) &&
      !is(t, dtype_code::Bfloat, 16) && !is(t, dtype_code::Float, 64))
    fail("{}: x has dtype {}; expected float32, float16, bfloat16 or float64", where, dtype_text(t));
  if (a.ndim() == 0) fail("{}: x is a scalar; expected shape [..., {}]", where, k);
  in.cols = static_cast<int64_t>(a.shape(a.ndim() - 1));
  if (in.cols != k) {
    std::string shape;
    for (size_t i = 0; i < a.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape(i));
    fail("{}: x has shape [{}]; expected last dimension in_features = {}", where, shape, k);
  }
  in.rows = 1;
  for (size_t i = 0; i + 1 < a.ndim(); ++i) {
    in.leading.push_back(a.shape(i));
    if (__builtin_mul_overflow(in.rows, static_cast<int64_t>(a.shape(i)), &in.rows))
      fail("{}: x has too many rows", where);
  }
  int64_t total;
  if (__builtin_mul_overflow(in.rows, in.cols, &total) || total > (int64_t{1} << 40))
    fail("{}: x is too large ({} rows of {})", where, in.rows, in.cols);
  in.zero_copy = is(t, dtype_code::Float, 32) && c_contiguous(a) &&
                 reinterpret_cast<uintptr_t>(a.data()) % alignof(float) == 0;
  return in;
}

const float* Input::prepare(const float* y, int64_t y_count) {
  const auto* base = static_cast<const std::byte*>(array.data());
  const int64_t count = rows * cols;
  if (zero_copy) {
    const auto* x = reinterpret_cast<const float*>(base);
    const bool overlaps = x < y + y_count && y < x + count;  // out= aliases x
    if (!overlaps) return x;
  }
  float* const out = thread_scratch(ScratchRole::input, static_cast<size_t>(count));
  const auto t = array.dtype();
  const size_t item = array.itemsize();
  const size_t nd = array.ndim();
  const int64_t col_stride = array.stride(nd - 1);
  util::parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
                        [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      // Unravel the row index over the leading dimensions (row-major order).
      int64_t offset = 0, rest = r;
      for (size_t d = nd - 1; d-- > 0;) {
        const int64_t extent = static_cast<int64_t>(array.shape(d));
        offset += (rest % extent) * array.stride(d);
        rest /= extent;
      }
      float* dst = out + r * cols;
      const std::byte* src = base + offset * static_cast<int64_t>(item);
      if (col_stride == 1 && is(t, dtype_code::Bfloat, 16)) {  // the common case: a shift, vectorised
        for (int64_t c = 0; c < cols; ++c) {
          uint16_t bits;
          std::memcpy(&bits, src + 2 * c, 2);
          dst[c] = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
        }
        continue;
      }
      for (int64_t c = 0; c < cols; ++c) dst[c] = load(src + c * col_stride * static_cast<int64_t>(item), t);
    }
  });
  return out;
}

float* thread_scratch(ScratchRole role, size_t count) {
  struct Buffer {
    std::unique_ptr<float[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[2];
  Buffer& b = buffers[static_cast<int>(role)];
  if (b.size < count) {
    b.data.reset();  // the old one goes first: never both at once
    b.data.reset(new float[count]);
    b.size = count;
  }
  return b.data.get();
}

void Output::finish() const {
  if (bf16 == nullptr) return;
  const float* src = data;
  uint16_t* dst = bf16;
  util::parallel_for(count, 16384, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      // RNE on the dropped 16 bits (a carry into the exponent is right, up
      // to inf), as mixq::f32_to_bf16, inline so that the loop vectorises;
      // every NaN becomes 0xFFFF, the NaN torch's CPU conversion writes.
      const uint32_t bits = std::bit_cast<uint32_t>(src[i]);
      const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
      const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
      dst[i] = static_cast<uint16_t>(nan ? 0xFFFFu : rounded);
    }
  });
}

Output read_output(nb::handle out, const std::vector<size_t>& shape, const std::string& where) {
  std::string want;
  for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
  Output result;
  nb::ndarray<>& a = result.array;
  if (!nb::try_cast(out, a, /*convert=*/false))
    fail("{}: out must be a writable float32 or bfloat16 array [{}], got {}", where, want, py_type_name(out));
  if (a.device_type() != nb::device::cpu::value) fail("{}: out must be in CPU memory", where);
  const bool bf16 = is(a.dtype(), dtype_code::Bfloat, 16);
  if (!bf16 && !is(a.dtype(), dtype_code::Float, 32))
    fail("{}: out has dtype {}; expected float32 or bfloat16", where, dtype_text(a.dtype()));
  bool same = a.ndim() == shape.size();
  for (size_t i = 0; same && i < shape.size(); ++i) same = a.shape(i) == shape[i];
  if (!same) {
    std::string got;
    for (size_t i = 0; i < a.ndim(); ++i) got += (i ? ", " : "") + std::to_string(a.shape(i));
    fail("{}: out has shape [{}]; expected [{}]", where, got, want);
  }
  const size_t align = bf16 ? alignof(uint16_t) : alignof(float);
  if (!c_contiguous(a) || reinterpret_cast<uintptr_t>(a.data()) % align != 0)
    fail("{}: out must be C-contiguous and aligned", where);
  result.count = 1;
  for (size_t d : shape) result.count *= static_cast<int64_t>(d);
  if (bf16) {
    result.bf16 = static_cast<uint16_t*>(a.data());
    result.data = thread_scratch(ScratchRole::output, static_cast<size_t>(result.count));
  } else {
    result.data = static_cast<float*>(a.data());
  }
  return result;
}

}  // namespace mixq::py
