#include "io/shard_index.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "io/atomic_file.hpp"
#include "io/strict_json.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxIndexBytes = 256ull << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) fail("{}: cannot read: {}", path, ec.message());
  if (size > kMaxIndexBytes) fail("{}: index is {} bytes, more than the {} byte limit", path, size, kMaxIndexBytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// weight_map values name shards next to the index; anything that could
// escape that folder (absolute paths, "..") is refused.
std::string shard_path(const fs::path& folder, const std::string& name, const std::string& index,
                       const std::string& tensor) {
  fs::path rel(name);
  bool escapes = name.empty() || rel.is_absolute();
  for (const auto& part : rel)
    if (part == "..") escapes = true;
  if (escapes)
    fail("{}: weight_map['{}'] = '{}' must be a file name relative to the index folder", index,
         tensor, name);
  return (folder / rel).string();
}

ShardIndex read_index(const std::string& path, ShardSources& out) {
  nlohmann::json index = parse_strict_json(read_text(path), path);
  if (!index.is_object()) fail("{}: index must be a JSON object, found {}", path, index.type_name());
  auto it = index.find("weight_map");
  if (it == index.end()) fail("{}: index has no 'weight_map'", path);
  if (!it->is_object()) fail("{}: 'weight_map' must be an object, found {}", path, it->type_name());
  ShardIndex result;
  result.path = path;
  const fs::path folder = fs::path(path).parent_path();
  std::set<std::string> seen(out.files.begin(), out.files.end());
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string())
      fail("{}: weight_map['{}'] must be a shard file name, found {}", path, tensor, shard.type_name());
    std::string file = shard_path(folder, shard.get<std::string>(), path, tensor);
    result.weight_map.emplace(tensor, file);
    if (seen.insert(file).second) out.files.push_back(file);
  }
  if (result.weight_map.empty()) fail("{}: 'weight_map' is empty", path);
  return result;
}

void add_directory(const std::string& path, ShardSources& out) {
  std::vector<std::string> shards;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    std::string name = entry.path().filename().string();
    if (ends_with(name, ".safetensors") && entry.is_regular_file()) shards.push_back(entry.path().string());
  }
  if (ec) fail("{}: cannot list directory: {}", path, ec.message());
  if (shards.empty()) fail("{}: directory holds no .safetensors files", path);
  std::sort(shards.begin(), shards.end());
  out.files.insert(out.files.end(), shards.begin(), shards.end());
}

}  // namespace

ShardSources resolve_shards(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("no checkpoint path given");
  ShardSources out;
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec))
      add_directory(path, out);
    else if (ends_with(path, ".json"))
      out.indexes.push_back(read_index(path, out));
    else
      out.files.push_back(path);
  }
  return out;
}

void write_shard_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                       uint64_t total_size) {
  nlohmann::json map = nlohmann::json::object();
  for (const auto& [name, file] : weight_map) map[name] = file;
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", map}};
  const std::string text = index.dump(2) + "\n";
  AtomicFile file(path);
  file.write_at(0, std::as_bytes(std::span<const char>(text.data(), text.size())));
  file.commit();
}

}  // namespace mixq
