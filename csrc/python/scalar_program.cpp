// Lowering a captured program to float operations on registers, and replaying it (scalar_program.h).
#include "python/scalar_program.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly_mode.h"
#include "autograd/node.h"
#include "python/bindings.h"

namespace fg {

// The grad_fn of a lowered program's output that requires grad: its graph was used up by the
// program's backward() (the lowering keeps no other), so, as that graph's released nodes would, it
// raises; PyTorch's compiled functions show their outputs' history under this name too.
FG_NODE(CompiledFunctionBackward);
GradList CompiledFunctionBackward::apply(GradList&&) { throw RuntimeError(kBackwardTwiceMessage); }

namespace capture {
namespace {

enum class Code : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  AddNumber,
  SubNumber,
  NumberSub,
  MulNumber,
  DivNumber,
  PowNumber,
  Unary,
  ReluGrad
};

// registers[out] = registers[a] op registers[b] (or the number); Unary: the float kernel on a; ReluGrad:
// PyTorch's threshold_backward, a the gradient and b the ReLU's result.
struct Operation {
  Code code;
  int32_t out, a, b;
  float number;
  UnaryKernel<float> unary;
};

// What a replay checks of a tensor made before the call, and loads from it.
struct Read {
  int slot, reg;
  bool requires_grad;
  bool grad_must_be_none;  // the program reads its .grad, or adds into it, before setting it
  const Storage* storage;  // a constant's (the same every call); null for an input
};
struct Write {
  int slot, reg;
  uint32_t versions;  // the in-place ops that wrote it
};
struct GradWrite {
  int slot, made;  // .grad = made tensor `made`, or None for -1
};
struct Made {  // a tensor the replay makes: an output, a .grad
  int reg;
  bool requires_grad;
  uint32_t versions;  // in-place writes (a .grad that a second backward() added into)
};
struct Output {
  int slot, made;  // a tensor made before the call, or made tensor `made`
};

void execute(const std::vector<Operation>& ops, float* r) {
  for (const Operation& op : ops) {
    switch (op.code) {
      case Code::Add: r[op.out] = r[op.a] + r[op.b]; break;
      case Code::Sub: r[op.out] = r[op.a] - r[op.b]; break;
      case Code::Mul: r[op.out] = r[op.a] * r[op.b]; break;
      case Code::Div: r[op.out] = r[op.a] / r[op.b]; break;
      case Code::AddNumber: r[op.out] = r[op.a] + op.number; break;
      case Code::SubNumber: r[op.out] = r[op.a] - op.number; break;
      case Code::NumberSub: r[op.out] = op.number - r[op.a]; break;
      case Code::MulNumber: r[op.out] = r[op.a] * op.number; break;
      case Code::DivNumber: r[op.out] = r[op.a] / op.number; break;
      case Code::PowNumber: r[op.out] = power_by_number(r[op.a], op.number); break;
      case Code::Unary: op.unary(r + op.a, r + op.out, 1); break;
      case Code::ReluGrad: r[op.out] = r[op.b] <= 0 ? 0.0f : r[op.a]; break;
    }
  }
}

float value_of(const Tensor& t) { return *t->data_as<float>(); }
void bump_versions(const Tensor& t, uint32_t writes) {
  for (uint32_t i = 0; i < writes; ++i) t->bump_version();
}
// The same value: the same bits, or both NaN. Which NaN an operation on two NaNs gives (on x86, its
// first operand) depends on the operand order a compiler chose for a commutative + or *, here and in
// the kernels, so only that NaN's sign and payload may differ from the steps'.
bool same_value(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0 || (a != a && b != b); }

}  // namespace

class ScalarProgram {
 public:
  int registers = 0;
  std::vector<std::pair<int, float>> numbers;  // registers holding a constant (the root gradient's 1)
  std::vector<Read> reads;
  std::vector<Operation> ops;
  std::vector<Write> writes;
  std::vector<Made> made;
  std::vector<GradWrite> grads;
  std::vector<Output> outputs;
  std::vector<const Storage*> constant_storages;  // sorted
};

void ScalarProgramDeleter::operator()(ScalarProgram* p) const { delete p; }

namespace {

// A tensor of the program: made before the call (slot >= 0) or by a step. One per tensor, so that a
// value written in place, or a .grad read twice, is seen through every slot that holds it.
struct Entity {
  int reg = -1;
  int slot = -1;
  bool requires_grad = false;
  int node = -1;   // its grad_fn; -1 for a leaf
  int grad = -1;   // the entity its .grad is; -1: None
  // How the program first uses its .grad: not at all, by reading it or adding into it (then it must
  // be None when the call starts), or by setting it (then whatever it was does not matter).
  enum { kUntouched, kReadFirst, kSetFirst } grad_use = kUntouched;
  uint32_t versions = 0;   // in-place writes
  int live_saves = 0;      // unreleased nodes that saved it
  int accumulator = -1;    // a leaf's AccumulateGrad
};

// A node the eager run would record: the backward of a step's op, or a leaf's AccumulateGrad.
struct SymbolicNode {
  ScalarForm form = ScalarForm::None;
  VecUnary unary = VecUnary::Count;
  bool with_number = false;
  double value = 0;            // the number, as the node keeps it
  int edges[2] = {-1, -1};     // nodes; -1: no gradient needed
  int saved[2] = {-1, -1};     // registers of what apply() reads (operands, or the result)
  int saved_entities[2] = {-1, -1};
  int leaf = -1;               // an AccumulateGrad's entity
  bool released = false;
};

class Lowering {
 public:
  Lowering(int inputs, const std::vector<Tensor>& tensors, const std::vector<char>& made_before,
           const std::vector<char>& had_grad, ScalarProgram& program)
      : inputs_(inputs),
        tensors_(tensors),
        made_before_(made_before),
        had_grad_(had_grad),
        slot_entity_(tensors.size(), -1),
        p_(program) {}

