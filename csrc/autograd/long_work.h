// Long work in a backward pass. The engine runs a node whose incoming gradients are large inside a
// LongWork scope, through which the binding lets other threads of the host language run meanwhile
// (Python: the GIL is released, by the same rule as for the ops it binds; python/tensor_bind.cpp).
// What a node calls back into Python for (hooks, custom Functions) takes the GIL itself.
#pragma once
#include <cstdint>

namespace fg {

// Set by the binding: begin returns what end needs (null: nothing was released).
extern void* (*begin_long_work)(int64_t elements);
extern void (*end_long_work)(void* token);

class LongWork {
 public:
  explicit LongWork(int64_t elements) : token_(begin_long_work ? begin_long_work(elements) : nullptr) {}
  ~LongWork() {
    if (token_) end_long_work(token_);
  }
  LongWork(const LongWork&) = delete;
  LongWork& operator=(const LongWork&) = delete;

 private:
  void* token_;
};

}  // namespace fg
