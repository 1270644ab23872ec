"""Python numbers given to integer tensors as fill values or bounds: PyTorch checks them against the type's range
(unsigned types take integers down to -max, wrapping around) and raises RuntimeError beyond it, where NumPy raises
OverflowError for integers and casts floats silently; in arithmetic they wrap. Also sums of unsigned tensors."""
import pytest
import torch

import ember

CASES = {
    "where": lambda m, u, v: m.where(u > 2, u, v),
    "fill_": lambda m, u, v: u.clone().fill_(v),
    "full": lambda m, u, v: m.full((2,), v, dtype=u.dtype),
    "full_like": lambda m, u, v: m.full_like(u, v),
    "new_full": lambda m, u, v: u.new_full((2,), v),
    "index_fill": lambda m, u, v: u.index_fill(0, m.tensor([0]), v),
    "setitem": lambda m, u, v: (lambda c: (c.__setitem__(0, v), c)[1])(u.clone()),
    "clamp(min)": lambda m, u, v: u.clamp(min=v),
    "clamp(max)": lambda m, u, v: u.clamp(max=v),
    "clamp_min": lambda m, u, v: u.clamp_min(v),
    "masked_fill": lambda m, u, v: u.masked_fill(u > 2, v),
    "add": lambda m, u, v: u + v,
    "mul": lambda m, u, v: u * v,
}
VALUES = [-1, -255, -256, 300, 127, -128, 128, -129, 2.7, -1.5, 2500.0, 2 ** 31, 2 ** 63, float("nan")]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("name", CASES)
def test_numbers_for_integer_tensors_as_torch(name, dtype):
    for v in VALUES:
        if name in ("add", "mul") and (isinstance(v, float) or abs(v) >= 2 ** 63):
            continue  # (float scalars promote; numbers past int64 are an OverflowError in both)
        if name == "setitem" and v == 2 ** 63:
            continue  # (PyTorch's binding refuses it before the tensor sees it: a ValueError)
        outcome = []
        for m in (torch, ember):
            u = m.tensor([1, 5, 100], dtype=getattr(m, dtype))
            try:
                r = CASES[name](m, u, v)
                outcome.append((str(r.dtype).split(".")[1], repr(r.tolist())))  # (repr: NaN equals NaN)
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                outcome.append((type(e).__name__, str(e)))
        assert outcome[1] == outcome[0], f"{name}({dtype}, {v})"


def test_a_tensor_fill_value_is_cast_unchecked():
    for m in (torch, ember):
        assert m.tensor([1, 5], dtype=m.uint8).fill_(m.tensor(300)).tolist() == [44, 44]


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32"])
def test_sum_to_size_of_integers_is_int64(dtype):
    got, expected = (m.ones(3, 2, dtype=getattr(m, dtype)).mul(200 if dtype == "uint8" else 1).sum_to_size(3, 1)
                     for m in (ember, torch))
    assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1] and got.tolist() == expected.tolist()


def _u8(m, *values):
    return m.tensor(values, dtype=m.uint8)


OTHER = {
    "add(alpha=-3)": lambda m: m.add(_u8(m, 1, 5, 250), _u8(m, 1, 2, 3), alpha=-3),
    "sub_(alpha=-3)": lambda m: _u8(m, 1, 5, 250).sub_(_u8(m, 1, 2, 3), alpha=-3),
    "add(alpha=300)": lambda m: m.add(_u8(m, 1), _u8(m, 1), alpha=300),
    "uint8 >> 8..255": lambda m: _u8(m, 1, 128, 255, 250) >> _u8(m, 8, 9, 200, 255),
    "int8 >> 9": lambda m: m.tensor([-128, 5], dtype=m.int8) >> 9,
    "x[int8 index]": lambda m: m.arange(6).reshape(3, 2)[m.tensor([1, 0], dtype=m.int8)],
    "x[int16 index] = 7": lambda m: m.arange(6).index_put_((m.tensor([1], dtype=m.int16),), m.tensor(7)),
    "x[uint8 mask]": lambda m: m.arange(6).reshape(3, 2)[m.tensor([1, 0, 1], dtype=m.uint8)],
    "x[int32 index]": lambda m: m.arange(6).reshape(3, 2)[m.tensor([1, 0], dtype=m.int32)],
    "index_fill(int32 index)": lambda m: m.arange(6).index_fill(0, m.tensor([1], dtype=m.int32), 5),
}


@pytest.mark.parametrize("name", OTHER)
def test_integer_arithmetic_and_index_dtypes_as_torch(name):
    import warnings
    outcome = []
    for m in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (uint8 masks are deprecated)
            try:
                outcome.append(OTHER[name](m).tolist())
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                outcome.append((type(e).__name__, str(e)))
    assert outcome[1] == outcome[0]
