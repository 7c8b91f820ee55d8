"""nn.Module, nn.Parameter and the layers: registration, traversal, state_dict, modes, repr.

Every model is built by a function of the library module (`fg` or real `torch`), so the same
structure is made in both and names, keys, messages and reprs are compared with PyTorch's.
"""

import copy
import collections
import math
import pickle
import re

import numpy as np
import pytest

from op_helpers import to_numpy
from oracle_helpers import same_error
from semantics_helpers import strip_module


def build_net(t):
    """A nested model: parameters, a persistent and a non-persistent buffer, submodules three deep,
    a shared module and containers."""
    nn = t.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 3)
            self.scale = nn.Parameter(t.ones(3))
            self.register_buffer("steps", t.zeros(2))
            self.register_buffer("cache", t.zeros(1), persistent=False)
            self.act = nn.LeakyReLU(0.2)

        def forward(self, x):
            return self.act(self.proj(x)) * self.scale

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4, padding_idx=0)
            self.block = Block()
            self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
            self.head = nn.Sequential(nn.LayerNorm(3), nn.Dropout(0.25), nn.Linear(3, 2, bias=False))
            self.shared = self.head[2]  # the same module under a second name

        def forward(self, idx):
            h = self.block(self.embed(idx))
            for layer in self.layers:
                h = t.relu(layer(h))
            return self.head(h)

    return Net()


PARAM_NAMES = [
    "embed.weight",
    "block.scale",
    "block.proj.weight",
    "block.proj.bias",
    "layers.0.weight",
    "layers.0.bias",
    "layers.1.weight",
    "layers.1.bias",
    "head.0.weight",
    "head.0.bias",
    "head.2.weight",
]


# ---- Parameter


def test_parameter_is_a_leaf_tensor_sharing_the_data(fg):
    data = fg.tensor([1.0, 2.0])
    p = fg.nn.Parameter(data)
    assert isinstance(p, fg.nn.Parameter) and isinstance(p, fg.Tensor)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    data[0] = 5.0  # storage is shared, as torch.Tensor._make_subclass does
    assert p.tolist() == [5.0, 2.0]
    assert not fg.nn.Parameter(fg.ones(2), requires_grad=False).requires_grad
    assert fg.nn.Parameter().shape == (0,)


def test_parameter_repr(fg, torch):
    expected = repr(torch.nn.Parameter(torch.tensor([1.5, -2.0])))
    assert repr(fg.nn.Parameter(fg.tensor([1.5, -2.0]))) == expected
    assert str(fg.nn.Parameter(fg.tensor([1.5, -2.0]))) == expected
    assert repr(fg.nn.Parameter(fg.ones(2), requires_grad=False)) == repr(
        torch.nn.Parameter(torch.ones(2), requires_grad=False)
    )


def test_operations_on_parameters_give_plain_tensors(fg):
    p = fg.nn.Parameter(fg.tensor([1.0, -2.0]))
    for result in (p * 2, p.detach(), p.data, p.clone(), p.relu(), p[0]):
        assert not isinstance(result, fg.nn.Parameter)
    with fg.no_grad():
        assert p.mul_(2) is p  # in place: the Parameter itself
    (p * p).sum().backward()
    assert p.grad.tolist() == [4.0, -8.0] and not isinstance(p.grad, fg.nn.Parameter)


def test_parameter_of_integers_cannot_require_grad(fg, torch):
    with pytest.raises(RuntimeError) as expected:
        torch.nn.Parameter(torch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value))):
        fg.nn.Parameter(fg.tensor([1, 2]))


def test_parameter_deepcopy_and_pickle(fg):
    p = fg.nn.Parameter(fg.tensor([1.0, 2.0]))
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(q) is type(p) and q.requires_grad and q.tolist() == [1.0, 2.0]
        with fg.no_grad():
            q.add_(1)
        assert p.tolist() == [1.0, 2.0]  # a copy, not a view


