"""DataLoader: batches of a dataset in a sampler's order, loaded in the main process or by worker
processes, with torch.utils.data.DataLoader's arguments, checks, warnings and messages.

With num_workers > 0 the iterator starts that many processes (see _utils.worker), hands them
(task id, indices) round-robin, at most prefetch_factor tasks per worker ahead of the consumer, and
yields their results in task order. Each worker seeds itself from base_seed + its id, base_seed
being one draw from the loader's generator per iterator, as PyTorch draws it.
"""

import atexit
import math
import multiprocessing
import os
import queue
import time
import typing
import warnings

from ..._factories import empty
from fastgrad.accelerator import is_available as _accelerator_available
from ._utils import worker as _worker
from ._utils.collate import default_collate, default_convert
from ._utils.fetch import _DatasetKind
from ._utils.worker import ExceptionWrapper, get_worker_info
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from fastgrad._types import int64

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

_python_exiting = False  # set at interpreter exit: iterators collected then leave their workers to multiprocessing


def _note_python_exit():
    global _python_exiting
    _python_exiting = True


atexit.register(_note_python_exit)


class _InfiniteConstantSampler(Sampler):
    """None forever: the 'indices' of an iterable dataset, whose fetcher just takes the next sample."""

    def __iter__(self):
        while True:
            yield None


def _cpu_count():
    """The CPUs this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


# Attributes that define the loading order and batches, fixed once the loader is built.
_FROZEN_ATTRIBUTES = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


_T_co = typing.TypeVar("_T_co", covariant=True)


class DataLoader(typing.Generic[_T_co]):
    """Iterates over `dataset` in batches of batch_size (None: sample by sample) in the order of
    `sampler` (sequential, or random with shuffle=True) or of `batch_sampler`, collated by
    collate_fn, in num_workers worker processes (0: in this process). Generic as PyTorch's."""

    _initialized = False

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
    ):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    f"batch_sampler option, but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._initialized = True
        self._IterableDataset_len_called = None  # len(self) of an iterable dataset, to warn when it runs longer
        self._iterator = None  # the one iterator of persistent workers
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got "
                    f"num_workers={self.num_workers}"
                )
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(
                        f"multiprocessing_context option should specify a valid start method in {methods!r}, but got "
                        f"multiprocessing_context={context!r}"
                    )
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a string specifying the "
                    f"start method, but got multiprocessing_context={context}"
                )
        self._multiprocessing_context = context

    def __setattr__(self, name, value):
        if self._initialized and name in _FROZEN_ATTRIBUTES:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None:
            self._iterator = self._get_iterator()
        else:
            self._iterator._reset(self)
        return self._iterator

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Map:
            return len(self._index_sampler)
        # the dataset's own estimate: the loader cannot know how the workers split it
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is None:
            return length
        return length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)

    def check_worker_number_rationality(self):
        """Warns when the loader would start more workers than this process has CPUs."""
        if not self.num_workers:
            return
        suggested = _cpu_count()
        if suggested is not None and self.num_workers <= suggested:
            return
        if suggested is None:
            advice = "DataLoader is not able to compute a suggested max number of worker in current system."
        else:
            cpuset = "" if hasattr(os, "sched_getaffinity") else " (`cpuset` is not taken into account)"
            advice = (
                f"Our suggested max number of worker in current system is {suggested}{cpuset}, which is smaller "
                "than what this DataLoader is going to create."
            )
        warnings.warn(
            f"This DataLoader will create {self.num_workers} worker processes in total. {advice} "
            "Please be aware that excessive worker creation might get DataLoader running slow or even freeze, "
            "lower the worker number to avoid potential slowness/freeze if necessary.",
            stacklevel=2,
        )


