#pragma once
// Quantizing a float checkpoint into a Comfy checkpoint, layer by layer.
//
// Candidates are the layers group_layers() finds without a marker whose
// `.weight` is a 2-D F32/F16/BF16/F64 tensor; the recipe decides each one.
// Every other tensor (biases, norms, embeddings, already-quantized layers and
// their markers) is copied byte for byte.
//
// Streaming: the writer needs every tensor's dtype and shape before any data,
// and those are only known after quantizing. Pass 1 therefore quantizes one
// layer at a time and appends its tensors to an unlinked spill file in the
// staging folder (only the quantized bytes, about 1/4..1/2 of the source);
// pass 2 declares everything and streams source tensors and spilled tensors
// into the writer. Layers are quantized in parallel batches of at most 256 MiB
// of f32 weights (one layer alone when it is larger), so peak memory is about
// max(256 MiB, largest layer) in f32 plus the quantizers' work space, not the
// model; source pages are released after each layer.
//
// Atomic and durable: all files are written into a staging folder next to
// the output (".<name>.mixq-tmp-<pid>@<host>-XXXXXXXX") and renamed into place
// at the end; every file, the staging folder and the output's folder are
// fsynced, so a power loss leaves either no output or a whole one. A watchdog
// process removes the staging folder if this process dies (even by SIGKILL)
// before the rename; if the watchdog dies too (SIGKILL of the process group),
// the next quantize into the same folder removes the leftover, recognised by
// the pid in its name no longer running on this host. The source is opened
// read-only and never written.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/recipe.hpp"

namespace mixq {

enum class MarkerDialect { tensor, header, both };

// Parses "tensor" / "header" / "both"; throws UsageError otherwise.
MarkerDialect parse_marker_dialect(std::string_view text);
// "2GB", "500MB", "1.5GiB", "4096" -> bytes (KB/MB/GB = 10^3.., KiB/MiB/GiB
// = 2^10..); throws UsageError on anything else.
uint64_t parse_byte_size(std::string_view text);

struct QuantizeProgress {
  std::string_view phase;  // "quantize" or "write"
  size_t done = 0;         // layers (quantize) or tensors (write) done
  size_t total = 0;
  uint64_t bytes_done = 0;  // source bytes read (quantize) / output bytes written (write)
  uint64_t bytes_total = 0;
};

struct QuantizeOptions {
  // A path ending in ".safetensors" is one output file; with shard_size > 0,
  // or a path not ending in ".safetensors", it is a folder that receives
  // model.safetensors, or model-0000i-of-0000n.safetensors shards plus
  // model.safetensors.index.json. An existing output file is replaced; an
  // existing folder must be empty.
  std::string output;
  MarkerDialect markers = MarkerDialect::tensor;
  uint64_t shard_size = 0;  // 0 = one file
  // Fork the watchdog that cleans up after a killed run (see above).
  bool watchdog = true;
  std::function<void(const QuantizeProgress&)> progress;
};

struct QuantizedLayerReport {
  std::string prefix;
  std::string format;  // "keep" for layers left in source precision
  nlohmann::json marker;  // written marker (null for kept layers)
  int64_t out_features = 0;
  int64_t in_features = 0;
  uint64_t source_bytes = 0;  // the source weight
  uint64_t output_bytes = 0;  // the weight and its companions as written
  bool fell_back = false;     // rule said fallback=keep and the format refused
  std::string reason;         // why it fell back
};

struct QuantizeReport {
  std::vector<std::string> files;  // written files (shards, index) in final place
  std::vector<QuantizedLayerReport> layers;  // every candidate layer, by prefix
  uint64_t source_bytes = 0;  // all source tensors
  uint64_t output_bytes = 0;  // all output tensors (data only)
  size_t tensors_written = 0;
  double seconds = 0;
  std::vector<std::string> warnings;  // e.g. a rule that matched no layer
};

// Quantizes `source` (file, index or folder; several paths for a split
// checkpoint). Throws Error naming the layer when a format cannot hold it
// (unless the rule says fallback=keep) and when the output would overwrite a
// source file.
QuantizeReport quantize_checkpoint(const std::vector<std::string>& source, const Recipe& recipe,
                                   const QuantizeOptions& options);

// The report as one JSON object (`mixq quantize --json`, Python's mixq.quantize).
nlohmann::json quantize_report_json(const QuantizeReport& report);


}  // namespace mixq
