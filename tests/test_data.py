"""fastgrad.utils.data against torch.utils.data: the same datasets, samplers and loader options give
the same batches (values, dtypes, container types), lengths, index orders, warnings and errors;
worker processes load what the main process loads, in order, and report errors and worker info as
PyTorch's do."""

import collections
import contextlib
import gc
import io
import os
import pickle
import random
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

from oracle_helpers import same_error

_X = np.arange(14, dtype=np.float32).reshape(7, 2)
_Y = np.arange(7, dtype=np.int64) * 10
Point = collections.namedtuple("Point", "x y")


def plain(value):
    """Tensors and numpy arrays as (kind, dtype name, values), containers kept with their types, so
    that what two libraries load compares with ==."""
    if isinstance(value, np.ndarray):
        return "ndarray", value.dtype.str, value.tolist()
    if hasattr(value, "requires_grad"):
        return "tensor", str(value.dtype).rsplit(".", 1)[-1], value.tolist()
    if isinstance(value, dict):
        return {key: plain(v) for key, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value).__name__, [plain(v) for v in value]
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def same_loading(fg, torch, make):
    """make(lib) gives an iterable (a loader or a sampler) over lib: both libraries yield the same."""
    ours, theirs = plain(list(make(fg))), plain(list(make(torch)))
    assert ours == theirs
    return ours


def tensors(lib):
    return lib.utils.data.TensorDataset(lib.tensor(_X), lib.tensor(_Y))


class Stream:
    """An iterable dataset of the numbers start..stop-1, split between workers as PyTorch's docs do."""

    def __new__(cls, lib, start, stop):
        class Numbers(lib.utils.data.IterableDataset):
            def __init__(self):
                self.start, self.stop = start, stop

            def __iter__(self):
                info = lib.utils.data.get_worker_info()
                if info is None:
                    return iter(range(self.start, self.stop))
                share = -(-(self.stop - self.start) // info.num_workers)
                first = self.start + info.id * share
                return iter(range(first, min(first + share, self.stop)))

            def __len__(self):
                return self.stop - self.start

        return Numbers()


# ---- datasets


@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (1, False), (7, True)])
def test_tensor_dataset_batches(fg, torch, batch_size, drop_last):
    loaded = same_loading(
        fg, torch, lambda lib: lib.utils.data.DataLoader(tensors(lib), batch_size, drop_last=drop_last)
    )
    lengths = [len(lib.utils.data.DataLoader(tensors(lib), batch_size, drop_last=drop_last)) for lib in (fg, torch)]
    assert lengths == [len(loaded)] * 2


def test_tensor_dataset_size_mismatch(fg, torch):
    same_error(fg, torch, lambda lib: lib.utils.data.TensorDataset(lib.zeros(3), lib.zeros(4)))


def test_concat_dataset(fg, torch):
    def program(lib):
        data = lib.utils.data
        joined = data.TensorDataset(lib.arange(3)) + data.TensorDataset(lib.arange(10, 14))
        assert type(joined) is data.ConcatDataset
        return joined.cumulative_sizes, len(joined), [joined[i] for i in (0, 2, 3, 6, -1, -7)]

    assert plain(program(fg)) == plain(program(torch))
    same_error(fg, torch, lambda lib: lib.utils.data.ConcatDataset([list(range(3))])[-4])
    same_error(fg, torch, lambda lib: lib.utils.data.ConcatDataset([]))
    same_error(fg, torch, lambda lib: lib.utils.data.ConcatDataset([Stream(lib, 0, 2)]))


def test_iterable_datasets_chain_and_batch(fg, torch):
    def chained(lib):
        stream = Stream(lib, 0, 5) + Stream(lib, 10, 12)
        assert type(stream) is lib.utils.data.ChainDataset and len(stream) == 7
        return stream

    assert list(chained(fg)) == list(chained(torch))
    for options in [{"batch_size": 3}, {"batch_size": 3, "drop_last": True}, {"batch_size": None}]:
        loaded = same_loading(fg, torch, lambda lib: lib.utils.data.DataLoader(chained(lib), **options))
        assert len(fg.utils.data.DataLoader(chained(fg), **options)) == len(loaded)
    same_error(fg, torch, lambda lib: list(lib.utils.data.ChainDataset([[1, 2]])))
    same_error(fg, torch, lambda lib: len(lib.utils.data.ChainDataset([[1, 2]])))
    same_error(fg, torch, lambda lib: lib.utils.data.IterableDataset())


