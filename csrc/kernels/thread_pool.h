// A small persistent pool of std::thread workers for the long kernels (GEMM, large elementwise
// loops, sums over many rows). parallel_for splits [begin, end) into at most num_threads fixed
// chunks; each chunk is computed the same way whichever thread runs it, so callers that split
// only independent outputs (C blocks, elementwise chunks, whole rows of a sum) get results that do
// not depend on the thread count.
//
// Tiny loops never pay for the pool: a range shorter than two grains runs inline on the caller.
// So does a call made while the pool is busy (another Python thread with the GIL released, or a
// nested call from a worker): one job at a time, never a wait for a second pool.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

namespace fg {

// At start-up, as PyTorch: MKL_NUM_THREADS, else OMP_NUM_THREADS (a positive integer, capped at
// the logical CPUs; other values are ignored), else the number of physical cores (hyperthreads
// share a core's FMA units, so the compute-bound kernels gain nothing from them).
int get_num_threads();
// n >= 1; the workers are restarted (after any running job ends).
void set_num_threads(int n);

namespace detail {
void run_parallel(int64_t begin, int64_t end, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn);
}

// Elementwise loops and sums split across threads into chunks of at least this many elements
// (smaller ones cost more to hand out than they save).
inline constexpr int64_t kParallelElements = 1 << 15;

// fn(lo, hi) for consecutive chunks [lo, hi) covering [begin, end), each at least `grain` long
// (except when the whole range is shorter).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  const int64_t n = end - begin;
  const int64_t chunks = grain > 0 ? std::min<int64_t>(get_num_threads(), n / grain) : 1;
  if (chunks < 2) {
    if (n > 0) fn(begin, end);
    return;
  }
  detail::run_parallel(begin, end, chunks, fn);
}

}  // namespace fg
