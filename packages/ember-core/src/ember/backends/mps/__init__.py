"""``ember.backends.mps``: Apple's Metal backend, which ember does not have (its devices are the CPU and CUDA).

Programs pick their device with ``torch.backends.mps.is_available()``; here it is always False.
"""


def is_available():
    return False


def is_built():
    return False
