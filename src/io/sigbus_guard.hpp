#pragma once
// Truncated input files without a crash.
//
// Checkpoints are memory-mapped. When another process truncates a mapped file,
// touching a page past the new end raises SIGBUS, which kills the process with
// no message. The choices were: read every tensor through pread (gives up the
// zero-copy design, and kernels read weights from many threads), re-check the
// file size before each access (a race: the file can shrink right after), or
// catch the signal. mixq catches it, without longjmp (which would skip C++
// destructors and cannot cross the thread pool): a SIGBUS at an address inside
// a guarded mapping replaces the mapping from that page to its end with
// zero-filled anonymous memory, marks the mapping as faulted, and returns, so
// the interrupted read carries on with zeros. Every result computed from a
// mapping is checked before it is trusted or written (Checkpoint::check_intact:
// the fault flag, and the file's size against the size mapped), and rejected
// with an Error naming the file. A SIGBUS anywhere else goes to the handler
// that was installed before (or kills the process as it would have).
#include <cstddef>

namespace mixq::io {

// Guards [begin, begin + size) (a read-only file mapping); returns the slot to
// pass to the other two functions. Installs the handler on first use.
int guard_mapping(const void* begin, size_t size);
// True once a SIGBUS was absorbed inside the slot's mapping.
bool mapping_faulted(int slot);
// Call before munmap.
void unguard_mapping(int slot);

}  // namespace mixq::io
