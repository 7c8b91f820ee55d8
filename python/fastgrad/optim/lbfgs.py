"""L-BFGS: quasi-Newton steps from the last history_size changes of parameters and gradients, with a
fixed step or a strong-Wolfe line search; torch.optim.LBFGS's algorithm with its arithmetic in the
same order and types (0-dim tensors where PyTorch's are tensors, Python floats where its are), so
that runs agree with PyTorch's.

The parameters are handled as one flat vector: the gradients concatenated in order."""

from .. import _prims
from .optimizer import Optimizer, _fma, _require
from .._factories import zeros
from .._grad_mode import enable_grad, no_grad

__all__ = ["LBFGS"]


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic with values f1, f2 and slopes g1, g2 at x1, x2, clamped to bounds
    (default: the interval between x1 and x2); the middle of the bounds when the cubic has none."""
    if not x1 <= x2:  # the formula below takes x1 as the left end (the cubic is the same)
        x1, f1, g1, x2, f2, g2 = x2, f2, g2, x1, f1, g1
    low, high = bounds if bounds is not None else (x1, x2)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if not d2_square >= 0:
        return (low + high) / 2.0
    d2 = d2_square.sqrt()
    minimum = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    return min(max(minimum, low), high)


def _strong_wolfe(evaluate, d, loss, grad, gtd, t, max_ls, c1=1e-4, c2=0.9, tolerance_change=1e-9):
    """A step length along direction d that meets the strong Wolfe conditions: sufficient decrease
    (c1) and small enough slope (c2). Longer steps are tried until one such step is found or an
    interval is known to hold one; the interval is then narrowed by cubic interpolation ("zoom").
    evaluate(t) -> (loss, flat gradient) at the parameters moved by t * d; at most max_ls calls.
    Points are (t, loss, flat gradient, slope along d). Returns loss, gradient, t and the call count."""
    d_norm = d.abs().max()

    def point(t):
        f, g = evaluate(t)
        return t, f, g, g.dot(d)

    def too_high(new):  # not a sufficient decrease
        return new[1] > (loss + c1 * new[0] * gtd)

    def flat_enough(new):
        return abs(new[3]) <= -c2 * gtd

    def interpolate(a, b, bounds=None):
        return _cubic_minimum(a[0], a[1], a[3], b[0], b[1], b[3], bounds)

    previous, new = (0, loss, grad, gtd), point(t)
    evaluations, ls_iter, done = 1, 0, False
    while ls_iter < max_ls:
        if too_high(new) or (ls_iter > 1 and new[1] >= previous[1]):
            bracket = [previous, new]
            break
        if flat_enough(new):
            bracket, done = [new], True
            break
        if new[3] >= 0:  # past a minimum
            bracket = [previous, new]
            break
        # extrapolate: a longer step, between 1.01 and 10 times this one (cubic interpolation)
        t = new[0]
        t_next = interpolate(previous, new, (t + 0.01 * (t - previous[0]), t * 10))
        previous, new = new, point(t_next)
        evaluations += 1
        ls_iter += 1
    if ls_iter == max_ls:  # no bracket found within max_ls evaluations
        bracket = [(0, loss, grad, None), new]

    insufficient_progress = False
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1][0] - bracket[0][0]) * d_norm < tolerance_change:
            break
        t = interpolate(*bracket)
        # A point too close to an end of the interval makes little progress: the second time in a row
        # (or when it is outside) it is moved to a tenth of the interval from that end.
        ends = [b[0] for b in bracket]
        margin = 0.1 * (max(ends) - min(ends))
        if min(max(ends) - t, t - min(ends)) < margin:
            if insufficient_progress or t >= max(ends) or t <= min(ends):
                t = max(ends) - margin if abs(t - max(ends)) < abs(t - min(ends)) else min(ends) + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False

        new = point(t)
        evaluations += 1
        ls_iter += 1
        if too_high(new) or new[1] >= bracket[low][1]:
            bracket[high] = new  # the new high end
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if flat_enough(new):
                done = True
            elif new[3] * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]  # the minimum lies between the old low end and the new point
            bracket[low] = new
    t, f, g, _ = bracket[low]
    return f, g, t, evaluations


class LBFGS(Optimizer):
    def __init__(
        self,
        params,
        lr=1,
        max_iter=20,
        max_eval=None,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
        history_size=100,
        line_search_fn=None,
    ):
        _require(0.0 <= lr, f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        _require(len(self.param_groups) == 1, "LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        return _prims.cat(
            [zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1) for p in self._params], 0
        )

    def _move(self, step_size, direction):
        """The parameters += step_size * direction (a flat vector), each rounded once as PyTorch's add_."""
        offset = 0
        for p in self._params:
            part = direction[offset : offset + p.numel()].view_as(p)
            p.copy_(_fma(float(step_size), part, p))
            offset += p.numel()

    def _evaluate(self, closure, start, step_size, direction):
        """The loss and flat gradient at start + step_size * direction; the parameters are restored."""
        self._move(step_size, direction)
        loss = float(closure())
        flat_grad = self._flat_grad()
        for p, value in zip(self._params, start):
            p.copy_(value)
        return loss, flat_grad

    def step(self, closure):
        """Up to max_iter L-BFGS iterations; `closure` re-evaluates the loss (and gradients)."""
        if len(self.param_groups) != 1:
            raise AssertionError(f"Expected exactly one param_group, but got {len(self.param_groups)}")

        def evaluate_loss():
            with enable_grad():
                return closure()

        with no_grad():
            return self._iterate(evaluate_loss, self.param_groups[0])

    def _iterate(self, closure, group):
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        # The state lives with the first parameter, the counters across steps too.
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        opt_cond = flat_grad.abs().max() <= tolerance_grad
        if opt_cond:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            if state["n_iter"] == 1:  # steepest descent
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                # the curvature pair of the last step: gradient change y over step s, kept when y.s > 0
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)  # the initial inverse Hessian: a multiple of the identity
                if "al" not in state:
                    state["al"] = [None] * history_size
                d = self._two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the first step ever is scaled down to at most lr / |gradient|_1
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)  # the slope along d
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if group["line_search_fn"] is not None:
                if group["line_search_fn"] != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                start = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda step: self._evaluate(closure, start, step, d),
                    d,
                    loss,
                    flat_grad,
                    gtd,
                    t,
                    max_ls=max_eval - current_evals,
                )
                self._move(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._move(t, d)
                if n_iter != max_iter:  # the last iteration leaves the loss to the next step
                    loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if (
                n_iter == max_iter
                or current_evals >= max_eval
                or opt_cond
                or d.mul(t).abs().max() <= tolerance_change  # the step is too small
                or abs(loss - prev_loss) < tolerance_change  # the loss no longer changes
            ):
                break

        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=H_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss

    @staticmethod
    def _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, al):
        """The L-BFGS direction -H @ flat_grad, H the inverse Hessian estimate from the curvature pairs
        (the two-loop recursion). `al` keeps the first loop's coefficients (in the state, as PyTorch)."""
        q = flat_grad.neg()
        for i in reversed(range(len(old_dirs))):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.copy_(_fma(float(-al[i]), old_dirs[i], q))
        r = q * H_diag
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.copy_(_fma(float(al[i] - be_i), old_stps[i], r))
        return r
