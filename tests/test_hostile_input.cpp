// Files crafted as a hostile user would (issue 15, first table), through the
// library: nesting bombs and duplicate keys in markers, oversized markers,
// NUL bytes in names and paths, FIFOs, symbolic-link loops and escapes, gaps
// between tensors, a file truncated while it is mapped. Every input is built
// here; the command-line rows are in test_cli_hostile.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/escape.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/npy.hpp"
#include "mixq/plan.hpp"
#include "mixq/quantize.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using testing::CheckpointBuilder;
using testing::temp_dir;

// [u64 LE header length][header][data]: any header text, valid or not.
void write_image(const fs::path& path, const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + data;
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// The Error message of `body`, or "" when it did not throw.
template <class F>
std::string error_of(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool one_printable_line(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

CheckpointBuilder float_layer(const std::string& prefix, int64_t n = 4, int64_t k = 32) {
  CheckpointBuilder b;
  b.add_float(prefix + ".weight", DType::F32, {n, k}, testing::random_floats(static_cast<size_t>(n * k), 7));
  return b;
}

// ---- escaping --------------------------------------------------------------

TEST(Escape, ControlCharactersAndInvalidUtf8BecomeEscapes) {
  EXPECT_EQ(escape_text("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(escape_text("bell\x07 new\nline\r\t"), "bell\\x07 new\\x0aline\\x0d\\x09");
  EXPECT_EQ(escape_text(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escape_text("\x7f"), "\\x7f");
  EXPECT_EQ(escape_text("bad \xff\xfe utf8 \xc0\xaf"), "bad \\xff\\xfe utf8 \\xc0\\xaf");
  EXPECT_EQ(escape_text("\xe2\x80\xae" "evil"), "\\u202eevil");  // right-to-left override
  EXPECT_EQ(escape_text("\xc2\x9b" "31m"), "\\u009b31m");         // C1 CSI
  // Printable text, UTF-8 included, is unchanged; escaping is idempotent.
  EXPECT_EQ(escape_text("blocks.0.attn.qkv_proj µ 模型 \\x1b"), "blocks.0.attn.qkv_proj µ 模型 \\x1b");
  const std::string once = escape_text("x\x1b\xff\n");
  EXPECT_EQ(escape_text(once), once);
}

TEST(Escape, JsonStringsAndKeysBecomeValidUtf8) {
  nlohmann::json j = {{"path", "dir/\xff\xfe.safetensors"}, {"list", {"ok", "\xc3"}}};
  j["k\xff"] = 1;
  make_json_utf8(j);
  EXPECT_EQ(j["path"], "dir/\\xff\\xfe.safetensors");
  EXPECT_EQ(j["list"][1], "\\xc3");
  EXPECT_TRUE(j.contains("k\\xff"));
  EXPECT_NO_THROW(j.dump());
}

TEST(Escape, ErrorsAreOnePrintableLine) {
  const std::string message = Error("tensor 'a\nmixq: accepted\x1b[0m'").what();
  EXPECT_TRUE(one_printable_line(message)) << message;
  EXPECT_NE(message.find("a\\x0amixq: accepted\\x1b[0m"), std::string::npos) << message;
}

// ---- markers: nesting, duplicate keys, size -------------------------------

TEST(HostileMarkers, MillionDeepNestingInATensorMarkerIsAnError) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto b = float_layer("blocks.0.mlp.fc1");
  b.add_marker("blocks.0.mlp.fc1", deep);
  const fs::path path = temp_dir("deep-marker") / "m.safetensors";
  b.write(path);
  // Above the 64 KiB cap: refused before parsing.
  std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("blocks.0.mlp.fc1"), std::string::npos) << error;
  EXPECT_NE(error.find("64 KiB"), std::string::npos) << error;
  // Under the cap, the bounded parser refuses the depth.
  auto small = float_layer("blocks.0.mlp.fc1");
  small.add_marker("blocks.0.mlp.fc1", std::string(30000, '[') + std::string(30000, ']'));
  small.write(path);
  error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("layer 'blocks.0.mlp.fc1'"), std::string::npos) << error;
  EXPECT_NE(error.find("nested deeper than 64"), std::string::npos) << error;
}

TEST(HostileMarkers, DeepNestingInsideParams) {
  auto b = float_layer("x");
  b.add_marker("x", R"({"format": "float8_e4m3fn", "params": )" + std::string(20000, '[') +
                        std::string(20000, ']') + "}");
  const fs::path path = temp_dir("deep-params") / "m.safetensors";
  b.write(path);
  const std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("layer 'x'"), std::string::npos) << error;
  EXPECT_NE(error.find("nested deeper than 64"), std::string::npos) << error;
}

TEST(HostileMarkers, DeepNestingInQuantizationMetadata) {
  auto b = float_layer("x");
  b.metadata("_quantization_metadata", R"({"layers": {"x": )" + std::string(1000000, '[') + "}}");
  const fs::path path = temp_dir("deep-meta") / "m.safetensors";
  b.write(path);
  const std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("Invalid _quantization_metadata in"), std::string::npos) << error;
  EXPECT_NE(error.find("nested deeper than 64"), std::string::npos) << error;
}

TEST(HostileMarkers, DuplicateKeysAreRejected) {
  for (const std::string json : {R"({"format": "float8_e4m3fn", "format": "nvfp4"})",
                                 R"({"format": "int8_tensorwise", "params": {"convrot": true, "convrot": false}})"}) {
    auto b = float_layer("x");
    b.add_marker("x", json);
    const fs::path path = temp_dir("dup-marker") / "m.safetensors";
    b.write(path);
    const std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
    EXPECT_NE(error.find("layer 'x'"), std::string::npos) << error;
    EXPECT_NE(error.find("duplicate key"), std::string::npos) << json << " -> " << error;
  }
  auto b = float_layer("x");
  b.metadata("_quantization_metadata", R"({"layers": {"x": {"format": "a", "format": "b"}}})");
  const fs::path path = temp_dir("dup-meta") / "m.safetensors";
  b.write(path);
  const std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("duplicate key 'format'"), std::string::npos) << error;
}