  const char* why = nullptr;

  bool step(const StepSlots& s) {
    const ScalarStep& k = *s.scalar;
    const std::vector<int>& args = *s.arguments;
    if (k.form == ScalarForm::None) return fail("an operation it does not compute");
    if (!k.zero_d_float) return fail("a tensor that is not a 0-d float32");
    switch (k.form) {
      case ScalarForm::Add:
      case ScalarForm::Sub:
      case ScalarForm::Mul:
      case ScalarForm::Div:
      case ScalarForm::Rsub:
      case ScalarForm::Pow:
      case ScalarForm::Unary: return forward(k, args, s.results, s.grad_mode);
      case ScalarForm::AddInPlace:
      case ScalarForm::SubInPlace:
      case ScalarForm::MulInPlace:
      case ScalarForm::DivInPlace: return in_place(k, args, s.results, s.grad_mode);
      case ScalarForm::GradGet: return grad_get(args, s.results);
      case ScalarForm::GradSet: return grad_set(args);
      case ScalarForm::Backward: return backward(k, args);
      case ScalarForm::None: break;
    }
    return fail("an operation it does not compute");
  }

  bool finish(const std::vector<int>& outputs) {
    std::vector<int> made(entities_.size(), -1);
    auto make = [&](int e) {
      if (made[e] < 0) {
        made[e] = static_cast<int>(p_.made.size());
        p_.made.push_back({entities_[e].reg, entities_[e].requires_grad, entities_[e].versions});
      }
      return made[e];
    };
    for (int slot : outputs) {
      const int e = entity(slot);
      if (e < 0) return false;
      const Entity& out = entities_[e];
      if (out.slot >= 0) {
        p_.outputs.push_back({out.slot, -1});
        continue;
      }
      // Its node must be spent: eagerly, a backward() through it would reach the graph, which the
      // lowered program does not keep.
      if (out.requires_grad && !nodes_[out.node].released)
        return fail("an output whose graph a backward() outside the function could use");
      p_.outputs.push_back({-1, make(e)});
    }
    for (const Entity& e : entities_) {
      if (e.slot < 0) continue;
      if (e.versions) p_.writes.push_back({e.slot, e.reg, e.versions});
      if (e.grad_use != Entity::kUntouched) p_.grads.push_back({e.slot, e.grad < 0 ? -1 : make(e.grad)});
    }
    for (Read& read : p_.reads)
      read.grad_must_be_none = entities_[slot_entity_[read.slot]].grad_use == Entity::kReadFirst;
    std::sort(p_.constant_storages.begin(), p_.constant_storages.end());
    return true;
  }

