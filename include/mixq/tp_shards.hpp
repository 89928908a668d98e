#pragma once
// Per-rank checkpoints of a whole model (`mixq shard`, docs/TP.md): one Comfy
// checkpoint per tensor-parallel rank holding that rank's share of every
// linear layer (mixq/shard.hpp), plus the index mixq-shard.json.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mixq {

struct ShardOptions {
  int degree = 1;                   // >= 1
  std::string profile = "comfyui";  // the plan that must admit `degree`
  std::string output;               // a folder that must not exist (or be empty)
};

struct ShardReport {
  std::string folder;
  std::vector<std::string> files;  // rank0.safetensors, ..., then mixq-shard.json
  std::vector<uint64_t> rank_bytes;
  uint64_t source_bytes = 0;
  nlohmann::json index;  // what mixq-shard.json holds
  double seconds = 0;
};

// The name of the index file in the output folder.
inline constexpr const char* kShardIndexName = "mixq-shard.json";

// Writes `degree` checkpoints rank<r>.safetensors plus mixq-shard.json into
// options.output. Each is a Comfy checkpoint holding that rank's share of
// every linear layer (shard_layer) and a copy of every other tensor (markers,
// norms, ...), with the source's header metadata. The folder appears only when
// complete (staged next to it, then renamed). Throws Error (nothing written)
// when the plan rejects the checkpoint or the degree, naming the first layer
// and the reason, or when the output exists.
ShardReport write_tp_shards(const std::vector<std::string>& sources, const ShardOptions& options);

}  // namespace mixq
