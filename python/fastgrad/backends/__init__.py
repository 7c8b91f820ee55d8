"""torch.backends as a CPU-only PyTorch reports it: no CUDA, cuDNN or MPS. The flags programs set
(`torch.backends.cudnn.benchmark = True`, `torch.backends.cuda.matmul.allow_tf32 = True`) keep their
values and change nothing, as they change nothing in PyTorch without a GPU."""

from . import cuda, cudnn, mps  # noqa: F401
