#include "io/shard_index.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "io/atomic_file.hpp"
#include "io/file_checks.hpp"
#include "io/strict_json.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxIndexBytes = 256ull << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// realpath(3), or empty when the path does not resolve (missing, a loop:
// opening the file reports that).
std::string real_path(const fs::path& path) {
  std::unique_ptr<char, decltype(&::free)> resolved(::realpath(path.c_str(), nullptr), &::free);
  return resolved ? std::string(resolved.get()) : std::string();
}

bool is_inside(const std::string& path, const std::string& folder) {
  if (folder.empty()) return false;
  if (folder == "/") return true;
  return path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/';
}

// Where an index's shards may resolve to: its folder, and (when the index
// itself is a symbolic link, as in a Hugging Face cache snapshot whose files
// all link into ../../blobs) the folder of the file it resolves to.
struct IndexFolders {
  fs::path given;              // the folder shard names are relative to
  std::vector<std::string> allowed;  // real paths
};

IndexFolders index_folders(const std::string& index) {
  IndexFolders f;
  f.given = fs::path(index).parent_path();
  if (std::string real = real_path(f.given.empty() ? fs::path(".") : f.given); !real.empty())
    f.allowed.push_back(real);
  if (std::string real = real_path(index); !real.empty())
    f.allowed.push_back(fs::path(real).parent_path().string());
  return f;
}

// weight_map values name shards next to the index; anything that could
// escape that folder (absolute paths, "..", a symbolic link resolving
// elsewhere) is refused.
std::string shard_path(const IndexFolders& folders, const std::string& name, const std::string& index,
                       const std::string& tensor) {
  fs::path rel(name);
  bool escapes = name.empty() || rel.is_absolute() || name.find('\0') != std::string::npos;
  for (const auto& part : rel)
    if (part == "..") escapes = true;
  if (escapes)
    fail("{}: weight_map['{}'] = '{}' must be a file name relative to the index folder", index,
         tensor, name);
  const fs::path path = folders.given / rel;
  const std::string real = real_path(path);
  if (!real.empty() && std::none_of(folders.allowed.begin(), folders.allowed.end(),
                                    [&](const std::string& folder) { return is_inside(real, folder); }))
    fail("{}: weight_map['{}'] = '{}' resolves to {}, outside the index folder", index, tensor, name, real);
  return path.string();
}

ShardIndex read_index(const std::string& path, ShardSources& out) {
  nlohmann::json index = parse_strict_json(read_whole_file(path, kMaxIndexBytes, "shard index"), path);
  if (!index.is_object()) fail("{}: index must be a JSON object, found {}", path, index.type_name());
  auto it = index.find("weight_map");
  if (it == index.end()) fail("{}: index has no 'weight_map'", path);
  if (!it->is_object()) fail("{}: 'weight_map' must be an object, found {}", path, it->type_name());
  ShardIndex result;
  result.path = path;
  const IndexFolders folders = index_folders(path);
  std::set<std::string> seen(out.files.begin(), out.files.end());
  std::map<std::string, std::string> resolved;  // shard name -> path (each name checked once)
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string())
      fail("{}: weight_map['{}'] must be a shard file name, found {}", path, tensor, shard.type_name());
    const std::string& name = shard.get_ref<const std::string&>();
    auto known = resolved.find(name);
    if (known == resolved.end()) known = resolved.emplace(name, shard_path(folders, name, path, tensor)).first;
    const std::string& file = known->second;
    result.weight_map.emplace(tensor, file);
    if (seen.insert(file).second) out.files.push_back(file);
  }
  if (result.weight_map.empty()) fail("{}: 'weight_map' is empty", path);
  return result;
}

// Every entry named *.safetensors that is not a folder: a FIFO, a device or a
// dangling or looping symbolic link among them is then refused by name when
// it is opened, rather than skipped silently.
void add_directory(const std::string& path, ShardSources& out) {
  std::vector<std::string> shards;
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (ends_with(name, ".safetensors") && !it->is_directory(type_ec)) shards.push_back(it->path().string());
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
    check_path(path);
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
