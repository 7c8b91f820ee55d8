"""The worker processes of a DataLoader with num_workers > 0: the loop each runs, what
get_worker_info() tells the code inside one, and how an exception travels back to the main process.

A worker seeds Python's random, the backend's default generator and numpy's global generator from
base_seed + worker_id (numpy's as PyTorch seeds it: SeedSequence([worker_id, low and high 32 bits
of base_seed])), then answers (task id, index) messages from its index queue with (task id, data)
on the shared result queue until it is told to stop or its parent dies.
"""

import dataclasses
import os
import queue
import random
import sys
import traceback

import numpy as np

from .... import _prims
from ....random import manual_seed
from .fetch import _DatasetKind

__all__ = ["WorkerInfo", "get_worker_info"]

# How long the main process waits for a worker to exit.
MP_STATUS_CHECK_INTERVAL = 5.0
# How often a waiting main process checks that its workers live, and an idle worker that the loader
# still wants it and that its parent lives. (The worker's None message can be lost when the iterator
# dies in a garbage collection, the queue's feeder thread finalized first: the done event then ends
# the worker without seconds of join timeouts.)
WORKER_POLL_INTERVAL = 0.1


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """The worker's id, the number of workers, its seed and its copy of the dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None  # PyTorch's per-thread generators of thread workers; process workers have none
    worker_method: str = "multiprocessing"


_worker_info = None


def get_worker_info():
    """This worker's WorkerInfo inside a DataLoader worker process; None in the main process."""
    return _worker_info


@dataclasses.dataclass(frozen=True)
class _IterableDatasetStopIteration:
    """A worker's answer when its copy of an iterable dataset is exhausted."""

    worker_id: int


@dataclasses.dataclass(frozen=True)
class _ResumeIteration:
    """Tells a persistent worker that a new epoch starts (it echoes this back when ready)."""

    seed: object = None


class KeyErrorMessage(str):
    """A KeyError's message shown as is: KeyError's str() is the repr of its argument."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """The exception being handled, as its type and traceback text, so that it pickles across
    processes and re-raises in the main process with the worker's traceback in its message."""

    def __init__(self, exc_info=None, where="in background"):
        exc_type, exc, tb = exc_info or sys.exc_info()
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where

    def reraise(self):
        # No local holds the exception: exception -> traceback -> this frame -> exception would be a
        # cycle, keeping the iterator (and its workers) alive until a garbage collection.
        raise self._exception()

    def _exception(self):
        message = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            return self.exc_type(KeyErrorMessage(message))
        if getattr(self.exc_type, "message", None):  # exceptions whose message is a keyword argument
            return self.exc_type(message=message)
        try:
            return self.exc_type(message)
        except Exception:  # a type that cannot be built from one message
            return RuntimeError(message)


def _seed_worker(base_seed, worker_id):
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32]).generate_state(4))
    return seed


def _worker_loop(
    dataset_kind,
    dataset,
    index_queue,
    data_queue,
    done_event,
    auto_collation,
    collate_fn,
    drop_last,
    base_seed,
    init_fn,
    worker_id,
    num_workers,
):
    global _worker_info
    try:
        _prims.set_num_threads(1)  # the workers share the machine's cores
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)  # the answer to the first task
        iteration_end = False
        parent = os.getppid()
        while not done_event.is_set() and os.getppid() == parent:
            try:
                task = index_queue.get(timeout=WORKER_POLL_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(task, _ResumeIteration):
                data_queue.put((task, None))
                iteration_end = False
                # a new pass: an iterable dataset is iterated afresh
                fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
                continue
            if task is None:  # the main process is done with this worker
                break
            if iteration_end:
                continue  # tasks sent after the end of the data: no answer is awaited
            task_id, index = task
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as error:
                    if isinstance(error, StopIteration) and dataset_kind == _DatasetKind.Iterable:
                        data = _IterableDatasetStopIteration(worker_id)  # this copy of the stream has ended
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=where)
            data_queue.put((task_id, data))
            del data, index, task  # hold no batch while waiting for the next task
    except KeyboardInterrupt:  # the main process handles Ctrl-C
        pass
    if done_event.is_set():  # nobody reads the results any more: exit without flushing them
        data_queue.cancel_join_thread()
        data_queue.close()
