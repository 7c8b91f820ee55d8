"""Pickling tensors, Parameters, modules and optimizers: round trips at every protocol, storage
sharing, protocol 5's out-of-band buffers (zero-copy), multiprocessing, and that loading calls
nothing but fastgrad's rebuild functions."""

import io
import multiprocessing
import pickle
import pickletools

import numpy as np
import pytest

PROTOCOLS = [2, 3, 4, 5]


def rebuild_globals(fg):
    """The only globals a pickle of tensors and Parameters may name."""
    return {
        (f"{fg.__name__}._pickling", "_rebuild_storage"),
        (f"{fg.__name__}._pickling", "_rebuild_tensor"),
        (f"{fg.__name__}.nn.parameter", "_rebuild_parameter"),
    }


class AllowListUnpickler(pickle.Unpickler):
    """Records every global the pickle asks for, and refuses those outside `allowed`."""

    def __init__(self, data, allowed):
        super().__init__(io.BytesIO(data))
        self.allowed, self.asked = allowed, set()

    def find_class(self, module, name):
        self.asked.add((module, name))
        if (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"global {module}.{name} refused")
        return super().find_class(module, name)


def assert_same_tensor(fg, ours, original):
    assert type(ours) is type(original)
    assert ours.dtype is original.dtype and ours.shape == original.shape and ours.stride() == original.stride()
    assert ours.requires_grad == original.requires_grad and ours.is_leaf
    assert fg._pickling.raw_values(ours).tobytes() == fg._pickling.raw_values(original).tobytes()  # bit for bit


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_round_trip_at_every_protocol(fg, torch, protocol):
    def made(lib):
        base = lib.arange(12.0).reshape(3, 4)
        return [
            base,
            base.t(),  # strides kept, as by PyTorch
            base[1:, ::2],
            lib.tensor([1.5, -2.0], requires_grad=True),
            lib.tensor([float("nan"), -0.0, float("inf"), 1e-45]),
            lib.tensor([1.5, 2.0], requires_grad=True) * 2,  # a non-leaf loads as a leaf that requires grad
            lib.tensor([1, -2], dtype=lib.int16),
            lib.tensor([True, False]),
            lib.tensor([0.1, 3.0], dtype=lib.bfloat16),
            lib.tensor([0.1, 3.0], dtype=lib.float16),
            lib.zeros(0, 2),
            lib.nn.Parameter(lib.ones(2)),
            lib.nn.Parameter(lib.ones(2), requires_grad=False),
        ]

    ours = AllowListUnpickler(pickle.dumps(made(fg), protocol=protocol), rebuild_globals(fg)).load()
    theirs = pickle.loads(pickle.dumps(made(torch), protocol=protocol))
    for loaded, original, oracle in zip(ours, made(fg), theirs):
        assert_same_tensor(fg, loaded, original)
        assert loaded.stride() == oracle.stride() and loaded.requires_grad == oracle.requires_grad
        assert type(loaded).__name__ == type(oracle).__name__


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_views_pickled_together_share_storage_after_load(fg, protocol):
    base = fg.arange(6.0).reshape(2, 3)
    loaded_base, loaded_view, loaded_row = pickle.loads(pickle.dumps([base, base.t(), base[1]], protocol=protocol))
    loaded_base[1, 2] = 100.0
    assert loaded_view[2, 1].item() == 100.0 and loaded_row[2].item() == 100.0
    assert base[1, 2].item() == 5.0  # not the original's memory


