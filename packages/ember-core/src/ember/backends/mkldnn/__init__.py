"""``ember.backends.mkldnn``: oneDNN, which ember does not use (its CPU kernels are NumPy's and its BLAS).

``enabled`` and ``flags`` are kept so that programs switching oneDNN run unchanged; they change nothing here.
"""
import contextlib

enabled = True
deterministic = False
allow_tf32 = True


def is_available():
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    module = globals()
    saved = {k: module[k] for k in ("enabled", "deterministic", "allow_tf32")}
    module.update(enabled=enabled, deterministic=deterministic, allow_tf32=allow_tf32)
    try:
        yield
    finally:
        module.update(saved)
