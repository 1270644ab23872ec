"""ember.compat: ``import torch`` resolving to ember, in-process and through ``python -m ember.compat``.

Every check runs in a fresh interpreter, so that this process's sys.modules never sees the alias. No PyTorch is
needed: the programs written below import torch only through the alias (their lines are kept as separate string
literals, so that the root conftest does not take this module for one that imports torch).
"""
import multiprocessing
import subprocess
import sys

import pytest


def _write(path, *lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _python(*args, cwd):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def _ok(out):
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_run_script_as_main_with_torch_modules_from_ember(tmp_path):
    _write(tmp_path / "helper.py", "VALUE = 42")
    script = _write(
        tmp_path / "prog.py",
        "import os, sys",
        "import torch",
        "import torch.linalg as LA",
        "from torch.utils import dlpack",
        "import ember, ember.linalg, ember.utils.dlpack",
        "import helper",  # a module beside the script: sys.path[0] is the script's folder
        "assert __name__ == '__main__'",
        "assert torch is ember and LA is ember.linalg and dlpack is ember.utils.dlpack",
        "assert torch.fft is ember.fft and sys.modules['torch.linalg'] is ember.linalg",
        "assert sys.path[0] == os.path.dirname(os.path.abspath(__file__))",
        "assert torch.Tensor is ember.Tensor and isinstance(torch.ones(2), ember.Tensor)",
        "print(sys.argv[1:], helper.VALUE, torch.__name__, (torch.arange(4) * 2).tolist())",
    )
    lines = _ok(_python("-m", "ember.compat", str(script), "a", "--flag", cwd=tmp_path.parent))
    assert lines == ["['a', '--flag'] 42 ember [0, 2, 4, 6]"]


def test_run_module_with_dash_m(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    _write(pkg / "__init__.py")
    _write(pkg / "tool.py",
           "import sys",
           "import torch",
           "print(__name__, torch.__name__, sys.argv[1:])")
    lines = _ok(_python("-m", "ember.compat", "-m", "pkg.tool", "x", cwd=tmp_path))
    assert lines == ["__main__ ember ['x']"]


def test_missing_submodule_is_module_not_found_under_its_torch_name(tmp_path):
    script = _write(
        tmp_path / "prog.py",
        "try:",
        "    import torch.no_such_module",
        "except ModuleNotFoundError as e:",
        "    print(e.name)",
    )
    assert _ok(_python("-m", "ember.compat", str(script), cwd=tmp_path)) == ["torch.no_such_module"]


def test_only_torch_and_its_submodules_are_aliased(tmp_path):
    # a top-level module whose name merely starts with "torch" is imported as itself
    _write(tmp_path / "torchlike.py", "NAME = 'the real torchlike'")
    script = _write(tmp_path / "prog.py", "import torchlike", "print(torchlike.NAME)")
    assert _ok(_python("-m", "ember.compat", str(script), cwd=tmp_path)) == ["the real torchlike"]


def test_install_in_process_is_idempotent_and_refuses_a_torch_already_imported(tmp_path):
    script = _write(
        tmp_path / "prog.py",
        "import sys, types",
        "import ember.compat",
        "ember.compat.install_torch_alias()",
        "ember.compat.install_torch_alias()",
        "print(sum(isinstance(f, ember.compat.TorchAliasFinder) for f in sys.meta_path))",
        "import torch",
        "print(torch.__name__)",
        "del sys.modules['torch']",
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ember.compat.TorchAliasFinder)]",
        "sys.modules['torch'] = types.ModuleType('torch')",  # stands for a real torch imported earlier
        "try:",
        "    ember.compat.install_torch_alias()",
        "except RuntimeError as e:",
        "    print('refused:', 'imported already' in str(e))",
    )
    assert _ok(_python(str(script), cwd=tmp_path)) == ["1", "ember", "refused: True"]


def test_the_script_run_with_python_m_compat_can_install_the_alias_again(tmp_path):
    # the script's own call finds the finder the command line installed (one class, not __main__'s copy)
    script = _write(
        tmp_path / "prog.py",
        "import sys",
        "import ember.compat",
        "ember.compat.install_torch_alias()",
        "print(sum(type(f).__name__ == 'TorchAliasFinder' for f in sys.meta_path))",
    )
    assert _ok(_python("-m", "ember.compat", str(script), cwd=tmp_path)) == ["1"]


@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_child_processes_import_ember_as_torch_too(tmp_path, method):
    # a spawned or forkserver child runs the main script again: its `import torch` must find ember there as well
    script = _write(
        tmp_path / "prog.py",
        "import multiprocessing, sys",
        "import torch",
        "def name(_):",
        "    return torch.__name__",
        "if __name__ == '__main__':",
        "    with multiprocessing.get_context(sys.argv[1]).Pool(1) as pool:",
        "        print(pool.map(name, [0]))",
    )
    assert _ok(_python("-m", "ember.compat", str(script), method, cwd=tmp_path)) == ["['ember']"]


def test_objects_saved_under_the_alias_load_in_plain_ember(tmp_path):
    script = _write(
        tmp_path / "prog.py",
        "import sys",
        "import torch",
        "torch.save({'w': torch.arange(3.0)}, sys.argv[1])",
    )
    _ok(_python("-m", "ember.compat", str(script), str(tmp_path / "w.pt"), cwd=tmp_path))
    check = "import ember, sys; print(ember.load(sys.argv[1])['w'].tolist(), 'torch' in sys.modules)"
    assert _ok(_python("-c", check, str(tmp_path / "w.pt"), cwd=tmp_path)) == ["[0.0, 1.0, 2.0] False"]


@pytest.mark.parametrize("body, code", [("raise SystemExit(3)", 3), ("raise ValueError('boom')", 1)])
def test_exit_status_and_traceback_of_the_script(tmp_path, body, code):
    script = _write(tmp_path / "prog.py", body)
    out = _python("-m", "ember.compat", str(script), cwd=tmp_path)
    assert out.returncode == code
    if code == 1:
        assert "prog.py" in out.stderr and "ValueError: boom" in out.stderr


@pytest.mark.parametrize("args, code", [([], 2), (["-m"], 2), (["--help"], 0)])
def test_usage(tmp_path, args, code):
    out = _python("-m", "ember.compat", *args, cwd=tmp_path)
    assert out.returncode == code
    assert "usage: python -m ember.compat script.py" in out.stderr


def test_a_missing_script_fails_like_python(tmp_path):
    out = _python("-m", "ember.compat", str(tmp_path / "absent.py"), cwd=tmp_path)
    assert out.returncode == 2
    assert "can't open file" in out.stderr and "absent.py" in out.stderr


def test_script_file_and_argv_as_python_gives_them(tmp_path):
    # `python prog.py` keeps argv[0] as typed and gives the code its absolute path (warnings name that file)
    _write(tmp_path / "prog.py",
           "import os, sys, warnings",
           "warnings.simplefilter('always')",
           "with warnings.catch_warnings(record=True) as w:",
           "    warnings.warn('x')",
           "print(sys.argv[0], __file__ == os.path.abspath('prog.py'), w[0].filename == __file__)")
    plain = _ok(_python("prog.py", cwd=tmp_path))
    assert _ok(_python("-m", "ember.compat", "prog.py", cwd=tmp_path)) == plain == ["prog.py True True"]
