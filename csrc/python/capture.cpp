// The recorder and the replayed program of fastgrad.compile (capture.h; the Python side, guards and
// fallbacks, is python/fastgrad/_compile.py).
#include "python/capture.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <unordered_map>

#include "python/optim_replay.h"

namespace fg::capture {

// The recorder of the capture this thread runs (null when it runs none). Steps are recorded only
// at depth 0: what a recorded op (a backward pass, an optimizer's step) does inside is its own.
struct Recorder;
Recorder* recorder();
bool recording(const Recorder* r);  // r is at depth 0 and not yet abandoned
// The capture cannot replay what the function does: `what` says why. Only the first reason is kept
// (with the user's line, found from the Python stack).
void abandon(Recorder* r, const char* what);

// A slot's tensor as the capture last saw it. A metadata change no recorded op explains (an
// in-place view op such as squeeze_ outside call_op, x.data = y) would not happen on replay.
struct Geometry {
  const Storage* storage;
  Shape shape, strides;
  int64_t offset;
  DType dtype;
  bool operator==(const Geometry& o) const {
    return storage == o.storage && shape == o.shape && strides == o.strides && offset == o.offset && dtype == o.dtype;
  }
};
Geometry geometry_of(const Tensor& t) { return {t->storage.get(), t->shape, t->strides, t->offset, t->dtype}; }

// A replay's tensors: the program's inputs, its constants and the results of its steps, by slot.
using Frame = std::vector<Tensor>;

// A step's result must be what it was at capture: defined or not, and of the same shape. An op whose
// result depends on values (a boolean mask's selection) or on state the guards do not see would
// otherwise feed later steps, recorded for the captured shapes, with something else.
[[noreturn]] void result_changed() {
  throw RuntimeError(
      "fastgrad.compile: a replayed operation gave a result of another shape than at capture (it depends on "
      "tensor values or on state the guards do not see); call fastgrad.compiler.reset() and run the function "
      "uncompiled");
}
void check_result(const Tensor& result, bool defined, const Shape& shape) {
  if (bool(result) != defined || (defined && result->shape != shape)) result_changed();
}

// call on `tensors`, without the GIL when `long_work` (the tensors are the caller's own copies).
Results run_call(const Call& call, bool long_work, TensorArgs tensors) {
  if (!long_work) return call.run(tensors);
  py::gil_scoped_release no_gil;
  return call.run(tensors);
}

// One result of a step's op as the capture saw it.
struct StepResult {
  int slot = -1;  // -1: undefined
  bool defined = false;
  Shape shape;
};

struct Step {
  explicit Step(Call c, std::vector<int> tensor_slots = {}) : call(std::move(c)), slots(std::move(tensor_slots)) {}

  Call call;
  std::vector<int> slots;           // the op's tensor arguments in argument order (capture.h's TensorArgs)
  std::vector<StepResult> results;  // none for a void op
  bool long_work = false;
  bool grad_mode = false;     // the grad mode it ran in
  ScalarStep scalar;          // what it is to a lowering (scalar_program.h)
  std::vector<int> last_use;  // the slots no later step reads: dropped after it, as eagerly

  // Without the GIL (Program::run): host calls take it back themselves.
  void run(Frame& frame) const {
    Results got = call.run({frame.data(), slots.data()});  // the frame belongs to this replay
    if (got.size() != results.size()) result_changed();  // split into another number of parts
    for (size_t i = 0; i < results.size(); ++i) {
      check_result(got[i], results[i].defined, results[i].shape);
      if (results[i].slot >= 0) frame[results[i].slot] = std::move(got[i]);
    }
  }
};

struct Program {
  int inputs = 0;
  std::vector<Tensor> frame_template;  // the constants in their slots, empty slots elsewhere
  std::vector<Step> steps;
  std::vector<int> outputs;
  size_t fingerprint = 0;  // of the steps (add_step)
  // Where replays put their intermediates (core/storage.h): planned from the first replay's
  // allocations, not the capture's, as the capture keeps every intermediate until it ends.
  mutable MemoryPlanPtr plan;
  mutable std::atomic<int> plan_state{kUnplanned};
  static constexpr int kUnplanned = 0, kPlanning = 1, kPlanned = 2;
  // The program lowered to float arithmetic (scalar_program.h), if every step is one it computes;
  // used once the first replay it applies to has checked it against the steps. Else why not.
  ScalarProgramPtr scalar;
  std::string scalar_refusal;
  mutable std::atomic<int> scalar_state{kUnchecked};
  static constexpr int kUnchecked = 0, kChecking = 1, kChecked = 2, kDiffered = 3;

