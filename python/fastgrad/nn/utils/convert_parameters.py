"""parameters_to_vector and vector_to_parameters: all parameters as one flat vector, and back."""

from ... import _prims
from ..._methods import FUNCTIONS
from ..module import _typename

Tensor = _prims.Tensor


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated, in order (differentiable)."""
    return FUNCTIONS["cat"]([param.view(-1) for param in parameters])


def vector_to_parameters(vec, parameters):
    """Gives each parameter, in order, the next slice of vec as its data (views of vec)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    start = 0
    for param in parameters:
        count = param.numel()
        param.data = vec[start : start + count].view_as(param).data
        start += count