def test_iterable_dataset_longer_than_its_len_warns(fg, torch):
    class Longer:
        def __new__(cls, lib):
            class Stream3(lib.utils.data.IterableDataset):
                def __iter__(self):
                    return iter(range(3))

                def __len__(self):
                    return 2

                def __repr__(self):
                    return "Stream3"

            return Stream3()

    def messages(lib):
        loader = lib.utils.data.DataLoader(Longer(lib), batch_size=None)
        len(loader)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            list(loader)
        return [str(w.message) for w in caught]

    assert messages(fg) == messages(torch) != []


def test_subset_and_stack_dataset(fg, torch):
    def program(lib):
        data = lib.utils.data
        subset = data.Subset(tensors(lib), [5, 0, 3])
        pairs = data.StackDataset(list(range(7)), tensors(lib))
        named = data.StackDataset(a=list("abcdefg"), b=subset.dataset)
        loaded = list(data.DataLoader(subset, batch_size=2))
        return len(subset), subset[1], loaded, pairs[2], named[6], list(data.DataLoader(named, batch_size=4))

    assert plain(program(fg)) == plain(program(torch))
    same_error(fg, torch, lambda lib: lib.utils.data.StackDataset([1, 2], [3]))
    same_error(fg, torch, lambda lib: lib.utils.data.StackDataset([1], a=[2]))
    same_error(fg, torch, lambda lib: lib.utils.data.StackDataset())


def test_subset_overriding_only_getitem_is_refused(fg, torch):
    def program(lib):
        class Doubled(lib.utils.data.Subset):
            def __getitem__(self, idx):
                return 2 * super().__getitem__(idx)

        return Doubled([1, 2], [0])

    same_error(fg, torch, program)


