"""torch.nn.utils: gradient clipping, parameters as one vector, pad_sequence, parametrizations; and
flatten_grads_ (fastgrad's own): the gradients as views of one flat buffer, for data parallelism."""

from . import parametrizations, parametrize, rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .flat_grad import flatten_grads_
from .weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "vector_to_parameters",
    "flatten_grads_",
    "parametrizations",
    "parametrize",
    "rnn",
    "weight_norm",
    "remove_weight_norm",
]
