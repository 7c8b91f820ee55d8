"""fastgrad.autograd.functional: derivatives of whole functions, as torch.autograd.functional.

    from fastgrad.autograd.functional import hessian, hvp
    hessian(lambda x: (x ** 3).sum(), x)     # diag(6 x)
    hvp(lambda x: (x ** 3).sum(), x, v)      # (f(x), H v)

Every function is built on autograd.grad: jacobian takes one backward pass per output element;
hessian is the jacobian of the jacobian; vjp is one backward pass; jvp uses the double-backward
trick (the vector-Jacobian product is linear in its vector u, so the gradient of u -> J^T u,
seeded with v, is J v); vhp differentiates v . grad f; hvp applies the double-backward trick to
the Hessian. Arguments, return conventions (a tensor in, a tensor out; tuples in, tuples out),
`create_graph` and `strict` are PyTorch's. There is no forward-mode AD and no vmap, so
vectorize=True and the "forward-mode" strategies are NotImplementedError.
"""

from .. import _prims
from .._factories import zeros_like
from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .gradients import grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

Tensor = _prims.Tensor


# ---- argument handling, as torch.autograd.functional's helpers


def _as_tuple(value, arg_name, fn_name):
    """(whether `value` was a tuple, its tensors as a tuple)."""
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for i, element in enumerate(values):
        if not isinstance(element, Tensor):
            what = f"the value at index {i} has" if is_tuple else f"the given {arg_name} has"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                f"{what} type {type(element)}."
            )
    return is_tuple, values


def _tuple_postprocess(result, was_tuple):
    """Unwraps the results the caller gave as single tensors. `was_tuple` is a bool, or a pair
    (outputs, inputs) for a nested result (one tuple per output, one entry per input)."""
    if isinstance(was_tuple, tuple):
        outputs_tuple, inputs_tuple = was_tuple
        if not inputs_tuple:
            result = tuple(per_output[0] for per_output in result)
        return result if outputs_tuple else result[0]
    return result if was_tuple else result[0]


def _grad_preprocess(tensors, create_graph, need_graph):
    """The tensors the function is called on: with create_graph, a differentiable alias of those
    that require grad (so that the result can be differentiated with respect to the caller's
    tensors); otherwise detached copies that require grad if `need_graph`."""
    return tuple(
        t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(need_graph) for t in tensors
    )


def _grad_postprocess(tensors, create_graph):
    """Without create_graph, the results are handed back detached."""
    if create_graph:
        return tensors
    return tuple(
        _grad_postprocess(t, False) if isinstance(t, tuple) else None if t is None else t.detach() for t in tensors
    )


def _validate_v(v, like, like_is_tuple):
    if len(v) != len(like):
        if like_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (v_i, like_i) in enumerate(zip(v, like)):
        if v_i.size() != like_i.size():
            prefix = f"Entry {i} in " if like_is_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {like_i.size()} but got {v_i.size()}.")


_INDEPENDENT = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed in "
    "a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
    "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
    "input {i} is independent of the input. This is not allowed in strict mode. You should ensure that "
    "your function is twice differentiable and that the jacobian depends on the inputs (this would be "
    "violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is independent of the input. This "
    "is not allowed in strict mode. You should ensure that your function is thrice differentiable and that "
    "the hessian depends on the inputs.",
}