 private:
  bool fail(const char* reason) {
    why = reason;
    return false;
  }
  int no_entity(const char* reason) {
    why = reason;
    return -1;
  }

  int new_register() { return p_.registers++; }

  int emit(Code code, int a, int b = -1, float number = 0, VecUnary unary = VecUnary::Count) {
    Operation op{code, new_register(), a, b, number, nullptr};
    if (code == Code::Unary) op.unary = kernels().of<float>().unary[static_cast<int>(unary)];
    p_.ops.push_back(op);
    return op.out;
  }

  int new_entity(int reg, bool requires_grad = false, int node = -1) {
    Entity e;
    e.reg = reg;
    e.requires_grad = requires_grad;
    e.node = node;
    entities_.push_back(e);
    return static_cast<int>(entities_.size()) - 1;
  }

  // The entity a slot holds; a tensor made before the call becomes one (and a read) when first used.
  // -1 (with `why`) for one the program cannot read.
  int entity(int slot) {
    if (slot < 0) return no_entity("an undefined tensor");
    if (slot_entity_[slot] >= 0) return slot_entity_[slot];
    if (!made_before_[slot]) return no_entity("a step's result it did not follow");
    const Tensor& t = tensors_[slot];
    if (!t || !t->shape.empty() || t->dtype != DType::Float32 || t->view_base)
      return no_entity("a tensor that is not a 0-d float32");
    if (t->grad_fn) return no_entity("a tensor with a history made before the call");
    const Storage* storage = t->storage.get();
    if (!storages_.insert(storage).second) return no_entity("tensors that share memory");
    const bool constant = slot >= inputs_;
    if (constant) p_.constant_storages.push_back(storage);
    const int e = new_entity(new_register(), t->requires_grad());
    entities_[e].slot = slot;
    p_.reads.push_back({slot, entities_[e].reg, t->requires_grad(), false, constant ? storage : nullptr});
    slot_entity_[slot] = e;
    return e;
  }

  // e's .grad is read or added into: false (with `why`) if it is the .grad the call started with
  // and that was set at capture (the lowering follows only gradients it made).
  bool reads_grad(Entity& e) {
    if (e.grad_use == Entity::kUntouched) {
      if (e.slot >= 0 && had_grad_[e.slot]) return fail("a .grad set before the call");
      e.grad_use = Entity::kReadFirst;
    }
    return true;
  }

  // The node an op's gradient for `e` goes to (gradient_edge), -1 if it needs none.
  int edge_to(int e) {
    Entity& x = entities_[e];
    if (!x.requires_grad) return -1;
    if (x.node >= 0) return x.node;
    if (x.accumulator < 0) {
      nodes_.emplace_back();
      nodes_.back().leaf = e;
      x.accumulator = static_cast<int>(nodes_.size()) - 1;
    }
    return x.accumulator;
  }

  void save(SymbolicNode& node, int i, int e, int reg) {
    node.saved[i] = reg;
    node.saved_entities[i] = e;
    ++entities_[e].live_saves;
  }

  static bool has_backward(VecUnary u) {
    return u == VecUnary::Relu || u == VecUnary::Neg || u == VecUnary::Tanh || u == VecUnary::Exp ||
           u == VecUnary::Sigmoid || u == VecUnary::Log;
  }
  // What a unary function's node saves: its input (log), its result (the others but neg).
  static bool saves_input(const ScalarStep& k) {
    return k.form == ScalarForm::Pow || (k.form == ScalarForm::Unary && k.unary == VecUnary::Log);
  }
  static bool saves_result(const ScalarStep& k) {
    return k.form == ScalarForm::Unary && !saves_input(k) && k.unary != VecUnary::Neg;
  }
  // A number as a backward formula's 0-d tensor of it holds it (full(): the double rounded to float).
  static float as_tensor(double value) { return Scalar::from_float(value).to<float>(); }

