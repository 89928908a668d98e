#include "io/sigbus_guard.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace mixq::io {
namespace {

// Slots live in blocks that are never freed, so the handler can walk them
// without a lock (it may run on any thread, at any time).
struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};    // page-rounded end of the mapping
  std::atomic<bool> faulted{false};
};

constexpr int kSlotsPerBlock = 256;

struct Block {
  Slot slots[kSlotsPerBlock];
  std::atomic<Block*> next{nullptr};
};

Block g_first;
std::mutex g_registry;  // guards slot allocation, never taken by the handler
struct sigaction g_previous {};
uintptr_t g_page = 4096;

Slot& slot_at(int index) {
  Block* block = &g_first;
  for (int i = index / kSlotsPerBlock; i > 0; --i) block = block->next.load(std::memory_order_acquire);
  return block->slots[index % kSlotsPerBlock];
}

void forward_to_previous(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: restore it and return; the faulting access runs again
  // and the kernel delivers SIGBUS with its default effect.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Block* block = &g_first; block; block = block->next.load(std::memory_order_acquire)) {
    for (Slot& slot : block->slots) {
      const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
      const uintptr_t end = slot.end.load(std::memory_order_acquire);
      if (begin == 0 || addr < begin || addr >= end) continue;
      // mmap is a plain system call on Linux and safe to call here.
      const uintptr_t page = addr & ~(g_page - 1);
      void* zeros = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (zeros == MAP_FAILED) break;
      slot.faulted.store(true, std::memory_order_release);
      return;
    }
  }
  forward_to_previous(sig, info, context);
}

void install_handler() {
  g_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

int guard_mapping(const void* begin, size_t size) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  std::lock_guard<std::mutex> lock(g_registry);
  int index = 0;
  for (Block* block = &g_first;; block = block->next.load(std::memory_order_acquire)) {
    for (Slot& slot : block->slots) {
      if (slot.begin.load(std::memory_order_relaxed) == 0) {
        const auto b = reinterpret_cast<uintptr_t>(begin);
        slot.faulted.store(false, std::memory_order_relaxed);
        slot.end.store((b + size + g_page - 1) & ~(g_page - 1), std::memory_order_release);
        slot.begin.store(b, std::memory_order_release);
        return index;
      }
      ++index;
    }
    if (!block->next.load(std::memory_order_acquire)) block->next.store(new Block(), std::memory_order_release);
  }
}

bool mapping_faulted(int slot) { return slot_at(slot).faulted.load(std::memory_order_acquire); }

void unguard_mapping(int slot) {
  std::lock_guard<std::mutex> lock(g_registry);
  Slot& s = slot_at(slot);
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
}

}  // namespace mixq::io
