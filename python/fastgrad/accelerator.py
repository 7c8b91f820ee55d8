"""torch.accelerator: no accelerator, only the CPU."""


def is_available():
    return False


def device_count():
    return 0


def current_accelerator(check_available=False):
    return None
