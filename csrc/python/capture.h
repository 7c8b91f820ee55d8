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
//
// Every binding instantiates call_op, so what it instantiates per op is kept small (it decides the
// bindings' compile time): a description of the arguments for the recorder, which is not a
// template (capture.cpp: slots, fingerprint, geometry, the replay loop), and a Call that re-runs
// the op on the replay's tensors.
#pragma once
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/capture_state.h"
#include "core/small_vec.h"
#include "python/bindings.h"
#include "python/scalar_program.h"

namespace fg {

// op(args...) without the GIL. The operands are copies holding their own references: the caller's
// Python objects may be dropped by another thread meanwhile.
template <class Op, class... Args>
auto without_gil(Op op, Args... args) {
  py::gil_scoped_release no_gil;
  return op(args...);
}

// f as an op that reads or writes what Python code of other threads reads with the GIL (a leaf's
// .grad; the backward pass, which accumulates into it): run with the GIL also by a replay, which runs
// its other steps without it.
template <class F>
auto with_gil(F f) {
  return [f](const auto&... args) {
    if (PyGILState_Check()) return f(args...);
    py::gil_scoped_acquire gil;
    return f(args...);
  };
}

namespace capture {

// What a replay cannot redo, done by this thread outside a recorded op, abandons its capture: a host
// read (item(), numpy(), ...), a node made by Python (a custom autograd Function's).
void cannot_replay(const char* what);

// The identity of a step's argument other than a tensor, by value; it goes into the program's
// fingerprint, which options={"check_every": n} compares with a new capture's. Structs whose bytes
// are not all value (padding) are left out, which only makes the fingerprint coarser.
inline size_t combine(size_t seed, size_t h) { return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }
inline size_t identity_of(const Scalar& s) {
  return combine(combine(std::hash<double>()(s.value), static_cast<size_t>(s.kind)), std::hash<int64_t>()(s.integer));
}
inline size_t identity_of(const std::string& s) { return std::hash<std::string>()(s); }
inline size_t identity_of(const py::object&) { return 0; }  // a new closure on every call: not in a fingerprint
inline size_t identity_of(const std::vector<uint8_t>& bytes) {
  return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}
inline size_t identity_of(const char* s) { return std::hash<std::string_view>()(s); }
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

// One argument of a recorded op as the recorder sees it: a tensor, a list of tensors, or another
// value (kept by the op's Call) known by its identity; an index spec is a list with an identity.
struct ArgRef {
  const Tensor* tensor = nullptr;
  const std::vector<Tensor>* list = nullptr;
  size_t identity = 0;
};
inline ArgRef arg_ref(const Tensor& t) { return {&t, nullptr, 0}; }
inline ArgRef arg_ref(const std::vector<Tensor>& list) { return {nullptr, &list, 0}; }
// x[key]: its index tensors as a list, its ints, slices and Nones by value.
inline ArgRef arg_ref(const IndexSpec& spec) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  size_t h = spec.steps.size();
  for (const IndexStep& s : spec.steps) {
    for (int64_t v : {int64_t(s.kind), s.dim, s.index, s.step, s.start.value_or(kNone), s.stop.value_or(kNone)})
      h = combine(h, std::hash<int64_t>()(v));
  }
  return {nullptr, &spec.advanced, h};
}
template <class T>
ArgRef arg_ref(const T& value) {
  return {nullptr, nullptr, identity_of(value)};
}

// The tensor arguments of a step's op in argument order (a list's tensors one after another): the
// i-th is tensors[slots[i]] (a replay's frame and the step's slots, read in place).
struct TensorArgs {
  const Tensor* tensors;
  const int* slots;
  const Tensor& operator[](size_t i) const { return tensors[slots[i]]; }
};

// What a step's op gives: nothing (a void op), one tensor (maybe undefined), or several (values and
// indices, split's parts).
using Results = SmallVec<Tensor, 1>;

// The typed part of a step: the op and its arguments other than tensors (a Bound below, or a host
// call), and the two functions that know their type. run() calls the op on the replay's tensor
// arguments and returns its results. Function pointers rather than virtual functions: no vtable or
// type info per op.
class Call {
 public:
  template <class State>
  explicit Call(State* state)
      : state_(state),
        run_([](const void* s, TensorArgs tensors) { return static_cast<const State*>(s)->run(tensors); }),
        free_([](void* s) { delete static_cast<State*>(s); }) {}
  Call(Call&& o) noexcept : state_(o.state_), run_(o.run_), free_(o.free_) { o.state_ = nullptr; }
  Call& operator=(Call&&) = delete;
  ~Call() {
    if (state_) free_(state_);
  }
  Results run(TensorArgs tensors) const { return run_(state_, tensors); }

