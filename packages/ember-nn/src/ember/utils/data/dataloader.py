"""``DataLoader``: batches from a dataset, in the main process or in worker processes."""
import itertools
import multiprocessing
import os
import pickle
import queue
import warnings

import ember

from . import _worker
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info"]

get_worker_info = _worker.get_worker_info


class _InfiniteConstantSampler(Sampler):
    """The keys of an iterable dataset: None forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterate over ``dataset`` in batches.

    Keys come from ``sampler`` (sequential, or random with ``shuffle``; drawn from ``generator``) and are
    grouped by ``batch_sampler`` (``batch_size``, ``drop_last``); each group of samples is merged by
    ``collate_fn`` (``default_collate``). ``batch_size=None`` turns batching off (samples pass through
    ``default_convert``). ``num_workers > 0`` loads in that many worker processes, each keeping
    ``prefetch_factor`` batches in flight, seeded ``base_seed + worker_id`` and set up by
    ``worker_init_fn(worker_id)``; ``persistent_workers`` keeps them across epochs. Batches arrive in
    sampler order. ``pin_memory`` is accepted (CPU batches are returned as they are).
    """

    _frozen = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False) if name == "shuffle" else value is not None:
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                                     f"{name}={value}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.prefetch_factor, self.pin_memory = num_workers, prefetch_factor, pin_memory
        self.pin_memory_device, self.timeout, self.worker_init_fn = pin_memory_device, timeout, worker_init_fn
        self.generator, self.persistent_workers, self.in_order = generator, persistent_workers, in_order
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if self.__dict__.get("_initialized") and name in self._frozen:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def multiprocessing_context(self):
        return self._mp_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            if self.num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(context, str):
                valid = multiprocessing.get_all_start_methods()
                if context not in valid:
                    raise ValueError("multiprocessing_context option should specify a valid start method in "
                                     f"{valid!r}, but got multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            elif not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={context}")
        self.__dict__["_mp_context"] = context

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessIter(self)

    def check_worker_number_rationality(self):
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cpus and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our suggested "
                          f"max number of worker in current system is {cpus}, which is smaller than what this "
                          "DataLoader is going to create. Please be aware that excessive worker creation might get "
                          "DataLoader running slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.", stacklevel=3)


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._num_workers = loader.num_workers
        self._iterable = loader._iterable
        self._generator = loader.generator
        self._timeout = loader.timeout
        self._sampler_iter = iter(self._index_sampler)
        if loader.pin_memory and not ember.accelerator.is_available():  # (PyTorch's notice, at each iterator)
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=3)
        self._base_seed = int(ember.empty((), dtype=ember.int64).random_(generator=loader.generator).item())
        self._yielded = 0
        self._loader_len = None
        self._loader = loader

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        self._yielded = 0

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        self._yielded += 1
        return data

    def __len__(self):
        return len(self._loader)

    def _next_keys(self):
        return next(self._sampler_iter)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = _worker.make_fetcher(self._dataset, self._iterable, self._auto_collation, self._collate_fn,
                                             self._drop_last)

    def _next_data(self):
        return self._fetcher.fetch(self._next_keys())


class _MultiProcessIter(_BaseIter):
    """Workers, one index queue each and one result queue; tasks are handed out round robin with up
    to ``prefetch_factor * num_workers`` in flight and results re-ordered by task number. Results of an
    abandoned epoch (persistent workers) are recognised by their generation and dropped."""

    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch = loader.prefetch_factor
        self._persistent = loader.persistent_workers
        loader.check_worker_number_rationality()
        ctx = loader.multiprocessing_context or multiprocessing
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        self._generation = 0
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()  # never block exit on tasks nobody will read
            w = ctx.Process(target=_worker.worker_loop, daemon=True,
                            args=(self._dataset, self._iterable, index_queue, self._result_queue, self._done_event,
                                  self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                                  loader.worker_init_fn, i, self._num_workers))
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._start_epoch(first=True)

    def _start_epoch(self, first=False):
        self._send_idx = self._rcvd_idx = 0
        self._worker_queue_cycle = itertools.cycle(range(self._num_workers))  # each epoch starts at worker 0
        self._task_info = {}  # task -> (worker,) while pending, (worker, payload) once it arrived early
        self._outstanding = 0
        self._active = [True] * self._num_workers
        if not first:
            self._generation += 1
            if self._iterable:
                for q in self._index_queues:
                    q.put(_worker._Reset())
        for _ in range(self._prefetch * self._num_workers):
            self._put_task()

    def _reset(self, loader):
        super()._reset(loader)
        self._start_epoch()

    def _put_task(self):
        if self._outstanding >= self._prefetch * self._num_workers:
            return
        try:
            keys = self._next_keys()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker = next(self._worker_queue_cycle)
            if self._active[worker]:
                break
        else:
            return  # every worker's iterable dataset is exhausted
        self._index_queues[worker].put((self._generation, self._send_idx, keys))
        self._task_info[self._send_idx] = (worker,)
        self._outstanding += 1
        self._send_idx += 1

    def _get_result(self):
        """The next result from any worker; fails if workers died or ``timeout`` passed."""
        wait = self._timeout if self._timeout > 0 else _worker.STATUS_CHECK_INTERVAL
        while True:
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                if self._timeout > 0:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly") from None

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._active[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]  # its worker ran out of data: no result will come
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                payload = self._task_info.pop(self._rcvd_idx)[1]
                return self._process(payload)
            if self._shutdown:
                raise StopIteration
            generation, task, payload = self._get_result()
            if generation != self._generation:
                continue  # left over from an abandoned epoch
            self._outstanding -= 1
            if isinstance(payload, _worker._IterationEnd):
                self._active[payload.worker_id] = False
                self._put_task()
                continue
            if task != self._rcvd_idx:
                self._task_info[task] += (payload,)
                continue
            del self._task_info[task]
            return self._process(payload)

    def _process(self, payload):
        self._rcvd_idx += 1
        self._put_task()
        if isinstance(payload, _worker.ExceptionWrapper):
            if not self._persistent:
                self._shutdown_workers()
            payload.reraise()
        return pickle.loads(payload)

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                q.put(None)
            for w in self._workers:
                w.join(timeout=_worker.STATUS_CHECK_INTERVAL)
            for q in self._index_queues:
                q.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()

    def __del__(self):
        if getattr(self, "_workers", None) is not None:
            try:
                self._shutdown_workers()
            except Exception:  # interpreter shutdown: queues may already be gone
                pass