  // The value of a out-of-place or in-place op: binary_map/scalar_map's float arithmetic, or the kernel.
  int compute(const ScalarStep& k, int a, int b) {
    const int x = entities_[a].reg, y = b >= 0 ? entities_[b].reg : -1;
    switch (k.form) {
      case ScalarForm::Add:
      case ScalarForm::AddInPlace:
        return k.with_number ? emit(Code::AddNumber, x, -1, k.number) : emit(Code::Add, x, y);
      case ScalarForm::Sub:
      case ScalarForm::SubInPlace:
        return k.with_number ? emit(Code::SubNumber, x, -1, k.number) : emit(Code::Sub, x, y);
      case ScalarForm::Mul:
      case ScalarForm::MulInPlace:
        return k.with_number ? emit(Code::MulNumber, x, -1, k.number) : emit(Code::Mul, x, y);
      case ScalarForm::Div:
      case ScalarForm::DivInPlace:
        return k.with_number ? emit(Code::DivNumber, x, -1, k.number) : emit(Code::Div, x, y);
      case ScalarForm::Rsub: return emit(Code::NumberSub, x, -1, k.number);
      case ScalarForm::Pow: return emit(Code::PowNumber, x, -1, k.number);
      default: return emit(Code::Unary, x, -1, 0, k.unary);
    }
  }

  // The operands: a tensor and a tensor or a number (binary), or one tensor (unary).
  bool operands(const ScalarStep& k, const std::vector<int>& args, int& a, int& b) {
    const size_t tensors = k.form == ScalarForm::Unary || k.with_number ? 1 : 2;
    if (args.size() != tensors || ((k.form == ScalarForm::Rsub || k.form == ScalarForm::Pow) && !k.with_number))
      return fail("an operation it does not compute");
    a = entity(args[0]);
    b = tensors == 2 ? entity(args[1]) : -1;
    return a >= 0 && (tensors == 1 || b >= 0);
  }

  bool forward(const ScalarStep& k, const std::vector<int>& args, const std::vector<int>& results, bool grad_mode) {
    int a, b;
    if (!operands(k, args, a, b)) return false;
    if (results.size() != 1 || results[0] < 0 || slot_entity_[results[0]] >= 0 || made_before_[results[0]])
      return fail("an operation it does not compute");
    const int out = compute(k, a, b);
    const bool records = grad_mode && (entities_[a].requires_grad || (b >= 0 && entities_[b].requires_grad));
    int node_index = -1;
    if (records) {
      if (k.form == ScalarForm::Unary && !has_backward(k.unary)) return fail("an operation it does not compute");
      nodes_.emplace_back();
      node_index = static_cast<int>(nodes_.size()) - 1;
      const int edge_a = edge_to(a), edge_b = b >= 0 ? edge_to(b) : -1;
      SymbolicNode& node = nodes_[node_index];
      node.form = k.form;
      node.unary = k.unary;
      node.with_number = k.with_number;
      node.value = k.value;
      node.edges[0] = edge_a;
      node.edges[1] = edge_b;
      // What apply() reads, as the op saved it (ops/elementwise.cpp, ops/unary.cpp).
      if (k.form == ScalarForm::Mul && b >= 0) {
        if (edge_b >= 0) save(node, 0, a, entities_[a].reg);
        if (edge_a >= 0) save(node, 1, b, entities_[b].reg);
      } else if (k.form == ScalarForm::Div && b >= 0) {
        if (edge_b >= 0) save(node, 0, a, entities_[a].reg);
        save(node, 1, b, entities_[b].reg);
      } else if (saves_input(k)) {
        save(node, 0, a, entities_[a].reg);
      }
    }
    const int e = new_entity(out, records, node_index);
    if (records && saves_result(k)) save(nodes_[node_index], 0, e, out);
    slot_entity_[results[0]] = e;
    return true;
  }

