"""torch.nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations."""

from ... import _prims
from ..._grad_mode import no_grad
from ..._methods import FUNCTIONS
from ..conv import ConvTranspose1d, ConvTranspose2d
from ..module import Module
from . import parametrize
from .weight_norm import norm_except_dim, weight_from_norm

Tensor = _prims.Tensor

__all__ = ["weight_norm", "spectral_norm"]


def _normalize(x, eps):
    """x / max(||x||, eps) for a vector (F.normalize along dim 0)."""
    return x / x.norm(2, 0, keepdim=True).clamp_min(eps).expand_as(x)


class _WeightNorm(Module):
    """weight = g * v / ||v|| (norms over all dims but `dim`), from original0 = g, original1 = v."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_from_norm(weight_g, weight_v, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrizes module.<name> as g * v / ||v||; g and v are stored as
    parametrizations.<name>.original0 and original1."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_old_keys(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # a state_dict saved with the legacy nn.utils.weight_norm names g and v <name>_g and <name>_v
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(load_old_keys)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value estimated by power iteration: the vectors
    _u and _v are buffers, advanced n_power_iterations steps at each call in training mode."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", _normalize(u, self.eps))
            self.register_buffer("_v", _normalize(v, self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            for _ in range(n_power_iterations):
                # in place: the buffers are what state_dict saves
                self._u.copy_(_normalize(FUNCTIONS["mv"](weight_mat, self._v), self.eps))
                self._v.copy_(_normalize(FUNCTIONS["mv"](weight_mat.t(), self._u), self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = FUNCTIONS["vdot"](u, FUNCTIONS["mv"](weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrizes module.<name> as itself divided by its spectral norm (power iteration)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:  # a transposed convolution's output channels are its weight's dim 1
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