def _check_requires_grad(tensors, kind, strict):
    """In strict mode, every one of `tensors` (of the given kind) must depend on the inputs."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is not "
                "allowed in strict mode."
            )
        if not t.requires_grad:
            raise RuntimeError(_INDEPENDENT[kind].format(i=i))


_NO_GRADIENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
    "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
    "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. "
    "This is not allowed in strict mode as it prevents from using the double backward trick to "
    "replace forward mode AD.",
}


def _fill_in_zeros(grads, like, strict, create_graph, stage):
    """Zeros for the gradients that did not arrive (an error in strict mode)."""
    result = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_NO_GRADIENT[stage].format(i=i))
            g = zeros_like(like[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This is not "
                "allowed in strict mode when create_graph=True."
            )
        result.append(g)
    return tuple(result)


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that require grad (None for every input when none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(out, g) for out, g in zip(outputs, grad_outputs) if out is not None and out.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad(
        [out for out, _ in pairs],
        inputs,
        [g for _, g in pairs],
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )


def _check_vectorize(vectorize):
    if vectorize:
        raise NotImplementedError("vectorize=True (batched gradients through vmap) is not supported yet")


def _single_element_output(outputs, is_tuple, fn_name):
    if is_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")


def _prepare_v(v, like, like_is_tuple, fn_name, create_graph, single_message):
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(single_message)
        return None
    v = _as_tuple(v, "v", fn_name)[1]
    v = _grad_preprocess(v, create_graph, need_graph=False)
    _validate_v(v, like, like_is_tuple)
    return v


_V_FOR_SINGLE_INPUT = (
    "The vector v can only be None if the input to the user-provided function is a single Tensor with a single element."
)


# ---- the functions


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product, by one backward pass."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _prepare_v(
            v,
            outputs,
            is_outputs_tuple,
            "vjp",
            create_graph,
            "The vector v can only be None if the user-provided function returns a single Tensor with a "
            "single element.",
        )
    with set_grad_enabled(create_graph or is_grad_enabled()):
        result = _fill_in_zeros(_autograd_grad(outputs, inputs, v, create_graph), inputs, strict, create_graph, "back")
    return (
        _tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
        _tuple_postprocess(_grad_postprocess(result, create_graph), is_inputs_tuple),
    )


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-backward trick."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, "jvp", create_graph, _V_FOR_SINGLE_INPUT)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        # u -> J^T u is linear, so u's value never reaches the result: zeros (no inf or NaN) will do.
        u = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, u, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        result = _fill_in_zeros(
            _autograd_grad(grad_inputs, u, v, create_graph), outputs, strict, create_graph, "back_trick"
        )
    return (
        _tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
        _tuple_postprocess(_grad_postprocess(result, create_graph), is_outputs_tuple),
    )


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func: for output i and input j, a tensor of shape out_i.shape + in_j.shape
    (unwrapped where func or the inputs give a single tensor)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        raise NotImplementedError('jacobian(strategy="forward-mode"): fastgrad has no forward-mode AD')
    _check_vectorize(vectorize)
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        result = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]  # per input, the gradient of each element of out
            flat = out.reshape(-1)
            for k in range(out.numel()):
                grads = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
                for j, (g, x) in enumerate(zip(grads, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of input "
                                f"{j}. This is not allowed in strict mode."
                            )
                        g = zeros_like(x)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(
                            f"The jacobian of the user-provided function is independent of input {j}. "
                            "This is not allowed in strict mode when create_graph=True."
                        )
                    rows[j].append(g)
            jacobians = (_prims.stack(r, 0).view(tuple(out.shape) + tuple(x.shape)) for r, x in zip(rows, inputs))
            result.append(tuple(jacobians))
        result = _grad_postprocess(tuple(result), create_graph)
    return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function returning a single-element tensor: for inputs i and j, a tensor of
    shape in_i.shape + in_j.shape (a single tensor for a single input)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*args):
        out = func(*args)
        is_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outputs, "outputs", strict)
        _single_element_output(outputs, is_tuple, "hessian")
        return out.squeeze()

    def jacobian_func(*args):
        jac = jacobian(scalar_func, args, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(
        jacobian_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(result, (is_inputs_tuple, is_inputs_tuple))


def _scalar_func_and_gradient(func, inputs, v, create_graph, strict, fn_name):
    """Shared by vhp and hvp: the prepared inputs and v, func's single-element output and its
    gradient with respect to the inputs (recorded)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
    v = _prepare_v(v, inputs, is_inputs_tuple, fn_name, create_graph, _V_FOR_SINGLE_INPUT)
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    _single_element_output(outputs, is_outputs_tuple, fn_name)
    gradient = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(gradient, "jacobian", strict)
    return is_inputs_tuple, inputs, v, outputs, gradient


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a function returning a single-element tensor."""
    with enable_grad():
        is_inputs_tuple, inputs, v, outputs, gradient = _scalar_func_and_gradient(
            func, inputs, v, create_graph, strict, "vhp"
        )
    with set_grad_enabled(create_graph or is_grad_enabled()):
        result = _fill_in_zeros(
            _autograd_grad(gradient, inputs, v, create_graph), inputs, strict, create_graph, "double_back"
        )
    return (
        _grad_postprocess(outputs, create_graph)[0],
        _tuple_postprocess(_grad_postprocess(result, create_graph), is_inputs_tuple),
    )


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a function returning a single-element tensor, by the double-backward
    trick (equal to vhp, as the Hessian is symmetric, but computed as PyTorch does)."""
    with enable_grad():
        is_inputs_tuple, inputs, v, outputs, gradient = _scalar_func_and_gradient(
            func, inputs, v, create_graph, strict, "hvp"
        )
        u = tuple(zeros_like(x, requires_grad=True) for x in inputs)
        double_back = _autograd_grad(gradient, inputs, u, create_graph=True)
        _check_requires_grad(gradient, "hessian", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        result = _fill_in_zeros(
            _autograd_grad(double_back, u, v, create_graph), inputs, strict, create_graph, "double_back_trick"
        )
    return (
        _grad_postprocess(outputs, create_graph)[0],
        _tuple_postprocess(_grad_postprocess(result, create_graph), is_inputs_tuple),
    )
