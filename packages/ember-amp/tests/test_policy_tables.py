"""The policy tables against the seed pages amp (text) and amp.rst: every op those pages list is in a
table and exists in ember (function, Tensor method, or module that calls it); every entry whose policy
differs from a page is explained in docs/amp_policy.md."""
import functools
import os
import pathlib
import re

import pytest

import ember
from ember.amp._policy import CPU, CUDA, POLICY, SEED_NAMES

_ROOT = pathlib.Path(__file__).resolve().parents[3]
PAGES = pathlib.Path(os.environ.get("EMBER_SEED_PAGES", _ROOT.parent / "shared" / "seeds" / "pages"))
DOC = _ROOT / "docs" / "amp_policy.md"
KINDS = ("lower", "fp32", "promote")
# amp.rst (headings stripped): CUDA's three lists, XPU's three (ember has no XPU: they are checked against
# the CUDA table, which they are a subset of), the CPU's three
RST_DEVICES = ("cuda", "cuda", "cpu")
# amp.txt, by heading
TXT_HEADINGS = {("cuda", "lower"): 'CUDA Ops that can autocast to "float16"',
                ("cuda", "fp32"): 'CUDA Ops that can autocast to "float32"',
                ("cuda", "promote"): "CUDA Ops that promote to the widest input type",
                ("cpu", "lower"): 'CPU Ops that can autocast to "bfloat16"',
                ("cpu", "fp32"): 'CPU Ops that can autocast to "float32"'}
# where ember has an op under a name of its own, or only as a module (PyTorch's internal op names)
SPELLINGS = {"__matmul__": "Tensor.__matmul__", "__pow__": "Tensor.__pow__", "__rpow__": "Tensor.__rpow__",
             "__rdiv__": "Tensor.__rtruediv__", "__rtruediv__": "Tensor.__rtruediv__", "rdiv": "Tensor.__rtruediv__",
             "rpow": "Tensor.__rpow__", "rtruediv": "Tensor.__rtruediv__", "pow": "pow",
             "multi_dot": "linalg.multi_dot", "_convolution": "nn.Conv2d", "cross_entropy_loss": "nn.CrossEntropyLoss",
             "nll_loss2d": "nn.NLLLoss2d", "multilabel_margin_loss_forward": "nn.MultiLabelMarginLoss",
             "grid_sampler": "nn.functional.grid_sample", "grid_sampler_2d": "nn.functional.grid_sample",
             "grid_sampler_3d": "nn.functional.grid_sample",
             "_grid_sampler_2d_cpu_fallback": "nn.functional.grid_sample", "reflection_pad1d": "nn.ReflectionPad1d",
             "reflection_pad2d": "nn.ReflectionPad2d", "replication_pad1d": "nn.ReplicationPad1d",
             "replication_pad2d": "nn.ReplicationPad2d", "replication_pad3d": "nn.ReplicationPad3d",
             "_lu_with_info": "lu", "mkldnn_rnn_layer": "nn.LSTM", "_native_multi_head_attention":
             "nn.MultiheadAttention", "GRUCell": "nn.GRUCell", "LSTMCell": "nn.LSTMCell", "RNNCell": "nn.RNNCell"}
# listed ops that ember does not provide yet: the test fails once one appears, so the entry is removed
NOT_YET = set()
# listed ops that another ember distribution provides: checked only where it is installed
try:
    import ember.special  # noqa: F401
    ELSEWHERE = set()
except ImportError:
    ELSEWHERE = {"erfinv"}


def _page(name):
    path = PAGES / name
    if not path.exists():
        pytest.skip(f"seed page {path} not found (set EMBER_SEED_PAGES)")
    return path.read_text()


