"""Finite-difference gradient check with PyTorch's ``torch.autograd.gradcheck`` semantics.

Written against nothing but the tensor API that fastgrad shares with PyTorch (methods on the
inputs: ``detach``, ``clone``, ``contiguous``, ``zero_``, ``requires_grad_``, ``numel``,
``reshape``, ``tolist``, ``item``, ``__getitem__``/``__setitem__`` with a tuple of ints,
``backward(gradient, retain_graph=True)`` and ``.grad``). It never names a tensor module, so the
same function checks fastgrad tensors, the pure-Python reference backend and real PyTorch tensors
(which is how this file itself is tested).

The analytical Jacobian is read row by row: one backward pass per output element with a unit
vector as the incoming gradient. The numerical Jacobian perturbs one input element at a time by
``+-eps`` and takes the central difference. Both are plain Python floats, so the comparison does
not depend on the backend's own comparison ops.

``gradgradcheck`` runs gradcheck on the function's gradients, computed with create_graph=True by
the ``autograd.grad`` of the library the tensors come from (torch, fastgrad or fastgrad.reference).
"""

import importlib
import random
import warnings

__all__ = ["gradcheck", "gradgradcheck"]

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_MAX_CHARS = 400  # of each Jacobian printed in a failure message


def _is_tensor(obj):
    return hasattr(obj, "requires_grad") and hasattr(obj, "detach") and hasattr(obj, "shape")


def _dtype_name(tensor):
    # 'torch.float32' / 'fastgrad.float32' -> 'float32'
    return str(tensor.dtype).split(".")[-1]


def _is_float(tensor):
    return _dtype_name(tensor) in _FLOAT_DTYPES


def _unravel(flat, shape):
    """Flat (row-major) position -> index usable with __getitem__/__setitem__."""
    if len(shape) == 0:
        return ...
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _as_tuple(obj):
    return tuple(obj) if isinstance(obj, (tuple, list)) else (obj,)


def _fresh_dense_copy(tensor):
    # clone() may keep an expanded (stride 0) layout; contiguous() then copies it, so that writing
    # one element of the copy changes exactly one logical element.
    return tensor.detach().clone().contiguous()


def _values(tensor):
    # clone(): a gradient PyTorch knows to be zero may be an "efficient zero tensor", with no memory to read
    return [float(v) for v in tensor.detach().clone().reshape(-1).tolist()]


def _float_outputs(outputs):
    return [(i, out) for i, out in enumerate(outputs) if _is_tensor(out) and _is_float(out)]


def _output_values(outputs):
    # Read the values at once: an output may alias the perturbed input (identity, views).
    return [(pos, _values(out)) for pos, out in _float_outputs(_as_tuple(outputs))]


def _numerical_jacobians(func, inputs, index, eps):
    """For input `index`: {output position: [[d out_k / d in_j for k] for j]}."""
    args = [x.detach() if _is_tensor(x) else x for x in inputs]
    perturbed = _fresh_dense_copy(inputs[index])
    args[index] = perturbed
    columns = {}
    for j in range(perturbed.numel()):
        at = _unravel(j, tuple(perturbed.shape))
        original = perturbed[at].item()
        perturbed[at] = original + eps
        plus = _output_values(func(*args))
        perturbed[at] = original - eps
        minus = _output_values(func(*args))
        perturbed[at] = original
        for (pos, values_p), (_, values_m) in zip(plus, minus):
            row = [(p - m) / (2 * eps) for p, m in zip(values_p, values_m)]
            columns.setdefault(pos, []).append(row)
    return columns


def _analytical_jacobians(func, inputs, checked):
    """Positions of the float outputs, whether any of them requires grad,
    {(output position, input position): [[d out_k / d in_j for k] for j]} and shape problems."""
    leaves = list(inputs)
    for i in checked:
        # A detached alias (same storage and strides) as a fresh leaf: gradients land in its .grad
        # even when the caller's input is a non-leaf, and the caller's .grad is left untouched.
        leaves[i] = inputs[i].detach().requires_grad_()
    outputs = _float_outputs(_as_tuple(func(*leaves)))
    jacobians, problems = {}, []
    for pos, out in outputs:
        n_out = out.numel()
        for i in checked:
            jacobians[(pos, i)] = [[0.0] * n_out for _ in range(leaves[i].numel())]
        if not out.requires_grad:
            continue  # output does not depend differentiably on any input: zero Jacobian
        for k in range(n_out):
            unit = _fresh_dense_copy(out)
            unit.zero_()
            unit[_unravel(k, tuple(out.shape))] = 1.0
            for i in checked:
                leaves[i].grad = None
            out.backward(unit, retain_graph=True)
            for i in checked:
                grad = leaves[i].grad
                if grad is None:
                    continue
                if tuple(grad.shape) != tuple(leaves[i].shape):
                    problems.append(
                        f"Gradient has incorrect shape for input {i}: got {tuple(grad.shape)}, "
                        f"expected {tuple(leaves[i].shape)}"
                    )
                    continue
                for j, value in enumerate(_values(grad)):
                    jacobians[(pos, i)][j][k] = value
    differentiable = any(out.requires_grad for _, out in outputs)
    return [pos for pos, _ in outputs], differentiable, jacobians, problems


def _format(jacobian):
    text = str([[round(v, 6) for v in row] for row in jacobian])
    return text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS] + " ..."