def copies_of(lib, copier):
    """A leaf with a grad, a view of it, a leaf requiring no grad and a Parameter with a grad, through
    `copier`, then written through: values, flags, grads and what the writes reached."""
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    plain = lib.arange(4.0)
    weight = lib.nn.Parameter(lib.ones(2))
    (weight * 3).sum().backward()
    cx, cplain, cweight = copier(x), copier(plain), copier(weight)
    with lib.no_grad():
        cx[0] = 50.0
        cplain[1] = 60.0
        cweight[0] = 70.0
    return (
        [
            (type(c).__name__, c.tolist(), c.requires_grad, c.is_leaf, None if c.grad is None else c.grad.tolist())
            for c in (cx, cplain, cweight)
        ],
        x.tolist(),
        plain.tolist(),
        weight.tolist(),
    )


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_tensor_copy_and_deepcopy_as_torch(fg, torch, copier):
    """copy.copy shares the data; deepcopy copies it and a tensor's grad (not a Parameter's, as PyTorch)."""
    assert copies_of(fg, copier) == copies_of(torch, copier)


def test_deepcopy_shares_a_grad_met_twice_and_refuses_non_leaves(fg, torch):
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        a, g = copy.deepcopy([x, x.grad])
        return a.grad is g, a.grad.tolist()

    assert program(fg) == program(torch)
    same_error(fg, torch, lambda lib: copy.deepcopy(lib.ones(2, requires_grad=True) * 2))


def test_deepcopy_keeps_views_sharing_their_copied_storage(fg, torch):
    def program(lib):
        base = lib.arange(6.0)
        view = base[2:].view(2, 2).t()
        new_base, new_view, lone = copy.deepcopy([base, view]) + [copy.deepcopy(view)]
        new_view[0, 1] = 100.0
        return (
            [t.tolist() for t in (base, new_base, new_view, lone)],
            [(t.storage_offset(), t.stride(), t.is_leaf) for t in (new_view, lone)],
        )

    assert program(fg) == program(torch)


def test_module_deepcopy_as_torch(fg, torch):
    """Parameters stay Parameters, with the values but (as in PyTorch) not the grads."""

    def program(lib):
        lib.manual_seed(0)
        model = lib.nn.Linear(2, 1)
        model(lib.ones(1, 2)).sum().backward()
        clone = copy.deepcopy(model)
        return [
            (type(q).__name__, q.requires_grad, q.is_leaf, q.grad, q is not p, lib.equal(p, q))
            for p, q in zip(model.parameters(), clone.parameters())
        ]

    assert program(fg) == program(torch)


# ---- registration and traversal


def test_named_parameters_order_and_names(fg, torch):
    names = [name for name, _ in build_net(fg).named_parameters()]
    assert names == [name for name, _ in build_net(torch).named_parameters()] == PARAM_NAMES


def test_traversal_matches_torch(fg, torch):
    ours, theirs = build_net(fg), build_net(torch)
    assert (
        [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()] == ["block.steps", "block.cache"]
    )
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]
    assert [n for n, _ in ours.block.named_parameters(prefix="b", recurse=False)] == ["b.scale"]
    assert len(list(ours.parameters())) == len(PARAM_NAMES)
    assert all(isinstance(p, fg.nn.Parameter) for p in ours.parameters())
    assert list(ours.children())[0] is ours.embed


def test_attribute_registration(fg):
    nn = fg.nn
    m = nn.Module()
    m.w = nn.Parameter(fg.ones(2))
    m.sub = nn.Linear(2, 2)
    m.register_buffer("buf", fg.zeros(1))
    m.plain = fg.zeros(1)  # a plain tensor attribute is neither a parameter nor a buffer
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and list(m._buffers) == ["buf"]
    assert m.w is m._parameters["w"] and m.sub is m._modules["sub"] and m.buf is m._buffers["buf"]
    m.buf = fg.ones(1)  # stays a buffer
    assert m._buffers["buf"].tolist() == [1.0]
    m.sub = nn.Parameter(fg.ones(1))  # a parameter under a module's name replaces the module
    assert "sub" not in m._modules and list(m._parameters) == ["w", "sub"]
    m.w = None  # None keeps the name registered as a parameter
    assert m.w is None and "w" in m._parameters
    del m.sub, m.buf, m.plain
    assert list(m._parameters) == ["w"] and not m._buffers and not hasattr(m, "plain")
    m.register_parameter("none", None)
    assert m.none is None and "none" not in m.state_dict()


