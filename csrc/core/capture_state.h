// The core's part in fastgrad.compile (python/capture.cpp records the ops a Python function runs,
// to replay them later without the function). The core only says when something happens that no
// recorded op accounts for: a storage allocated or written in place outside a recorded op means the
// function ran an op the capture cannot replay, so the capture is abandoned (the function then runs
// eagerly) instead of replaying a program with a hole in it. Off the capture, the hooks cost a
// relaxed load and a branch.
#pragma once
#include <atomic>
#include <cstdint>

namespace fg {

// The id of the capture in progress (one at a time in the process), 0 when there is none.
extern std::atomic<uint32_t> active_capture;
inline uint32_t capture_in_progress() { return active_capture.load(std::memory_order_relaxed); }
// Set by the capture while it runs: told about an untracked allocation or write (`what` says which).
// It ignores events of other threads and of recorded ops.
extern void (*capture_untracked)(const char* what);

}  // namespace fg