TEST(HostileMarkers, OversizedMarkerIsRefusedWithItsSize) {
  auto b = float_layer("x");
  const std::string text = R"({"format": "float8_e4m3fn", "pad": ")" + std::string(kMaxMarkerBytes, 'a') + "\"}";
  b.add_marker("x", text);
  const fs::path path = temp_dir("big-marker") / "m.safetensors";
  b.write(path);
  const std::string error = error_of([&] { collect_markers(Checkpoint::open(path.string())); });
  EXPECT_NE(error.find("layer 'x'"), std::string::npos) << error;
  EXPECT_NE(error.find(std::to_string(text.size()) + " bytes"), std::string::npos) << error;
  EXPECT_NE(error.find("more than the 64 KiB"), std::string::npos) << error;
}

// ---- names ---------------------------------------------------------------

TEST(HostileNames, NulInATensorNameIsRejectedAndEscaped) {
  const fs::path path = temp_dir("nul-name") / "n.safetensors";
  write_image(path, "{" + entry("a\\u0000b", "U8", "[1]", 0, 1) + "}", std::string(1, '\0'));
  const std::string error = error_of([&] { Checkpoint::open(path.string()); });
  EXPECT_NE(error.find("tensor 'a\\x00b'"), std::string::npos) << error;
  EXPECT_NE(error.find("NUL"), std::string::npos) << error;
  EXPECT_TRUE(one_printable_line(error)) << error;
}

TEST(HostileNames, NulInAPathIsAnError) {
  const std::string error = error_of([&] { Checkpoint::open(std::string("x\0y", 3)); });
  EXPECT_NE(error.find("x\\x00y"), std::string::npos) << error;
  EXPECT_NE(error.find("NUL"), std::string::npos) << error;
}

// ---- layout: gaps the reference reader rejects ----------------------------

