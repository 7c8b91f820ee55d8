"""Anomaly mode (torch.autograd.detect_anomaly / set_detect_anomaly): the switches, the NaN check
that stops backward at the node whose gradient became NaN, and the forward traceback kept for the
error. Written against the PyTorch API: FASTGRAD_TEST_BACKENDS=torch runs it on PyTorch itself."""

import inspect
import math
import re
import threading
import warnings

import pytest


@pytest.fixture(autouse=True)
def anomaly_off_after(fg):
    """Anomaly mode is process-wide: a failing test must not leave it on for the others."""
    yield
    fg.set_anomaly_enabled(False)


def _line():
    """The line number of the caller's current line."""
    return inspect.currentframe().f_back.f_lineno


def _backward_error(fg, loss):
    """Runs loss.backward(); returns (its exception, the warnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception) as info:
            loss.backward()
    return info.value, [str(w.message) for w in caught]


def test_switches_and_their_defaults(fg):
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (False, True)
    fg.autograd.set_detect_anomaly(True, check_nan=False)  # as a function: on right away
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (True, False)
    with fg.autograd.set_detect_anomaly(False):
        assert not fg.is_anomaly_enabled()
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (True, False)
    fg.set_anomaly_enabled(False)
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (False, True)
    fg.set_anomaly_enabled(True)
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (True, True)


def test_mode_is_process_wide(fg):
    """Unlike grad mode, anomaly mode is one switch for every thread, as PyTorch's."""
    seen = []
    fg.set_anomaly_enabled(True, False)
    thread = threading.Thread(target=lambda: seen.append((fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled())))
    thread.start()
    thread.join()
    assert seen == [(True, False)]


@pytest.mark.parametrize(
    "args, message",
    [
        ((1,), "argument 'enabled' (position 1) must be bool, not int"),
        ((None,), "argument 'enabled' (position 1) must be bool, not NoneType"),
        ((True, 0.0), "argument 'check_nan' (position 2) must be bool, not float"),
    ],
)
def test_switch_takes_bools_only(fg, args, message):
    with pytest.raises(TypeError, match="^" + re.escape(f"set_anomaly_enabled(): {message}") + "$"):
        fg.set_anomaly_enabled(*args)
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (False, True)


def test_detect_anomaly_warns_and_restores_the_previous_mode(fg):
    with pytest.warns(
        UserWarning,
        match="^Anomaly Detection has been enabled. This mode will increase the runtime "
        "and should only be enabled for debugging.$",
    ):
        context = fg.autograd.detect_anomaly(check_nan=False)
    assert not fg.is_anomaly_enabled()  # only __enter__ turns it on
    with pytest.raises(ValueError):
        with context:
            assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (True, False)
            raise ValueError
    assert (fg.is_anomaly_enabled(), fg.is_anomaly_check_nan_enabled()) == (False, True)


# A NaN first appears in the gradient of the named node, at output (input position) k.
NAN_CASES = [
    ("log(0)", lambda m, x: m.log(x * 0) * 0, "LogBackward0", 0),
    ("sqrt(-1)", lambda m, x: m.sqrt(-x) * 0, "SqrtBackward0", 0),
    ("x / 0", lambda m, x: (x / (x * 0)) * 0, "DivBackward0", 0),
    ("0 * inf, output 1", lambda m, x: (1 / (x * 0)) * x * 0, "MulBackward0", 1),
    ("pow(0, -1)", lambda m, x: (x * 0) ** -1.0 * 0, "PowBackward0", 0),
]


@pytest.mark.parametrize("fn, node, k", [c[1:] for c in NAN_CASES], ids=[c[0] for c in NAN_CASES])
def test_nan_gradient_raises_at_the_node_that_made_it(fg, fn, node, k):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        line = _line() + 1
        loss = fn(fg, x).sum()
        error, messages = _backward_error(fg, loss)
    assert type(error) is RuntimeError
    assert str(error) == f"Function '{node}' returned nan values in its {k}th output."
    assert len(messages) == 1
    head, _, stack = messages[0].partition("\n")
    assert head == f"Error detected in {node}. Traceback of forward call that caused the error:"
    assert f'"{__file__}", line {line}, in test_nan_gradient_raises_at_the_node_that_made_it' in stack
    assert x.grad is None  # stopped before the leaf


@pytest.mark.parametrize("fn, node, k", [c[1:] for c in NAN_CASES], ids=[c[0] for c in NAN_CASES])
def test_nan_gradient_flows_when_the_check_is_off(fg, fn, node, k):
    for mode in (fg.autograd.set_detect_anomaly(False), fg.autograd.set_detect_anomaly(True, check_nan=False)):
        with mode:
            x = fg.tensor([1.0, 2.0], requires_grad=True)
            fn(fg, x).sum().backward()
        assert all(math.isnan(v) for v in x.grad.tolist())


