// Whether ops record graph nodes. Thread-local, as in PyTorch: a new thread starts with grad on.
#pragma once

namespace fg {

bool grad_enabled();
void set_grad_enabled(bool enabled);

// Scoped switch, restored on exit (also by exceptions).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace fg
