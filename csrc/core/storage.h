// A refcounted, 64-byte aligned buffer shared by a tensor and all its views. It also carries the
// version counter that autograd uses to detect in-place changes to saved tensors: every in-place
// write to any view bumps it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/capture_state.h"

namespace fg {

// torch.inference_mode, per thread: storages allocated while it is on are inference tensors' (see
// Storage::inference). Autograd records nothing meanwhile (the Python switch turns grad mode off).
bool inference_mode_enabled();
void set_inference_mode(bool enabled);

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
  std::atomic<uint32_t> version_{0};
};

}  // namespace fg
