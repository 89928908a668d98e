// The `mixq._mixq` extension module: mixq.Error, threads, and the bindings of
// bindings.hpp. The pure-Python package (python/mixq/__init__.py) re-exports it.
#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/linear.hpp"
#include "mixq/version.hpp"

NB_MODULE(_mixq, m) {
  namespace nb = nanobind;
  m.doc() = "mixq: mixed-precision quantized (Comfy convention) checkpoints on CPUs";
  m.attr("__version__") = MIXQ_VERSION;  // from project() in CMakeLists.txt
  // True when built with MIXQ_PYTHON_CHECKS (nanobind's GIL assertions on), as
  // scripts/python_test.sh builds it; the test suite checks it ran on one.
#if defined(MIXQ_PYTHON_CHECKS) && !defined(NDEBUG)
  m.attr("_checks") = true;
#else
  m.attr("_checks") = false;
#endif

  // Every mixq::Error (and UsageError) becomes mixq.Error with the same
  // message the CLI prints after "mixq: error: ".
  nb::exception<mixq::Error>(m, "Error", PyExc_ValueError);

  // Without the GIL: resizing waits for a forward running on another thread
  // (the pool's call lock), and other Python threads should run meanwhile.
  m.def("set_num_threads",
        [](int threads) {
          // As the CLI's --threads: a negative count is an error, not "all cores".
          if (threads < 0) mixq::fail("set_num_threads: threads must be >= 0 (0 = all cores), got {}", threads);
          mixq::set_num_threads(threads);
        },
        nb::arg("threads"), nb::call_guard<nb::gil_scoped_release>(),
        "Threads used by every Linear (one persistent pool); 0 = all cores.");
  m.def("num_threads", &mixq::num_threads, "Threads used by every Linear.");

  mixq::py::bind_checkpoint(m);
  mixq::py::bind_linear(m);
  mixq::py::bind_from_tensors(m);
  mixq::py::bind_quantize(m);
  mixq::py::bind_save(m);
  mixq::py::bind_block_quant(m);
}
