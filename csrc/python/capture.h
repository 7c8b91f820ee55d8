// fastgrad.compile's capture (docs/compile.md). While a compiled function's first call runs eagerly,
// every binding that goes through call_op() below also appends a step to a program: the same C++
// op, its tensor arguments replaced by slots of a frame (the function's tensor inputs, the tensors
// it reads that were made before the call, such as parameters, and the results of earlier steps),
// its other arguments copied. A replay runs the steps on a new frame without running the Python
// function: the same kernels, nodes and backward passes in the same order, so the same bits.
//
// A capture records only what it can replay. Anything else the function does with tensors (an op
// whose binding does not use call_op, a view made outside it, an in-place write, a host read such
// as item()) abandons the capture: the core reports untracked allocations and writes
// (core/capture_state.h), inputs made during the capture but not by a recorded op are refused, and
// the bindings of host reads report themselves. The function then runs eagerly for good.
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/capture_state.h"
#include "python/bindings.h"

namespace fg {

// op(args...) without the GIL. The operands are copies holding their own references: the caller's
// Python objects may be dropped by another thread meanwhile.
template <class Op, class... Args>
auto without_gil(Op op, Args... args) {
  py::gil_scoped_release no_gil;
  return op(args...);
}

namespace capture {

using Frame = std::vector<Tensor>;

// A tensor argument of a step: its slot in the frame, or -1 for an undefined tensor.
struct Slot {
  int index;
};

// The recorder of the capture this thread runs (null when it runs none). Steps are recorded only
// at depth 0: what a recorded op (a backward pass, an optimizer's step) does inside is its own.
struct Recorder;
Recorder* recorder();
bool recording(const Recorder* r);  // r is at depth 0 and not yet abandoned
// The capture cannot replay what the function does: `what` says why. Only the first reason is kept
// (with the user's line, found from the Python stack).
void abandon(Recorder* r, const char* what);
// A host read (item(), numpy(), ...) of this thread outside a recorded op abandons its capture.
void host_read(const char* what);
int input_slot(Recorder* r, const Tensor& t);  // -1: undefined; -2: refused (the capture abandoned)
int output_slot(Recorder* r, const Tensor& t);
// After a recorded op: its tensor arguments' geometry as the op left it (an in-place view op, x.data = y).
void refresh_geometry(Recorder* r, const Tensor& t);
inline void refresh_geometry(Recorder* r, const std::vector<Tensor>& list) {
  for (const Tensor& t : list) refresh_geometry(r, t);
}
template <class T>
void refresh_geometry(Recorder*, const T&) {}
// Appends a step; `identity` (the op, its slots and arguments) goes into the program's fingerprint,
// which options={"check_every": n} compares with a new capture's.
void add_step(Recorder* r, std::function<void(Frame&)> step, size_t identity);

// The identity of a step's argument: slots by index, values by value. Structs whose bytes are not
// all value (padding) are left out, which only makes the fingerprint coarser.
inline size_t combine(size_t seed, size_t h) { return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }
inline size_t identity_of(Slot s) { return std::hash<int>()(s.index); }
inline size_t identity_of(const std::vector<Slot>& slots) {
  size_t h = slots.size();
  for (Slot s : slots) h = combine(h, identity_of(s));
  return h;
}
inline size_t identity_of(const Scalar& s) {
  return combine(combine(std::hash<double>()(s.value), static_cast<size_t>(s.kind)), std::hash<int64_t>()(s.integer));
}
inline size_t identity_of(const std::string& s) { return std::hash<std::string>()(s); }
inline size_t identity_of(const char* s) { return std::hash<std::string>()(s); }
template <class T>
size_t identity_of(const T& value) {
  if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    return std::hash<T>()(value);
  } else if constexpr (std::has_unique_object_representations_v<T>) {
    return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(&value), sizeof(T)));
  } else if constexpr (std::is_same_v<T, Shape> || std::is_same_v<T, std::vector<int64_t>> ||
                       std::is_same_v<T, std::vector<double>>) {
    size_t h = value.size();
    for (auto v : value) h = combine(h, std::hash<std::decay_t<decltype(v)>>()(v));
    return h;
  } else {
    return 0;
  }
}
// Marks the ops and allocations of a recorded op as its own while it runs.
class Region {
 public:
  explicit Region(Recorder* r);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  Recorder* r_;
};

