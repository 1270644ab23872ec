"""``ember.backends.openmp``: ember's CPU code does not use OpenMP (NumPy's loops and its BLAS's own threads)."""


def is_available():
    return False