  // The outputs of one replay on `args`: by the lowered program where it applies and has been
  // checked, else by the steps (run_steps). Grad mode is restored afterwards, even on an error. The
  // steps run without the GIL (other Python threads run meanwhile, other programs replay in parallel):
  // the ops are C++ on the frame's own tensors; host calls, the backward pass and the reads and writes
  // of .grad take the GIL back, as they hold it eagerly (capture.h's with_gil).
  std::vector<Tensor> run(const std::vector<Tensor>& args) const {
    if (static_cast<int>(args.size()) != inputs)
      throw ValueError(cat("compiled program: expected ", inputs, " tensor inputs, got ", args.size()));
    const CallTensors tensors{args, frame_template};
    int checked = scalar_state.load(std::memory_order_acquire);
    if (!scalar || checked == kDiffered || !scalar_program_applies(*scalar, tensors)) return run_steps(args);
    if (checked == kChecked) return run_scalar_program(*scalar, tensors);
    if (checked != kUnchecked || !scalar_state.compare_exchange_strong(checked, kChecking)) return run_steps(args);
    std::vector<Tensor> out;
    try {
      std::vector<float> registers = load_scalar_program(*scalar, tensors);
      out = run_steps(args);
      checked = scalar_program_matches(*scalar, std::move(registers), tensors, out) ? kChecked : kDiffered;
    } catch (...) {
      scalar_state.store(kUnchecked, std::memory_order_release);
      throw;
    }
    scalar_state.store(checked, std::memory_order_release);
    return out;
  }

  // A replay of the steps. One replay at a time logs its allocations for the plan; others meanwhile
  // run unplanned.
  std::vector<Tensor> run_steps(const std::vector<Tensor>& args) const {
    int state = plan_state.load(std::memory_order_acquire);
    const bool logs = state == kUnplanned && plan_state.compare_exchange_strong(state, kPlanning);
    AllocationLog log;
    std::vector<Tensor> out;
    try {
      Frame frame = frame_template;
      std::copy(args.begin(), args.end(), frame.begin());
      py::gil_scoped_release no_gil;
      GradModeGuard restore(grad_enabled());
      PlanAllocations planned(state == kPlanned ? plan.get() : nullptr, logs ? &log : nullptr);
      for (const Step& step : steps) {
        if (step.grad_mode != grad_enabled()) set_grad_enabled(step.grad_mode);
        step.run(frame);
        for (int slot : step.last_use) frame[slot].reset();
      }
      for (int slot : outputs) out.push_back(frame[slot]);
    } catch (...) {
      if (logs) plan_state.store(kUnplanned, std::memory_order_release);
      throw;
    }
    if (logs) {
      plan = make_memory_plan(log);
      plan_state.store(kPlanned, std::memory_order_release);
    }
    return out;
  }
};

struct Recorder {
  uint32_t id;
  int depth = 0;
  bool abandoned = false;
  std::string reason, location;
  py::object locate;  // Python: the user's line that is running ("file:line")
  std::unique_ptr<Program> program = std::make_unique<Program>();
  std::unordered_map<const TensorImpl*, int> slots;
  std::vector<Geometry> geometries;  // per slot
  std::vector<char> had_grad;        // per slot: its .grad was set when first seen
  std::vector<size_t> last_step;     // per slot: the last step that reads or writes it
  std::vector<Tensor> alive;         // every slot's tensor, so that no address is reused meanwhile

