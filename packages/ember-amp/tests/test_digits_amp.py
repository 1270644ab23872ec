"""The digits demo (examples/train_digits.py) trained with bfloat16 autocast and a GradScaler reaches the
float32 run's test accuracy within one point."""
import importlib.util
import pathlib
import re

import pytest

DEMO = pathlib.Path(__file__).resolve().parents[3] / "examples" / "train_digits.py"


@pytest.mark.skipif(not DEMO.exists(), reason="examples/train_digits.py is not in this checkout")
def test_bfloat16_autocast_training_matches_float32_accuracy(tmp_path, capsys):
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("train_digits", DEMO)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    accuracy = {}
    for flag in ([], ["--amp"]):
        demo.main(["--epochs", "8", "--checkpoint", str(tmp_path / "ckpt.pt"), *flag])
        out = capsys.readouterr().out
        accuracy[bool(flag)] = float(re.findall(r"test accuracy: ([\d.]+)%", out)[-1])
    assert accuracy[False] > 90
    assert accuracy[True] >= accuracy[False] - 1.0, accuracy
