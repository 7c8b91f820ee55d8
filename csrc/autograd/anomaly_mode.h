// Anomaly mode (torch.autograd.detect_anomaly): a debugging switch. While it is on, each node made
// keeps the Python traceback of the forward call that recorded it, and backward checks every
// node's gradients for NaN, naming the node; a node that fails gets its forward traceback shown.
// Process-wide, as PyTorch's. While it is off it costs one flag test per node made and per node run.
#pragma once
#include <atomic>

namespace fg {

struct Node;

extern std::atomic<bool> anomaly_mode;
extern std::atomic<bool> anomaly_check_nan;

inline bool anomaly_enabled() { return anomaly_mode.load(std::memory_order_relaxed); }
inline void set_anomaly_enabled(bool enabled, bool check_nan) {
  anomaly_check_nan.store(check_nan, std::memory_order_relaxed);
  anomaly_mode.store(enabled, std::memory_order_relaxed);
}

// Set by the binding, which knows Python: keep the forward traceback in a new node's metadata, and
// warn with it when the node's backward fails.
extern void (*store_forward_traceback)(Node* node);
extern void (*report_failed_node)(const Node* node);

}  // namespace fg
