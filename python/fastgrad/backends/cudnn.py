"""torch.backends.cudnn: its switches with PyTorch's defaults; cuDNN itself is not available."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