  int new_slot(const Tensor& t) {
    const int slot = static_cast<int>(alive.size());
    slots.emplace(t.get(), slot);
    geometries.push_back(geometry_of(t));
    had_grad.push_back(bool(t->grad));
    last_step.push_back(0);
    alive.push_back(t);
    return slot;
  }
};

namespace {
thread_local Recorder* this_thread_recorder = nullptr;
uint32_t last_capture_id = 0;

void untracked(const char* what) {
  Recorder* r = this_thread_recorder;
  if (r && r->depth == 0) abandon(r, what);
}
}  // namespace

Recorder* recorder() { return this_thread_recorder; }
bool recording(const Recorder* r) { return r && r->depth == 0 && !r->abandoned; }

void abandon(Recorder* r, const char* what) {
  if (r->abandoned) return;
  r->abandoned = true;
  r->reason = what;
  // Where the user's code is: asked of Python, which may be waiting for the GIL (a kernel released it).
  py::gil_scoped_acquire gil;
  try {
    r->location = py::cast<std::string>(r->locate());
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("fastgrad.compile locating a graph break");
  }
}

void cannot_replay(const char* what) {
  Recorder* r = this_thread_recorder;
  if (r && r->depth == 0) abandon(r, what);
}

namespace {

// The slot of a tensor argument of the step about to be added: -1 for an undefined tensor, -2 when
// refused (the capture is abandoned).
int input_slot(Recorder* r, const Tensor& t) {
  if (!t) return -1;
  auto found = r->slots.find(t.get());
  if (found != r->slots.end()) {
    r->last_step[found->second] = r->program->steps.size();  // the step about to be added
    if (r->geometries[found->second] == geometry_of(t)) return found->second;
    abandon(r, "a tensor changed in place by an operation compile cannot capture (x.data = ..., an in-place view op)");
    return -2;
  }
  if (t->capture_birth == r->id) {
    abandon(r, "a tensor made by an operation compile cannot capture yet (a view, detach(), .data, ...)");
    return -2;
  }
  // Made before the call (a parameter, a buffer, a global): replays read it as it is then.
  const int slot = r->new_slot(t);
  r->last_step[slot] = r->program->steps.size();
  r->program->frame_template.push_back(t);
  return slot;
}

int output_slot(Recorder* r, const Tensor& t) {
  if (!t) return -1;
  auto found = r->slots.find(t.get());
  if (found == r->slots.end()) {
    r->program->frame_template.emplace_back();
    const int slot = r->new_slot(t);
    r->last_step[slot] = r->program->steps.size();
    return slot;
  }
  r->last_step[found->second] = r->program->steps.size();
  r->geometries[found->second] = geometry_of(t);  // an in-place op's result is its input
  return found->second;
}

void refresh_geometry(Recorder* r, const Tensor& t) {
  if (!t) return;
  auto found = r->slots.find(t.get());
  if (found != r->slots.end()) r->geometries[found->second] = geometry_of(t);
}

// `identity` (the op, its slots and its other arguments) goes into the program's fingerprint.
void add_step(Recorder* r, Step step, size_t identity) {
  step.grad_mode = grad_enabled();
  r->program->steps.push_back(std::move(step));
  r->program->fingerprint = combine(combine(r->program->fingerprint, identity), grad_enabled());
}

// Marks the ops and allocations of a recorded host call as its own while it runs.
class Region {
 public:
  explicit Region(Recorder* r) : r_(r) { ++r_->depth; }
  ~Region() { --r_->depth; }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  Recorder* r_;
};

// A host call as a step: fn() again, with the GIL taken back (a replay runs without it), or the
// optimizer update it stands for in C++ where optim_replay.h can do it.
struct HostCall {
  py::object fn;
  std::optional<FusedUpdate> fused;
  HostCall(py::object f, std::optional<FusedUpdate> u) : fn(std::move(f)), fused(std::move(u)) {}
  Results run(TensorArgs) const {
    PlanAllocations unplanned(nullptr, nullptr);
    py::gil_scoped_acquire gil;
    if (!fused || !replay_fused_update(*fused)) fn();
    return {};
  }
};

// Records one op around its eager run: the constructor takes the slots of the op's tensor arguments
// as they are before it runs (its result may be one of them) and marks what the op does inside as
// its own; finish() adds the step once the op has run.
class OpRecord {
 public:
  OpRecord(Recorder* r, const ArgRef* args, size_t count, size_t op_identity);
  ~OpRecord();
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;
  // results: the op's (none for a void op); long_work: the replay runs it without the GIL.
  void finish(Call call, bool long_work, const Results& results, const ScalarStep& scalar);

