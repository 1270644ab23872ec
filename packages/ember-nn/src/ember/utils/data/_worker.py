"""What runs inside a DataLoader worker process, and the objects the processes exchange.

A worker reads ``(generation, task, keys)`` from its own index queue and puts
``(generation, task, payload)`` on the shared result queue, where the payload is the batch pickled
with protocol 5 (NumPy arrays travel as raw buffers, not element by element), an ``ExceptionWrapper``,
or ``_IterationEnd`` for an exhausted iterable dataset. ``None`` on the index queue stops the worker;
``_Reset`` restarts an iterable dataset's iterator (persistent workers, new epoch).
"""
import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

STATUS_CHECK_INTERVAL = 5.0  # seconds between checks that the parent process is still alive

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """About the worker process this runs in: ``id``, ``num_workers``, ``seed`` and its copy of ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """The ``WorkerInfo`` of the current DataLoader worker process; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process with its traceback as text."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyError(msg)  # KeyError would quote the message: wrap it so it prints readably
        try:
            exc = self.exc_type(msg)
        except Exception:  # exception types whose constructor needs other arguments
            raise RuntimeError(msg) from None
        raise exc


class _IterationEnd:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Reset:
    """Restart the iterable dataset's iterator (a persistent worker's new epoch)."""


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, keys):
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(keys) if callable(getitems) else [self.dataset[k] for k in keys]
        else:
            data = self.dataset[keys]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, keys):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in keys:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(keys)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last):
    kind = _IterableFetcher if iterable else _MapFetcher
    return kind(dataset, auto_collation, collate_fn, drop_last)


def _seed_worker(seed, worker_id):
    """Seed Python's, ember's and NumPy's global generators in the worker from its own seed."""
    import ember
    random.seed(seed)
    ember.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, seed]).generate_state(4))


def worker_loop(dataset, iterable, index_queue, result_queue, done_event, auto_collation, collate_fn, drop_last,
                base_seed, init_fn, worker_id, num_workers):
    """The body of a worker process."""
    global _worker_info
    try:
        seed = base_seed + worker_id
        _seed_worker(seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        parent = os.getppid()
        exhausted = False
        while True:
            try:
                msg = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent or done_event.is_set():
                    break  # the main process died or gave up on us
                continue
            if msg is None:
                break
            if isinstance(msg, _Reset):
                if init_error is None:
                    fetcher = make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last)
                exhausted = False
                continue
            if done_event.is_set():
                continue  # shutting down: drain the queue without working
            generation, task, keys = msg
            if init_error is not None:
                payload, init_error = init_error, None
                exhausted = True
            elif exhausted:
                payload = _IterationEnd(worker_id)
            else:
                try:
                    payload = pickle.dumps(fetcher.fetch(keys), protocol=5)
                except StopIteration:
                    payload, exhausted = _IterationEnd(worker_id), True
                except Exception:
                    payload = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            result_queue.put((generation, task, payload))
            del payload
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        result_queue.cancel_join_thread()
    result_queue.close()