  bool in_place(const ScalarStep& k, const std::vector<int>& args, const std::vector<int>& results, bool grad_mode) {
    int a, b;
    if (!operands(k, args, a, b)) return false;
    if (results.size() != 1 || results[0] != args[0]) return fail("an operation it does not compute");
    Entity& self = entities_[a];
    if (grad_mode && (self.requires_grad || (b >= 0 && entities_[b].requires_grad)))
      return fail("an in-place operation recorded for backward");
    if (self.live_saves > 0) return fail("an in-place write to a tensor a backward would read");
    self.reg = compute(k, a, b);
    ++self.versions;
    return true;
  }

  bool grad_get(const std::vector<int>& args, const std::vector<int>& results) {
    if (args.size() != 1 || results.size() != 1) return fail("an operation it does not compute");
    const int e = entity(args[0]);
    if (e < 0) return false;
    Entity& x = entities_[e];
    if (!reads_grad(x)) return false;
    const int result = results[0];
    if (x.grad < 0) return result < 0 ? true : fail("a .grad it did not follow");
    if (result < 0 || (slot_entity_[result] >= 0 && slot_entity_[result] != x.grad) || made_before_[result])
      return fail("a .grad it did not follow");
    slot_entity_[result] = x.grad;
    return true;
  }

  bool grad_set(const std::vector<int>& args) {
    if (args.size() != 2 || args[1] >= 0) return fail("a .grad set to a tensor");
    const int e = entity(args[0]);
    if (e < 0) return false;
    Entity& x = entities_[e];
    if (x.grad_use == Entity::kUntouched) x.grad_use = Entity::kSetFirst;
    x.grad = -1;
    return true;
  }

  // The gradients node `n` sends along its edges for gradient register g (its apply()).
  std::pair<int, int> apply(const SymbolicNode& n, int g) {
    const bool need_a = n.edges[0] >= 0, need_b = n.edges[1] >= 0;
    switch (n.form) {
      case ScalarForm::Add: return {g, g};
      case ScalarForm::Sub: return {g, need_b ? emit(Code::Unary, g, -1, 0, VecUnary::Neg) : -1};
      case ScalarForm::Rsub: return {emit(Code::Unary, g, -1, 0, VecUnary::Neg), -1};
      case ScalarForm::Mul:
        if (n.with_number) return {emit(Code::MulNumber, g, -1, as_tensor(n.value)), -1};
        return {need_a ? emit(Code::Mul, g, n.saved[1]) : -1, need_b ? emit(Code::Mul, g, n.saved[0]) : -1};
      case ScalarForm::Div: {
        if (n.with_number) return {emit(Code::DivNumber, g, -1, as_tensor(n.value)), -1};
        const int ga = need_a ? emit(Code::Div, g, n.saved[1]) : -1;
        if (!need_b) return {ga, -1};
        // -(g * ((a / b) / b))
        const int quotient = emit(Code::Div, emit(Code::Div, n.saved[0], n.saved[1]), n.saved[1]);
        return {ga, emit(Code::Unary, emit(Code::Mul, g, quotient), -1, 0, VecUnary::Neg)};
      }
      case ScalarForm::Pow: {  // g * (x ** (p - 1) * p); 0 for p == 0
        if (n.value == 0) return {constant(0.0f), -1};
        const int power = emit(Code::PowNumber, n.saved[0], -1, as_tensor(n.value - 1));
        return {emit(Code::Mul, g, emit(Code::MulNumber, power, -1, as_tensor(n.value))), -1};
      }
      default: break;
    }
    const int y = n.saved[0];
    switch (n.unary) {
      case VecUnary::Relu: return {emit(Code::ReluGrad, g, y), -1};
      case VecUnary::Neg: return {emit(Code::Unary, g, -1, 0, VecUnary::Neg), -1};
      case VecUnary::Exp: return {emit(Code::Mul, g, y), -1};
      case VecUnary::Log: return {emit(Code::Div, g, y), -1};  // y: the input
      case VecUnary::Tanh: return {emit(Code::Mul, g, emit(Code::NumberSub, emit(Code::Mul, y, y), -1, 1.0f)), -1};
      default:  // Sigmoid: g * (y * (1 - y))
        return {emit(Code::Mul, g, emit(Code::Mul, y, emit(Code::NumberSub, y, -1, 1.0f))), -1};
    }
  }

