"""``ember.backends.cudnn``: PyTorch's cuDNN switches.

ember does not call cuDNN (its convolutions run through CuPy and cuBLAS), so these flags are kept for
code that sets or reads them and change nothing; ``is_available()`` is False.
"""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