TEST(HostileLayout, GapBetweenTensorsIsAWarningNamingBoth) {
  const fs::path path = temp_dir("gap") / "g.safetensors";
  write_image(path, "{" + entry("a", "U8", "[4]", 0, 4) + "," + entry("b", "U8", "[4]", 8, 12) + "}",
              std::string(12, '\0'));
  const Checkpoint c = Checkpoint::open(path.string());
  ASSERT_EQ(c.warnings().size(), 1u);
  const std::string& w = c.warnings()[0];
  EXPECT_NE(w.find("4 unused bytes between the data of tensor 'a' and tensor 'b'"), std::string::npos) << w;
  EXPECT_NE(w.find("InvalidOffset"), std::string::npos) << w;
  // What the safetensors library raises for this file (checked against
  // safetensors 0.4: "invalid offset for tensor `b`").
  EXPECT_EQ(c.files()[0].reference_reader_error, "invalid offset for tensor `b`");
  for (const char* profile : {"sglang", "sglang-minimax-h3", "comfyui"}) {
    const Plan plan = Plan::build(c, PlanOptions{profile, 1});
    bool risk = false;
    for (const std::string& pw : plan.warnings())
      risk = risk || (pw.rfind("risk: ", 0) == 0 && pw.find("SafetensorError") != std::string::npos &&
                      pw.find("invalid offset for tensor `b`") != std::string::npos);
    EXPECT_TRUE(risk) << profile;
  }
}

TEST(HostileLayout, LeadingGapAndEmptyTensorInsideAnother) {
  const fs::path dir = temp_dir("gap2");
  write_image(dir / "lead.safetensors", "{" + entry("a", "U8", "[4]", 2, 6) + "}", std::string(6, '\0'));
  const Checkpoint lead = Checkpoint::open((dir / "lead.safetensors").string());
  ASSERT_EQ(lead.warnings().size(), 1u);
  EXPECT_NE(lead.warnings()[0].find("2 unused bytes between the header and tensor 'a'"),
            std::string::npos)
      << lead.warnings()[0];
  write_image(dir / "inside.safetensors", "{" + entry("a", "U8", "[4]", 0, 4) + "," + entry("e", "U8", "[0]", 2, 2) + "}",
              std::string(4, '\0'));
  const Checkpoint inside = Checkpoint::open((dir / "inside.safetensors").string());
  EXPECT_EQ(inside.files()[0].reference_reader_error, "invalid offset for tensor `e`");
  // The contiguous layout, an empty tensor at the end included, is clean.
  write_image(dir / "ok.safetensors", "{" + entry("a", "U8", "[4]", 0, 4) + "," + entry("e", "U8", "[0]", 4, 4) + "}",
              std::string(4, '\0'));
  const Checkpoint ok = Checkpoint::open((dir / "ok.safetensors").string());
  EXPECT_TRUE(ok.warnings().empty());
  EXPECT_EQ(ok.files()[0].reference_reader_error, "");
  // Trailing bytes: the reference reader's "incomplete metadata".
  write_image(dir / "trail.safetensors", "{" + entry("a", "U8", "[4]", 0, 4) + "}", std::string(6, '\0'));
  const Checkpoint trail = Checkpoint::open((dir / "trail.safetensors").string());
  EXPECT_EQ(trail.files()[0].reference_reader_error, "incomplete metadata, file not fully covered");
}

// ---- files that are not files --------------------------------------------

TEST(HostileFiles, FifoIsNotARegularFile) {
  const fs::path dir = temp_dir("fifo");
  const fs::path fifo = dir / "x.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string error = error_of([&] { Checkpoint::open(fifo.string()); });
  EXPECT_NE(error.find("x.safetensors: not a regular file"), std::string::npos) << error;
  // Through an index whose shard is the FIFO.
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"w": "x.safetensors"}})";
  error = error_of([&] { Checkpoint::open((dir / "model.safetensors.index.json").string()); });
  EXPECT_NE(error.find("x.safetensors: not a regular file"), std::string::npos) << error;
  // Through a folder listing.
  error = error_of([&] { Checkpoint::open(dir.string()); });
  EXPECT_NE(error.find("x.safetensors: not a regular file"), std::string::npos) << error;
  // An .npy input and an index file that are FIFOs.
  const fs::path npy = dir / "x.npy";
  ASSERT_EQ(::mkfifo(npy.c_str(), 0600), 0);
  error = error_of([&] { read_npy(npy.string()); });
  EXPECT_NE(error.find("x.npy: not a regular file"), std::string::npos) << error;
}

TEST(HostileFiles, SymlinkLoopInAFolder) {
  const fs::path dir = temp_dir("loop");
  fs::create_symlink("x.safetensors", dir / "x.safetensors");
  const std::string error = error_of([&] { Checkpoint::open(dir.string()); });
  EXPECT_NE(error.find("x.safetensors: cannot open: Too many levels of symbolic links"), std::string::npos) << error;
}

