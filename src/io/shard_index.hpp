#pragma once
// Resolving what the user named (a .safetensors file, a
// *.safetensors.index.json, a directory of shards) into the shard files to
// open, plus the index's weight_map to check the shards against.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mixq {

struct ShardIndex {
  std::string path;                               // the index.json
  std::map<std::string, std::string> weight_map;  // tensor name -> shard path (resolved)
};

struct ShardSources {
  std::vector<std::string> files;  // in order, each once
  std::vector<ShardIndex> indexes;
};

// Throws Error for an unreadable or malformed index, a weight_map entry that
// is not a plain relative file name, or a directory without shards.
ShardSources resolve_shards(const std::vector<std::string>& paths);

// The writing side: `path` = {"metadata": {"total_size": N}, "weight_map":
// {tensor: shard file name}}, as Hugging Face writes it, through AtomicFile
// (complete or absent, fsynced, folder fsynced).
void write_shard_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                       uint64_t total_size);

}  // namespace mixq
