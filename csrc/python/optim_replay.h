// The optimizer calls a compiled program replays in C++ rather than by calling the Python method
// again (capture.cpp's host calls): Adam/AdamW's and SGD's step() and zero_grad(set_to_none=True).
// A replay reads the optimizer as the Python method would then (its param_groups, learning rates,
// step counts, state tensors, hooks) and runs the same fused kernels, so a scheduler's step between
// replays takes effect and the bits are eager's; where the Python method would do anything else
// (a hook, a parameter without state yet, a dtype the fused kernels do not take, an option of an
// unexpected type) it returns false having changed nothing, and the replay calls the method.
#pragma once
#include "python/bindings.h"

namespace fg::capture {

struct FusedUpdate {
  enum Kind { AdamStep, SgdStep, ZeroGrad } kind;
  py::object optimizer;
  py::object type;                           // the optimizer's class at capture
  unsigned int type_version;                  // its version tag then: a method patched since changes it
  py::object global_pre, global_post;        // the step hooks of every optimizer (dicts)
};

// What python/fastgrad/optim/optimizer.py gives at capture: (kind name, optimizer, global pre-step
// hooks, global post-step hooks).
FusedUpdate fused_update_of(py::handle description);

// With the GIL; releases it around the kernels. False: nothing was done, call the Python method.
bool replay_fused_update(const FusedUpdate& update);

}  // namespace fg::capture
