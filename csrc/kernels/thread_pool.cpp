#include "kernels/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fg {

namespace {

// Physical cores among the CPUs this process may run on: distinct sibling lists in sysfs (one
// per core, shared by its hyperthreads); the logical CPU count where sysfs is unavailable.
int physical_cores() {
#ifndef __linux__
  return std::max(1u, std::thread::hardware_concurrency());
#else
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return std::max(1u, std::thread::hardware_concurrency());
  std::set<std::string> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &cpus)) continue;
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list");
    std::string siblings;
    if (!(f >> siblings)) return CPU_COUNT(&cpus);
    cores.insert(siblings);
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
#endif
}

// The thread count the environment variable `name` asks for: a positive decimal integer, blanks
// around it allowed, and of a comma-separated list (OpenMP's form: one count per nesting level) the
// first entry. 0 when unset or anything else ("0", "-2", "abc", "1.5"): ignored, as PyTorch does.
int env_threads(const char* name) {
  const char* text = std::getenv(name);
  if (!text) return 0;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text, &end, 10);
  if (end == text || errno == ERANGE || n <= 0) return 0;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end != '\0' && *end != ',') return 0;
  return static_cast<int>(std::min<long long>(n, std::max(1u, std::thread::hardware_concurrency())));
}

// The count at start-up, as PyTorch decides it: MKL_NUM_THREADS, else OMP_NUM_THREADS (each capped
// at the logical CPUs: PyTorch turns OMP_NUM_THREADS=1000 into their number), else the physical cores.
int initial_threads() {
  for (const char* name : {"MKL_NUM_THREADS", "OMP_NUM_THREADS"})
    if (int n = env_threads(name)) return n;
  return physical_cores();
}

thread_local bool in_worker = false;

// Waiting threads spin this long before they sleep: the next job of a loop of ops, or the last
// chunk of this one, usually comes sooner, and a futex wake-up costs more than a short job.
constexpr auto kSpin = std::chrono::microseconds(50);

template <class Ready>
bool spin_until(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return true;
}

// One job at a time: the caller and num_threads - 1 workers take chunks from a shared counter,
// and the caller returns once every worker has seen the job.
struct Pool {
  std::atomic<int> threads;  // read by parallel_for without a lock
  std::vector<std::thread> workers;  // started at the first job
  std::mutex busy;                   // held by the thread running a job
  std::mutex m;
  std::condition_variable wake, done;
  std::atomic<uint64_t> generation{0};  // bumped (under m) to publish a job
  std::atomic<int> pending{0};          // workers still on the current job
  bool stop = false;
  // The current job.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t begin = 0, end = 0, chunks = 0;
  std::atomic<int64_t> next{0};
  std::exception_ptr error;

  explicit Pool(int n) : threads(n) {}

  void run_chunks() {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      const int64_t n = end - begin;
      try {
        (*fn)(begin + n * c / chunks, begin + n * (c + 1) / chunks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
    }
  }

  // `seen`: the generation when the worker started (a worker takes only later jobs).
  void work(uint64_t seen) {
    in_worker = true;
    for (;;) {
      if (!spin_until([&] { return generation.load(std::memory_order_acquire) != seen; })) {
        std::unique_lock<std::mutex> lock(m);
        wake.wait(lock, [&] { return stop || generation.load() != seen; });
        if (stop) return;
      }
      seen = generation.load(std::memory_order_acquire);
      run_chunks();
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(m);  // the caller checks `pending` under m before it sleeps
        done.notify_one();
      }
    }
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    wake.notify_all();
    for (std::thread& t : workers) t.join();
    workers.clear();
    stop = false;
  }
};

// Never destroyed: worker threads may still wait on it at interpreter exit.
Pool* pool = new Pool(initial_threads());

// A forked child has none of the parent's workers (and maybe a lock held by one): it starts a
// fresh pool and abandons the old one.
void reset_after_fork() { pool = new Pool(pool->threads); }
[[maybe_unused]] const int registered_fork_handler = pthread_atfork(nullptr, nullptr, reset_after_fork);

}  // namespace

int get_num_threads() { return pool->threads; }

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lock(pool->busy);
  pool->shutdown();
  pool->threads = n;
}

namespace detail {

void run_parallel(int64_t begin, int64_t end, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
  Pool& p = *pool;
  std::unique_lock<std::mutex> busy(p.busy, std::try_to_lock);
  if (in_worker || !busy.owns_lock()) return fn(begin, end);
  while (static_cast<int>(p.workers.size()) < p.threads - 1)
    p.workers.emplace_back([&p, seen = p.generation.load()] { p.work(seen); });
  {
    std::lock_guard<std::mutex> lock(p.m);
    p.fn = &fn;
    p.begin = begin;
    p.end = end;
    p.chunks = chunks;
    p.next = 0;
    p.error = nullptr;
    p.pending = static_cast<int>(p.workers.size());
    ++p.generation;
  }
  p.wake.notify_all();
  p.run_chunks();
  auto finished = [&] { return p.pending.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(p.m);
    p.done.wait(lock, finished);
  }
  if (p.error) std::rethrow_exception(p.error);
}

}  // namespace detail

}  // namespace fg
