#include "core/storage.h"

#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "core/spin_lock.h"

namespace fg {

namespace {

constexpr size_t kAlignment = 64;
// Large blocks start on a 2 MiB boundary, so that where the system gives transparent huge pages
// unasked (THP "always") a fresh 64 MB output faults in 32 pages instead of 16,384. They are not
// asked for with madvise(MADV_HUGEPAGE) as numpy does: with THP "madvise" (the common default) such
// a fault compacts memory synchronously, and on a machine whose memory is fragmented the first touch
// of a 256 MB tensor took 0.8-1.3 s instead of 0.1 s (2 GB: 9.6 s), as it does for numpy there.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeFrom = size_t{4} << 20;

void* allocate_block(size_t bytes) {
  size_t align = bytes >= kHugeFrom ? kHugePage : kAlignment;
  void* data = std::aligned_alloc(align, (bytes + align - 1) / align * align);
  if (!data) throw MemoryError(cat("can't allocate memory: you tried to allocate ", bytes, " bytes"));
  return data;
}

// The buffer cache. Every op makes a fresh output, and training repeats the same sizes each step,
// so freed buffers are kept in size classes and handed out again: an allocation is then a pop
// from a free list instead of aligned_alloc (whose memalign path is slow for small blocks) or an
// mmap plus page faults (for large ones). Classes are 64-byte steps up to 256 bytes, then four per
// power of two (a block is at most 25% larger than asked); the cache holds at most kCacheLimit
// bytes and frees what does not fit.
constexpr int kMaxExponent = 30;  // blocks above 1 GiB are never cached
constexpr int kClasses = 4 + 4 * (kMaxExponent - 8 + 1);
constexpr size_t kCacheLimit = size_t{256} << 20;

// Under AddressSanitizer buffers are never reused, so a read of freed tensor memory is reported.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

struct SizeClass {
  int index;  // -1: too large to cache
  size_t bytes;
};

SizeClass size_class(size_t nbytes) {
  if (nbytes <= 256) {
    size_t steps = nbytes == 0 ? 1 : (nbytes + kAlignment - 1) / kAlignment;
    return {static_cast<int>(steps) - 1, steps * kAlignment};
  }
  int e = 63 - __builtin_clzll(nbytes - 1);  // 2^e < nbytes <= 2^(e+1), e >= 8
  int shift = e - 2;
  size_t quarters = (nbytes + (size_t{1} << shift) - 1) >> shift;  // 5..8
  size_t bytes = quarters << shift;
  if (e > kMaxExponent) return {-1, bytes};
  return {4 + 4 * (e - 8) + static_cast<int>(quarters) - 5, bytes};
}

struct FreeBlock {
  FreeBlock* next;
};

struct BufferCache {
  SpinLock mutex;
  FreeBlock* free_lists[kClasses] = {};
  size_t cached_bytes = 0;
};

// Never destroyed: tensors may be freed during interpreter shutdown, after static destructors.
BufferCache& cache() {
  static BufferCache* instance = new BufferCache();
  return *instance;
}

void* take_block(SizeClass c) {
  if (kCacheEnabled && c.index >= 0) {
    BufferCache& bc = cache();
    std::lock_guard<SpinLock> lock(bc.mutex);
    if (FreeBlock* b = bc.free_lists[c.index]) {
      bc.free_lists[c.index] = b->next;
      bc.cached_bytes -= c.bytes;
      return b;
    }
  }
  return allocate_block(c.bytes);
}

void give_back_block(void* data, SizeClass c) {
  if (kCacheEnabled && c.index >= 0) {
    BufferCache& bc = cache();
    std::lock_guard<SpinLock> lock(bc.mutex);
    if (bc.cached_bytes + c.bytes <= kCacheLimit) {
      auto* b = static_cast<FreeBlock*>(data);
      b->next = bc.free_lists[c.index];
      bc.free_lists[c.index] = b;
      bc.cached_bytes += c.bytes;
      return;
    }
  }
  std::free(data);
}

thread_local bool inference_mode = false;
}  // namespace

bool inference_mode_enabled() { return inference_mode; }
void set_inference_mode(bool enabled) { inference_mode = enabled; }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  auto s = std::make_shared<Storage>(take_block(size_class(nbytes)), nbytes, nullptr, nullptr);
  s->cached_ = true;
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, void (*release)(void*), void* ctx) {
  return std::make_shared<Storage>(data, nbytes, release, ctx);
}

Storage::~Storage() {
  if (cached_) give_back_block(data_, size_class(nbytes_));
  else if (release_) release_(ctx_);
}

}  // namespace fg
