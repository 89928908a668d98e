// mixq.open() and the Checkpoint class: inspect, plan, layer lookup.
#include <fmt/format.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/inspect.hpp"
#include "mixq/plan.hpp"

namespace mixq::py {

const LayerSet& CheckpointState::layers() {
  std::lock_guard lock(mutex_);
  if (!layers_) {
    if (!markers_) markers_ = collect_markers(checkpoint);
    layers_ = group_layers(checkpoint, *markers_);
  }
  return *layers_;
}

const Plan& CheckpointState::plan(const std::string& profile) {
  std::lock_guard lock(mutex_);
  auto& slot = plans_[profile];
  if (!slot) slot = std::make_unique<const Plan>(Plan::build(checkpoint, PlanOptions{profile, 1}));
  return *slot;
}

namespace {

using Handle = std::shared_ptr<CheckpointState>;

// str, os.PathLike, or a list/tuple of those -> file system paths.
std::vector<std::string> path_list(nb::handle path) {
  nb::object fspath = nb::module_::import_("os").attr("fspath");
  std::vector<std::string> paths;
  if (nb::isinstance<nb::list>(path) || nb::isinstance<nb::tuple>(path)) {
    for (nb::handle item : path) paths.push_back(nb::cast<std::string>(fspath(item)));
    if (paths.empty()) fail("mixq.open: the list of paths is empty");
  } else {
    nb::object text;
    try {
      text = fspath(path);
    } catch (nb::python_error&) {
      fail("mixq.open: expected a path (str or os.PathLike) or a list of paths, got {}",
           nb::cast<std::string>(nb::str(path.type().attr("__name__"))));
    }
    if (!nb::isinstance<nb::str>(text))
      fail("mixq.open: paths must be text, got bytes");
    paths.push_back(nb::cast<std::string>(text));
  }
  return paths;
}

Handle open_checkpoint(nb::handle path) {
  std::vector<std::string> paths = path_list(path);
  nb::gil_scoped_release release;
  auto state = std::make_shared<CheckpointState>(Checkpoint::open(paths));
  state->paths = std::move(paths);
  return state;
}

nb::object inspect(const Handle& self) {
  nlohmann::json report;
  {
    nb::gil_scoped_release release;
    report = inspect_report(self->checkpoint);
  }
  return to_python(report);
}

nb::object plan(const Handle& self, const std::string& profile, int tp) {
  if (tp < 1) fail("plan: tp must be >= 1, got {}", tp);
  nlohmann::json json;
  {
    nb::gil_scoped_release release;
    PlanOptions options;
    options.profile = profile;
    options.tp = tp;
    Plan plan = Plan::build(self->checkpoint, options);
    plan.require_accepted();  // the CLI's message, as mixq.Error
    json = plan.to_json();
  }
  return to_python(json);
}

std::vector<std::string> prefixes(const Handle& self) {
  std::vector<std::string> out;
  {
    nb::gil_scoped_release release;
    for (const Layer& layer : self->layers().layers) out.push_back(layer.prefix);
  }
  return out;
}

std::string repr(const Handle& self) {
  std::string files;
  for (const std::string& p : self->paths) files += (files.empty() ? "'" : ", '") + p + "'";
  return fmt::format("mixq.Checkpoint([{}], {} tensors)", files, self->checkpoint.tensors().size());
}

}  // namespace

void bind_checkpoint(nb::module_& m) {
  nb::class_<CheckpointState>(m, "Checkpoint",
                              "An opened checkpoint (memory-mapped; tensor data is read on use).")
      .def_prop_ro("paths", [](const Handle& self) { return self->paths; },
                   "The paths given to mixq.open().")
      .def("inspect", &inspect,
           "The data of `mixq inspect --json`: files, layers, other_tensors, formats, warnings.")
      .def("plan", &plan, nb::arg("profile") = "comfyui", nb::arg("tp") = 1,
           "The data of `mixq plan --json` for a runtime profile (comfyui, sglang,\n"
           "sglang-minimax-h3) and tensor-parallel degree. Raises mixq.Error with the\n"
           "CLI's message when the profile rejects the checkpoint or a layer does not\n"
           "admit tp.")
      // No keep_alive: a Linear holds the mapping through its shared_ptr, and
      // Linear.detach() must be able to let it go.
      .def("linear", &make_linear, nb::arg("prefix"), nb::arg("kernel") = "auto", nb::kw_only(),
           nb::arg("tp_rank") = 0, nb::arg("tp_size") = 1, nb::arg("profile") = "comfyui",
           "The runtime linear of one layer: weights prepared for the fastest kernel\n"
           "(kernel='auto') or for the reference implementation (kernel='ref').\n"
           "Once they are prepared, the file pages under the layer's tensors leave\n"
           "the process' resident memory (a loaded model holds each weight once);\n"
           "the tensors stay readable and are read from the file again if needed.\n"
           "With tp_size > 1, only rank tp_rank's share of the layer, split as the\n"
           "plan under `profile` classifies it (column: out_features/tp_size rows of\n"
           "every fused part; row: in_features/tp_size inputs, bias on rank 0 only).\n"
           "Raises mixq.Error naming the layer when the split is not admitted.")
      .def("prefixes", &prefixes, "The prefix of every linear layer, sorted.")
      .def("__repr__", &repr);

  m.def("open", &open_checkpoint, nb::arg("path"),
        "Opens a .safetensors file, a *.safetensors.index.json, a directory of shards,\n"
        "or a list of the shard files of one checkpoint. Reads headers only.");
}

}  // namespace mixq::py
