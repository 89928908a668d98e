// quantize's output survives a power loss and its leftovers do not survive the
// next run:
//  - every output file is fsynced before it becomes visible, the staging
//    folder is fsynced after its last entry, and the output's folder after
//    the final rename (observed by interposing fsync() and rename() in this
//    executable: the static library's calls resolve to the definitions below,
//    which log the path and forward to libc);
//  - a staging folder whose pid (in its name) no longer runs on this host is
//    removed by the next quantize into that folder; live, foreign-host and
//    old-style folders are kept.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"
#include "quantize/staging.hpp"
#include "support/test_support.hpp"

namespace {

struct Event {
  std::string op;    // "fsync" or "rename"
  std::string path;  // the synced path, or the rename's target
  std::string from;  // the rename's source
};

std::mutex g_mutex;
std::vector<Event> g_events;

std::string fd_path(int fd) {
  char link[64], target[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

void record(Event e) {
  std::lock_guard lock(g_mutex);
  g_events.push_back(std::move(e));
}

}  // namespace

extern "C" int fsync(int fd) {
  static auto real = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fsync"));
  record({"fsync", fd_path(fd), ""});
  return real(fd);
}

extern "C" int rename(const char* from, const char* to) noexcept {
  static auto real = reinterpret_cast<int (*)(const char*, const char*)>(dlsym(RTLD_NEXT, "rename"));
  const int rc = real(from, to);
  if (rc == 0) {
    std::error_code ec;
    // Log canonical paths, as fd_path() reports them.
    auto canonical = [&](const char* p) {
      auto c = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
      return ec ? std::string(p) : c.string();
    };
    record({"rename", canonical(to), canonical(from)});
  }
  return rc;
}

namespace mixq {
namespace {

namespace fs = std::filesystem;

fs::path make_source(const fs::path& dir) {
  testing::CheckpointBuilder b;
  b.add_float("blocks.0.mlp.fc1.weight", DType::F32, {64, 128}, testing::random_floats(64 * 128, 1, 0.05f));
  b.add_float("blocks.0.mlp.fc2.weight", DType::F32, {32, 256}, testing::random_floats(32 * 256, 2, 0.05f));
  b.add_float("norm.weight", DType::F32, {32}, testing::random_floats(32, 3));
  const fs::path path = dir / "source.safetensors";
  b.write(path);
  return path;
}

QuantizeReport run(const fs::path& source, const fs::path& out, uint64_t shard_size) {
  QuantizeOptions options;
  options.output = out.string();
  options.shard_size = shard_size;
  options.watchdog = false;
  Recipe recipe;
  recipe.rules.push_back(parse_rule("*=float8_e4m3fn"));
  return quantize_checkpoint({source.string()}, recipe, options);
}

std::vector<Event> take_events() {
  std::lock_guard lock(g_mutex);
  return std::exchange(g_events, {});
}

// Index of the first event matching, at or after `from`; -1 if none.
long find(const std::vector<Event>& events, const std::string& op, const std::string& path, size_t from = 0) {
  for (size_t i = from; i < events.size(); ++i)
    if (events[i].op == op && events[i].path == path) return static_cast<long>(i);
  return -1;
}

long find_last(const std::vector<Event>& events, const std::string& op, const std::string& path) {
  for (size_t i = events.size(); i-- > 0;)
    if (events[i].op == op && events[i].path == path) return static_cast<long>(i);
  return -1;
}

std::string dump(const std::vector<Event>& events) {
  std::string text;
  for (const Event& e : events)
    text += e.op + " " + (e.from.empty() ? "" : e.from + " -> ") + e.path + "\n";
  return text;
}

// The final rename that published `out`, whose source is in a staging folder.
long publishing_rename(const std::vector<Event>& events, const fs::path& out) {
  long at = find_last(events, "rename", out.string());
  if (at >= 0 && events[static_cast<size_t>(at)].from.find(".mixq-tmp-") == std::string::npos) return -1;
  return at;
}

TEST(QuantizeDurability, SingleFileIsSyncedThenPublishedThenItsFolderSynced) {
  const fs::path dir = fs::canonical(testing::temp_dir("durability_file"));
  const fs::path source = make_source(dir);
  const fs::path out = dir / "out.safetensors";
  take_events();
  run(source, out, 0);
  const std::vector<Event> events = take_events();
  SCOPED_TRACE(dump(events));

  const long publish = publishing_rename(events, out);
  ASSERT_GE(publish, 0);
  const fs::path staged = events[static_cast<size_t>(publish)].from;
  const fs::path staging = staged.parent_path();
  // The data: the temporary file was synced, then renamed to the staged name,
  // then the staging folder synced, all before publishing.
  const long staged_rename = find(events, "rename", staged.string());
  ASSERT_GE(staged_rename, 0);
  const std::string temp = events[static_cast<size_t>(staged_rename)].from;
  const long data_sync = find(events, "fsync", temp);
  EXPECT_GE(data_sync, 0);
  EXPECT_LT(data_sync, staged_rename);
  const long staging_sync = find(events, "fsync", staging.string(), static_cast<size_t>(staged_rename));
  EXPECT_GE(staging_sync, 0);
  EXPECT_LT(staging_sync, publish);
  // The new name in the output's folder.
  EXPECT_GT(find(events, "fsync", dir.string(), static_cast<size_t>(publish)), publish);
  fs::remove_all(dir);
}

TEST(QuantizeDurability, ShardsAndIndexAreSyncedBeforeTheFolderIsPublished) {
  const fs::path dir = fs::canonical(testing::temp_dir("durability_shards"));
  const fs::path source = make_source(dir);
  const fs::path out = dir / "out";
  take_events();
  const QuantizeReport report = run(source, out, 4000);
  const std::vector<Event> events = take_events();
  SCOPED_TRACE(dump(events));
  ASSERT_GT(report.files.size(), 2u);  // shards + index

  const long publish = publishing_rename(events, out);
  ASSERT_GE(publish, 0);
  const fs::path staging = events[static_cast<size_t>(publish)].from;
  long last_entry = -1;
  for (const std::string& file : report.files) {
    const fs::path staged = staging / fs::path(file).filename();
    SCOPED_TRACE(staged.string());
    long synced = find(events, "fsync", staged.string());
    const long renamed = find(events, "rename", staged.string());
    if (renamed >= 0) {  // written as a temporary file, renamed into the staging folder
      synced = find(events, "fsync", events[static_cast<size_t>(renamed)].from);
      EXPECT_LT(synced, renamed);
      last_entry = std::max(last_entry, renamed);
    } else {
      last_entry = std::max(last_entry, synced);
    }
    EXPECT_GE(synced, 0) << "never fsynced";
    EXPECT_LT(synced, publish);
  }
  // The staging folder's entries after the last one was made, before publishing.
  const long staging_sync = find(events, "fsync", staging.string(), static_cast<size_t>(last_entry));
  EXPECT_GT(staging_sync, last_entry);
  EXPECT_LT(staging_sync, publish);
  EXPECT_GT(find(events, "fsync", dir.string(), static_cast<size_t>(publish)), publish);
  fs::remove_all(dir);
}

// A pid that existed and is gone: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(QuantizeDurability, StagingFoldersOfDeadProcessesAreRemovedByTheNextRun) {
  const fs::path dir = testing::temp_dir("durability_stale");
  const fs::path source = make_source(dir);
  const std::string host = quantize::staging_host_name();
  const pid_t dead = dead_pid();
  ASSERT_EQ(kill(dead, 0), -1);
  const auto staging = [&](const std::string& base, const std::string& owner) {
    const fs::path path = dir / ("." + base + ".mixq-tmp-" + owner + "-abcd1234");
    fs::create_directories(path / "inner");
    testing::CheckpointBuilder().write(path / "inner" / "half.safetensors");
    return path;
  };
  const fs::path stale = staging("out.safetensors", std::to_string(dead) + "@" + host);
  const fs::path stale_other_base = staging("other.safetensors", std::to_string(dead) + "@" + host);
  const fs::path live = staging("out.safetensors", std::to_string(getpid()) + "@" + host);
  const fs::path foreign = staging("out.safetensors", std::to_string(dead) + "@not-" + host);
  const fs::path old_style = dir / ".out.safetensors.mixq-tmp-k3j4h5g6";
  fs::create_directory(old_style);

  const QuantizeReport report = run(source, dir / "out.safetensors", 0);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_other_base));
  EXPECT_TRUE(fs::exists(live / "inner" / "half.safetensors"));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_TRUE(fs::exists(old_style));
  size_t removal_warnings = 0;
  for (const std::string& w : report.warnings)
    removal_warnings += w.find("no longer runs") != std::string::npos;
  EXPECT_EQ(removal_warnings, 2u);
  fs::remove_all(dir);
}

TEST(QuantizeDurability, StagingFolderNamesThisProcessAndHost) {
  const fs::path dir = testing::temp_dir("durability_name");
  const fs::path source = make_source(dir);
  QuantizeOptions options;
  options.output = (dir / "out.safetensors").string();
  options.watchdog = false;
  std::vector<std::string> seen;
  options.progress = [&](const QuantizeProgress&) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.find(".mixq-tmp-") != std::string::npos) seen.push_back(name);
    }
  };
  Recipe recipe;
  recipe.rules.push_back(parse_rule("*=float8_e4m3fn"));
  quantize_checkpoint({source.string()}, recipe, options);
  ASSERT_FALSE(seen.empty());
  const std::string owner = ".out.safetensors.mixq-tmp-" + std::to_string(getpid()) + "@" +
                            quantize::staging_host_name() + "-";
  EXPECT_EQ(seen.front().rfind(owner, 0), 0u) << seen.front();
  EXPECT_EQ(seen.front().size(), owner.size() + 8);
  // A finished run leaves no staging folder behind.
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".mixq-tmp-"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mixq
