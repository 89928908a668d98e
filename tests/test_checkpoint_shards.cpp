// Split checkpoints: through a *.safetensors.index.json, a directory of
// shards, or several paths; duplicates across shards and indexes that
// disagree with their shards are errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/safetensors_writer.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

OwnedTensor u8(const std::string& name, uint8_t value) {
  return {name, DType::U8, {1}, {static_cast<std::byte>(value)}};
}

// dir/a.safetensors: x, y   dir/b.safetensors: z
fs::path two_shards(const std::string& name) {
  fs::path dir = testing::temp_dir(name);
  std::vector<OwnedTensor> a{u8("x", 1), u8("y", 2)}, b{u8("z", 3)};
  write_safetensors((dir / "a.safetensors").string(), a);
  write_safetensors((dir / "b.safetensors").string(), b);
  return dir;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

template <class F>
void expect_error(F&& f, std::vector<std::string> needles) {
  try {
    f();
    FAIL() << "no error; expected: " << needles.front();
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

void expect_three_tensors(const Checkpoint& c) {
  ASSERT_EQ(c.tensors().size(), 3u);
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.tensors()[0].name, "x");
  EXPECT_EQ(c.tensors()[2].name, "z");
  EXPECT_EQ(c.files()[c.find("z")->file].path.find("b.safetensors") != std::string::npos, true);
  EXPECT_EQ(static_cast<int>(c.find("z")->data[0]), 3);
  EXPECT_EQ(static_cast<int>(c.find("x")->data[0]), 1);
}

TEST(CheckpointShards, Directory) {
  fs::path dir = two_shards("shards-dir");
  write_text(dir / "README.md", "not a shard");
  Checkpoint c = Checkpoint::open(dir.string());
  expect_three_tensors(c);
  EXPECT_NE(c.files()[0].path.find("a.safetensors"), std::string::npos);  // sorted
}

TEST(CheckpointShards, Index) {
  fs::path dir = two_shards("shards-index");
  write_text(dir / "m.safetensors.index.json",
             R"({"metadata": {"total_size": 3}, "weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})");
  expect_three_tensors(Checkpoint::open((dir / "m.safetensors.index.json").string()));
}

TEST(CheckpointShards, SeveralPaths) {
  fs::path dir = two_shards("shards-paths");
  expect_three_tensors(Checkpoint::open({(dir / "b.safetensors").string(), (dir / "a.safetensors").string()}));
}

TEST(CheckpointShards, IndexListsMissingTensor) {
  fs::path dir = two_shards("shards-missing");
  write_text(dir / "m.safetensors.index.json",
             R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors", "w": "b.safetensors"}})");
  expect_error([&] { Checkpoint::open((dir / "m.safetensors.index.json").string()); },
               {"m.safetensors.index.json", "tensor 'w'", "no shard holds it"});
}

TEST(CheckpointShards, IndexPutsTensorInWrongShard) {
  fs::path dir = two_shards("shards-wrong");
  write_text(dir / "m.safetensors.index.json",
             R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"}})");
  expect_error([&] { Checkpoint::open((dir / "m.safetensors.index.json").string()); },
               {"tensor 'y'", "b.safetensors", "but it is in", "a.safetensors"});
}

TEST(CheckpointShards, ShardTensorMissingFromIndex) {
  fs::path dir = two_shards("shards-unlisted");
  write_text(dir / "m.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors", "z": "b.safetensors"}})");
  expect_error([&] { Checkpoint::open((dir / "m.safetensors.index.json").string()); },
               {"tensor 'y'", "a.safetensors", "missing from weight_map"});
}

TEST(CheckpointShards, IndexMalformed) {
  fs::path dir = two_shards("shards-bad-index");
  auto open = [&](const std::string& text) {
    write_text(dir / "m.safetensors.index.json", text);
    Checkpoint::open((dir / "m.safetensors.index.json").string());
  };
  expect_error([&] { open("[]"); }, {"m.safetensors.index.json", "must be a JSON object"});
  expect_error([&] { open("{}"); }, {"no 'weight_map'"});
  expect_error([&] { open(R"({"weight_map": {"x": 3}})"); }, {"weight_map['x']", "shard file name"});
  expect_error([&] { open(R"({"weight_map": {"x": "../a.safetensors"}})"); }, {"relative to the index folder"});
  expect_error([&] { open(R"({"weight_map": {"x": "/etc/passwd"}})"); }, {"relative to the index folder"});
  expect_error([&] { open(R"({"weight_map": {"x": "a.safetensors", "x": "b.safetensors"}})"); },
               {"duplicate key 'x'"});
  expect_error([&] { open(R"({"weight_map": {"x": "gone.safetensors"}})"); }, {"gone.safetensors", "cannot open"});
}

TEST(CheckpointShards, DuplicateAcrossShards) {
  fs::path dir = testing::temp_dir("shards-dup");
  std::vector<OwnedTensor> a{u8("x", 1)}, b{u8("x", 2)};
  write_safetensors((dir / "a.safetensors").string(), a);
  write_safetensors((dir / "b.safetensors").string(), b);
  expect_error([&] { Checkpoint::open(dir.string()); },
               {"tensor 'x' appears twice", "a.safetensors", "b.safetensors"});
}

TEST(CheckpointShards, EmptyDirectoryAndMissingFile) {
  fs::path dir = testing::temp_dir("shards-empty");
  expect_error([&] { Checkpoint::open(dir.string()); }, {"holds no .safetensors files"});
  expect_error([&] { Checkpoint::open((dir / "nope.safetensors").string()); },
               {"nope.safetensors", "cannot open", "No such file"});
  expect_error([&] { Checkpoint::open(std::vector<std::string>{}); }, {"no checkpoint path"});
}

TEST(CheckpointShards, MalformedShardNamesItsFile) {
  fs::path dir = two_shards("shards-malformed");
  write_text(dir / "c.safetensors", "short");
  expect_error([&] { Checkpoint::open(dir.string()); }, {"c.safetensors", "too short"});
}

}  // namespace
}  // namespace mixq