 private:
  void* state_;
  Results (*run_)(const void*, TensorArgs);
  void (*free_)(void*);
};

// A binding's op while this thread captures (record() below): run on `args` (their tensors in
// `call`'s order), without the GIL when `long_work`, and recorded as a step when the capture records
// (at depth 0 and not abandoned). `scalar`: what the op computes on 0-d float32 values, if its binding
// says (Tagged below).
Results run_recorded(Call call, bool long_work, const ArgRef* args, size_t count, size_t op_identity,
                     const ScalarStep& scalar);

// A binding's op that a program of 0-d float32 values can compute without it (scalar_program.h):
// op itself, with what it is as part of its type.
template <ScalarForm kForm, class Op, VecUnary kUnary = VecUnary::Count>
struct Tagged {
  Op op;
  static constexpr ScalarForm kScalarForm = kForm;
  static constexpr VecUnary kScalarUnary = kUnary;
  template <class... Args>
  auto operator()(const Args&... args) const {
    return op(args...);
  }
};
template <ScalarForm kForm, VecUnary kUnary = VecUnary::Count, class Op>
Tagged<kForm, Op, kUnary> tagged(Op op) {
  return {op};
}

// The ScalarStep of a tagged op's call: its form, its Python number, its bool arguments.
inline void note_argument(ScalarStep& step, const Scalar& s) {
  step.with_number = true;
  step.number = s.to<float>();  // as the forward's scalar_map converts it
  step.value = s.value;
}
inline void note_argument(ScalarStep& step, bool flag) { step.flags |= uint8_t(flag) << step.flag_count++; }
template <class T>
void note_argument(ScalarStep&, const T&) {}
template <class Op, class = void>
struct ScalarFormOf {
  static constexpr ScalarForm form = ScalarForm::None;
  static constexpr VecUnary unary = VecUnary::Count;
};
template <class Op>
struct ScalarFormOf<Op, std::void_t<decltype(Op::kScalarForm)>> {
  static constexpr ScalarForm form = Op::kScalarForm;
  static constexpr VecUnary unary = Op::kScalarUnary;
};
template <class Op, class... Args>
ScalarStep scalar_step(const Args&... args) {
  ScalarStep step;
  step.form = ScalarFormOf<Op>::form;
  step.unary = ScalarFormOf<Op>::unary;
  if (step.form != ScalarForm::None) (note_argument(step, args), ...);
  return step;
}

// How a Call keeps each argument: tensors and lists of tensors as their positions among the tensors
// run() is given, everything else (numbers, enums, Scalars, shapes, option structs, names) as a
// copy. Other types (an index spec holding tensors) make the op one that cannot be captured yet.
struct TensorArg {
  size_t index;
};
struct TensorListArg {
  size_t first, size;
};
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
  using type = TensorArg;
};
template <>
struct Kept<std::vector<Tensor>> {
  static constexpr bool capturable = true;
  using type = TensorListArg;
};
struct IndexSpecArg {
  std::vector<IndexStep> steps;
  TensorListArg advanced;
};
template <>
struct Kept<IndexSpec> {
  static constexpr bool capturable = true;
  using type = IndexSpecArg;
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
struct Kept<std::vector<uint8_t>> : KeptCopy<std::vector<uint8_t>> {};
template <>  // a Python callable (a node's backward): kept with a reference, copied with the GIL (at capture)
struct Kept<py::object> : KeptCopy<py::object> {};
template <>
struct Kept<std::optional<std::vector<int64_t>>> : KeptCopy<std::optional<std::vector<int64_t>>> {};
template <>
struct Kept<std::string> : KeptCopy<std::string> {};

// `tensors`: how many tensors the arguments before this one hold.
template <class T>
const T& keep(const T& value, size_t&) {
  return value;
}
inline TensorArg keep(const Tensor&, size_t& tensors) { return {tensors++}; }
inline TensorListArg keep(const std::vector<Tensor>& list, size_t& tensors) {
  tensors += list.size();
  return {tensors - list.size(), list.size()};
}
inline IndexSpecArg keep(const IndexSpec& spec, size_t& tensors) { return {spec.steps, keep(spec.advanced, tensors)}; }

template <class T>
const T& take(TensorArgs, const T& value) {
  return value;
}
inline const Tensor& take(TensorArgs tensors, TensorArg arg) { return tensors[arg.index]; }
inline std::vector<Tensor> take(TensorArgs tensors, TensorListArg list) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < list.size; ++i) out.push_back(tensors[list.first + i]);
  return out;
}
inline IndexSpec take(TensorArgs tensors, const IndexSpecArg& spec) {
  return {spec.steps, take(tensors, spec.advanced)};
}