 private:
  Recorder* r_;
  const ArgRef* args_;
  size_t count_;
  size_t identity_;
  std::vector<int> slots_;
  bool refused_ = false;
};

OpRecord::OpRecord(Recorder* r, const ArgRef* args, size_t count, size_t op_identity)
    : r_(r), args_(args), count_(count), identity_(op_identity) {
  for (size_t i = 0; i < count; ++i) {
    if (args[i].tensor) {
      slots_.push_back(input_slot(r, *args[i].tensor));
    } else if (args[i].list) {
      for (const Tensor& t : *args[i].list) slots_.push_back(input_slot(r, t));
    }
    identity_ = combine(identity_, args[i].identity);  // a list may come with values (an index's)
  }
  for (int slot : slots_) {
    refused_ |= slot == -2;
    identity_ = combine(identity_, std::hash<int>()(slot));
  }
  ++r_->depth;
}

OpRecord::~OpRecord() { --r_->depth; }

void OpRecord::finish(Call call, bool long_work, const Results& results, const ScalarStep& scalar) {
  // The arguments' geometry as the op left it (an in-place view op, x.data = y).
  for (size_t i = 0; i < count_; ++i) {
    if (args_[i].tensor) refresh_geometry(r_, *args_[i].tensor);
    if (args_[i].list)
      for (const Tensor& t : *args_[i].list) refresh_geometry(r_, t);
  }
  if (refused_) return;
  Step step(std::move(call), std::move(slots_));
  step.long_work = long_work;
  step.scalar = scalar;
  for (const Tensor& result : results) {
    StepResult& kept = step.results.emplace_back();
    kept.slot = output_slot(r_, result);
    kept.defined = bool(result);
    if (kept.defined) kept.shape = result->shape;
    identity_ = combine(identity_, std::hash<int>()(kept.slot));
  }
  add_step(r_, std::move(step), identity_);
}

}  // namespace

Results run_recorded(Call call, bool long_work, const ArgRef* args, size_t count, size_t op_identity,
                     const ScalarStep& scalar) {
  // The op's tensors in the Call's order: copies holding their own references (with the GIL
  // released, another thread may drop the caller's Python objects).
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < count; ++i) {
    if (args[i].tensor) tensors.push_back(*args[i].tensor);
    if (args[i].list) tensors.insert(tensors.end(), args[i].list->begin(), args[i].list->end());
  }
  std::vector<int> positions(tensors.size());
  std::iota(positions.begin(), positions.end(), 0);
  const TensorArgs in_place{tensors.data(), positions.data()};
  Recorder* r = recorder();
  if (!recording(r)) return run_call(call, long_work, in_place);
  OpRecord record(r, args, count, op_identity);
  Results results = run_call(call, long_work, in_place);
  ScalarStep lowered = scalar;
  if (lowered.form != ScalarForm::None) {  // only a tagged op can be lowered: the others need no look
    auto zero_d_float = [](const Tensor& t) { return !t || (t->shape.empty() && t->dtype == DType::Float32); };
    lowered.zero_d_float = std::all_of(tensors.begin(), tensors.end(), zero_d_float);
    for (const Tensor& t : results) lowered.zero_d_float = lowered.zero_d_float && zero_d_float(t);
  }
  record.finish(std::move(call), long_work, results, lowered);
  return results;
}

namespace {

// The tensors of a Python list, which must hold only tensors.
template <class F>
void for_each_tensor(py::handle list, const char* caller, F f) {
  if (!PyList_Check(list.ptr())) throw TypeError(cat(caller, "(): expected a list of tensors"));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.ptr()); ++i) {
    const Tensor* t = tensor_of(PyList_GET_ITEM(list.ptr(), i));
    if (!t) throw TypeError(cat(caller, "(): expected a list of tensors"));
    f(**t);
  }
}

// The key of a compiled function's call (_compile.py's _key): everything a replay depends on, written
// as 64-bit words (a type tag, then the value's bits, so -0.0 is not 0.0 and a NaN matches itself)
// and hashed once; values that only == can compare (an argument of another hashable type) are kept
// aside as objects. Built in C++ as it is built on every call.
struct CallKey {
  std::vector<int64_t> words;
  py::tuple others;
  size_t hash = 0;
  bool operator==(const CallKey& o) const {
    if (hash != o.hash || words != o.words) return false;
    const int equal = PyObject_RichCompareBool(others.ptr(), o.others.ptr(), Py_EQ);
    if (equal < 0) throw py::error_already_set();
    return equal;
  }
};

// Each value starts with one of these.
enum KeyTag : int64_t {
  // None, bool, int, float, complex, str, bytes (the exact types), then the value
  kNone = 1,
  kFalse,
  kTrue,
  kInt,
  kBigInt,
  kFloat,
  kComplex,
  kStr,
  kBytes,
  kNumpy,       // a numpy scalar: its type's address, then its bytes
  kTupleOf,     // a tuple of a subclass (a namedtuple, torch.Size): its type's address, then its kTuple
  kTuple,       // containers: then their length and items
  kList,
  kDict,
  kArgument,    // a tensor argument, then its position among them
  kReached,     // a tensor reached otherwise (its guard words come at the end, in order)
  kModule,      // a module: its structure's words (_key_words, cached in _compile.py)
  kIdentity,    // any other object reached: its address
  kEqual,       // an argument of another type: its index in `others`
};

// numpy.generic, the type of numpy's scalars (np.float64(2.0), an element read from an array).
PyTypeObject* numpy_scalar_type() {
  static PyTypeObject* type = reinterpret_cast<PyTypeObject*>(
      py::object(py::module_::import("numpy").attr("generic")).release().ptr());  // kept for good
  return type;
}

// A tuple of a subclass whose instances hold nothing but their items (no __dict__; a tuple subclass
// cannot have slots): a namedtuple, torch.Size, torch.return_types.
bool is_items_only_tuple(PyObject* v) { return PyTuple_Check(v) && Py_TYPE(v)->tp_dictoffset == 0; }

class KeyWriter {
 public:
  std::vector<int64_t> words;
  std::vector<py::object> others;

