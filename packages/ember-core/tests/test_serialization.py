"""ember.save / ember.load against torch.save / torch.load (PyTorch's zip and legacy checkpoint formats)."""
import collections
import datetime
import importlib.util
import io
import os
import pickle
import struct
import warnings
import zipfile

import numpy as np
import pytest
import torch

import ember
from ember import _dtype as D
from ember.serialization import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

DTYPES = [d for d in D.ALL if d.np is not None]


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10
    if dtype.is_complex:
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x.astype(D.storage(dtype)) if dtype is not D.bool else x > 0)


def _pair(dtype, shape, seed=0):
    """The same values as an ember tensor and a torch tensor."""
    arr = _values(dtype, shape, seed)
    tt = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16) if dtype is D.bfloat16 else torch.from_numpy(arr)
    return ember.from_numpy(arr.copy()), tt.clone()


def _same(e, t):
    assert isinstance(e, ember.Tensor) and isinstance(t, torch.Tensor)
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert tuple(e.shape) == tuple(t.shape)
    assert e.tolist() == t.tolist()


def _roundtrip(save, load, obj, **kw):
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf, **kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (5,), (3, 4)], ids=str)
def test_ember_to_torch_and_back(dtype, shape):
    e, t = _pair(dtype, shape)
    loaded = _roundtrip(ember.save, torch.load, {"x": e})
    _same(e, loaded["x"])
    assert loaded["x"].stride() == torch.empty(shape).stride()
    back = _roundtrip(torch.save, ember.load, {"x": t})
    _same(back["x"], t)
    # as the file says; an empty tensor (whose NumPy-made strides are zero) reports contiguous ones, as torch.empty
    assert back["x"].stride() == (t.stride() if t.numel() else torch.empty(shape).stride())


def test_views_share_one_storage_ember_to_torch():
    base = ember.arange(12, dtype=ember.float32)
    sd = {"view": base[2:8].view(2, 3), "base": base, "t": base.view(3, 4).T, "step": base[1::3]}
    out = _roundtrip(ember.save, torch.load, sd)
    ref = {"view": torch.arange(12.)[2:8].view(2, 3), "t": torch.arange(12.).view(3, 4).T,
           "step": torch.arange(12.)[1::3]}
    for k, v in ref.items():
        _same(sd[k], out[k])
        assert out[k].stride() == v.stride() and out[k].storage_offset() == v.storage_offset()
    ptrs = {v.untyped_storage().data_ptr() for v in out.values()}
    assert len(ptrs) == 1
    out["base"][3] = -1.0
    assert out["view"][0, 1].item() == -1.0


def test_views_share_memory_torch_to_ember():
    base = torch.arange(12.)
    sd = {"view": base[2:8].view(2, 3), "base": base, "t": base.view(3, 4).T, "step": base[1::3]}
    out = _roundtrip(torch.save, ember.load, sd)
    for k, v in sd.items():
        _same(out[k], v)
        assert out[k].stride() == v.stride() and out[k].storage_offset() == v.storage_offset()
    out["base"][3] = -1.0
    assert out["view"][0, 1].item() == -1.0 and out["t"][3, 0].item() == -1.0
    # every tensor on one storage shares the version counter, so autograd sees in-place changes
    assert out["view"]._vc is out["base"]._vc


@pytest.mark.parametrize("make", [lambda x: x.T, lambda x: x[:, ::2], lambda x: x.flip(0), lambda x: x[1:, 1:],
                                  lambda x: x[:1].expand(3, 4)], ids=["T", "step", "flip", "slice", "expand"])
def test_non_contiguous(make):
    e, t = _pair(D.float32, (3, 4))
    out = _roundtrip(ember.save, torch.load, make(e))
    _same(make(e), out)
    back = _roundtrip(torch.save, ember.load, make(t))
    _same(back, make(t))
    assert back.stride() == make(t).stride()