template <class Op, class... Args>
struct Bound {
  Op op;
  std::tuple<typename Kept<Args>::type...> kept;
  // Braces: the arguments are kept in order, counting tensors.
  Bound(const Op& o, const Args&... args, size_t tensors = 0) : op(o), kept{keep(args, tensors)...} {}
  Results run(TensorArgs tensors) const { return run(tensors, std::index_sequence_for<Args...>()); }

 private:
  template <size_t... I>
  Results run(TensorArgs tensors, std::index_sequence<I...>) const {
    using Result = decltype(op(take(tensors, std::get<I>(kept))...));
    Results out;
    if constexpr (std::is_void_v<Result>) {
      op(take(tensors, std::get<I>(kept))...);
    } else if constexpr (std::is_same_v<Result, std::vector<Tensor>>) {
      for (Tensor& t : op(take(tensors, std::get<I>(kept))...)) out.push_back(std::move(t));
    } else if constexpr (std::is_same_v<Result, std::pair<Tensor, Tensor>>) {
      auto [first, second] = op(take(tensors, std::get<I>(kept))...);
      out.push_back(std::move(first));
      out.push_back(std::move(second));
    } else {
      out.push_back(op(take(tensors, std::get<I>(kept))...));
    }
    return out;
  }
};

// op(args...), without the GIL when the work is long; with the GIL released, the op runs on copies.
template <class Op, class... Args>
auto invoke(bool long_work, const Op& op, const Args&... args) {
  if (long_work) return without_gil(op, args...);
  return op(args...);
}

// Out of line and cold: the bindings' hot path keeps only call_op's load and branch. The op runs
// through its Call, as replays run it, so what is instantiated per op is the Call alone.
template <class Op, class... Args>
[[gnu::noinline, gnu::cold]] auto record(bool long_work, const Op& op, const Args&... args) {
  using Result = decltype(op(args...));
  constexpr bool capturable = (Kept<Args>::capturable && ...) &&
                              (std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::pair<Tensor, Tensor>> ||
                               std::is_same_v<Result, std::vector<Tensor>> || std::is_void_v<Result>);
  if constexpr (!capturable) {
    cannot_replay("an operation compile cannot capture yet");
    return invoke(long_work, op, args...);
  } else {
    const std::array<ArgRef, sizeof...(Args)> refs{arg_ref(args)...};
    // The op's identity: its type, and its value where that is all value (a function pointer, the
    // enum a comparison's lambda keeps), so that abs and sign, or < and >, are different steps.
    const size_t op_identity = combine(typeid(Op).hash_code(), identity_of(op));
    Results results = run_recorded(Call(new Bound<std::decay_t<Op>, Args...>(op, args...)), long_work, refs.data(),
                                   refs.size(), op_identity, scalar_step<Op>(args...));
    if constexpr (std::is_same_v<Result, Tensor>) return std::move(results[0]);
    if constexpr (std::is_same_v<Result, std::pair<Tensor, Tensor>>) return Result(results[0], results[1]);
    if constexpr (std::is_same_v<Result, std::vector<Tensor>>) {
      std::vector<Tensor> parts;
      for (Tensor& t : results) parts.push_back(std::move(t));
      return parts;
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