  void word(int64_t w) { words.push_back(w); }
  void text(const char* data, size_t size) {  // its length, then its bytes in words
    word(static_cast<int64_t>(size));
    const size_t at = words.size();
    words.resize(at + (size + 7) / 8, 0);
    if (size) std::memcpy(words.data() + at, data, size);
  }
  // A value of one of the exact types None, bool, int, float, complex, str, bytes, or a numpy scalar
  // (by its type and bytes); false for another.
  bool value(PyObject* v) {
    PyTypeObject* kind = Py_TYPE(v);
    if (v == Py_None) {
      word(kNone);
    } else if (kind == &PyBool_Type) {
      word(v == Py_True ? kTrue : kFalse);
    } else if (kind == &PyLong_Type) {
      int overflow = 0;
      const long long i = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow == 0) {
        word(kInt);
        word(i);
      } else {  // beyond 64 bits: its digits
        const std::string digits = py::str(v);
        word(kBigInt);
        text(digits.data(), digits.size());
      }
    } else if (kind == &PyFloat_Type) {
      word(kFloat);
      word(bit_cast<int64_t>(PyFloat_AS_DOUBLE(v)));
    } else if (kind == &PyComplex_Type) {
      const Py_complex c = PyComplex_AsCComplex(v);
      word(kComplex);
      word(bit_cast<int64_t>(c.real));
      word(bit_cast<int64_t>(c.imag));
    } else if (kind == &PyUnicode_Type) {
      // As UTF-8, lone surrogates kept (a str may hold them; the key must still tell it apart).
      const py::object utf8 = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(v, "utf-8", "surrogatepass"));
      if (!utf8) throw py::error_already_set();
      word(kStr);
      text(PyBytes_AS_STRING(utf8.ptr()), PyBytes_GET_SIZE(utf8.ptr()));
    } else if (kind == &PyBytes_Type) {
      word(kBytes);
      text(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    } else if (PyObject_TypeCheck(v, numpy_scalar_type())) {
      Py_buffer view;
      if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) != 0) {  // a scalar without one: by identity
        PyErr_Clear();
        return false;
      }
      word(kNumpy);
      word(reinterpret_cast<intptr_t>(kind));
      text(static_cast<const char*>(view.buf), static_cast<size_t>(view.len));
      PyBuffer_Release(&view);
    } else {
      return false;
    }
    return true;
  }
  // A value compared by ==: its bits when value() takes it, else the object itself (which must hash).
  void equal(py::handle v) {
    if (value(v.ptr())) return;
    if (PyObject_Hash(v.ptr()) == -1) throw py::error_already_set();
    word(kEqual);
    word(static_cast<int64_t>(others.size()));
    others.push_back(py::reinterpret_borrow<py::object>(v));
  }
  void identity(py::handle v) {
    word(kIdentity);
    word(reinterpret_cast<intptr_t>(v.ptr()));
  }
  // A tuple, list or dict of exactly these types, or a tuple of a subclass that holds nothing else
  // (is_items_only_tuple): its tag and length;
  // `each(key or null, item)` then writes the items.
  template <class F>
  bool container(py::handle v, F each) {
    const bool dict = PyDict_CheckExact(v.ptr()), list = PyList_CheckExact(v.ptr());
    const bool tuple = !dict && !list && (is_items_only_tuple(v.ptr()));
    if (!dict && !list && !tuple) return false;
    if (tuple && !PyTuple_CheckExact(v.ptr())) {
      word(kTupleOf);
      word(reinterpret_cast<intptr_t>(Py_TYPE(v.ptr())));
    }
    word(dict ? kDict : tuple ? kTuple : kList);
    word(static_cast<int64_t>(PyObject_Length(v.ptr())));
    if (dict) {
      for (auto [k, item] : py::reinterpret_borrow<py::dict>(v)) each(k, item);
      return true;
    }
    // By index, each item held meanwhile: each() may run Python code (a module's parts) that changes a list.
    for (Py_ssize_t i = 0; i < (tuple ? PyTuple_GET_SIZE(v.ptr()) : PyList_GET_SIZE(v.ptr())); ++i) {
      const py::object item =
          py::reinterpret_borrow<py::object>(tuple ? PyTuple_GET_ITEM(v.ptr(), i) : PyList_GET_ITEM(v.ptr(), i));
      each(py::handle(), item);
    }
    return true;
  }
  CallKey finish() {
    CallKey key;
    key.words = std::move(words);
    key.others = py::tuple(others.size());
    for (size_t i = 0; i < others.size(); ++i) key.others[i] = std::move(others[i]);
    size_t h = key.words.size();
    for (int64_t w : key.words) h = combine(h, static_cast<size_t>(w));
    key.hash = combine(h, static_cast<size_t>(py::hash(key.others)));
    return key;
  }
};

