"""The examples of docs/rpc.md (the parameter server and the pipeline) run as written: each is a script that
starts its own workers; both run at once, as separate processes."""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "rpc.md"


def _scripts():
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.M | re.S)
    return [b for b in blocks if '__name__ == "__main__"' in b]


@pytest.mark.slow
def test_examples_run(tmp_path):
    scripts = _scripts()
    assert len(scripts) == 2
    procs = []
    for i, code in enumerate(scripts):
        path = tmp_path / f"example{i}.py"
        path.write_text(code)
        procs.append(subprocess.Popen([sys.executable, str(path)], cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=120)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
    assert "final losses:" in outputs[0] and "loss " in outputs[1]