@pytest.mark.parametrize(
    "case",
    [
        "missing attribute",
        "tensor as parameter",
        "int as module",
        "parameter name with dot",
        "existing attribute",
        "non-module",
        "non-tensor buffer",
    ],
)
def test_registration_errors(fg, torch, case):
    def act(t):
        m = t.nn.Linear(2, 2)
        if case == "missing attribute":
            return m.nothing
        if case == "tensor as parameter":
            m.weight = t.ones(2, 2)
        if case == "int as module":
            s = t.nn.Sequential(t.nn.ReLU())
            setattr(s, "0", 3)
        if case == "parameter name with dot":
            m.register_parameter("a.b", None)
        if case == "existing attribute":
            m.register_buffer("forward", None)
        if case == "non-module":
            m.add_module("x", 3)
        if case == "non-tensor buffer":
            m.register_buffer("x", [1.0])

    with pytest.raises(Exception) as expected:
        act(torch)
    with pytest.raises(expected.type) as got:
        act(fg)
    assert strip_module(got.value).replace("fastgrad", "torch") == strip_module(expected.value)


def test_forward_is_required(fg):
    with pytest.raises(NotImplementedError, match=re.escape('Module [Module] is missing the required "forward"')):
        fg.nn.Module()(1)


def test_apply_and_requires_grad_(fg):
    net = build_net(fg)
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen[-1] == "Net" and seen[0] == "Embedding"  # children first, as PyTorch
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.block.requires_grad_()
    assert [n for n, p in net.named_parameters() if p.requires_grad] == PARAM_NAMES[1:4]


def test_double_converts_parameters_in_place(fg):
    lin = fg.nn.Linear(2, 2)
    weight = lin.weight
    assert lin.double() is lin
    assert lin.weight is weight and weight.dtype == fg.float64 and isinstance(weight, fg.nn.Parameter)
    assert lin(fg.ones(1, 2, dtype=fg.float64)).dtype == fg.float64
    assert lin.to(fg.float32).weight.dtype == fg.float32
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex dtypes"):
        lin.to(fg.int64)


# ---- state_dict


def test_state_dict_keys_and_values(fg, torch):
    net = build_net(fg)
    state = net.state_dict()
    assert isinstance(state, collections.OrderedDict)
    assert list(state) == list(build_net(torch).state_dict())  # dotted; persistent buffers; shared once per name
    assert "block.steps" in state and "block.cache" not in state
    for key, value in state.items():
        assert not value.requires_grad and not isinstance(value, fg.nn.Parameter), key
    assert net.state_dict(keep_vars=True)["block.scale"] is net.block.scale
    assert list(net.block.state_dict(prefix="x.")) == ["x.scale", "x.steps", "x.proj.weight", "x.proj.bias"]