def test_containers_and_python_values():
    e, t = _pair(D.float64, (2, 2))
    def tree(x, lib):
        return collections.OrderedDict(
            w=x, nested={"l": [x, 1, 2.5, "s", None, True], "t": (x[0], b"raw", 1 + 2j, {1, 2})},
            size=lib.Size([2, 3]), dtype=lib.bfloat16, dev=lib.device("cpu"), cuda=lib.device("cuda", 1))
    for out, ref in ((_roundtrip(ember.save, torch.load, tree(e, ember)), tree(t, torch)),
                     (_roundtrip(torch.save, ember.load, tree(t, torch)), tree(e, ember))):
        assert type(out) is collections.OrderedDict and list(out) == list(ref)
        assert out["nested"]["l"][1:] == ref["nested"]["l"][1:]
        assert out["nested"]["t"][1:] == ref["nested"]["t"][1:]
        assert tuple(out["size"]) == (2, 3) and str(out["dtype"]).endswith("bfloat16")
        assert str(out["dev"]) == "cpu" and str(out["cuda"]) == "cuda:1"
    ember_out = _roundtrip(torch.save, ember.load, tree(t, torch))
    assert type(ember_out["size"]) is ember.Size and ember_out["dtype"] is ember.bfloat16
    assert ember_out["cuda"] == ember.device("cuda:1")
    _same(ember_out["nested"]["t"][0], t[0])


def test_file_paths_and_archive_name(tmp_path):
    e, _ = _pair(D.float32, (4,))
    path = tmp_path / "model.pt"
    ember.save({"w": e}, path)
    assert zipfile.ZipFile(path).namelist()[0] == "model/data.pkl"
    _same(ember.load(str(path))["w"], torch.load(path)["w"])
    buf = io.BytesIO()
    ember.save(e, buf)
    names = zipfile.ZipFile(buf).namelist()
    assert names == zipfile.ZipFile(_torch_bytes(torch.ones(1))).namelist()  # the same records as torch


def _torch_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    buf.seek(0)
    return buf


def test_records_are_aligned_for_mmap(tmp_path):
    ember.save({"a": ember.ones(3), "b": ember.ones(5, dtype=ember.float64)}, tmp_path / "x.pt")
    raw = (tmp_path / "x.pt").read_bytes()
    for info in zipfile.ZipFile(tmp_path / "x.pt").infolist():
        name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0, info.filename


def test_mmap(tmp_path):
    _, t = _pair(D.float32, (3, 4))
    torch.save({"w": t, "v": t[1]}, tmp_path / "t.pt")
    out = ember.load(tmp_path / "t.pt", mmap=True)
    _same(out["w"], t)
    base = out["w"]._data
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert base is not None  # the tensor's memory is the mapped file
    out["w"][0, 0] = 5.0  # private mapping: writable, the file stays unchanged
    assert torch.load(tmp_path / "t.pt")["w"][0, 0].item() == t[0, 0].item()
    with pytest.raises(ValueError, match="file path"):
        ember.load(io.BytesIO((tmp_path / "t.pt").read_bytes()), mmap=True)


def test_legacy_format():
    base = torch.arange(6.)
    sd = {"a": base[1:3], "b": base, "c": torch.ones(2, dtype=torch.int16), "d": torch.zeros(2, 2).T}
    out = ember.load(_torch_bytes(sd, _use_new_zipfile_serialization=False))
    for k, v in sd.items():
        _same(out[k], v)
    out["b"][1] = 9.0
    assert out["a"][0].item() == 9.0
    e = {"a": ember.arange(6.)[1:3], "m": ember.ones(2, 2, dtype=ember.bfloat16)}
    buf = io.BytesIO()
    ember.save(e, buf, _use_new_zipfile_serialization=False)
    assert not zipfile.is_zipfile(buf)
    buf.seek(0)
    back = torch.load(buf)
    _same(e["a"], back["a"])
    _same(e["m"], back["m"])