class _BaseDataLoaderIter:
    """One pass over a DataLoader: the state both the single- and the multi-process iterator keep."""

    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        if loader.pin_memory and loader.pin_memory_device:
            warnings.warn(
                "pin_memory_device is deprecated, the current accelerator will be used as the device,"
                f"ignore pin_memory_device='{loader.pin_memory_device}'.",
                stacklevel=3,
            )
        if loader.pin_memory and not _accelerator_available():
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, "
                "then device pinned memory won't be used.",
                stacklevel=3,
            )
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = empty((), dtype=int64).random_(generator=loader.generator).item()
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)  # may raise StopIteration

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        reported = self._IterableDataset_len_called
        if self._dataset_kind == _DatasetKind.Iterable and reported is not None and self._num_yielded > reported:
            message = (
                f"Length of IterableDataset {self._dataset} was reported to be {reported}"
                f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. "
            )
            if self._num_workers > 0:
                message += (
                    "For multiprocessing data-loading, this could be caused by not properly configuring the "
                    "IterableDataset replica at each worker. Please see "
                    "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for examples."
                )
            warnings.warn(message, stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled", type(self).__name__)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._dataset_fetcher = _DatasetKind.create_fetcher(
            self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        return self._dataset_fetcher.fetch(self._next_index())  # either may raise StopIteration


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Batches loaded by worker processes, yielded in the sampler's order (with in_order=True)."""

    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        context = loader.multiprocessing_context or multiprocessing.get_context()
        self._worker_result_queue = context.Queue()
        self._workers_done_event = context.Event()
        self._shutdown = False
        self._index_queues = []
        self._workers = []
        for worker_id in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()  # tasks left unread at shutdown are dropped
            process = context.Process(
                target=_worker._worker_loop,
                args=(
                    self._dataset_kind,
                    self._dataset,
                    index_queue,
                    self._worker_result_queue,
                    self._workers_done_event,
                    self._auto_collation,
                    self._collate_fn,
                    self._drop_last,
                    self._base_seed,
                    loader.worker_init_fn,
                    worker_id,
                    self._num_workers,
                ),
                daemon=True,
            )
            process.start()
            self._index_queues.append(index_queue)
            self._workers.append(process)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0  # the id of the next task to send
        self._rcvd_idx = 0  # the id of the next task to yield
        self._task_worker = {}  # task id -> the worker it went to, until it is yielded
        self._early_results = {}  # task id -> data that arrived before its turn
        self._workers_status = [True] * self._num_workers  # False once a worker will take no more tasks
        self._next_worker = 0
        if not first_iter:  # persistent workers start a new pass: wait until each has restarted
            for index_queue in self._index_queues:
                index_queue.put(_worker._ResumeIteration())
            resumed = 0
            while resumed < self._num_workers:
                task_id, _ = self._get_data()
                resumed += isinstance(task_id, _worker._ResumeIteration)
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_get_data(self, timeout):
        """(True, a worker's message), or (False, None) if none came within timeout; a RuntimeError
        when a worker died."""
        try:
            return True, self._worker_result_queue.get(timeout=timeout)
        except Exception as error:
            failed = []
            for worker_id, process in enumerate(self._workers):
                if self._workers_status[worker_id] and not process.is_alive():
                    failed.append(process)
                    self._mark_worker_as_unavailable(worker_id)
            if failed:
                pids = ", ".join(str(process.pid) for process in failed)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly") from error
            if isinstance(error, queue.Empty):
                return False, None
            raise

    def _get_data(self):
        """The next message of the workers. Waits in short steps, so that a worker's death is
        noticed soon, up to the loader's timeout (if any)."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else math.inf
        while True:
            step = min(_worker.WORKER_POLL_INTERVAL, deadline - time.monotonic())
            success, data = self._try_get_data(max(step, 0))
            if success:
                return data
            if time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _skip_settled_tasks(self):
        """Moves _rcvd_idx past tasks that were yielded out of order, or that will never be answered
        (sent to a worker whose copy of an iterable dataset has ended)."""
        while self._rcvd_idx < self._send_idx:
            worker_id = self._task_worker.get(self._rcvd_idx)
            if worker_id is not None and (self._rcvd_idx in self._early_results or self._workers_status[worker_id]):
                return
            self._task_worker.pop(self._rcvd_idx, None)
            self._rcvd_idx += 1

    def _next_data(self):
        while True:
            self._skip_settled_tasks()
            if self._rcvd_idx == self._send_idx:  # every task answered: the pass is over
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if self._rcvd_idx in self._early_results:
                del self._task_worker[self._rcvd_idx]
                return self._process_data(self._early_results.pop(self._rcvd_idx))
            task_id, data = self._get_data()
            if isinstance(data, _worker._IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False  # it stays for the next pass
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
            elif task_id == self._rcvd_idx or not self._in_order:
                del self._task_worker[task_id]  # settled: _skip_settled_tasks moves past it
                return self._process_data(data)
            else:
                self._early_results[task_id] = data

    def _try_put_index(self):
        """Sends the sampler's next index to the next worker still taking tasks, if any."""
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = self._next_worker
            self._next_worker = (worker_id + 1) % self._num_workers
            if self._workers_status[worker_id]:
                break
        else:
            return
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_worker[self._send_idx] = worker_id
        self._send_idx += 1

    def _process_data(self, data):
        self._try_put_index()  # one task out, the next one in
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id):
        self._index_queues[worker_id].put(None)  # tells the worker to exit
        self._workers_status[worker_id] = False

    def _shutdown_workers(self):
        if _python_exiting or self._shutdown:
            return
        self._shutdown = True
        try:
            self._workers_done_event.set()
            for worker_id, active in enumerate(self._workers_status):
                if self._persistent_workers or active:
                    self._mark_worker_as_unavailable(worker_id)
            for process in self._workers:
                process.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL)
            for index_queue in self._index_queues:
                index_queue.close()
        finally:
            for process in self._workers:
                if process.is_alive():
                    process.terminate()
                    process.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL)

    def __del__(self):
        if hasattr(self, "_shutdown"):  # not when __init__ failed before the workers existed
            self._shutdown_workers()
