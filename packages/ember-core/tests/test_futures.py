"""ember.futures.Future, collect_all and wait_all (one process)."""
import threading

import pytest

from ember.futures import Future, collect_all, wait_all


def test_result_callbacks_and_then():
    f = Future()
    seen = []
    f.add_done_callback(lambda x: seen.append(x.value()))
    chained = f.then(lambda x: x.wait() * 2)
    assert not f.done() and not chained.done()
    with pytest.raises(RuntimeError):
        f.value()
    threading.Timer(0.01, f.set_result, (21,)).start()
    assert chained.wait() == 42
    assert f.done() and f.value() == 21 and seen == [21]
    with pytest.raises(RuntimeError, match="completed Future as complete again"):
        f.set_result(1)
    late = []
    f.add_done_callback(lambda x: late.append(x.wait()))  # done already: runs at once
    assert late == [21]


def test_exceptions():
    f = Future()
    f.set_exception(ValueError("bad value"))
    with pytest.raises(ValueError, match="bad value"):
        f.wait()
    with pytest.raises(ValueError, match="bad value"):
        f.value()
    g = Future()
    chained = g.then(lambda x: 1 / 0)
    g.set_result(1)
    with pytest.raises(RuntimeError, match="ZeroDivisionError: division by zero"):
        chained.wait()
    with pytest.raises(TypeError):
        Future().set_exception("not an exception")


def test_collect_all_and_wait_all():
    fs = [Future() for _ in range(3)]
    all_done = collect_all(fs)
    for i, f in enumerate(fs):
        assert not all_done.done()
        f.set_result(i)
    assert all_done.wait() == fs
    assert wait_all(fs) == [0, 1, 2]
    assert collect_all([]).wait() == []
    bad = [Future(), Future()]
    bad[0].set_result(1)
    bad[1].set_exception(KeyError("k"))
    assert collect_all(bad).wait() == bad  # collect_all completes with the futures, errors inside
    with pytest.raises(KeyError):
        wait_all(bad)