// What a compiled call's key reads: its arguments (as _compile.py's docstring says: tensors by
// position, other values by type and value), and what the function reaches without them.
struct CallKeyWalk {
  KeyWriter out;
  py::list arguments, reached;  // the tensor arguments (each once) and the tensors reached otherwise
  std::unordered_map<PyObject*, int64_t> positions;
  py::handle module_class, module_parts;
  std::vector<const TensorImpl*> argument_tensors, reached_tensors;  // the same, read by tensors()

  // An argument: a tensor by its position, a tuple, list or dict by its items, anything else by value.
  // A list that contains itself has no key (TypeError: the call runs eagerly), nor has anything nested
  // deeper than kMaxNesting.
  static constexpr int kMaxNesting = 64;
  void argument(py::handle v, int nesting = 0) {
    if (nesting > kMaxNesting)
      throw TypeError(cat("an argument nested more than ", kMaxNesting, " containers deep cannot be a key"));
    if (const Tensor* t = tensor_of(v.ptr())) {
      auto [at, added] = positions.emplace(v.ptr(), static_cast<int64_t>(positions.size()));
      if (added) {
        arguments.append(v);
        argument_tensors.push_back(t->get());
      }
      out.word(kArgument);
      out.word(at->second);
    } else if (!out.container(v, [&](py::handle k, py::handle item) {
                 if (k) out.equal(k);
                 argument(item, nesting + 1);
               })) {
      out.equal(v);
    }
  }
  // What a replay depends on in a value the function reaches, `depth` containers deep: a tensor's guard
  // (at the end), a module's structure and tensors, a container's items (and its identity, unless it
  // is an argument's: `inputs`), a value of a primitive type by value, anything else by identity.
  void state(py::handle v, int depth, bool inputs) {
    if (const Tensor* t = tensor_of(v.ptr())) {
      if (!inputs) add_reached(v, *t);
      out.word(kReached);
      return;
    }
    if (out.value(v.ptr())) return;
    if (depth > 0 && out.container(v, [&](py::handle k, py::handle item) {
          if (k) out.equal(k);
          state(item, depth - 1, inputs);
        })) {
      if (!inputs) out.word(reinterpret_cast<intptr_t>(v.ptr()));
      return;
    }
    const int is_module = PyObject_IsInstance(v.ptr(), module_class.ptr());
    if (is_module < 0) throw py::error_already_set();
    if (is_module) {
      py::tuple parts = module_parts(v);
      const py::bytes structure = parts[0];
      out.word(kModule);
      out.text(PyBytes_AS_STRING(structure.ptr()), PyBytes_GET_SIZE(structure.ptr()));
      for (py::handle t : parts[1]) add_reached(t, *tensor_of(t.ptr()));
      return;
    }
    out.identity(v);
  }
  void add_reached(py::handle object, const Tensor& t) {
    reached.append(object);
    reached_tensors.push_back(t.get());
  }
  // Each tensor argument's shape, strides, offset, dtype and requires_grad, and which earlier one
  // shares its storage (the replay's ops see the same aliasing); each reached tensor's identity,
  // dtype, requires_grad, whether its .grad is set (Python may branch on it) and shape.
  void tensors() {
    std::vector<const Storage*> storages;
    for (const TensorImpl* a : argument_tensors) {
      const TensorImpl& t = *a;
      const int64_t sharing = std::find(storages.begin(), storages.end(), t.storage.get()) - storages.begin();
      storages.push_back(t.storage.get());
      for (int64_t w : {t.dim(), t.offset, static_cast<int64_t>(t.dtype), int64_t(t.requires_grad()), sharing})
        out.word(w);
      for (int64_t s : t.shape) out.word(s);
      for (int64_t s : t.strides) out.word(s);
    }
    for (const TensorImpl* r : reached_tensors) {
      const TensorImpl& t = *r;
      for (int64_t w : {int64_t(reinterpret_cast<intptr_t>(&t)), t.dim(), static_cast<int64_t>(t.dtype),
                        int64_t(t.requires_grad()), int64_t(bool(t.grad))})
        out.word(w);
      for (int64_t s : t.shape) out.word(s);
    }
  }
};

// A module's structure (_compile.py's _module_parts: ids and (name, value) pairs) as a key's words.
void write_structure(KeyWriter& out, py::handle v) {
  if (out.value(v.ptr())) return;
  if (!out.container(v, [&](py::handle, py::handle item) { write_structure(out, item); }))
    throw TypeError("_key_words: a structure of tuples of ints, floats, strings, ...");
}

