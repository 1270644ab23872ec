"""Sums, products and means with an explicit ``dtype`` or an ``out=`` tensor: PyTorch casts the input to that dtype
first and returns it (a bool sum is a logical or, a bool product an and; integer sums wrap), or refuses it with its
exception type; an ``out=`` tensor's dtype is the one computed in unless ``dtype`` is given, which must match it."""
import numpy as np
import pytest
import torch

import ember

A = np.array([[1.5, 0.0, -2.0], [2.0, -2.0, 0.25]])
I = np.array([[100, 0, -3], [120, 7, 90]], dtype=np.int16)
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64"]
# (the exception types are compared: PyTorch's messages name the wrong dtype at times, "result type Float" for a
# double mean)
CALLS = {
    "sum": lambda m, x, **k: m.sum(x, **k),
    "sum(dim)": lambda m, x, **k: m.sum(x, 1, **k),
    "prod": lambda m, x, **k: m.prod(x, **k),
    "prod(dim)": lambda m, x, **k: m.prod(x, 0, **k),
    "nansum(dim)": lambda m, x, **k: m.nansum(x, 1, **k),
    "cumsum": lambda m, x, **k: m.cumsum(x, 1, **k),
    "cumprod": lambda m, x, **k: m.cumprod(x, 0, **k),
    "mean(dim)": lambda m, x, **k: m.mean(x, 1, **k),
    "nanmean(dim)": lambda m, x, **k: m.nanmean(x, 1, **k),
}


def _outcome(m, name, source, dtype, how):
    x = m.from_numpy(source.copy())
    d = getattr(m, dtype)
    kwargs = {"dtype": d} if how == "dtype" else {"out": m.empty(0, dtype=d)} if how == "out" else {
        "dtype": d, "out": m.empty(0, dtype=m.float64 if dtype != "float64" else m.float32)}
    try:
        r = CALLS[name](m, x, **kwargs)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e).__name__
    if how == "out":
        assert r is kwargs["out"]
    return str(r.dtype).split(".")[1], r.to(m.complex128).numpy().round(2).tolist()


@pytest.mark.parametrize("how", ["dtype", "out", "dtype and another out"])
@pytest.mark.parametrize("source", [A, I], ids=["float64", "int16"])
@pytest.mark.parametrize("name", CALLS)
def test_dtype_and_out_as_torch(name, source, how):
    if how != "dtype" and name.startswith("nan"):
        pytest.skip("nansum/nanmean with out=: test_ops.OUT_CAST_DIFFERS")
    for dtype in DTYPES:
        if how != "dtype" and name in ("sum", "prod"):
            continue  # (PyTorch has no full sum/prod with out=: its TypeError lists overloads)
        expected = _outcome(torch, name, source, dtype, how)
        got = _outcome(ember, name, source, dtype, how)
        assert got == expected, f"{name} {how}={dtype}"


@pytest.mark.parametrize("name", ["arange", "range"])
def test_ranges_refuse_bool(name):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (range is deprecated)
        for m in (torch, ember):
            with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented for \'Bool\''):
                getattr(m, name)(0, 3, dtype=m.bool)
