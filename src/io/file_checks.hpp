#pragma once
// Opening files named by hostile input (command lines, index files, folder
// listings) without hanging, following loops, or overwriting an input:
//  - a path with a NUL byte is refused (the C library would cut it short and
//    open another file);
//  - files are stat'ed before they are opened, and opened O_NONBLOCK: a FIFO
//    or device is refused as "not a regular file" instead of blocking forever;
//  - an output that is an input (the same path, a hard link, or a symbolic
//    link to it) is refused before anything is written.
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mixq {

// Throws Error when `path` is empty or holds a NUL byte.
void check_path(const std::string& path);

// stat() of a regular file (symbolic links followed). Errors name the path:
// "x: cannot open: Too many levels of symbolic links", "x: not a regular file".
struct stat stat_regular_file(const std::string& path);

// A read-only descriptor of a regular file (O_CLOEXEC; O_NONBLOCK so that a
// FIFO swapped in after the stat cannot block); `st` receives its fstat.
int open_regular_file(const std::string& path, struct stat& st);

// The whole file, refused when larger than `limit` bytes (`what` names the
// kind of file in that message: "index", ".npy input", "recipe").
std::string read_whole_file(const std::string& path, uint64_t limit, std::string_view what);

// Throws Error when `output` exists and is one of `inputs` (same device and
// inode: the same path, a hard link, or a symbolic link resolving to it).
// `flag` names the option in the message ("-o").
void refuse_output_over_inputs(const std::string& output, const std::vector<std::string>& inputs,
                               std::string_view flag = "-o");

}  // namespace mixq
