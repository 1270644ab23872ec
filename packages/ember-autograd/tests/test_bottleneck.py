"""python -m ember.utils.bottleneck: environment summary, cProfile and autograd profiler reports."""
import subprocess
import sys

import pytest

SCRIPT = """
import sys
import ember
x = ember.ones(16, 16, requires_grad=True)
for _ in range(int(sys.argv[1])):
    (x @ x).tanh().sum().backward()
print("script ran with", sys.argv[1:])
if sys.argv[-1] == "exit":
    sys.exit(3)
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return str(path)


def test_report_sections(script, capsys):
    from ember.utils.bottleneck.__main__ import main
    assert main(["--topk", "3", script, "2", "exit", "--topk", "9"]) == 0  # the script's own arguments and exit
    out = capsys.readouterr().out
    sections = ["Environment Summary", "cProfile output", "autograd profiler output (CPU mode)"]
    positions = [out.index(s) for s in sections]
    assert positions == sorted(positions)
    assert "CUDA mode" not in out or "CUDA available : True" in out
    assert "ember          : " in out and "CUDA available" in out
    assert out.count("script ran with ['2', 'exit', '--topk', '9']") == 2
    profile = out[positions[2]:]
    assert "ember::matmul" in profile and "Self CPU time total" in profile
    assert len([line for line in profile.splitlines() if line.strip().startswith("ember::")]) == 3
    assert "Ordered by: internal time" in out[positions[1]:positions[2]]


@pytest.mark.slow
def test_module_entry_point(script):
    run = subprocess.run([sys.executable, "-m", "ember.utils.bottleneck", script, "1"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "autograd profiler output" in run.stdout and "ember::matmul" in run.stdout
    usage = subprocess.run([sys.executable, "-m", "ember.utils.bottleneck", "-h"], capture_output=True, text=True)
    assert usage.returncode == 0 and "scriptfile" in usage.stdout