def test_state_dict_round_trip(fg):
    fg.manual_seed(1)
    source, target = build_net(fg).eval(), build_net(fg).eval()
    weight = target.block.proj.weight
    with fg.no_grad():
        source.block.steps.fill_(3.0)
    result = target.load_state_dict(source.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert target.block.proj.weight is weight and weight.requires_grad  # copied in place
    assert target.block.steps.tolist() == [3.0, 3.0]
    idx = fg.tensor([[1, 2, 0], [4, 5, 6]])
    np.testing.assert_array_equal(to_numpy(target(idx)), to_numpy(source(idx)))


def _load_error(t, edit, strict=True):
    model = t.nn.Sequential(t.nn.Linear(2, 3), t.nn.ReLU(), t.nn.Linear(3, 1))
    state = model.state_dict()
    edit(t, state)
    try:
        return model.load_state_dict(state, strict=strict)
    except RuntimeError as e:
        return e


LOAD_EDITS = {
    "missing": lambda t, s: s.pop("0.bias"),
    "unexpected": lambda t, s: s.update({"2.extra": t.ones(1), "9.weight": t.ones(1)}),
    "size mismatch": lambda t, s: s.update({"0.weight": t.ones(2, 3)}),
    "all three": lambda t, s: (s.pop("2.bias"), s.update({"0.weight": t.ones(4), "extra": t.ones(1)})),
    "not a tensor": lambda t, s: s.update({"2.bias": [1.0]}),
}


@pytest.mark.parametrize("edit", LOAD_EDITS)
def test_strict_load_errors_match_torch(fg, torch, edit):
    expected = _load_error(torch, LOAD_EDITS[edit])
    got = _load_error(fg, LOAD_EDITS[edit])
    assert isinstance(expected, RuntimeError) and isinstance(got, RuntimeError)
    assert strip_module(got) == strip_module(expected)
    assert str(got).startswith("Error(s) in loading state_dict for Sequential:\n\t")


@pytest.mark.parametrize("edit", ["missing", "unexpected"])
def test_non_strict_load_reports_keys(fg, torch, edit):
    expected = _load_error(torch, LOAD_EDITS[edit], strict=False)
    got = _load_error(fg, LOAD_EDITS[edit], strict=False)
    assert (got.missing_keys, got.unexpected_keys) == (expected.missing_keys, expected.unexpected_keys)
    assert repr(got) == repr(expected)


def test_load_reshapes_a_one_element_vector_into_a_scalar(fg):
    m = fg.nn.Module()
    m.s = fg.nn.Parameter(fg.tensor(1.0))
    m.load_state_dict({"s": fg.tensor([4.0])})
    assert m.s.shape == () and m.s.item() == 4.0


def test_load_with_assign_takes_the_given_tensors(fg):
    lin = fg.nn.Linear(2, 1)
    new_weight = fg.ones(1, 2)
    lin.load_state_dict({"weight": new_weight, "bias": fg.zeros(1)}, assign=True)
    assert isinstance(lin.weight, fg.nn.Parameter) and lin.weight.requires_grad
    new_weight[0, 0] = 7.0  # the parameter is a view of the given tensor
    assert lin.weight[0, 0].item() == 7.0


# ---- modes and gradients


def test_train_eval_propagate(fg):
    net = build_net(fg)
    assert net.training and all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train(1)


def test_dropout_module_follows_mode(fg):
    drop = fg.nn.Dropout(0.5)
    x = fg.ones(1000)
    fg.manual_seed(0)
    out = drop(x)
    values = set(out.tolist())
    assert values == {0.0, 2.0}
    assert 400 < out.tolist().count(0.0) < 600
    drop.eval()
    assert drop(x) is x


def test_zero_grad(fg):
    lin = fg.nn.Linear(3, 2)
    lin(fg.ones(4, 3)).sum().backward()
    assert lin.weight.grad is not None
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad.tolist() == [[0.0] * 3] * 2 and lin.bias.grad.tolist() == [0.0, 0.0]
    grad = lin.weight.grad
    lin(fg.ones(4, 3)).sum().backward()
    assert lin.weight.grad is grad  # zeroed in place, then accumulated into
    lin.zero_grad()
    assert lin.weight.grad is None and lin.bias.grad is None


# ---- repr


def test_repr_matches_torch(fg, torch):
    assert repr(build_net(fg)) == repr(build_net(torch))


def _layers(t):
    nn = t.nn
    return [
        nn.Linear(3, 2, bias=False),
        nn.Embedding(5, 2),
        nn.Embedding(5, 2, padding_idx=-1),
        nn.LayerNorm(4),
        nn.LayerNorm([2, 3], eps=1e-3, elementwise_affine=False),
        nn.LayerNorm(2, bias=False),
        nn.RMSNorm(4),
        nn.RMSNorm([2, 3], eps=1e-6, elementwise_affine=False),
        nn.ReLU(),
        nn.ReLU(inplace=True),
        nn.LeakyReLU(),
        nn.LeakyReLU(0.1, inplace=True),
        nn.Tanh(),
        nn.Sigmoid(),
        nn.GELU(),
        nn.GELU("tanh"),
        nn.Softmax(dim=1),
        nn.LogSoftmax(),
        nn.Dropout(),
        nn.Flatten(0, 2),
        nn.Identity(7),
        nn.MSELoss(),
        nn.L1Loss(reduction="sum"),
        nn.SmoothL1Loss(beta=0.5),
        nn.HuberLoss(),
        nn.CrossEntropyLoss(),
        nn.NLLLoss(),
        nn.BCEWithLogitsLoss(),
        nn.ModuleList(),
        nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh(), nn.ReLU()]),
        nn.Sequential(),
    ]


def test_layer_reprs_match_torch(fg, torch):
    assert [repr(m) for m in _layers(fg)] == [repr(m) for m in _layers(torch)]


def test_layer_parameters_match_torch(fg, torch):
    def shapes(t):
        return [[(n, tuple(p.shape)) for n, p in m.named_parameters()] for m in _layers(t)]

    assert shapes(fg) == shapes(torch)


# ---- containers


