#include "autograd/arena.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "core/spin_lock.h"

namespace fg {

namespace {

constexpr size_t kClassBytes = 64;
constexpr size_t kClasses = 16;  // blocks up to 1 KiB; larger nodes fall back to the heap
constexpr size_t kSlabBytes = 64 * 1024;

struct FreeBlock { FreeBlock* next; };

struct Arena {
  SpinLock mutex;
  FreeBlock* free_lists[kClasses] = {};
  std::vector<void*> slabs;
  int64_t live = 0;

  void refill(size_t cls) {
    size_t block = (cls + 1) * kClassBytes;
    char* slab = static_cast<char*>(std::aligned_alloc(kClassBytes, kSlabBytes));
    if (!slab) throw std::bad_alloc();
    slabs.push_back(slab);
    for (size_t off = 0; off + block <= kSlabBytes; off += block) {
      auto* b = reinterpret_cast<FreeBlock*>(slab + off);
      b->next = free_lists[cls];
      free_lists[cls] = b;
    }
  }
};

// Never destroyed: nodes may be released during interpreter shutdown, after static destructors.
Arena& arena() {
  static Arena* instance = new Arena();
  return *instance;
}

size_t size_class(size_t nbytes) { return (nbytes + kClassBytes - 1) / kClassBytes - 1; }

}  // namespace

// Under AddressSanitizer every node comes from the heap, so that a node used after its release is
// reported (a recycled arena block would hide it).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHeapOnly = true;
#else
constexpr bool kHeapOnly = false;
#endif

void* arena_allocate(size_t nbytes) {
  Arena& a = arena();
  size_t cls = size_class(nbytes);
  std::lock_guard<SpinLock> lock(a.mutex);
  ++a.live;
  if (kHeapOnly || cls >= kClasses) return ::operator new(nbytes);
  if (!a.free_lists[cls]) a.refill(cls);
  FreeBlock* b = a.free_lists[cls];
  a.free_lists[cls] = b->next;
  return b;
}

void arena_deallocate(void* block, size_t nbytes) {
  Arena& a = arena();
  size_t cls = size_class(nbytes);
  std::lock_guard<SpinLock> lock(a.mutex);
  --a.live;
  if (kHeapOnly || cls >= kClasses) {
    ::operator delete(block);
    return;
  }
  auto* b = static_cast<FreeBlock*>(block);
  b->next = a.free_lists[cls];
  a.free_lists[cls] = b;
}

ArenaStats arena_stats() {
  Arena& a = arena();
  std::lock_guard<SpinLock> lock(a.mutex);
  return {a.live, static_cast<int64_t>(a.slabs.size() * kSlabBytes)};
}

}  // namespace fg
