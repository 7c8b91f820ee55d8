// A captured program on 0-d float32 values (micrograd's: thousands of scalar ops, their backward and
// an update of each parameter) lowered to a list of float operations on registers. Replaying the
// steps costs a tensor, a node and a kernel call per op; the lowered program does the arithmetic
// alone, on values loaded from the program's tensors, and writes back what the steps would leave:
// the parameters' values and versions, the leaves' .grad, the outputs.
//
// Lowering follows the steps as eager execution runs them: each op's forward value, the node it would
// record (whether its result requires grad), and at a backward() step the engine's order (nodes by
// decreasing tape position, gradients summed in arrival order) and each node's formula as its apply()
// computes it, operation by operation (the same float rounding; the unary functions by the same
// kernel). It gives up (the steps replay as before) on anything else: an op it does not know, a
// tensor that is not 0-d float32, hooks, a backward that keeps the graph, an output whose graph a
// later backward could still use. A replay checks the tensors it reads are still as the lowering
// saw them (leaves, no .grad, no hooks, the same storage); the first replay also runs the steps and
// compares every value written, bit for bit, before the lowered program is used.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernel_table.h"

namespace fg::capture {

// What a binding's op is to the lowering (capture.h's Tagged): binary arithmetic with a tensor or a
// number, in place or not, a unary function, reads and writes of .grad, backward().
enum class ScalarForm : uint8_t {
  None,
  Add,
  Sub,
  Mul,
  Div,
  Rsub,  // number - tensor
  Pow,   // tensor ** number
  AddInPlace,
  SubInPlace,
  MulInPlace,
  DivInPlace,
  Unary,  // ScalarStep::unary
  GradGet,
  GradSet,
  Backward,  // flags: retain_graph, create_graph
};

// A recorded step as the lowering sees it.
struct ScalarStep {
  ScalarForm form = ScalarForm::None;
  VecUnary unary = VecUnary::Count;
  bool with_number = false;  // the op's second operand is a Python number:
  float number = 0;          // as the forward computes with it
  double value = 0;          // as the node keeps it
  uint8_t flags = 0, flag_count = 0;  // the op's bool arguments, first in bit 0
  bool zero_d_float = false;          // every defined tensor argument and result is a 0-d float32
};

// A step with its tensors' slots (-1: undefined), as the program records it.
struct StepSlots {
  const ScalarStep* scalar;
  const std::vector<int>* arguments;
  std::vector<int> results;
  bool grad_mode;
};

// A call's tensors made before it, by slot: its inputs, then the program's constants.
struct CallTensors {
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& frame_template;
  const Tensor& operator[](int slot) const {
    return slot < static_cast<int>(inputs.size()) ? inputs[slot] : frame_template[slot];
  }
};

class ScalarProgram;
struct ScalarProgramDeleter {
  void operator()(ScalarProgram* p) const;
};
using ScalarProgramPtr = std::unique_ptr<ScalarProgram, ScalarProgramDeleter>;

// The lowered program of `steps`, or null with `why` set. Slots below `inputs` are the call's inputs;
// `slot_tensors`: every slot's tensor as the capture saw it first; `made_before[slot]`: an input or
// constant (not a step's result); `had_grad`: its .grad was set when first seen.
ScalarProgramPtr lower_scalar_program(const std::vector<StepSlots>& steps, int inputs,
                                      const std::vector<Tensor>& slot_tensors, const std::vector<char>& made_before,
                                      const std::vector<char>& had_grad, const std::vector<int>& outputs,
                                      std::string& why);

// Whether `program` can replay a call on `tensors` as it was lowered.
bool scalar_program_applies(const ScalarProgram& program, CallTensors tensors);
// One replay, with the GIL (released around the arithmetic); the outputs.
std::vector<Tensor> run_scalar_program(const ScalarProgram& program, CallTensors tensors);

// The first replay's check: the registers loaded before the steps ran, then, after they ran, whether
// the lowered program computes what they left (the tensors, their .grad, `outputs`), bit for bit.
std::vector<float> load_scalar_program(const ScalarProgram& program, CallTensors tensors);
bool scalar_program_matches(const ScalarProgram& program, std::vector<float> registers, CallTensors tensors,
                            const std::vector<Tensor>& outputs);

// The report: (values, operations).
std::pair<size_t, size_t> scalar_program_size(const ScalarProgram& program);

}  // namespace fg::capture
