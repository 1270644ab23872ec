"""examples/train_digits.py for real: the full run reaches 97% test accuracy, and --resume continues
from the checkpoint of an interrupted run."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")
SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "train_digits.py"
pytestmark = pytest.mark.slow


def _run(*args, cwd):
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()


def _accuracy(line):
    m = re.fullmatch(r"test accuracy: (\d+\.\d)%", line)
    assert m, line
    return float(m.group(1))


def test_full_run_reaches_97_percent(tmp_path):
    lines = _run("--checkpoint", str(tmp_path / "ckpt.pt"), cwd=tmp_path)
    assert _accuracy(lines[-1]) >= 97.0
    assert sum(line.startswith("epoch ") for line in lines) == 15  # one summary line per epoch
    assert (tmp_path / "ckpt.pt").exists()


def test_resume_continues_from_checkpoint(tmp_path):
    import ember
    straight = _run("--epochs", "2", "--checkpoint", str(tmp_path / "a.pt"), cwd=tmp_path)
    ckpt = str(tmp_path / "b.pt")
    _run("--epochs", "1", "--checkpoint", ckpt, cwd=tmp_path)  # an interrupted run: stopped after epoch 1
    assert ember.load(ckpt)["epoch"] == 0
    resumed = _run("--epochs", "2", "--checkpoint", ckpt, "--resume", cwd=tmp_path)
    assert resumed[0] == f"resumed from {ckpt} after epoch 1"
    epochs = [line for line in resumed if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 2"]
    assert epochs == [line for line in straight if line.startswith("epoch 2:")]
    assert resumed[-1] == straight[-1]
    assert ember.load(ckpt)["epoch"] == 1