TEST(HostileFiles, ShardSymlinkOutsideTheIndexFolderIsRefused) {
  const fs::path root = temp_dir("shard-escape");
  fs::create_directories(root / "model");
  fs::create_directories(root / "elsewhere");
  float_layer("a").write(root / "elsewhere" / "secret.safetensors");
  fs::create_symlink("../elsewhere/secret.safetensors", root / "model" / "shard.safetensors");
  std::ofstream(root / "model" / "model.safetensors.index.json") << R"({"weight_map": {"a.weight": "shard.safetensors"}})";
  const std::string error = error_of([&] { Checkpoint::open((root / "model" / "model.safetensors.index.json").string()); });
  EXPECT_NE(error.find("'shard.safetensors' resolves to"), std::string::npos) << error;
  EXPECT_NE(error.find("outside the index folder"), std::string::npos) << error;
}

TEST(HostileFiles, HuggingFaceCacheLayoutStillOpens) {
  // snapshots/<rev>/ holds symbolic links into ../../blobs, the index too.
  const fs::path root = temp_dir("hf-cache");
  fs::create_directories(root / "blobs");
  fs::create_directories(root / "snapshots" / "rev");
  float_layer("a").write(root / "blobs" / "1111");
  std::ofstream(root / "blobs" / "2222") << R"({"weight_map": {"a.weight": "model-00001.safetensors"}})";
  fs::create_symlink("../../blobs/1111", root / "snapshots" / "rev" / "model-00001.safetensors");
  fs::create_symlink("../../blobs/2222", root / "snapshots" / "rev" / "model.safetensors.index.json");
  const Checkpoint c = Checkpoint::open((root / "snapshots" / "rev" / "model.safetensors.index.json").string());
  EXPECT_NE(c.find("a.weight"), nullptr);
}

// ---- .npy ------------------------------------------------------------------

TEST(HostileNpy, DuplicateKeyIsOneLine) {
  const fs::path path = temp_dir("npy-dup") / "x.npy";
  std::string header = "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header + std::string(4, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  const std::string error = error_of([&] { read_npy(path.string()); });
  EXPECT_NE(error.find("duplicate key 'descr'"), std::string::npos) << error;
  EXPECT_TRUE(one_printable_line(error)) << error;
}

// ---- a file truncated while it is mapped ------------------------------------

TEST(HostileFiles, TruncatedWhileMappedIsAnErrorNotSigbus) {
  const fs::path path = temp_dir("truncate") / "t.safetensors";
  float_layer("a", 256, 1024).write(path);  // 1 MiB of f32
  const Checkpoint c = Checkpoint::open(path.string());
  const TensorView* a = c.find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_NO_THROW(c.check_intact());
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  // Reading past the new end would raise SIGBUS; the guard turns it into zeros.
  uint64_t sum = 0;
  for (std::byte b : a->data) sum += static_cast<uint8_t>(b);
  volatile uint64_t sink = sum;
  (void)sink;
  const std::string error = error_of([&] { c.check_intact(); });
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("shrank"), std::string::npos) << error;
}

TEST(HostileFiles, QuantizeOfASourceTruncatedMidwayWritesNothing) {
  const fs::path dir = temp_dir("truncate-q");
  const fs::path source = dir / "src.safetensors";
  CheckpointBuilder b;
  for (int i = 0; i < 4; ++i)
    b.add_float("blocks." + std::to_string(i) + ".weight", DType::F32, {256, 512},
                testing::random_floats(256 * 512, static_cast<uint64_t>(i)));
  b.write(source);
  Recipe recipe;
  recipe.rules.push_back(parse_rule("*=float8_e4m3fn", "test"));
  QuantizeOptions options;
  options.output = (dir / "out.safetensors").string();
  options.watchdog = false;
  bool truncated = false;
  options.progress = [&](const QuantizeProgress&) {
    if (!truncated) {
      ASSERT_EQ(::truncate(source.c_str(), 8192), 0);
    }
    truncated = true;
  };
  const std::string error = error_of([&] { quantize_checkpoint({source.string()}, recipe, options); });
  EXPECT_TRUE(truncated);
  EXPECT_NE(error.find(source.string()), std::string::npos) << error;
  EXPECT_NE(error.find("shrank"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "src.safetensors") << "left behind: " << e.path();
}

}  // namespace
}  // namespace mixq