  void release(SymbolicNode& n) {
    n.released = true;
    for (int e : n.saved_entities)
      if (e >= 0) --entities_[e].live_saves;
  }

  // root.backward(): the engine's pass (autograd/engine.cpp) over the nodes recorded so far.
  bool backward(const ScalarStep& k, const std::vector<int>& args) {
    if (args.size() != 1 || k.flag_count != 2) return fail("an operation it does not compute");
    if (k.flags) return fail("a backward() that keeps the graph");
    const int root = entity(args[0]);
    if (root < 0) return false;
    const Entity& r = entities_[root];
    if (!r.requires_grad || r.node < 0) return fail("a backward() from a leaf");
    // The nodes reachable from the root; nodes are numbered in creation (tape) order.
    std::vector<char> reached(nodes_.size(), 0);
    std::vector<int> stack{r.node};
    reached[r.node] = 1;
    while (!stack.empty()) {
      const SymbolicNode& n = nodes_[stack.back()];
      stack.pop_back();
      if (n.released) return fail("a backward() through a graph it already went through");
      for (int next : n.edges)
        if (next >= 0 && !reached[next]) {
          reached[next] = 1;
          stack.push_back(next);
        }
    }
    std::vector<int> inbox(nodes_.size(), -1);
    auto arrive = [&](int node, int g) { inbox[node] = inbox[node] < 0 ? g : emit(Code::Add, inbox[node], g); };
    arrive(r.node, constant(1.0f));  // ones_like(root)
    // Latest first; the sinks (AccumulateGrad) after the nodes that feed them, which is all values see.
    for (size_t i = nodes_.size(); i-- > 0;) {
      SymbolicNode& n = nodes_[i];
      if (!reached[i] || n.leaf >= 0 || inbox[i] < 0) continue;
      auto [ga, gb] = apply(n, inbox[i]);
      release(n);
      if (n.edges[0] >= 0 && ga >= 0) arrive(n.edges[0], ga);
      if (n.edges[1] >= 0 && gb >= 0) arrive(n.edges[1], gb);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!reached[i] || nodes_[i].leaf < 0 || inbox[i] < 0) continue;
      Entity& leaf = entities_[nodes_[i].leaf];
      if (!reads_grad(leaf)) return false;
      if (leaf.grad < 0) {  // .grad = the incoming gradient
        const int g = new_entity(inbox[i]);
        entities_[nodes_[i].leaf].grad = g;
      } else {  // .grad += it, in place
        Entity& grad = entities_[leaf.grad];
        if (grad.live_saves > 0) return fail("an in-place write to a tensor a backward would read");
        grad.reg = emit(Code::Add, grad.reg, inbox[i]);
        ++grad.versions;
      }
    }
    return true;
  }

  int constant(float value) {
    const int reg = new_register();
    p_.numbers.emplace_back(reg, value);
    return reg;
  }

  const int inputs_;
  const std::vector<Tensor>& tensors_;
  const std::vector<char>& made_before_;
  const std::vector<char>& had_grad_;
  std::vector<int> slot_entity_;
  std::vector<Entity> entities_;
  std::vector<SymbolicNode> nodes_;
  std::unordered_set<const Storage*> storages_;
  ScalarProgram& p_;
};

}  // namespace

ScalarProgramPtr lower_scalar_program(const std::vector<StepSlots>& steps, int inputs,
                                      const std::vector<Tensor>& slot_tensors, const std::vector<char>& made_before,
                                      const std::vector<char>& had_grad, const std::vector<int>& outputs,
                                      std::string& why) {
  ScalarProgramPtr program(new ScalarProgram);
  Lowering lowering(inputs, slot_tensors, made_before, had_grad, *program);
  bool ok = true;
  for (const StepSlots& s : steps)
    if (!(ok = lowering.step(s))) break;
  if (ok) ok = lowering.finish(outputs);
  if (ok) return program;
  why = lowering.why ? lowering.why : "";
  return nullptr;
}

