// A minimal lock for the allocators' free lists (storage.cpp, autograd/arena.cpp). They are taken
// for a few instructions per tensor or node, almost always by the thread holding the GIL, so the
// uncontended cost is what counts: one atomic exchange and one store, against a pthread mutex's
// call pair. A waiter yields rather than burning its time slice.
#pragma once
#include <atomic>
#include <thread>

namespace fg {

class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire))
      while (locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace fg