class _Evil:
    def __reduce__(self):
        return os.system, ("echo pwned",)


def test_weights_only_rejects_other_globals():
    raw = pickle.dumps({"x": _Evil()}, protocol=2)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", raw)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
    for load in (torch.load, ember.load):
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match=r"posix\.system|os\.system"):
            load(buf)


def test_weights_only_false_and_safe_globals():
    obj = {"when": datetime.date(2024, 1, 2), "w": ember.ones(2)}
    with pytest.raises(pickle.UnpicklingError, match="datetime.date"):
        _roundtrip(ember.save, ember.load, obj)
    assert _roundtrip(ember.save, ember.load, obj, weights_only=False)["when"] == datetime.date(2024, 1, 2)
    assert _roundtrip(ember.save, torch.load, obj, weights_only=False)["when"] == datetime.date(2024, 1, 2)
    try:
        add_safe_globals([datetime.date])
        assert get_safe_globals() == [datetime.date]
        assert _roundtrip(ember.save, ember.load, obj)["when"] == datetime.date(2024, 1, 2)
    finally:
        clear_safe_globals()
    assert get_safe_globals() == []
    with safe_globals([datetime.date]):
        assert _roundtrip(ember.save, ember.load, obj)["when"].year == 2024
    assert get_safe_globals() == []


def test_explicit_pickle_module_means_weights_only_false():
    buf = _torch_bytes(torch.ones(1))
    for load in (torch.load, ember.load):
        buf.seek(0)
        with pytest.raises(RuntimeError, match="pickle_module"):
            load(buf, pickle_module=pickle, weights_only=True)
    buf.seek(0)
    _same(ember.load(buf, pickle_module=pickle), torch.ones(1))


def _relocate(buf, location):
    """A copy of a checkpoint whose storages claim to live on ``location`` (no GPU needed to make it)."""
    src = zipfile.ZipFile(buf)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("data.pkl"):
                new = b"X" + struct.pack("<I", len(location)) + location.encode()
                data = data.replace(b"X\x03\x00\x00\x00cpu", new)
            zf.writestr(name, data)
    out.seek(0)
    return out