def test_sequential(fg):
    nn = fg.nn
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    assert seq.append(c) is seq and seq[2] is c
    part = seq[1:]
    assert isinstance(part, nn.Sequential) and list(part) == [b, c] and list(part._modules) == ["1", "2"]
    x = fg.ones(4, 2)
    np.testing.assert_array_equal(to_numpy(seq(x)), to_numpy(c(b(a(x)))))
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[0] is b
    seq[0] = nn.Tanh()
    assert isinstance(seq[0], nn.Tanh)
    with pytest.raises(IndexError, match="index 2 is out of range"):
        seq[2]
    named = nn.Sequential(collections.OrderedDict([("first", a), ("second", b)]))
    assert [n for n, _ in named.named_children()] == ["first", "second"] and named[1] is b


def test_module_list(fg):
    nn = fg.nn
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    layers.append(nn.ReLU())
    layers += [nn.Tanh()]
    assert [type(m).__name__ for m in layers] == ["Linear"] * 3 + ["ReLU", "Tanh"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got int"):
        layers.extend(3)


@pytest.mark.parametrize("index", [0, 1, 2, 5])
def test_module_list_insert(fg, torch, index):
    def program(lib):
        layers = lib.nn.ModuleList([lib.nn.ReLU(), lib.nn.Tanh()])
        assert layers.insert(index, lib.nn.Sigmoid()) is None
        return [(name, type(m).__name__) for name, m in layers.named_children()], [type(m).__name__ for m in layers]

    assert program(fg) == program(torch)


# ---- layers


def test_linear_default_init_bounds(fg):
    fg.manual_seed(0)
    lin = fg.nn.Linear(16, 200)
    bound = 1 / math.sqrt(16)  # kaiming_uniform_(a=sqrt(5)) and the bias both give U(-1/sqrt(in), 1/sqrt(in))
    for p in (lin.weight, lin.bias):
        values = to_numpy(p)
        assert values.min() >= -bound and values.max() <= bound
        assert values.max() > 0.9 * bound and values.min() < -0.9 * bound
    fg.manual_seed(0)
    np.testing.assert_array_equal(to_numpy(fg.nn.Linear(16, 200).weight), to_numpy(lin.weight))


def test_linear_matches_torch(fg, torch):
    rng = np.random.default_rng(3)
    w, b, x = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((2, 5, 4))
    results = []
    for t in (fg, torch):
        lin = t.nn.Linear(4, 3).double()
        lin.load_state_dict({"weight": t.tensor(w), "bias": t.tensor(b)})
        out = lin(t.tensor(x))
        out.sum().backward()
        results.append([to_numpy(out), to_numpy(lin.weight.grad), to_numpy(lin.bias.grad)])
    for got, expected in zip(*results):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_embedding_init_and_padding(fg):
    fg.manual_seed(0)
    emb = fg.nn.Embedding(400, 50, padding_idx=3)
    values = to_numpy(emb.weight)
    assert (values[3] == 0).all()
    others = np.delete(values, 3, axis=0)
    assert abs(others.mean()) < 0.02 and abs(others.std() - 1) < 0.02  # N(0, 1)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        fg.nn.Embedding(3, 2, padding_idx=3)


def test_layer_norm_module(fg, torch):
    x = np.random.default_rng(5).standard_normal((2, 3, 4))
    results = []
    for t in (fg, torch):
        ln = t.nn.LayerNorm([3, 4]).double()
        with t.no_grad():
            ln.weight.mul_(t.tensor(np.linspace(0.5, 2, 12).reshape(3, 4)))
            ln.bias.add_(0.25)
        out = ln(t.tensor(x))
        (out**3).sum().backward()
        results.append([to_numpy(out), to_numpy(ln.weight.grad), to_numpy(ln.bias.grad)])
    for got, expected in zip(*results):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_loss_modules_keep_weights_as_buffers(fg, torch):
    for t in (fg, torch):
        loss = t.nn.CrossEntropyLoss(weight=t.tensor([1.0, 2.0]))
        assert list(loss.state_dict()) == ["weight"]
        bce = t.nn.BCEWithLogitsLoss(pos_weight=t.tensor([3.0]))
        assert list(bce.state_dict()) == ["pos_weight"] and bce.weight is None
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert fg.nn.MSELoss(size_average=False).reduction == "sum"