def test_protocol_5_sends_storages_out_of_band_without_copies(fg):
    base = fg.arange(1000.0)
    buffers = []
    data = pickle.dumps([base, base[10:20]], protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and len(data) < 400  # one storage, not in the pickle
    assert bytes(buffers[0].raw()) == base.numpy().tobytes()
    received = bytearray(buffers[0].raw())  # what another process would get
    loaded_base, loaded_view = pickle.loads(data, buffers=[received])
    received[:4] = np.float32(-7.0).tobytes()  # the loaded tensors are over that buffer
    assert loaded_base[0].item() == -7.0
    received[40:44] = np.float32(-8.0).tobytes()
    assert loaded_view[0].item() == -8.0
    # any object with the buffer protocol, as transports hand them back (Ray: its own SubBuffer type)
    loaded_base, loaded_view = pickle.loads(data, buffers=[np.frombuffer(buffers[0].raw(), np.uint8)])
    assert loaded_base.tolist() == base.tolist() and loaded_view.tolist() == base[10:20].tolist()
    # in-band, the storage's bytes are written once
    in_band = pickle.dumps([base, base[10:20]], protocol=5)
    assert base.numpy().nbytes < len(in_band) < base.numpy().nbytes + 400


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_pickle_names_only_the_rebuild_functions(fg, protocol):
    data = pickle.dumps([fg.ones(3), fg.nn.Parameter(fg.zeros(2))], protocol=protocol)
    opcodes = {op.name for op, _, _ in pickletools.genops(data)}
    assert not opcodes & {"INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "BUILD", "EXT1", "EXT2", "EXT4"}
    unpickler = AllowListUnpickler(data, rebuild_globals(fg))
    unpickler.load()
    assert unpickler.asked == rebuild_globals(fg)


class Rebuilds:
    """Pickles as a call of one of fastgrad's rebuild functions with arbitrary arguments."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


@pytest.mark.parametrize(
    "arguments",
    [
        ("storage", (5,), (1,), 0),  # past the storage's 4 elements
        ("storage", (2, 2), (2, 1), 1),
        ("storage", (2,), (-1,), 3),
        ("storage", (2,), (1, 1), 0),
        ("a view", (1,), (1,), 0),  # a storage is a whole one: a view's bounds are not its storage's
        ("an expanded view", (8,), (1,), 0),
        ("not a tensor", (1,), (1,), 0),
    ],
)
def test_hostile_rebuild_arguments_refused(fg, arguments):
    first = {
        "storage": Rebuilds(fg._pickling._rebuild_storage, "float32", bytes(16)),
        "a view": fg.arange(4.0)[1:],
        "an expanded view": fg.ones(1).expand(8),
        "not a tensor": [1.0],
    }[arguments[0]]
    data = pickle.dumps(Rebuilds(fg._pickling._rebuild_tensor, first, *arguments[1:], False), protocol=4)
    with pytest.raises(pickle.UnpicklingError, match="^not a valid pickled fastgrad tensor"):
        pickle.loads(data)


@pytest.mark.parametrize("storage_arguments", [("complex64", bytes(8)), ("float32", bytes(6)), ("float32", 7)])
def test_hostile_storages_refused(fg, storage_arguments):
    data = pickle.dumps(Rebuilds(fg._pickling._rebuild_storage, *storage_arguments), protocol=4)
    with pytest.raises(pickle.UnpicklingError, match="^not a valid pickled fastgrad tensor"):
        pickle.loads(data)


def test_module_and_optimizer_pickled_together_keep_training_alike(fg):
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.Tanh(), fg.nn.Linear(4, 1))
    optimizer = fg.optim.Adam(model.parameters(), lr=0.1)
    x = fg.randn(5, 3)

    def step(model, optimizer):
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()

    step(model, optimizer)
    model_copy, optimizer_copy = pickle.loads(pickle.dumps((model, optimizer), protocol=5))
    assert optimizer_copy.param_groups[0]["params"][0] is model_copy[0].weight
    step(model, optimizer)
    step(model_copy, optimizer_copy)
    for ours, original in zip(model_copy.parameters(), model.parameters()):
        assert type(ours) is type(original)
        np.testing.assert_array_equal(ours.detach().numpy(), original.detach().numpy())


def scaled_state_dict(args):
    """In a worker process: the state_dict received, each tensor doubled."""
    backend, state_dict = args
    return backend, {name: value * 2 for name, value in state_dict.items()}


def test_state_dict_through_a_process_pool(fg):
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    model = fg.nn.Linear(3, 2)
    with context.Pool(1) as pool:
        backend, doubled = pool.map(scaled_state_dict, [(fg.__name__, model.state_dict())])[0]
    assert backend == fg.__name__ and list(doubled) == list(model.state_dict())
    for name, value in model.state_dict().items():
        assert type(doubled[name]) is fg.Tensor
        np.testing.assert_array_equal(doubled[name].numpy(), (value * 2).numpy())
