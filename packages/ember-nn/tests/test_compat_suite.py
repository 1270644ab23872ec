"""The compatibility suite (examples/compat): each program, a plain PyTorch script, runs once with PyTorch and once
with ember as ``torch`` (``python -m ember.compat``), each library in its own process, and the losses must agree
step by step.

Both runs start from the same weights and data because ember's CPU random stream is PyTorch's bit for bit
(manual_seed, rand/randn/randint/randperm, dropout, nn.init); the data come from NumPy with fixed seeds. The runs
are CPU-only (CUDA_VISIBLE_DEVICES is emptied) and single-threaded (OMP_NUM_THREADS=1: the same reduction order
for PyTorch on any machine, and no spinning threads on a busy one).

Tolerances (relative, every loss of a run): float32 programs 1e-5, which leaves a margin of 5x over the largest
difference measured (2.2e-6, the DCGAN: Adam's first steps move each weight by about lr whatever the size of its
gradient, so a rounding difference in a near-zero gradient becomes a difference of lr); the others measured
1e-7 to 3e-7. The float64 LBFGS program: 1e-9 (measured 3e-13).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SUITE = Path(__file__).resolve().parents[3] / "examples" / "compat" / "run_suite.py"
pytestmark = pytest.mark.slow

_DROPOUT_ZERO_INPUT = pytest.mark.xfail(strict=True, reason=(
    "ember's dropout VJP (ember/_ops/nn_misc.py, the RNG helper's file) rebuilds the mask as "
    "(out != 0) | (input == 0), so a dropped element whose input is exactly 0 passes its gradient (times "
    "1/(1-p)) instead of 0. In TransformerEncoderLayer a query whose only unmasked attention weight is dropped "
    "gives a zero row (out_proj's bias starts at zero), and dropout1's gradient there is wrong "
    "(losses drift 1e-5 after one step, 3e-4 at the test)"))

# case (as run_suite.py takes it) -> relative tolerance, marks
CASES = {
    "mnist_cnn": (1e-5, ()),
    "mnist_cnn:num_workers=2": (1e-5, ()),
    "vae": (1e-5, ()),
    "word_language_model_lstm": (1e-5, ()),
    "word_language_model_transformer": (1e-5, (_DROPOUT_ZERO_INPUT,)),
    "gcn": (1e-5, ()),
    "dcgan": (1e-5, ()),
    "super_resolution": (1e-5, ()),
    "time_sequence_prediction": (1e-9, ()),
    "time_sequence_prediction:line_search_fn='strong_wolfe'": (1e-9, ()),
    "gpt": (1e-5, ()),
    "gpt:flash=False": (1e-5, ()),
    "gpt:dropout=0.1": (1e-5, ()),
    "resnet": (1e-5, ()),
}


def test_cases_are_the_suites():
    sys.path.insert(0, str(SUITE.parent))
    try:
        import run_suite
    finally:
        sys.path.remove(str(SUITE.parent))
    assert list(CASES) == run_suite.CASES


def _run(cases, *prefix):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, *prefix, str(SUITE), "--json", *cases], capture_output=True, text=True,
                         env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def runs(request):
    """{"torch": results, "ember": results} of the cases this session selected, each library run once."""
    cases = [item.callspec.params["case"] for item in request.session.items
             if item.module is request.module and hasattr(item, "callspec")]
    torch_run, ember_run = _run(cases), _run(cases, "-m", "ember.compat")
    assert (torch_run["library"], ember_run["library"]) == ("torch", "ember")
    return {"torch": torch_run, "ember": ember_run}


@pytest.mark.parametrize("case", [pytest.param(c, marks=m) for c, (_, m) in CASES.items()])
def test_losses_match_torch(runs, case):
    expected, got = runs["torch"][case], runs["ember"][case]
    assert "error" not in expected, expected["error"]
    assert "error" not in got, got["error"]
    expected, got = expected["losses"], got["losses"]
    assert len(got) == len(expected)
    rtol = CASES[case][0]
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(expected, got)) if not abs(a - b) <= rtol * abs(a)]
    assert not bad, f"losses beyond rtol {rtol} (step, torch, ember): {bad}"


def test_gpt_checkpoint_resumes_across_libraries(tmp_path):
    """nanoGPT-style checkpoint (model, AdamW with two groups, LambdaLR, the CPU random state) saved at iteration 4
    by one library and resumed by the other gives the losses of one uninterrupted run."""
    a, b = repr(str(tmp_path / "from_torch")), repr(str(tmp_path / "from_ember"))
    straight = _run(["gpt", f"gpt:steps=4,out_dir={a}"])
    ember_run = _run([f"gpt:steps=8,out_dir={a},init_from='resume'", f"gpt:steps=4,out_dir={b}"], "-m", "ember.compat")
    torch_run = _run([f"gpt:steps=8,out_dir={b},init_from='resume'"])
    full = straight["gpt"]["losses"]
    pieces = [straight[f"gpt:steps=4,out_dir={a}"], ember_run[f"gpt:steps=8,out_dir={a},init_from='resume'"],
              ember_run[f"gpt:steps=4,out_dir={b}"], torch_run[f"gpt:steps=8,out_dir={b},init_from='resume'"]]
    for piece in pieces:
        assert "error" not in piece, piece["error"]
    torch_then_ember = pieces[0]["losses"] + pieces[1]["losses"]
    ember_then_torch = pieces[2]["losses"] + pieces[3]["losses"]
    assert len(torch_then_ember) == len(ember_then_torch) == len(full) == 8
    for run in (torch_then_ember, ember_then_torch):
        assert all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(full, run)), (full, run)