// Ends this thread's capture, whatever becomes of it.
// A program's memory plan (core/storage.h) as (the planned block's bytes, the bytes each replay
// allocates outside it (what outlives the call: outputs, gradients), the planned allocations replays
// could not place so far); None before the first replay has made it.
py::object memory_plan_report(const Program& p) {
  if (p.plan_state.load(std::memory_order_acquire) != Program::kPlanned) return py::none();
  return py::make_tuple(planned_bytes(*p.plan), unplanned_bytes(*p.plan), plan_misses(*p.plan));
}

// The recorded program lowered to float arithmetic, if it can be (scalar_program.h).
void lower(const Recorder& r) {
  Program& program = *r.program;
  std::vector<StepSlots> steps;
  steps.reserve(program.steps.size());
  for (const Step& step : program.steps) {
    StepSlots& s = steps.emplace_back(StepSlots{&step.scalar, &step.slots, {}, step.grad_mode});
    for (const StepResult& result : step.results) s.results.push_back(result.slot);
  }
  std::vector<char> made_before(r.alive.size());
  for (size_t slot = 0; slot < made_before.size(); ++slot)
    made_before[slot] = static_cast<int>(slot) < program.inputs || bool(program.frame_template[slot]);
  program.scalar = lower_scalar_program(steps, program.inputs, r.alive, made_before, r.had_grad, program.outputs,
                                        program.scalar_refusal);
}

std::unique_ptr<Recorder> end_capture() {
  std::unique_ptr<Recorder> r(this_thread_recorder);
  this_thread_recorder = nullptr;
  active_capture.store(0, std::memory_order_relaxed);
  return r;
}

}  // namespace
}  // namespace fg::capture

