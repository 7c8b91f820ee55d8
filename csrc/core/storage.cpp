#include "core/storage.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

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

// Under AddressSanitizer a planned block is poisoned but where a live tensor's bytes are (not even
// the rest of its size class), and each place is followed by a poisoned gap: a read of a planned
// tensor after its death, or past its end, is reported as one of a heap block would be.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kPlaceGap = 64;
#else
constexpr size_t kPlaceGap = 0;
#endif
void set_poisoned(void* data, size_t bytes, bool poisoned) {
#if defined(__SANITIZE_ADDRESS__)
  if (poisoned) ASAN_POISON_MEMORY_REGION(data, bytes);
  else ASAN_UNPOISON_MEMORY_REGION(data, bytes);
#else
  (void)data, (void)bytes, (void)poisoned;
#endif
}
}  // namespace

bool inference_mode_enabled() { return inference_mode; }
void set_inference_mode(bool enabled) { inference_mode = enabled; }

class MemoryPlan {
 public:
  explicit MemoryPlan(const AllocationLog& log);
  ~MemoryPlan() {
    if (!block_) return;
    set_poisoned(block_, block_bytes, false);  // as the allocator gave it
    std::free(block_);
  }

  // One replay at a time takes from the plan (the others allocate as usual), so that take() can
  // read a place's flag and then set it: only a storage's death, on any thread, clears it.
  bool claim() { return !claimed_.exchange(true, std::memory_order_acquire); }
  void unclaim() { claimed_.store(false, std::memory_order_release); }

