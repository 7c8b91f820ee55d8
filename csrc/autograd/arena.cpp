#include "autograd/arena.h"

#include <cstdlib>
#include <mutex>
#include <new>

#include "core/spin_lock.h"

namespace fg {

namespace {

constexpr size_t kClassBytes = 64;
constexpr size_t kClasses = 16;  // blocks up to 1 KiB; larger nodes fall back to the heap
constexpr size_t kSlabBytes = 64 * 1024;
// Empty slabs kept for reuse (4 MiB: tens of thousands of nodes, more than a training step's
// graph usually holds). Past this, a slab whose last node is released goes back to the heap, so
// one huge graph does not pin its memory for the rest of the process.
constexpr int64_t kKeptEmptySlabs = 64;

struct FreeBlock {
  FreeBlock* next;
};

// Each slab starts with this header (in its first block) and is aligned to its own size, so a
// block finds its slab by masking its address. Slabs with a free block are linked per class.
struct alignas(kClassBytes) Slab {
  Slab* prev;
  Slab* next;
  FreeBlock* free;
  int64_t live;
};
static_assert(sizeof(Slab) == kClassBytes, "the slab header takes exactly one block");

Slab* slab_of(void* block) { return reinterpret_cast<Slab*>(reinterpret_cast<uintptr_t>(block) & ~(kSlabBytes - 1)); }

struct Arena {
  SpinLock mutex;
  Slab* with_free[kClasses] = {};  // per class: the slabs that have a free block
  int64_t slabs = 0;
  int64_t empty_slabs = 0;
  int64_t live = 0;

  void link(size_t cls, Slab* s) {
    s->prev = nullptr;
    s->next = with_free[cls];
    if (s->next) s->next->prev = s;
    with_free[cls] = s;
  }

  void unlink(size_t cls, Slab* s) {
    if (s->prev) s->prev->next = s->next;
    else with_free[cls] = s->next;
    if (s->next) s->next->prev = s->prev;
  }

  void add_slab(size_t cls) {
    size_t block = (cls + 1) * kClassBytes;
    char* base = static_cast<char*>(std::aligned_alloc(kSlabBytes, kSlabBytes));
    if (!base) throw std::bad_alloc();
    auto* s = new (base) Slab{nullptr, nullptr, nullptr, 0};
    for (size_t off = block; off + block <= kSlabBytes; off += block) {
      auto* b = reinterpret_cast<FreeBlock*>(base + off);
      b->next = s->free;
      s->free = b;
    }
    ++slabs;
    ++empty_slabs;
    link(cls, s);
  }

  void* take(size_t cls) {
    if (!with_free[cls]) add_slab(cls);
    Slab* s = with_free[cls];
    FreeBlock* b = s->free;
    s->free = b->next;
    if (s->live++ == 0) --empty_slabs;
    if (!s->free) unlink(cls, s);
    return b;
  }

  void give_back(size_t cls, void* block) {
    Slab* s = slab_of(block);
    if (!s->free) link(cls, s);
    auto* b = static_cast<FreeBlock*>(block);
    b->next = s->free;
    s->free = b;
    if (--s->live > 0) return;
    if (empty_slabs < kKeptEmptySlabs) {
      ++empty_slabs;
      return;
    }
    unlink(cls, s);
    --slabs;
    std::free(s);
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
  return a.take(cls);
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
  a.give_back(cls, block);
}

ArenaStats arena_stats() {
  Arena& a = arena();
  std::lock_guard<SpinLock> lock(a.mutex);
  return {a.live, a.slabs * static_cast<int64_t>(kSlabBytes)};
}

}  // namespace fg