namespace fg {

void bind_capture(py::module_& m) {
  using namespace capture;
  py::class_<Program, std::shared_ptr<Program>>(m, "CompiledProgram")
      .def("run", &Program::run)
      .def_property_readonly("num_steps", [](const Program& p) { return p.steps.size(); })
      .def_property_readonly("num_inputs", [](const Program& p) { return p.inputs; })
      .def_property_readonly("fingerprint", [](const Program& p) { return p.fingerprint; })
      .def_property_readonly("memory_plan", &memory_plan_report)
      // The lowered program (scalar_program.h): (values, operations, state: "unchecked", "checked" or
      // "differed"), or the reason there is none.
      .def_property_readonly("scalar_program",
                             [](const Program& p) -> py::object {
                               if (!p.scalar) return py::str(p.scalar_refusal);
                               auto [values, operations] = scalar_program_size(*p.scalar);
                               const int state = p.scalar_state.load(std::memory_order_acquire);
                               const char* name = state == Program::kChecked    ? "checked"
                                                  : state == Program::kDiffered ? "differed"
                                                                                : "unchecked";
                               return py::make_tuple(values, operations, name);
                             })
      // The tensors made before the capture that the program reads (parameters, buffers, globals).
      .def_property_readonly("constants", [](const Program& p) {
        std::vector<Tensor> out;
        for (const Tensor& t : p.frame_template)
          if (t) out.push_back(t);
        return out;
      });
  // Starts recording this thread's ops, `inputs` in the first slots; `locate()` names the user's line.
  // False if another thread is capturing (the call then runs eagerly, unrecorded).
  m.def("_capture_begin", [](const std::vector<Tensor>& inputs, py::object locate) {
    if (capture_in_progress()) return false;
    auto r = std::make_unique<Recorder>();
    r->id = ++last_capture_id == 0 ? ++last_capture_id : last_capture_id;
    r->locate = std::move(locate);
    for (const Tensor& t : inputs) {
      if (r->slots.count(t.get())) throw ValueError("_capture_begin: an input appears twice");
      r->program->frame_template.emplace_back();
      r->new_slot(t);
    }
    r->program->inputs = static_cast<int>(inputs.size());
    capture_untracked = &untracked;
    this_thread_recorder = r.release();
    active_capture.store(this_thread_recorder->id, std::memory_order_relaxed);
    return true;
  });
  // Ends the capture: the program whose outputs are `outputs`, or (reason, "file:line") when the
  // function did something the capture cannot replay.
  m.def("_capture_end", [](const std::vector<Tensor>& outputs) -> py::object {
    std::unique_ptr<Recorder> r = end_capture();
    if (!r) throw RuntimeError("_capture_end: no capture in progress on this thread");
    if (!r->abandoned) {
      r->depth = 0;  // the outputs' slots are looked up as inputs of a last step would be
      for (const Tensor& t : outputs) {
        const int slot = input_slot(r.get(), t);
        if (slot < 0) break;
        r->program->outputs.push_back(slot);
      }
    }
    if (!r->abandoned) {
      Program& program = *r->program;
      lower(*r);
      for (int slot : program.outputs) r->last_step[slot] = program.steps.size();  // kept to the end
      for (size_t slot = 0; slot < r->last_step.size(); ++slot)
        if (r->last_step[slot] < program.steps.size()) program.steps[r->last_step[slot]].last_use.push_back(slot);
      // Undefined arguments read one slot that stays empty.
      const int undefined = static_cast<int>(program.frame_template.size());
      program.frame_template.emplace_back();
      for (Step& step : program.steps) std::replace(step.slots.begin(), step.slots.end(), -1, undefined);
    }
    if (r->abandoned) return py::make_tuple(r->reason, r->location);
    return py::cast(std::shared_ptr<Program>(std::move(r->program)));
  });
  py::class_<CallKey>(m, "_CallKey")
      .def("__hash__", [](const CallKey& k) { return static_cast<Py_ssize_t>(k.hash); })
      .def("__eq__", [](const CallKey& a, const CallKey& b) { return a == b; }, py::is_operator());
  // _compile.py's key of a call (CallKey): its tensor arguments are appended to `arguments`, the
  // tensors it reaches otherwise (through the object of a bound method, its closure cells, the global
  // names its code reads, modules among its arguments) to `reached`. `flags`: the process state a
  // replay depends on (grad mode, ...), by value. TypeError when an argument cannot be part of a key.
  m.def("_call_key",
        [](py::handle self, py::tuple cells, py::dict globals, py::tuple names, py::handle args, py::tuple flags,
           py::list arguments, py::list reached, int depth, py::handle module_class, py::handle module_parts) {
          CallKeyWalk walk{{}, arguments, reached, {}, module_class, module_parts, {}, {}};
          for (py::handle flag : flags) walk.out.equal(flag);
          walk.argument(args);
          walk.state(self, depth, false);
          for (py::handle cell : cells) {
            PyObject* contents = PyCell_GET(cell.ptr());
            if (contents) walk.state(contents, depth, false);
            else walk.out.word(0);  // an empty cell: no tag
          }
          for (py::handle name : names) {
            PyObject* value = PyDict_GetItemWithError(globals.ptr(), name.ptr());
            if (!value && PyErr_Occurred()) throw py::error_already_set();
            walk.state(value ? value : Py_None, depth, false);
          }
          walk.state(args, depth, true);
          walk.tensors();
          return walk.out.finish();
        });
  // A module's structure as the words a call key copies (_compile.py caches them per module).
  m.def("_key_words", [](py::handle structure) {
    KeyWriter out;
    write_structure(out, structure);
    return py::bytes(reinterpret_cast<const char*>(out.words.data()), out.words.size() * sizeof(int64_t));
  });
  m.def("_capture_abort", [] { end_capture(); });
  // Python code that knows a replay would go wrong (capture.h's cannot_replay).
  m.def("_capture_abandon", [](const std::string& what) { cannot_replay(what.c_str()); });
  // Whether this thread records steps now (a capture at depth 0).
  m.def("_capturing", [] { return recording(recorder()); });
  // An eager optimizer step or zero_grad done as a replay does it (optim_replay.h; the same bits as the
  // Python method's, without its per-parameter work): false when the Python method must run.
  m.def("_run_fused_update", [](py::handle fused) { return replay_fused_update(fused_update_of(fused)); });
  // fn(*args), a host call of the program: replays call it again (an optimizer's step, a scheduler's
  // step: Python that reads its state then). What it does with tensors is its own, not recorded.
  // `fused`: None, or the C++ form of an optimizer's step or zero_grad (optim_replay.h) that replays
  // run instead of fn() when they can.
  m.def("_capture_host_call", [](py::object fn, py::handle fused) {
    Recorder* r = recorder();
    if (!recording(r)) return fn();
    // Its identity: for a functools.partial (which hashes by identity), the method and the arguments
    // that hash.
    const bool partial = py::hasattr(fn, "func") && py::hasattr(fn, "args");
    size_t identity = py::hash(partial ? fn.attr("func") : fn);
    for (py::handle a : partial ? py::tuple(fn.attr("args")) : py::tuple()) {
      const Py_hash_t h = PyObject_Hash(a.ptr());
      if (h == -1) PyErr_Clear();
      identity = combine(identity, static_cast<size_t>(h));
    }
    std::optional<FusedUpdate> update;
    if (!fused.is_none()) update = fused_update_of(fused);
    Step step(Call(new HostCall(fn, std::move(update))));
    add_step(r, std::move(step), identity);
    Region region(r);
    return fn();
  });
}

}  // namespace fg