  // The storage of the claiming replay's allocation number `index`, or null when it is not planned
  // or its place cannot take it.
  std::shared_ptr<Storage> take(size_t index, size_t block_bytes, size_t nbytes) {
    if (index >= place_of_.size() || place_of_[index] < 0) return nullptr;
    Place& place = places_[place_of_[index]];
    if (place.bytes != block_bytes || place.taken.load(std::memory_order_acquire)) {
      misses.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    place.taken.store(true, std::memory_order_relaxed);
    void* data = static_cast<char*>(block_) + place.offset;
    set_poisoned(data, nbytes, false);
    return Storage::wrap(data, nbytes, &give_back, &place);
  }
  // Whether a tensor still uses a place. Once the program is gone (nothing takes places any more)
  // and this is false, no storage will touch the plan again: clearing its place's flag is the last
  // thing a storage's release does with it.
  bool in_use() const {
    for (size_t p = 0; p < place_count_; ++p)
      if (places_[p].taken.load(std::memory_order_acquire)) return true;
    return false;
  }

  size_t block_bytes = 0;         // of the block
  size_t unplanned_bytes = 0;     // of the logged allocations that outlived the logging replay
  std::atomic<size_t> misses{0};  // planned allocations that take() could not place

 private:
  struct Place {
    MemoryPlan* plan;
    size_t offset, bytes;
    std::atomic<bool> taken{false};
  };
  static void give_back(void* context) {
    auto* place = static_cast<Place*>(context);
    MemoryPlan* plan = place->plan;
    set_poisoned(static_cast<char*>(plan->block_) + place->offset, place->bytes, true);
    place->taken.store(false, std::memory_order_release);  // the last access (in_use)
  }

  void* block_ = nullptr;
  std::unique_ptr<Place[]> places_;
  size_t place_count_ = 0;
  std::vector<int> place_of_;  // per allocation of the log: its place, -1 when not planned
  std::atomic<bool> claimed_{false};
};

// Places in the order the log's allocations were made: an allocation that died within the replay
// takes the most recently freed place of its size (freed: its occupant died before this allocation
// was made), or a new one at the block's end.
MemoryPlan::MemoryPlan(const AllocationLog& log) : place_of_(log.bytes.size(), -1) {
  const size_t count = log.bytes.size();
  std::vector<std::vector<size_t>> dying_before(count + 1);
  for (size_t i = 0; i < count; ++i) {
    if (log.died[i] >= 0) dying_before[log.died[i]].push_back(i);
    else unplanned_bytes += log.bytes[i];
  }
  std::unordered_map<size_t, std::vector<int>> free_places;  // by size
  std::vector<std::pair<size_t, size_t>> layout;             // per place: offset, bytes
  for (size_t i = 0; i < count; ++i) {
    for (size_t dead : dying_before[i]) free_places[log.bytes[dead]].push_back(place_of_[dead]);
    if (log.died[i] < 0) continue;
    std::vector<int>& free = free_places[log.bytes[i]];
    if (free.empty()) {
      place_of_[i] = static_cast<int>(layout.size());
      layout.emplace_back(block_bytes, log.bytes[i]);
      block_bytes += log.bytes[i] + kPlaceGap;
    } else {
      place_of_[i] = free.back();
      free.pop_back();
    }
  }
  places_.reset(new Place[layout.size()]);
  place_count_ = layout.size();
  for (size_t p = 0; p < layout.size(); ++p) {
    places_[p].plan = this;
    places_[p].offset = layout[p].first;
    places_[p].bytes = layout[p].second;
  }
  if (block_bytes) {
    block_ = allocate_block(block_bytes);
    set_poisoned(block_, block_bytes, true);
  }
}

// A plan whose program is gone is freed once no tensor uses its block: at once, or when a later plan
// is released (a tensor kept from a replay may outlive its program). Storages do not count their
// plan's users, which would cost an atomic read-modify-write per tensor.
void MemoryPlanRelease::operator()(MemoryPlan* plan) const {
  static SpinLock mutex;
  static auto* retired = new std::vector<MemoryPlan*>();  // never destroyed, as the buffer cache
  std::lock_guard<SpinLock> lock(mutex);
  retired->push_back(plan);
  retired->erase(std::remove_if(retired->begin(), retired->end(),
                                [](MemoryPlan* p) {
                                  if (p->in_use()) return false;
                                  delete p;
                                  return true;
                                }),
                 retired->end());
}
MemoryPlanPtr make_memory_plan(const AllocationLog& log) { return MemoryPlanPtr(new MemoryPlan(log)); }
size_t planned_bytes(const MemoryPlan& plan) { return plan.block_bytes; }
size_t unplanned_bytes(const MemoryPlan& plan) { return plan.unplanned_bytes; }
size_t plan_misses(const MemoryPlan& plan) { return plan.misses.load(std::memory_order_relaxed); }

namespace {
// This thread's PlanAllocations. Allocations look at it only while some thread plans (a load and a
// branch for the others, as capture_in_progress()).
thread_local PlanAllocations::State this_thread_planning;
std::atomic<int> threads_planning{0};
std::atomic<uint64_t> last_log_serial{0};

PlanAllocations::State* planning() {
  return threads_planning.load(std::memory_order_relaxed) ? &this_thread_planning : nullptr;
}
}  // namespace

PlanAllocations::PlanAllocations(MemoryPlan* plan, AllocationLog* log)
    : claimed_(plan && plan->claim() ? plan : nullptr), outer_(this_thread_planning) {
  if (log && !log->serial) log->serial = ++last_log_serial;
  this_thread_planning = {claimed_, 0, log};
  threads_planning.fetch_add(1, std::memory_order_relaxed);
}
PlanAllocations::~PlanAllocations() {
  if (claimed_) claimed_->unclaim();
  this_thread_planning = outer_;
  threads_planning.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  const SizeClass c = size_class(nbytes);
  PlanAllocations::State* planned = planning();
  if (planned && planned->plan) {
    if (auto s = planned->plan->take(planned->next++, c.bytes, nbytes)) return s;
  }
  auto s = std::make_shared<Storage>(take_block(c), nbytes, nullptr, nullptr);
  s->cached_ = true;
  if (AllocationLog* log = planned ? planned->log : nullptr) {
    s->logged_in_ = log->serial;
    s->log_index_ = static_cast<uint32_t>(log->bytes.size());
    log->bytes.push_back(c.bytes);
    log->died.push_back(-1);
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, void (*release)(void*), void* ctx) {
  return std::make_shared<Storage>(data, nbytes, release, ctx);
}

Storage::~Storage() {
  if (logged_in_) {
    AllocationLog* log = this_thread_planning.log;
    if (log && log->serial == logged_in_) log->died[log_index_] = static_cast<int64_t>(log->bytes.size());
  }
  if (cached_) give_back_block(data_, size_class(nbytes_));
  else if (release_) release_(ctx_);
}

}  // namespace fg
