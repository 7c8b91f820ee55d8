// A refcounted, 64-byte aligned buffer shared by a tensor and all its views. It also carries the
// version counter that autograd uses to detect in-place changes to saved tensors: every in-place
// write to any view bumps it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/capture_state.h"

namespace fg {

// torch.inference_mode, per thread: storages allocated while it is on are inference tensors' (see
// Storage::inference). Autograd records nothing meanwhile (the Python switch turns grad mode off).
bool inference_mode_enabled();
void set_inference_mode(bool enabled);

// fastgrad.compile's planned buffer (python/capture.cpp). A program's first replay logs the
// allocations of its thread with the time each one dies (AllocationLog); the MemoryPlan made from
// the log gives those that died within the replay places in one block, a place being reused once
// its occupant has died, and later replays take their n-th allocation's storage from its place when
// the sizes match and the place is free. Everything else allocates as usual: an allocation the first
// replay did not make, one that outlived it (an output, a .grad), one whose place is still taken (a
// tensor kept longer than then, by a hook or another thread). So a plan decides where memory goes,
// never whether two live tensors share it.
struct AllocationLog {
  std::vector<size_t> bytes;  // per allocation, in order: its block's size
  std::vector<int64_t> died;  // per allocation: the number of allocations made before it died; -1: alive
  uint64_t serial = 0;        // which log a storage was logged in (PlanAllocations sets it)
};

class MemoryPlan;
struct MemoryPlanRelease {
  void operator()(MemoryPlan* plan) const;
};
using MemoryPlanPtr = std::unique_ptr<MemoryPlan, MemoryPlanRelease>;
MemoryPlanPtr make_memory_plan(const AllocationLog& log);
size_t planned_bytes(const MemoryPlan& plan);    // the block's size
size_t unplanned_bytes(const MemoryPlan& plan);  // of the logged allocations that outlived the replay
size_t plan_misses(const MemoryPlan& plan);      // planned allocations that replays could not place

// While alive, this thread's allocations are taken from `plan` in order from the first (unless
// another thread's replay is using it), and logged into `log` with their deaths on this thread.
// Either may be null: both are for a replay's host call, which may allocate otherwise from one call
// to the next (as an optimizer's first step does).
class PlanAllocations {
 public:
  PlanAllocations(MemoryPlan* plan, AllocationLog* log);
  ~PlanAllocations();
  PlanAllocations(const PlanAllocations&) = delete;
  PlanAllocations& operator=(const PlanAllocations&) = delete;

  struct State {  // a thread's: where its allocations come from and go
    MemoryPlan* plan = nullptr;
    size_t next = 0;  // the number of its next allocation
    AllocationLog* log = nullptr;
  };

 private:
  MemoryPlan* claimed_;
  State outer_;
};

class Storage {
 public:
  // Owns a fresh aligned allocation of `nbytes` (uninitialized), taken from the buffer cache
  // (storage.cpp) and given back to it when the storage dies.
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  // Wraps memory owned by someone else (e.g. a numpy array); `release(ctx)` runs when the last
  // tensor viewing it goes away.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, void (*release)(void*), void* ctx);

  Storage(void* data, size_t nbytes, void (*release)(void*), void* ctx)
      : data_(data), nbytes_(nbytes), release_(release), ctx_(ctx) {
    if (capture_in_progress()) capture_untracked("a tensor made by an operation compile cannot capture");
  }
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() {
    if (capture_in_progress()) capture_untracked("an in-place write by an operation compile cannot capture");
    version_.fetch_add(1, std::memory_order_relaxed);
  }
  // Allocated in inference mode: PyTorch's inference tensors, and all their views, are never saved
  // for backward and are written in place only in inference mode (check_inference_write).
  bool inference() const { return inference_; }
  void set_inference(bool inference) { inference_ = inference; }

 private:
  void* data_;
  size_t nbytes_;
  void (*release_)(void*);
  void* ctx_;
  bool inference_ = inference_mode_enabled();
  bool cached_ = false;  // data_ is a buffer-cache block (allocate), not someone else's memory (wrap)
  uint32_t log_index_ = 0;
  uint64_t logged_in_ = 0;  // the serial of the AllocationLog that logged it at log_index_; 0: none
  std::atomic<uint32_t> version_{0};
};

}  // namespace fg
