// Stage 1 of `mixq quantize`: where the output goes (a file, or a folder of
// shards) and the refusal to overwrite any source file.
#include <filesystem>

#include <fmt/format.h>

#include "io/file_checks.hpp"
#include "mixq/error.hpp"
#include "quantize/stages.hpp"

namespace mixq::quantize {
namespace fs = std::filesystem;

Target resolve_target(const std::string& output, uint64_t shard_size) {
  if (output.empty()) throw UsageError("quantize: -o OUT is required");
  Target t;
  t.final_path = fs::absolute(fs::path(output)).lexically_normal();
  if (t.final_path.filename().empty()) t.final_path = t.final_path.parent_path();
  bool safetensors_name = t.final_path.extension() == ".safetensors";
  if (shard_size > 0 && safetensors_name)
    throw UsageError(fmt::format(
        "-o {}: sharded output is a folder (model-00001-of-0000N.safetensors + index); give a "
        "folder path",
        output));
  t.folder = !safetensors_name;
  t.parent = t.final_path.parent_path();
  std::error_code ec;
  if (!fs::is_directory(t.parent, ec)) fail("{}: output folder does not exist", t.parent.string());
  if (t.folder && fs::exists(t.final_path, ec)) {
    if (!fs::is_directory(t.final_path, ec))
      fail("{}: exists and is not a folder", t.final_path.string());
    if (!fs::is_empty(t.final_path, ec))
      fail("{}: output folder exists and is not empty", t.final_path.string());
  }
  if (!t.folder && fs::is_directory(t.final_path, ec))
    fail("{}: output path is a folder", t.final_path.string());
  return t;
}

// The output must be none of the source's files (shards and index, by path,
// hard link or symbolic link: io/file_checks.hpp), nor a folder holding them.
void refuse_overwriting_source(const Checkpoint& source, const Target& target) {
  refuse_output_over_inputs(target.final_path.string(), source.source_paths());
  for (const FileInfo& file : source.files()) {
    fs::path src = fs::absolute(file.path).lexically_normal();
    if (target.folder) {
      auto rel = src.lexically_relative(target.final_path);
      if (!rel.empty() && *rel.begin() != "..")
        fail("{}: the source lies inside the output folder", target.final_path.string());
    }
  }
}

}  // namespace mixq::quantize