def _fail(message, raise_exception):
    if raise_exception:
        raise RuntimeError(message)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    ``inputs`` is a tensor or a tuple of arguments; every tensor among them with
    ``requires_grad=True`` is checked (use float64: lower precisions warn, as in PyTorch). ``func``
    returns a tensor or a tuple; its floating-point outputs are checked. The check passes when, for
    every Jacobian entry, ``|analytical - numerical| <= atol + rtol * |numerical|``.

    Returns True on success. On failure raises RuntimeError ("Jacobian mismatch for output i with
    respect to input j", counting, as PyTorch does, only floating-point outputs and inputs that
    require grad) with the largest error, or returns False when ``raise_exception=False``.
    """
    inputs = _as_tuple(inputs)
    checked = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    if not checked:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    for i in checked:
        if _dtype_name(inputs[i]) != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                UserWarning,
                stacklevel=2,
            )

    output_positions, differentiable, analytical, problems = _analytical_jacobians(func, inputs, checked)
    if problems:
        return _fail(problems[0], raise_exception)
    if not differentiable:
        # No output requires grad: as in PyTorch, the function must then be locally constant.
        for i in checked:
            columns = _numerical_jacobians(func, inputs, i, eps).values()
            if any(v != 0.0 for jacobian in columns for row in jacobian for v in row):
                return _fail("Numerical gradient for function expected to be zero", raise_exception)
        return True

    # As in PyTorch, "input n" / "output n" count only the inputs that require grad and the
    # floating-point outputs; the message also names the argument's position in `inputs`.
    for n_in, i in enumerate(checked):
        numerical = _numerical_jacobians(func, inputs, i, eps)
        for n_out, pos in enumerate(output_positions):
            num = numerical.get(pos, [])
            ana = analytical[(pos, i)]
            worst, where = -1.0, None
            for j, (num_row, ana_row) in enumerate(zip(num, ana)):
                for k, (n, a) in enumerate(zip(num_row, ana_row)):
                    error = abs(a - n)
                    if not error <= atol + rtol * abs(n):  # `not <=` also catches NaN
                        if where is None or not error <= worst:
                            worst, where = error, (j, k, n, a)
            if where is not None:
                j, k, n, a = where
                return _fail(
                    f"Jacobian mismatch for output {n_out} with respect to input {n_in},\n"
                    f"max error {worst:.6g} at input element {j}, output element {k}: "
                    f"numerical {n:.6g}, analytical {a:.6g} (atol={atol}, rtol={rtol}; "
                    f"the input is argument {i} of func)\n"
                    f"numerical:{_format(num)}\nanalytical:{_format(ana)}\n",
                    raise_exception,
                )
    return True


def _autograd_grad(tensor):
    """The autograd.grad of the library that `tensor`'s type belongs to: the nearest package, going
    up from the type's module (fastgrad._C -> fastgrad, torch), that has one."""
    name = type(tensor).__module__
    while name:
        grad = getattr(getattr(importlib.import_module(name), "autograd", None), "grad", None)
        if grad is not None:
            return grad
        name = name.rpartition(".")[0]
    raise TypeError(f"gradgradcheck: no autograd.grad for tensors of type {type(tensor).__name__}")


def _random_like(tensor, rng):
    """A leaf of tensor's shape and dtype, uniform in [-1, 1), that requires grad."""
    values = _fresh_dense_copy(tensor)
    for j in range(values.numel()):
        values[_unravel(j, tuple(values.shape))] = rng.uniform(-1.0, 1.0)
    return values.requires_grad_()


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Check the second derivatives of ``func`` at ``inputs`` against finite differences of its
    gradients, as ``torch.autograd.gradgradcheck``: gradcheck of the function that maps (inputs,
    grad_outputs) to the gradients of ``func``'s outputs that require grad, weighted by
    ``grad_outputs``, with respect to the inputs that require grad (computed with
    create_graph=True). ``grad_outputs`` (one per such output) default to random tensors in
    [-1, 1) that require grad, so that the check covers them too.

    Returns True on success; on failure raises RuntimeError, or returns False when
    ``raise_exception=False``. The messages count inputs and outputs as gradcheck's do, over the
    inputs followed by the grad_outputs.
    """
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = [out for out in _as_tuple(func(*inputs)) if _is_tensor(out) and out.requires_grad]
        rng = random.Random(0)  # the same check on every run
        grad_outputs = tuple(_random_like(out, rng) for out in outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_grads = len(grad_outputs)
    differentiable_inputs = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]

    def gradients(*args):
        # gradcheck hands in fresh leaves that require grad, or detached copies (finite
        # differences): these become leaves too, sharing their memory, so that the gradients can
        # be computed at every perturbed point.
        args = list(args)
        for i in differentiable_inputs:
            args[i] = args[i] if args[i].requires_grad else args[i].detach().requires_grad_()
        vectors = args[len(args) - n_grads :]
        outputs = [
            out for out in _as_tuple(func(*args[: len(args) - n_grads])) if _is_tensor(out) and out.requires_grad
        ]
        if len(outputs) != n_grads:
            raise RuntimeError(
                f"gradgradcheck: func has {len(outputs)} outputs that require grad, but "
                f"{n_grads} grad_outputs were given"
            )
        wrt = [args[i] for i in differentiable_inputs]
        if not outputs:
            return ()
        grads = _autograd_grad(outputs[0])(outputs, wrt, vectors, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(gradients, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)
