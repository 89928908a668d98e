#include "mixq/checkpoint.hpp"

#include <algorithm>
#include <set>

#include "io/mapped_file.hpp"
#include "io/safetensors_header.hpp"
#include "io/shard_index.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

// Every tensor listed by an index must sit in the shard it names, and every
// tensor of the index's shards must be listed.
void check_index(const ShardIndex& index, const std::vector<FileInfo>& files,
                 const std::vector<TensorView>& sorted, const Checkpoint& checkpoint) {
  for (const auto& [name, shard] : index.weight_map) {
    const TensorView* t = checkpoint.find(name);
    if (!t) fail("{}: weight_map lists tensor '{}' in {}, but no shard holds it", index.path, name, shard);
    if (files[t->file].path != shard)
      fail("{}: weight_map puts tensor '{}' in {}, but it is in {}", index.path, name, shard,
           files[t->file].path);
  }
  std::set<std::string> shards;
  for (const auto& entry : index.weight_map) shards.insert(entry.second);
  std::vector<bool> listed_shard(files.size());
  for (size_t i = 0; i < files.size(); ++i) listed_shard[i] = shards.count(files[i].path) > 0;
  for (const TensorView& t : sorted)
    if (listed_shard[t.file] && !index.weight_map.count(t.name))
      fail("{}: tensor '{}' of shard {} is missing from weight_map", index.path, t.name,
           files[t.file].path);
}

}  // namespace

Checkpoint::Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

// Adds one file's tensors; views point into the file's bytes at their offsets
// (validated by read_safetensors_header).
static void add_file(const std::shared_ptr<const MappedFile>& file, std::vector<FileInfo>& files,
                     std::vector<TensorView>& tensors, std::vector<std::string>& warnings) {
  ParsedHeader header = read_safetensors_header(*file);
  const int index = static_cast<int>(files.size());
  const std::byte* base = file->bytes().data();
  tensors.reserve(tensors.size() + header.entries.size());
  for (auto& e : header.entries) {
    uint64_t offset = header.data_start + e.begin;
    tensors.push_back(TensorView{std::move(e.name), e.dtype, std::move(e.shape),
                                 std::span<const std::byte>(base + offset, e.end - e.begin), index,
                                 offset, file});
  }
  for (std::string& w : header.warnings) warnings.push_back(std::move(w));
  if (header.info.trailing_bytes > 0)
    warnings.push_back(fmt::format(
        "{}: {} bytes after the last tensor's data (ignored; the reference safetensors reader rejects such a "
        "file: incomplete metadata, file not fully covered)",
        header.info.path, header.info.trailing_bytes));
  files.push_back(std::move(header.info));
}

// Sorts by name and rejects a name held by two files (or twice by one).
static void sort_unique(std::vector<TensorView>& tensors, const std::vector<FileInfo>& files) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].name == tensors[i - 1].name)
      fail("tensor '{}' appears twice: in {} and in {}", tensors[i].name,
           files[tensors[i - 1].file].path, files[tensors[i].file].path);
}

Checkpoint Checkpoint::open(const std::vector<std::string>& paths) {
  ShardSources sources = resolve_shards(paths);
  Checkpoint ckpt;
  for (const auto& path : sources.files) {
    ckpt.mappings_.push_back(MappedFile::map(path));
    add_file(ckpt.mappings_.back(), ckpt.files_, ckpt.tensors_, ckpt.warnings_);
  }
  sort_unique(ckpt.tensors_, ckpt.files_);
  for (const auto& index : sources.indexes) {
    check_index(index, ckpt.files_, ckpt.tensors_, ckpt);
    ckpt.index_paths_.push_back(index.path);
  }
  return ckpt;
}

Checkpoint Checkpoint::from_bytes(std::span<const std::byte> bytes, std::string name) {
  Checkpoint ckpt;
  ckpt.mappings_.push_back(MappedFile::copy_of(bytes, std::move(name)));
  add_file(ckpt.mappings_.back(), ckpt.files_, ckpt.tensors_, ckpt.warnings_);
  sort_unique(ckpt.tensors_, ckpt.files_);
  return ckpt;
}

void Checkpoint::read(const TensorView& t, void* out) const {
  mappings_.at(static_cast<size_t>(t.file))->read(t.offset, out, t.data.size());
}

std::vector<std::string> Checkpoint::source_paths() const {
  std::vector<std::string> paths;
  for (const FileInfo& f : files_) paths.push_back(f.path);
  paths.insert(paths.end(), index_paths_.begin(), index_paths_.end());
  return paths;
}

void Checkpoint::check_intact() const {
  for (const auto& mapping : mappings_) mapping->check_intact();
}

const TensorView* Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, std::string_view n) { return t.name < n; });
  return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
}

}  // namespace mixq
