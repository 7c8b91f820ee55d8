// Error types thrown by the core. The binding layer maps each to the Python exception PyTorch raises
// for the same mistake, so the core stays free of Python.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace fg {

struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct IndexError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotImplementedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An allocation the system refused (std::bad_alloc carries no message: this one names the size).
struct MemoryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// cat("a (", 3, ")") -> "a (3)": builds error messages without printf format strings.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace fg