// How a step keeps each argument: tensors as slots, lists of tensors as lists of slots, everything
// else (numbers, enums, Scalars, shapes, option structs, names) as a copy. Other types (an index
// spec holding tensors) make the op one that cannot be captured yet.
template <class T>
struct Kept {
  static constexpr bool capturable = std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>;
  using type = T;
};
template <>
struct Kept<const char*> {  // node and op names: string literals
  static constexpr bool capturable = true;
  using type = const char*;
};
template <>
struct Kept<Tensor> {
  static constexpr bool capturable = true;
  using type = Slot;
};
template <>
struct Kept<std::vector<Tensor>> {
  static constexpr bool capturable = true;
  using type = std::vector<Slot>;
};
template <class T>
struct KeptCopy {
  static constexpr bool capturable = true;
  using type = T;
};
template <>
struct Kept<Shape> : KeptCopy<Shape> {};
template <>
struct Kept<std::vector<int64_t>> : KeptCopy<std::vector<int64_t>> {};
template <>
struct Kept<std::vector<double>> : KeptCopy<std::vector<double>> {};
template <>
struct Kept<std::optional<std::vector<int64_t>>> : KeptCopy<std::optional<std::vector<int64_t>>> {};
template <>
struct Kept<std::string> : KeptCopy<std::string> {};

template <class T>
const T& keep(Recorder*, const T& value, bool&) {
  return value;
}
inline Slot keep(Recorder* r, const Tensor& t, bool& refused) {
  const int index = input_slot(r, t);
  refused |= index == -2;
  return Slot{index};
}
inline std::vector<Slot> keep(Recorder* r, const std::vector<Tensor>& list, bool& refused) {
  std::vector<Slot> slots;
  for (const Tensor& t : list) slots.push_back(keep(r, t, refused));
  return slots;
}

template <class T>
const T& resolve(const Frame&, const T& value) {
  return value;
}
inline const Tensor& resolve(const Frame& frame, Slot slot) {
  static const Tensor undefined;
  return slot.index < 0 ? undefined : frame[slot.index];
}
inline std::vector<Tensor> resolve(const Frame& frame, const std::vector<Slot>& slots) {
  std::vector<Tensor> list;
  for (Slot s : slots) list.push_back(resolve(frame, s));
  return list;
}

// A step's result must be what it was at capture: defined or not, and of the same shape. An op whose
// result depends on values (a boolean mask's selection) or on state the guards do not see would
// otherwise feed later steps, recorded for the captured shapes, with something else.
void check_result(const Tensor& result, bool defined, const Shape& shape);

// op(args...), without the GIL when the work is long; with the GIL released, the op runs on copies.
template <class Op, class... Args>
auto invoke(bool long_work, const Op& op, const Args&... args) {
  if (long_work) return without_gil(op, args...);
  return op(args...);
}

// Out of line and cold: the bindings' hot path keeps only call_op's load and branch.
template <class Op, class... Args>
[[gnu::noinline, gnu::cold]] auto record(bool long_work, const Op& op, const Args&... args) {
  using Result = decltype(op(args...));
  Recorder* r = recorder();
  if (!recording(r)) return invoke(long_work, op, args...);
  constexpr bool capturable =
      (Kept<std::decay_t<Args>>::capturable && ...) && (std::is_same_v<Result, Tensor> || std::is_void_v<Result>);
  if constexpr (!capturable) {
    abandon(r, "an operation compile cannot capture yet");
    return invoke(long_work, op, args...);
  } else {
    bool refused = false;
    // The slots of the inputs as they are before the op runs (its result may be one of them).
    std::tuple<typename Kept<std::decay_t<Args>>::type...> kept{keep(r, args, refused)...};
    const size_t identity = std::apply(
        [](const auto&... a) {
          size_t h = typeid(Op).hash_code();
          ((h = combine(h, identity_of(a))), ...);
          return h;
        },
        kept);
    Region region(r);
    if constexpr (std::is_void_v<Result>) {
      invoke(long_work, op, args...);
      (refresh_geometry(r, args), ...);
      if (!refused)
        add_step(
            r,
            [long_work, op, kept](Frame& frame) {
              std::apply([&](const auto&... a) { invoke(long_work, op, resolve(frame, a)...); }, kept);
            },
            identity);
    } else {
      Tensor result = invoke(long_work, op, args...);
      (refresh_geometry(r, args), ...);
      if (!refused) {
        const int out = output_slot(r, result);
        const bool defined = bool(result);
        Shape shape = defined ? result->shape : Shape();
        add_step(
            r,
            [long_work, op, kept, out, defined, shape](Frame& frame) {
              Tensor t =
                  std::apply([&](const auto&... a) { return invoke(long_work, op, resolve(frame, a)...); }, kept);
              check_result(t, defined, shape);
              if (out >= 0) frame[out] = std::move(t);
            },
            combine(identity, std::hash<int>()(out)));
      }
      return result;
    }
  }
}

}  // namespace capture

// The way bindings run an op: op(args...), without the GIL when `long_work`, and recorded when this
// thread captures a compiled function (a relaxed load and a branch otherwise).
template <class Op, class... Args>
auto call_op(bool long_work, const Op& op, const Args&... args) {
  if (capture_in_progress()) return capture::record(long_work, op, args...);
  return capture::invoke(long_work, op, args...);
}

void bind_capture(py::module_& m);

}  // namespace fg