def test_map_location_for_a_cuda_checkpoint():
    e, t = _pair(D.float32, (2, 3))
    saved = io.BytesIO()
    ember.save({"w": e}, saved)
    cuda_ckpt = _relocate(saved, "cuda:0")
    for load in (torch.load, ember.load):
        cuda_ckpt.seek(0)
        with pytest.raises(RuntimeError, match="map_location"):
            load(cuda_ckpt)
    for where in ("cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        cuda_ckpt.seek(0)
        out = ember.load(cuda_ckpt, map_location=where)["w"]
        _same(out, t)
        assert out.device == ember.device("cpu")
    for load in (torch.load, ember.load):  # a callable returning None leaves the saved location
        cuda_ckpt.seek(0)
        with pytest.raises(RuntimeError, match="CUDA"):
            load(cuda_ckpt, map_location=lambda storage, loc: None)


def test_map_location_callable_sees_location():
    saved = io.BytesIO()
    ember.save({"w": ember.ones(2)}, saved)
    saved.seek(0)
    seen = []
    ember.load(saved, map_location=lambda storage, loc: seen.append((loc, storage.shape)))
    assert seen == [("cpu", ember.Size([2]))]


def test_extra_files(tmp_path):
    path = tmp_path / "m.pt"
    ember.save({"w": ember.ones(2)}, path, _extra_files={"producer.json": '{"user": "me"}', "blob": b"\x00\x01"})
    assert "m/extra/producer.json" in zipfile.ZipFile(path).namelist()
    _same(ember.ones(2), torch.load(path)["w"])  # torch still reads the checkpoint
    files = {"producer.json": "", "blob": "", "missing": "x"}
    ember.load(path, _extra_files=files)
    assert files == {"producer.json": b'{"user": "me"}', "blob": b"\x00\x01", "missing": b""}


def test_unsupported_content():
    for obj, match in ((torch.ones(2, dtype=torch.uint16), "uint16"), (torch.ones(2, 2).to_sparse_csc(), "sparse_csc")):
        with pytest.raises(pickle.UnpicklingError, match=match):
            _roundtrip(torch.save, ember.load, obj)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_protocols(protocol):
    e, _ = _pair(D.float32, (2, 3))
    buf = io.BytesIO()
    ember.save({"w": e, "b": b"\x00raw"}, buf, pickle_protocol=protocol)
    buf.seek(0)
    # torch's weights-only unpickler knows only protocol 2's opcodes (BINBYTES, FRAME fail there)
    out = torch.load(buf, weights_only=protocol == 2)
    _same(e, out["w"])
    assert out["b"] == b"\x00raw"
    buf.seek(0)
    assert ember.load(buf)["b"] == b"\x00raw"


def test_parameters_need_ember_nn():
    if importlib.util.find_spec("ember.nn") is None:
        with pytest.raises(pickle.UnpicklingError, match="ember-nn"):
            _roundtrip(torch.save, ember.load, {"p": torch.nn.Parameter(torch.ones(2))})
    else:
        out = _roundtrip(torch.save, ember.load, {"p": torch.nn.Parameter(torch.ones(2))})
        assert type(out["p"]).__name__ == "Parameter" and out["p"].requires_grad


def test_out_of_bounds_layout_is_rejected():
    buf = io.BytesIO()
    ember.save(ember.ones(4), buf)
    src = zipfile.ZipFile(buf)
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zf:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("data.pkl"):  # size (4,) -> (40,): would read past the 4-element storage
                data = data.replace(b"K\x04\x85", b"K\x28\x85")
            zf.writestr(name, data)
    for load in (torch.load, ember.load):
        evil.seek(0)
        with pytest.raises(RuntimeError):
            load(evil)


def test_big_endian_checkpoint():
    _, t = _pair(D.float32, (3,))
    src = zipfile.ZipFile(_torch_bytes({"w": t}))
    swapped = io.BytesIO()
    with zipfile.ZipFile(swapped, "w") as zf:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("byteorder"):
                data = b"big"
            elif "/data/" in name:
                data = np.frombuffer(data, np.float32).byteswap().tobytes()
            zf.writestr(name, data)
    swapped.seek(0)
    _same(ember.load(swapped)["w"], t)
    swapped.seek(0)
    assert torch.equal(torch.load(swapped)["w"], t)


def test_bad_files():
    with pytest.raises(RuntimeError, match="checkpoint"):
        ember.load(io.BytesIO(b"not a checkpoint at all"))
    with pytest.raises(RuntimeError, match="data.pkl"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("readme.txt", "hi")
        buf.seek(0)
        ember.load(buf)


def test_plain_pickle_of_a_tensor():
    e, _ = _pair(D.bfloat16, (2, 3))
    out = pickle.loads(pickle.dumps(e[:, 1:]))
    assert out.dtype is ember.bfloat16 and out.tolist() == e[:, 1:].tolist()


def test_weights_only_environment_variables_as_torch(monkeypatch):
    # the array that time_sequence_prediction's generator saves: not loadable under weights_only=True
    buf = io.BytesIO()
    torch.save(np.arange(3.0), buf)
    data = buf.getvalue()

    def outcome(m, **kw):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                r = m.load(io.BytesIO(data), **kw)
            return "ok", r.tolist(), [str(w.message)[:60] for w in caught]
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            return type(e).__name__

    for env in ({}, {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, {"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "yes"},
                {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"}):
        for name in ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_WEIGHTS_ONLY_LOAD"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for kw in ({}, {"weights_only": False}, {"weights_only": True}):
            assert outcome(ember, **kw) == outcome(torch, **kw), (env, kw)