@functools.cache
def rst_lists():
    """[(device, kind, names)] of amp.rst.txt: runs of names separated by lines holding a comma."""
    lines = [ln.strip() for ln in _page("amp.rst.txt").splitlines()]
    runs, run = [], []
    for i, ln in enumerate(lines):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ln) and (run or (i + 1 < len(lines) and lines[i + 1] == ",")):
            run.append(ln)
            if i + 1 < len(lines) and lines[i + 1] == ",":
                continue
            runs.append(run)
            run = []
    assert len(runs) == 9, [r[:2] for r in runs]
    return [(RST_DEVICES[i // 3], KINDS[i % 3], r) for i, r in enumerate(runs)]


@functools.cache
def txt_lists():
    """[(device, kind, names)] of amp.txt: the quoted names after each heading (the page ends inside the CPU
    float32 list)."""
    text = " ".join(_page("amp.txt").split())
    found = []
    for (dev, kind), heading in TXT_HEADINGS.items():
        start = text.rindex(heading) + len(heading)  # the last occurrence: the first is the page's contents
        ends = [text.find(m, start) for m in ("Ops that", "Some ops not listed", "Prefer")]
        body = text[start:min([e for e in ends if e > 0] + [len(text)])]
        names = re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', body)
        found.append((dev, kind, [n for n in names if n not in ("float16", "float32", "bfloat16")]))
    return found


def _seed_entries():
    return [("amp.rst", dev, kind, n) for dev, kind, names in rst_lists() for n in names] + \
           [("amp", dev, kind, n) for dev, kind, names in txt_lists() for n in names]


def _exists(name):
    path = SPELLINGS.get(name, name)
    if path.startswith("Tensor."):
        return hasattr(ember.Tensor, path[7:])
    for base in ("", "nn.functional.", "linalg.", "fft."):
        obj = ember
        try:
            for part in (base + (path[len("linalg_"):] if base == "linalg." and path.startswith("linalg_") else
                                 path[len("fft_"):] if base == "fft." and path.startswith("fft_") else path)
                         ).split("."):
                obj = getattr(obj, part)
            return True
        except AttributeError:
            continue
    return hasattr(ember.Tensor, path)


def test_pages_parse():
    lists = rst_lists()
    assert lists[0][2][:2] == ["__matmul__", "addbmm"] and lists[6][2][:2] == ["conv1d", "conv2d"]
    assert lists[8][2] == ["cat", "stack", "index_copy"]
    assert [len(n) for _, _, n in txt_lists()][:3] == [23, 51, 10]


def test_every_listed_op_is_in_a_table():
    missing = [(page, dev, name) for page, dev, _, name in _seed_entries()
               if SEED_NAMES.get(name, name) not in POLICY[dev]]
    assert not missing


def test_every_listed_op_exists_in_ember():
    names = {name for *_, name in _seed_entries()}
    missing = sorted(n for n in names if not _exists(n))
    assert sorted(set(missing) - NOT_YET - ELSEWHERE) == []
    assert sorted(NOT_YET - set(missing)) == [], "now provided by ember: remove from NOT_YET"


def _differences():
    """{(device, key)}: table entries whose kind differs from a page listing them, or that no page lists."""
    listed = {}
    for _, dev, kind, name in _seed_entries():
        listed.setdefault((dev, SEED_NAMES.get(name, name)), set()).add(kind)
    diffs = set()
    for dev, table in (("cpu", CPU), ("cuda", CUDA)):
        for kind, names in table.items():
            for key in names:
                if listed.get((dev, key), {kind}) != {kind} or (dev, key) not in listed:
                    diffs.add((dev, key))
    return diffs


def test_docs_explain_every_difference_from_the_pages():
    if not DOC.exists():
        pytest.fail(f"{DOC} is missing")
    doc = DOC.read_text()
    sections = {dev: doc.split(f"## {dev.upper()}", 1)[1].split("\n## ", 1)[0] for dev in ("cpu", "cuda")}
    unexplained = sorted((dev, key) for dev, key in _differences() if f"`{key}`" not in sections[dev])
    assert not unexplained
    assert ("cpu", "conv_transpose2d") in _differences()  # amp.txt has it in float32; 2.13 runs it in bfloat16
