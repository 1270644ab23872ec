"""ember._jit: numba loops are handed out only for large inputs, once compiled, and compile on a background thread
(or on the call in deterministic mode); a loop that cannot be built leaves its op on the JIT-free path."""
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from ember import _jit, _settings

SIGNATURE = "(float64[::1], float64[::1])"
SOURCE = """
import numba


@numba.njit(nogil=True)
def double(x, out):
    for i in range(out.size):
        out[i] = 2.0 * x[i]
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A fresh module with one numba loop, ``double`` (a new name each time: ``_jit`` remembers loops by name)."""
    name = f"jit_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _doubles(f):
    out = np.empty(3)
    f(np.arange(3.0), out)
    return out.tolist()


def test_small_inputs_never_ask_for_a_loop(module):
    assert _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN - 1) is None
    assert _jit.wait(timeout=60) and module not in sys.modules


def test_a_large_input_leaves_the_compilation_to_the_background_thread(module):
    assert _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN) is None  # the caller takes its JIT-free path
    assert _jit.wait(timeout=120)
    assert _jit._state["worker"].name == "ember-jit"
    f = _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN)
    assert _doubles(f) == [0.0, 2.0, 4.0] and len(f.signatures) == 1
    assert _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN - 1) is None  # small inputs: still JIT-free


def test_deterministic_mode_compiles_on_the_call(module, monkeypatch):
    monkeypatch.setitem(_settings._state, "deterministic", True)
    assert _doubles(_jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN)) == [0.0, 2.0, 4.0]
    assert _jit.loop(module, "double", SIGNATURE, 1) is None


def test_exact_loops_serve_any_size_once_ready_and_never_compile_on_the_call(module, monkeypatch):
    """(An exact JIT-free path gives the loop's bits: nothing to wait for, nothing to hide from small inputs.)"""
    monkeypatch.setitem(_settings._state, "deterministic", True)
    assert _jit.loop(module, "double", SIGNATURE, 1, exact=True) is None and module not in sys.modules
    assert _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN, exact=True) is None  # queued, not compiled here
    assert _jit.wait(timeout=120)
    assert _doubles(_jit.loop(module, "double", SIGNATURE, 1, exact=True)) == [0.0, 2.0, 4.0]
    assert _jit.loop(module, "double", SIGNATURE, 1) is None


def test_rebound_runs_one_source_with_other_primitives():
    import types
    source = types.ModuleType("jit_rebound_probe")
    exec("import math\nscale = math.sqrt\n\ndef twice(x):\n    return 2 * scale(x)\n\n"
         "def quad(x):\n    return twice(twice(x))\n", vars(source))
    calls = []
    space = _jit.rebound(source, lambda name, f: calls.append(name) or f, scale=abs, twice=lambda x: 3 * x)
    assert space["quad"](-2.0) == -18.0 and source.quad(16.0) == 2 * 8 ** 0.5
    assert calls == ["quad"] and space["scale"] is abs


def test_forced_hands_out_loops_for_any_size(module):
    with _jit.forced():
        assert _doubles(_jit.loop(module, "double", SIGNATURE, 1)) == [0.0, 2.0, 4.0]
    assert _jit.loop(module, "double", SIGNATURE, 1) is None


@pytest.mark.parametrize("name,signature", [("double", "(no_such_type[::1],)"), ("missing", SIGNATURE)])
def test_a_loop_that_cannot_be_built_leaves_the_jit_free_path(module, name, signature):
    assert _jit.loop(module, name, signature, _jit.JIT_MIN) is None
    assert _jit.wait(timeout=120)
    assert _jit.loop(module, name, signature, _jit.JIT_MIN) is None
    assert (module, name, signature) in _jit._failed


def test_a_child_forked_during_a_compilation_compiles_nothing(module, monkeypatch):
    """numba's compiler lock may be held for good in such a child: it keeps the loops it has and builds no more."""
    monkeypatch.setattr(_jit, "_state", dict(_jit._state, busy=("m", "f", SIGNATURE)))
    monkeypatch.setattr(_jit, "_cond", _jit._cond)
    monkeypatch.setattr(_jit, "_queue", [])
    _jit._after_fork()
    assert _jit._state["broken"] and _jit._state["worker"] is None
    assert _jit.loop(module, "double", SIGNATURE, _jit.JIT_MIN) is None and _jit._queue == []


def test_loops_cache_under_the_temporary_directory_where_nothing_else_is_writable(module, tmp_path):
    """(Where numba finds no writable cache folder it refuses to make cached dispatchers.)"""
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
            "from numba.core import caching\n"
            "caching.CacheImpl._locator_classes = [caching.UserProvidedCacheLocator]  # only NUMBA_CACHE_DIR\n"
            "import os, numpy as np\n"
            "from ember import _jit\n"
            f"f = _jit._compile(({module!r}, 'double', {SIGNATURE!r}))\n"
            "out = np.empty(2); f(np.ones(2), out)\n"
            "print(out.tolist(), os.environ['NUMBA_CACHE_DIR'])")
    (tmp_path / f"{module}.py").write_text(SOURCE.replace("nogil=True", "nogil=True, cache=True"))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split()[:2] == ["[2.0,", "2.0]"] and "ember-numba-cache" in out
