"""NumPy's floating-point warnings off while ember computes: NaN and inf results are PyTorch's too, and PyTorch
neither warns of them nor raises (a script's ``np.seterr(all="raise")`` or pytest's ``-W error`` must not make an
op on an inf fail). The registry runs every op's computation this way, and ``quiet`` marks implementations that
run outside it (the elementwise fast paths). ``token = STATE.set(IGNORE)`` ... ``STATE.reset(token)``: NumPy keeps
its error state in a context variable, set directly in 90 ns (``np.errstate``: 650 ns, NumPy 2.4); NumPy 1.x, which
has no such variable, gets a stand-in entering ``np.errstate``."""
import functools

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as STATE
except ImportError:
    STATE = None

if STATE is not None:
    with np.errstate(all="ignore"):
        IGNORE = STATE.get()
else:
    class _Errstate:
        """``set``/``reset`` of the context variable, for NumPy 1.x."""

        @staticmethod
        def set(_):
            state = np.errstate(all="ignore")
            state.__enter__()
            return state

        @staticmethod
        def reset(state):
            state.__exit__(None, None, None)

    STATE, IGNORE = _Errstate(), None


def quiet(impl):
    """``impl`` run with NumPy's floating-point warnings off (marked ``quiet``: the registry's split of a declared
    ufunc runs quiet too)."""
    set_, reset = STATE.set, STATE.reset

    @functools.wraps(impl)
    def run(*args, **kwargs):
        token = set_(IGNORE)
        try:
            return impl(*args, **kwargs)
        finally:
            reset(token)
    run.quiet = True
    return run