bool scalar_program_applies(const ScalarProgram& p, CallTensors tensors) {
  if (anomaly_enabled()) return false;  // its checks of each node's gradients
  AccumulatorsHeld held;                // a hook may be on a leaf's AccumulateGrad, kept alive by a graph
  for (const Read& read : p.reads) {
    const Tensor& t = tensors[read.slot];
    if (!t || !t->shape.empty() || t->dtype != DType::Float32 || t->view_base || t->grad_fn ||
        t->requires_grad() != read.requires_grad)
      return false;
    if (read.storage ? t->storage.get() != read.storage
                     : std::binary_search(p.constant_storages.begin(), p.constant_storages.end(), t->storage.get()))
      return false;
    if (read.requires_grad && (t->hooks || (t->grad_accumulator && t->grad_accumulator->hooks))) return false;
    if (read.grad_must_be_none && t->grad) return false;
  }
  return true;
}

std::vector<float> load_scalar_program(const ScalarProgram& p, CallTensors tensors) {
  std::vector<float> registers(p.registers);
  for (const Read& read : p.reads) registers[read.reg] = value_of(tensors[read.slot]);
  for (auto [reg, value] : p.numbers) registers[reg] = value;
  return registers;
}

std::vector<Tensor> run_scalar_program(const ScalarProgram& p, CallTensors tensors) {
  std::vector<float> registers = load_scalar_program(p, tensors);
  {
    py::gil_scoped_release no_gil;
    execute(p.ops, registers.data());
  }
  for (const Write& w : p.writes) {
    const Tensor& t = tensors[w.slot];
    *t->data_as<float>() = registers[w.reg];
    bump_versions(t, w.versions);
  }
  std::vector<Tensor> made;
  made.reserve(p.made.size());
  for (const Made& m : p.made) {
    Tensor& t = made.emplace_back(empty({}, DType::Float32));
    *t->data_as<float>() = registers[m.reg];
    bump_versions(t, m.versions);
    if (m.requires_grad) t->grad_fn = NodeRef(make_node<CompiledFunctionBackward>());
  }
  for (const GradWrite& g : p.grads) tensors[g.slot]->grad = g.made < 0 ? Tensor() : made[g.made];
  std::vector<Tensor> out;
  out.reserve(p.outputs.size());
  for (const Output& o : p.outputs) out.push_back(o.made < 0 ? tensors[o.slot] : made[o.made]);
  return out;
}

bool scalar_program_matches(const ScalarProgram& p, std::vector<float> registers, CallTensors tensors,
                            const std::vector<Tensor>& outputs) {
  execute(p.ops, registers.data());
  auto holds = [](const Tensor& t, float value) {
    return t && t->shape.empty() && t->dtype == DType::Float32 && same_value(value_of(t), value);
  };
  // What the program leaves in each tensor it read: its last value (a write's), or the value loaded.
  std::unordered_map<int, int> last;
  for (const Read& read : p.reads) last[read.slot] = read.reg;
  for (const Write& w : p.writes) last[w.slot] = w.reg;
  for (auto [slot, reg] : last)
    if (!holds(tensors[slot], registers[reg])) return false;
  for (const GradWrite& g : p.grads) {
    const Tensor& grad = tensors[g.slot]->grad;
    if (g.made < 0 ? bool(grad) : !holds(grad, registers[p.made[g.made].reg])) return false;
  }
  if (outputs.size() != p.outputs.size()) return false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = p.outputs[i];
    if (o.made < 0) {
      if (outputs[i].get() != tensors[o.slot].get()) return false;
    } else if (!holds(outputs[i], registers[p.made[o.made].reg]) ||
               outputs[i]->requires_grad() != p.made[o.made].requires_grad) {
      return false;
    }
  }
  return true;
}

std::pair<size_t, size_t> scalar_program_size(const ScalarProgram& p) {
  return {static_cast<size_t>(p.registers), p.ops.size()};
}

}  // namespace capture
}  // namespace fg