@pytest.mark.parametrize("total, fractions", [(10, [0.3, 0.3, 0.4]), (5, [0.5, 0.5]), (7, [0.1, 0.2, 0.7])])
def test_random_split_lengths(fg, torch, total, fractions):
    def lengths(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            parts = lib.utils.data.random_split(range(total), fractions, generator=lib.Generator().manual_seed(1))
        return [len(part) for part in parts], [str(w.message) for w in caught]

    assert lengths(fg) == lengths(torch)


def test_random_split_is_a_seeded_partition(fg):
    def split(seed):
        parts = fg.utils.data.random_split(range(10), [3, 7], generator=fg.Generator().manual_seed(seed))
        return [list(part) for part in parts]

    first = split(4)
    assert first == split(4) != split(5)
    assert sorted(first[0] + first[1]) == list(range(10))


def test_random_split_errors(fg, torch):
    same_error(fg, torch, lambda lib: lib.utils.data.random_split(range(10), [3, 3]))
    same_error(fg, torch, lambda lib: lib.utils.data.random_split(range(10), [1.5, -0.5]))


# ---- samplers


def test_deterministic_samplers(fg, torch):
    def program(lib):
        data = lib.utils.data
        sequential = data.SequentialSampler(range(5))
        batches = [data.BatchSampler(sequential, 2, drop_last) for drop_last in (False, True)]
        by_list = data.BatchSampler([4, 1, 3], 2, False)
        return list(sequential), len(sequential), [(list(b), len(b)) for b in batches], list(by_list)

    assert program(fg) == program(torch)


def test_random_samplers_are_seeded(fg):
    data = fg.utils.data

    def draws(seed):
        generator = fg.Generator().manual_seed(seed)
        return (
            list(data.RandomSampler(range(6), generator=generator)),
            list(data.RandomSampler(range(6), num_samples=8, generator=generator)),
            list(data.RandomSampler(range(6), replacement=True, num_samples=40, generator=generator)),
            list(data.SubsetRandomSampler([10, 20, 30], generator=generator)),
            list(data.WeightedRandomSampler([0.0, 1.0, 3.0], 50, generator=generator)),
            list(data.WeightedRandomSampler([1.0, 0.0, 3.0, 2.0], 3, replacement=False, generator=generator)),
        )

    plain_perm, longer, with_replacement, subset, weighted, unique = draws(3)
    assert draws(3) == (plain_perm, longer, with_replacement, subset, weighted, unique) != draws(4)
    assert sorted(plain_perm) == list(range(6)) and sorted(longer[:6]) == list(range(6)) and len(longer) == 8
    assert len(with_replacement) == 40 and set(with_replacement) <= set(range(6))
    assert sorted(subset) == [10, 20, 30] and set(weighted) <= {1, 2}
    assert len(set(unique)) == 3 and 1 not in unique


def test_sampler_lengths(fg, torch):
    def lengths(lib):
        data = lib.utils.data
        return [
            len(data.RandomSampler(range(5))),
            len(data.RandomSampler(range(5), replacement=True, num_samples=9)),
            len(data.SubsetRandomSampler([1, 2])),
            len(data.WeightedRandomSampler([1.0, 2.0], 4)),
        ]

    assert lengths(fg) == lengths(torch)


@pytest.mark.parametrize(
    "make",
    [
        lambda data: data.RandomSampler(range(3), replacement=1),
        lambda data: data.RandomSampler(range(3), num_samples=0),
        lambda data: data.RandomSampler([]),
        lambda data: data.WeightedRandomSampler([1.0], 0),
        lambda data: data.WeightedRandomSampler([1.0], True),
        lambda data: data.WeightedRandomSampler([1.0], 2, replacement=None),
        lambda data: data.WeightedRandomSampler([[1.0, 2.0]], 2),
        lambda data: data.BatchSampler(range(3), 0, False),
        lambda data: data.BatchSampler(range(3), 2, None),
    ],
)
def test_sampler_errors(fg, torch, make):
    same_error(fg, torch, lambda lib: make(lib.utils.data))


# ---- collation


def test_default_collate_structures_and_dtypes(fg, torch):
    def samples(lib):
        return [
            {
                "int": i,
                "float": i / 2,
                "bool": i % 2 == 0,
                "name": f"s{i}",
                "bytes": b"b",
                "tensor": lib.tensor([i, -i], dtype=lib.float32),
                "array": np.full((2, 2), i, dtype=np.int32),
                "np_scalar": np.float64(i) / 4,
                "np_bool": np.bool_(i == 1),
                "point": Point(i, [i, 2.5]),
                "pair": (i, "x"),
            }
            for i in range(3)
        ]

    assert plain(fg.utils.data.default_collate(samples(fg))) == plain(torch.utils.data.default_collate(samples(torch)))


def test_default_convert(fg, torch):
    def converted(lib):
        sample = (np.int32(3), [np.arange(2.0)], "a", {"k": np.array([True])}, Point(np.float32(1), 2), np.array(["u"]))
        return lib.utils.data.default_convert(sample)

    assert plain(converted(fg)) == plain(converted(torch))


@pytest.mark.parametrize(
    "batch",
    [[object(), object()], [np.array(["a"]), np.array(["b"])], [[1, 2], [3]], [{"a": [1]}, {"a": [1, 2]}]],
)
def test_default_collate_errors(fg, torch, batch):
    same_error(fg, torch, lambda lib: lib.utils.data.default_collate(batch))


def test_collate_fn_map_extends_collation(fg, torch):
    def program(lib):
        collate = lib.utils.data._utils.collate
        table = {**collate.default_collate_fn_map, str: lambda batch, *, collate_fn_map: "".join(batch)}
        return collate.collate([("a", 1), ("b", 2)], collate_fn_map=table)

    assert plain(program(fg)) == plain(program(torch))


# ---- DataLoader options


def test_loader_orders_and_collate_options(fg, torch):
    def loaders(lib):
        data = lib.utils.data
        dataset = tensors(lib)
        return [
            data.DataLoader(dataset, batch_size=None),
            data.DataLoader(dataset, sampler=[6, 1, 4]),
            data.DataLoader(dataset, batch_sampler=[[3, 2], [0]]),
            data.DataLoader(dataset, batch_size=2, collate_fn=lambda batch: len(batch)),
            data.DataLoader([np.float32(1), np.float32(2)], batch_size=None),
        ]

    ours, theirs = loaders(fg), loaders(torch)
    assert [plain(list(a)) for a in ours] == [plain(list(b)) for b in theirs]
    assert [len(a) for a in ours] == [len(b) for b in theirs]


def test_shuffle_is_seeded(fg):
    def order(seed):
        generator = fg.Generator().manual_seed(seed)
        loader = fg.utils.data.DataLoader(tensors(fg), batch_size=3, shuffle=True, generator=generator)
        return [(batch[1] // 10).tolist() for epoch in range(2) for batch in loader]

    first = order(0)
    assert first == order(0) != order(1)
    assert sorted(sum(first[:3], [])) == list(range(7)) and first[:3] != first[3:]


@pytest.mark.parametrize(
    "options",
    [
        {"num_workers": -1},
        {"timeout": -1},
        {"prefetch_factor": 2},
        {"num_workers": 1, "prefetch_factor": -1},
        {"persistent_workers": True},
        {"shuffle": True, "sampler": [0]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_sampler": [[0]], "drop_last": True},
        {"batch_size": None, "drop_last": True},
        {"multiprocessing_context": "spawn"},
        {"num_workers": 1, "multiprocessing_context": "nonesuch"},
        {"num_workers": 1, "multiprocessing_context": 3},
    ],
)
def test_loader_argument_errors(fg, torch, options):
    same_error(fg, torch, lambda lib: lib.utils.data.DataLoader(tensors(lib), **options))


@pytest.mark.parametrize("options", [{"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}])
def test_iterable_dataset_argument_errors(fg, torch, options):
    same_error(fg, torch, lambda lib: lib.utils.data.DataLoader(Stream(lib, 0, 3), **options))


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.utils.data.Dataset()[0],
        lambda lib: next(iter(lib.utils.data.Sampler())),
        lambda lib: pickle.dumps(iter(lib.utils.data.DataLoader([1]))),
        lambda lib: list(lib.utils.data.DataLoader(range(3), batch_size=2.0)),
        lambda lib: len(
            lib.utils.data.DataLoader(type("NoLen", (lib.utils.data.IterableDataset,), {"__iter__": iter})())
        ),
        lambda lib: lib.utils.data.default_collate([lib.zeros(2), lib.zeros(3)]),
    ],
)
def test_base_classes_and_misuse(fg, torch, program):
    same_error(fg, torch, program)


def test_renamed_attribute_warns(fg, torch):
    def program(lib):
        with pytest.warns(FutureWarning) as caught:
            sizes = lib.utils.data.ConcatDataset([[1], [2, 3]]).cummulative_sizes
        return sizes, [str(w.message) for w in caught]

    assert program(fg) == program(torch)


def test_loader_attributes_are_frozen(fg, torch):
    def program(lib):
        loader = lib.utils.data.DataLoader(tensors(lib))
        loader.num_workers = 0  # allowed
        loader.batch_size = 4

    same_error(fg, torch, program)


def test_loader_defaults_and_pin_memory_warning(fg, torch):
    def program(lib):
        loader = lib.utils.data.DataLoader(tensors(lib), pin_memory=True)
        defaults = [loader.batch_size, loader.drop_last, loader.prefetch_factor, loader.timeout, loader.in_order]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = next(iter(loader))
        return defaults, type(loader.sampler).__name__, first, [str(w.message) for w in caught]

    assert plain(program(fg)) == plain(program(torch))


# ---- worker processes


class Indexed:
    """A map-style dataset over `lib` whose samples name the worker that loaded them."""

    def __new__(cls, lib, size, fail_at=None):
        class Samples(lib.utils.data.Dataset):
            def __len__(self):
                return size

            def __getitem__(self, i):
                if i == fail_at:
                    raise ValueError(f"sample {i} is broken")
                info = lib.utils.data.get_worker_info()
                return lib.tensor(float(i)), -1 if info is None else info.id

        return Samples()


def test_workers_load_what_the_main_process_loads(fg):
    def epochs(workers, **options):
        loader = fg.utils.data.DataLoader(
            tensors(fg), 2, shuffle=True, num_workers=workers, generator=fg.Generator().manual_seed(5), **options
        )
        return [plain(list(loader)) for _ in range(2)]

    in_process = epochs(0)
    assert epochs(2) == in_process
    assert [sorted(epoch) for epoch in epochs(2, in_order=False)] == [sorted(epoch) for epoch in in_process]


def test_more_workers_than_cpus_warns(fg, torch):
    def messages(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.utils.data.DataLoader(tensors(lib), num_workers=(os.cpu_count() or 1) + 1)
        return [str(w.message) for w in caught]

    assert messages(fg) == messages(torch) != []


def test_spawned_worker_gets_the_dataset_by_pickling(fg):
    """A spawned worker imports the backend afresh and unpickles the dataset and collate_fn."""
    loader = fg.utils.data.DataLoader(tensors(fg), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert plain(list(loader)) == plain(list(fg.utils.data.DataLoader(tensors(fg), batch_size=4)))


def test_worker_info_and_init_fn(fg, torch):
    def program(lib):
        data = lib.utils.data

        def init(worker_id):  # runs in the worker: it reports through the dataset's copy there
            info = data.get_worker_info()
            base = info.dataset.base = info.seed - info.id
            numpy_seed = np.random.SeedSequence([info.id, base & 0xFFFFFFFF, base >> 32]).generate_state(4)
            info.dataset.seeded = (
                lib.initial_seed() == info.seed,
                random.random() == random.Random(info.seed).random(),
                np.random.random() == np.random.RandomState(numpy_seed).random_sample(),
            )

        def sample(i):
            info = data.get_worker_info()
            dataset = info.dataset
            return info.id, info.num_workers, type(dataset).__name__, dataset.seeded, dataset.base, info.seed

        class Probe(data.Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return sample(i)

        loader = data.DataLoader(Probe(), batch_size=None, num_workers=2, worker_init_fn=init)
        seen = list(loader)
        bases = {row[4] for row in seen}
        assert len(bases) == 1 and all(row[5] == row[4] + row[0] for row in seen)  # seed = base_seed + id
        return data.get_worker_info(), [row[:4] for row in seen]

    assert program(fg) == program(torch)


def loading_error(loader):
    """The type and message of the error iterating loader raises. Not pytest.raises, and without the
    traceback: PyTorch's iterator would stay in a reference cycle until a garbage collection, and its
    workers' shutdown then waits seconds."""
    try:
        list(loader)
    except Exception as error:
        return type(error), str(error.with_traceback(None))
    pytest.fail("no error")


def test_worker_error_is_reraised_with_its_traceback(fg, torch):
    def message(lib):
        error_type, text = loading_error(
            lib.utils.data.DataLoader(Indexed(lib, 6, fail_at=3), batch_size=2, num_workers=2)
        )
        assert error_type is ValueError
        return text

    ours, theirs = message(fg), message(torch)
    assert ours.splitlines()[:2] == theirs.splitlines()[:2]
    assert ours.endswith("ValueError: sample 3 is broken\n") and theirs.endswith("ValueError: sample 3 is broken\n")
    assert 'in __getitem__\n    raise ValueError(f"sample {i} is broken")' in ours


def test_worker_error_leaves_the_iterator_to_reference_counting(fg):
    """The re-raised error holds no cycle: dropping it and the iterator ends the workers at once."""
    if fg.__name__ == "torch":
        pytest.skip("PyTorch's ExceptionWrapper.reraise() keeps its exception in a local: a cycle")
    iterator = iter(fg.utils.data.DataLoader(Indexed(fg, 2, fail_at=0), num_workers=1))
    workers = iterator._workers
    gc.disable()
    try:
        with pytest.raises(ValueError):
            next(iterator)
        del iterator
        assert [process.is_alive() for process in workers] == [False]
    finally:
        gc.enable()


def test_persistent_workers_and_iterable_streams(fg, torch):
    def program(lib):
        data = lib.utils.data
        stream = data.DataLoader(Stream(lib, 0, 7), batch_size=2, num_workers=2, persistent_workers=True)
        epochs = [list(stream) for _ in range(2)]
        iterator = stream._iterator
        assert all(process.is_alive() for process in iterator._workers)
        workers = [process.pid for process in iterator._workers]
        again = iter(stream)
        assert again is iterator and [process.pid for process in again._workers] == workers
        return epochs

    ours, theirs = program(fg), program(torch)
    assert plain(ours) == plain(theirs)


def test_prefetch_factor_bounds_the_indices_sent_ahead(fg, torch):
    def drawn(lib):
        requested = []

        def batches():
            for i in range(10):
                requested.append(i)
                yield [i]

        class Batches:  # a batch sampler with a length, drawn lazily
            def __iter__(self):
                return batches()

            def __len__(self):
                return 10

        loader = lib.utils.data.DataLoader(list(range(10)), batch_sampler=Batches(), num_workers=2, prefetch_factor=3)
        iterator = iter(loader)
        ahead = len(requested)
        first = next(iterator)
        return ahead, len(requested), first.tolist(), [b.tolist() for b in iterator]

    assert drawn(fg) == drawn(torch)


class Stalling:
    """A dataset whose worker takes 0.1 s for sample 0, or dies there (exit=True)."""

    def __new__(cls, lib, exit=False):
        class Slow(lib.utils.data.Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                if exit:
                    os._exit(1)
                threading.Event().wait(0.1)
                return i

        return Slow()


def test_timeout(fg, torch):
    def error(lib):
        return loading_error(lib.utils.data.DataLoader(Stalling(lib), num_workers=1, timeout=0.02))

    assert error(fg) == error(torch)


def test_dead_worker(fg):
    if fg.__name__ == "torch":
        pytest.skip("PyTorch's SIGCHLD handler may report the death first, in other words")
    error_type, text = loading_error(fg.utils.data.DataLoader(Stalling(fg, exit=True), num_workers=1))
    assert error_type is RuntimeError and re.fullmatch(r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly", text)


# A PyTorch program's data pipeline, through the imports programs use.
SCRIPT = """
import torch
import torch.utils.data
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return {"x": torch.tensor([float(i * i)]), "worker": -1 if info is None else info.id}


for batch in DataLoader(Squares(), batch_size=2, num_workers=2):
    print(batch["x"].tolist(), batch["worker"].tolist())
pairs = TensorDataset(torch.arange(6).reshape(3, 2), torch.tensor([1.5, 2.5, 3.5]))
print([(a.tolist(), b.tolist(), b.dtype == torch.float32) for a, b in torch.utils.data.DataLoader(pairs, batch_size=2)])
print([len(part) for part in random_split(range(10), [0.5, 0.3, 0.2])])
"""


def test_pytorch_program_under_the_alias(torch, tmp_path):
    """On fastgrad only: the alias is the same for the reference (a subprocess costs a second)."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    ours = subprocess.run([sys.executable, "-m", "fastgrad.run", str(script)], capture_output=True, text=True, env=env)
    assert ours.returncode == 0, ours.stderr
    theirs = io.StringIO()
    with contextlib.redirect_stdout(theirs):  # the same program on PyTorch, here (already imported)
        exec(compile(SCRIPT, str(script), "exec"), {"__name__": "__main__"})
    assert ours.stdout == theirs.getvalue()
