"""The public surface that both implementations (fastgrad and fastgrad.reference) provide: the op
table's functions and methods (fastgrad._optable), and the names listed here that are not ops.

tests/test_api.py fails when either lacks a name listed here, or when fastgrad exports a public
name missing from this list (so the list cannot silently fall behind).
"""

from fastgrad import _nn_functions, _optable

MODULE = (
    """
    Size Tensor device dtype bool int64 float32 float64 long float double
    int32 int16 int8 uint8 float16 bfloat16 int short half
    finfo iinfo promote_types result_type can_cast get_default_dtype set_default_dtype e inf nan pi
    tensor as_tensor from_numpy from_dlpack frombuffer zeros ones empty full zeros_like ones_like empty_like full_like
    FloatTensor DoubleTensor LongTensor BoolTensor
    IntTensor ShortTensor CharTensor ByteTensor HalfTensor BFloat16Tensor
    arange linspace eye rand randn rand_like randn_like randint normal manual_seed seed
    randint_like randperm
    Generator default_generator random initial_seed get_rng_state set_rng_state
    no_grad enable_grad set_grad_enabled is_grad_enabled inference_mode is_inference_mode_enabled
    autograd nn optim utils viz linalg compile compiler
    is_anomaly_enabled is_anomaly_check_nan_enabled set_anomaly_enabled
    save load serialization safetensors config set_num_threads get_num_threads
    set_num_interop_threads get_num_interop_threads
    show_config version
    cuda backends accelerator amp autocast set_printoptions return_types
    use_deterministic_algorithms are_deterministic_algorithms_enabled is_deterministic_algorithms_warn_only_enabled
""".split()
    + _optable.names("function")
    + _nn_functions.__all__
)

TENSOR = (
    """
    shape dtype device requires_grad is_leaf grad grad_fn data retains_grad ndim T mT mH H output_nr is_cuda is_cpu
    nelement ndimension itemsize nbytes
    dim numel size stride storage_offset is_contiguous element_size item tolist numpy is_inference
    backward retain_grad requires_grad_ detach detach_ contiguous cpu cuda to type float double long bool
    type_as int short char byte half bfloat16
    __getitem__ __setitem__ __len__ __iter__ __bool__ __float__ __int__ __index__ __format__ __repr__
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __pow__ __rpow__ __matmul__
    __neg__ __abs__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __iadd__ __isub__ __imul__ __itruediv__
    __ipow__ __floordiv__ __rfloordiv__ __ifloordiv__ __mod__ __rmod__ __imod__ __and__ __rand__ __iand__
    __or__ __ror__ __ior__ __xor__ __rxor__ __ixor__ __invert__
    __lshift__ __rlshift__ __ilshift__ __rshift__ __rrshift__ __irshift__
""".split()
    + _optable.names("method")
)

# Intentional differences: names only one implementation has, and why.
ONLY_FASTGRAD = {
    "data_ptr": "an address into C++ memory; the reference's data is a Python array",
}
