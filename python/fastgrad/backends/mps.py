"""torch.backends.mps: Apple's GPU backend, not available."""


def is_available():
    return False


def is_built():
    return False