def test_inf_gradient_is_not_an_anomaly(fg):
    x = fg.tensor([0.0, 2.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        x.log().sum().backward()
    assert x.grad.tolist() == [math.inf, 0.5]


def test_error_without_forward_traceback(fg):
    x = fg.tensor([0.0, 2.0], requires_grad=True)
    loss = (x.log() * 0).sum()  # recorded with anomaly mode off: no traceback kept
    assert "traceback_" not in loss.grad_fn.metadata
    with fg.autograd.set_detect_anomaly(True):
        error, messages = _backward_error(fg, loss)
    assert str(error) == "Function 'LogBackward0' returned nan values in its 0th output."
    assert messages[0].startswith(
        "Error detected in LogBackward0. No forward pass information available. Enable "
        "detect anomaly during forward pass for more information."
    )


def test_forward_traceback_is_kept_in_metadata(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        line = _line() + 1
        y = fg.nn.functional.softmax(x.exp(), dim=0)
    stack = y.grad_fn.metadata["traceback_"]
    assert isinstance(stack, list) and all(isinstance(entry, str) for entry in stack)
    # Innermost last, as traceback.format_list: the test's own line (a functional wrapper's frame, if any,
    # comes after it in PyTorch's and is left out in fastgrad's).
    entries = [entry for entry in stack if entry.startswith(f'  File "{__file__}"')]
    assert entries[-1].startswith(f'  File "{__file__}", line {line}, in test_forward_traceback_is_kept_in_metadata')
    assert y.grad_fn.next_functions[0][0].metadata["traceback_"][-1] == entries[-1]


def test_traceback_of_an_op_running_without_the_gil(fg):
    """Large ops run in the core with the GIL released; the node still gets its traceback."""
    x = fg.ones(200_000, requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        line = _line() + 1
        y = x * x
    assert f"line {line}" in y.grad_fn.metadata["traceback_"][-1]


def test_custom_function_error_is_reported_with_its_forward_traceback(fg):
    class Broken(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("broken backward")

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        line = _line() + 1
        loss = Broken.apply(x).sum()
        error, messages = _backward_error(fg, loss)
    assert type(error) is ValueError and str(error) == "broken backward"
    head, _, stack = messages[0].partition("\n")
    assert head == "Error detected in BrokenBackward. Traceback of forward call that caused the error:"
    assert f"line {line}, in test_custom_function_error" in stack


def test_nan_from_a_hook_is_caught_at_its_node(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        y = x * 2
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * math.nan, None))
        error, _ = _backward_error(fg, y.sum())
    assert str(error) == "Function 'MulBackward0' returned nan values in its 0th output."


def test_clean_backward_is_unchanged(fg):
    x = fg.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        loss = (fg.nn.functional.log_softmax(x @ x, dim=1) * x.tanh()).sum()
        (grad,) = fg.autograd.grad(loss, x, create_graph=True)  # the backward's own nodes are checked too
        grad.sum().backward()
    with_anomaly = x.grad.tolist()
    x.grad = None
    loss = (fg.nn.functional.log_softmax(x @ x, dim=1) * x.tanh()).sum()
    (grad,) = fg.autograd.grad(loss, x, create_graph=True)
    grad.sum().backward()
    assert x.grad.tolist() == with_anomaly


def test_nan_in_a_double_backward(fg):
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    with fg.autograd.set_detect_anomaly(True):
        (grad,) = fg.autograd.grad(x.sqrt().sum(), x, create_graph=True)  # grad / (2 * sqrt(x)): inf at 0
        error, _ = _backward_error(fg, (grad * 0).sum())
    # The gradient of grad / (2 * sqrt(x)) with respect to its divisor: 0 * inf.
    assert str(error) == "Function 'DivBackward0' returned nan values in its 1th output."


@pytest.mark.parametrize("fn, node, k", [c[1:] for c in NAN_CASES], ids=[c[0] for c in NAN_CASES])
def test_same_error_as_torch(fg, torch, fn, node, k):
    def error_of(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        with m.autograd.set_detect_anomaly(True):
            loss = fn(m, x).sum()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(RuntimeError) as info:
                    loss.backward()
        return str(info.value)

    assert error_of(fg) == error_of(torch)


def test_a_graph_freed_during_a_leafs_first_use_in_anomaly_mode(fg):
    """In anomaly mode a node's creation calls Python to keep the forward traceback, and Python may
    free other graphs there (its garbage collector runs when it allocates). A graph freed then frees
    another leaf's accumulator: that must not wait on the lock under which the new leaf's
    accumulator is being made (it deadlocked). In a child with a timeout, so that a deadlock fails
    instead of hanging the run."""
    from semantics_helpers import run_python

    result = run_python(
        f"""
import traceback
import {fg.__name__} as fg

graphs = [fg.tensor([1.0], requires_grad=True) * 2 for _ in range(3)]  # each holds its leaf's accumulator
extract_stack = traceback.extract_stack
def extract_stack_freeing_a_graph(*args, **kwargs):
    if graphs:
        graphs.pop()  # freed here, as by a garbage collection that the traceback's making starts
    return extract_stack(*args, **kwargs)
traceback.extract_stack = extract_stack_freeing_a_graph

fg.autograd.set_detect_anomaly(True)
b = fg.tensor([2.0], requires_grad=True)
(b * 3).sum().backward()  # MulBackward0 frees one graph; b's accumulator, made next, another
assert b.grad.item() == 3.0
print("ok")
""",
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
