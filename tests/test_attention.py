"""Attention and the Transformer layers against PyTorch: F.scaled_dot_product_attention (masks,
is_causal, scale, broadcast batch dims, GQA, fully masked rows, float32), nn.MultiheadAttention over
a table of options and masks, the encoder/decoder layers, their stacks and nn.Transformer (outputs,
attention weights, gradients of the inputs, masks and every weight, from PyTorch's weights loaded
through state_dict); float64 gradcheck; reprs, state_dict keys, init, warnings and errors."""

import importlib
import math

import numpy as np
import pytest

from op_helpers import assert_same_bits_at_thread_counts, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error


def _tensor(lib, value, requires_grad=False):
    """A numpy array as a tensor of `lib`: bool arrays as masks, the rest float64."""
    if value.dtype == bool:
        return lib.tensor(value)
    return lib.tensor(value, requires_grad=requires_grad)


def _weighted_sum(lib, t):
    return (t * lib.tensor(np.linspace(-1, 1, t.numel()).reshape(tuple(t.shape)))).sum()


def _compare(ours, theirs, rtol=1e-10, atol=1e-12):
    assert len(ours) == len(theirs)
    for got, expected in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


SDPA = {  # id: (query, key, value shapes, keyword arguments; arrays in them are masks)
    "3-D": ((3, 4, 8), (3, 5, 8), (3, 5, 6), {}),
    "4-D": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), {}),
    "2-D unbatched": ((4, 8), (5, 8), (5, 6), {}),
    "causal L < S": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 6), {"is_causal": True}),
    "causal L > S": ((2, 5, 8), (2, 3, 8), (2, 3, 6), {"is_causal": True}),
    "bool mask": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), {"attn_mask": "bool", "mask_shape": (4, 5)}),
    "bool mask per batch": (
        (2, 3, 4, 8),
        (2, 3, 5, 8),
        (2, 3, 5, 6),
        {"attn_mask": "bool", "mask_shape": (2, 1, 1, 5)},
    ),
    "float mask": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), {"attn_mask": "float", "mask_shape": (3, 4, 5)}),
    "scale": ((2, 4, 8), (2, 5, 8), (2, 5, 6), {"scale": 0.3}),
    "negative scale": ((2, 4, 8), (2, 5, 8), (2, 5, 6), {"scale": -0.7}),
    "broadcast batch dims": ((2, 1, 4, 8), (1, 3, 5, 8), (1, 3, 5, 6), {}),
    "gqa": ((2, 4, 3, 8), (2, 2, 5, 8), (2, 1, 5, 6), {"enable_gqa": True}),
    "fully masked row": (
        (1, 2, 3, 4),
        (1, 2, 3, 4),
        (1, 2, 3, 4),
        {"attn_mask": np.array([[1, 0, 0], [0, 0, 0], [1, 1, 1]], bool)},
    ),
    "empty keys": ((2, 3, 4), (2, 0, 4), (2, 0, 5), {}),
}


def _sdpa_case(case, dtype=np.float64):
    shapes, kwargs = SDPA[case][:3], dict(SDPA[case][3])
    rng = rng_for("sdpa", case)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    if isinstance(kwargs.get("attn_mask"), str):
        shape = kwargs.pop("mask_shape")
        mask = rng.random(shape) > 0.3 if kwargs["attn_mask"] == "bool" else rng.standard_normal(shape).astype(dtype)
        if mask.dtype == bool:
            mask[..., 0] = True  # no fully masked row (those have a case of their own)
        kwargs["attn_mask"] = mask
    return arrays, kwargs


def _sdpa_run(lib, arrays, kwargs):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    kwargs = dict(kwargs)
    mask = kwargs.get("attn_mask")
    if mask is not None:
        kwargs["attn_mask"] = _tensor(lib, mask, requires_grad=True)
    output = lib.nn.functional.scaled_dot_product_attention(*tensors, **kwargs)
    _weighted_sum(lib, output).backward()
    grads = [t.grad for t in tensors]
    if mask is not None and mask.dtype != bool:
        grads.append(kwargs["attn_mask"].grad)
    return [to_numpy(output)] + [to_numpy(g) for g in grads]


@pytest.mark.parametrize("case", list(SDPA))
def test_sdpa_matches_pytorch(fg, torch, case):
    arrays, kwargs = _sdpa_case(case)
    _compare(_sdpa_run(fg, arrays, kwargs), _sdpa_run(torch, arrays, kwargs))


@pytest.mark.parametrize("case", ["4-D", "causal L < S", "float mask", "gqa"])
def test_sdpa_float32_matches_pytorch(fg, torch, case):
    """PyTorch takes its CPU flash kernel here (4-D, no dropout): float32 rounding apart."""
    arrays, kwargs = _sdpa_case(case, np.float32)
    ours, theirs = _sdpa_run(fg, arrays, kwargs), _sdpa_run(torch, arrays, kwargs)
    for got, expected in zip(ours, theirs):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_sdpa_causal_mask_of_every_size_and_float_dtype(fg, torch, dtype):
    """is_causal's mask (written into the scores by the core, added as the 0 / -inf bias by the
    reference) over rows < cols, rows > cols, a square and one row, against PyTorch."""
    rng = rng_for("sdpa causal", dtype)
    tolerance = {"float64": 1e-10, "float32": 1e-5}.get(dtype, 2e-2)
    for rows, cols in [(3, 5), (5, 3), (5, 5), (1, 4)]:
        q, k, v = (rng.standard_normal((2, n, 4)) for n in (rows, cols, cols))
        got, expected = (
            lib.nn.functional.scaled_dot_product_attention(
                *(lib.tensor(a, dtype=getattr(lib, dtype)) for a in (q, k, v)), is_causal=True
            )
            for lib in (fg, torch)
        )
        assert str(got.dtype).split(".")[-1] == dtype
        np.testing.assert_allclose(to_numpy(got.float()), expected.float().numpy(), rtol=tolerance, atol=tolerance)


def _same_values(a, b):
    """The same values, NaNs in the same places (and -0 equal to 0)."""
    a, b = to_numpy(a.float()), to_numpy(b.float())
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(a[~np.isnan(a)], b[~np.isnan(b)])


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_attention_scores_primitive_is_the_scaled_product_plus_the_mask(fg, dtype):
    """The primitive's causal scores are those of the scaled product plus the 0 / -inf bias, rounded
    to the dtype as add_ rounds (a NaN or +inf score above the diagonal gives NaN); with a bias and a
    negative scale, the product of query scaled by -sqrt(|scale|) and key by sqrt(|scale|), plus it."""
    prims = importlib.import_module(f"{fg.__name__}._prims")
    rng = rng_for("attention scores", dtype)
    q, k = (rng.standard_normal((3, n, 4)) for n in (4, 6))
    k[0, 5, 0], k[1, 4, 1] = np.nan, np.inf  # above the diagonal of every row
    query, key = (fg.tensor(a, dtype=getattr(fg, dtype)) for a in (q, k))
    root = 0.3**0.5
    bias = fg.tensor(np.triu(np.full((4, 6), -np.inf), 1), dtype=getattr(fg, dtype))
    product = (query * root) @ (key.transpose(-2, -1) * root)
    _same_values(prims.attention_scores(query, key, 0.3, None, True), product + bias)
    product = (query * -root) @ (key.transpose(-2, -1) * root)
    _same_values(prims.attention_scores(query, key, -0.3, bias, False), product + bias)
    with pytest.raises(RuntimeError, match="at least 2 dims"):
        prims.attention_scores(query[0, 0], key, 0.3, None, True)


def test_sdpa_fully_masked_row_is_zero(fg):
    arrays, kwargs = _sdpa_case("fully masked row")
    output, *grads = _sdpa_run(fg, arrays, kwargs)
    assert np.array_equal(output[:, :, 1], np.zeros_like(output[:, :, 1]))
    assert all(np.isfinite(g).all() for g in grads)


def test_sdpa_dropout(fg):
    arrays, _ = _sdpa_case("4-D")
    q, k, v = (fg.tensor(a) for a in arrays)
    sdpa = fg.nn.functional.scaled_dot_product_attention
    assert to_numpy(sdpa(q, k, v, dropout_p=1.0)).max() == 0  # every weight dropped
    fg.manual_seed(3)
    first = to_numpy(sdpa(q, k, v, dropout_p=0.5))
    fg.manual_seed(3)
    np.testing.assert_array_equal(to_numpy(sdpa(q, k, v, dropout_p=0.5)), first)
    assert not np.allclose(first, to_numpy(sdpa(q, k, v)))


def test_sdpa_gradcheck(fg):
    rng = rng_for("sdpa gradcheck")
    q, k, v = (fg.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3)))
    mask = fg.tensor(rng.standard_normal((3, 5)), requires_grad=True)

    def fn(q, k, v, mask):
        sdpa = fg.nn.functional.scaled_dot_product_attention
        return sdpa(q, k, v, attn_mask=mask) + sdpa(q, k, v, is_causal=True, scale=0.4)

    assert gradcheck_for(fg)(fn, [q, k, v, mask], eps=1e-6, atol=1e-5)


# ---- the fused op (PyTorch's CPU flash cases: 4-D, no mask but is_causal, no dropout)

FLASH = "ScaledDotProductFlashAttentionForCpuBackward0"
FLASH_CASES = {  # id: (batch, heads, L, S, E, is_causal, heads of a (batch, L, heads, E) tensor)
    "T 1": (1, 1, 1, 1, 4, False, False),
    "square causal": (2, 4, 5, 5, 8, True, False),
    "L < S causal": (2, 3, 4, 6, 8, True, False),
    "L > S causal": (2, 2, 7, 3, 5, True, False),
    "L != S": (1, 2, 5, 9, 3, False, True),
    "S 33, width 19": (1, 1, 3, 33, 19, False, False),
    "split heads T 33 causal": (1, 4, 33, 33, 16, True, True),
    "batch 16 causal": (16, 4, 9, 9, 16, True, True),
}


def _flash_inputs(lib, case, dtype):
    """query, key, value of the case as leaves: (B, H, T, E), or (B, T, H, E) leaves seen as heads."""
    b, h, rows, keys, width, _, split = FLASH_CASES[case]
    rng = rng_for("flash", case)
    shapes = [(b, n, h, width) if split else (b, h, n, width) for n in (rows, keys, keys)]
    leaves = [lib.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    return leaves, [t.transpose(1, 2) if split else t for t in leaves]


def _flash_run(lib, case, dtype, **kwargs):
    leaves, (q, k, v) = _flash_inputs(lib, case, dtype)
    out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=FLASH_CASES[case][5], **kwargs)
    _weighted_sum(lib, out).backward()
    return out, [to_numpy(out)] + [to_numpy(t.grad) for t in leaves]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", list(FLASH_CASES))
def test_fused_sdpa_matches_pytorch(fg, torch, case, dtype):
    """Values and the three gradients, PyTorch's node, over causal and not, L != S, widths with vector
    tails, strided heads, batch 1 and 16, heads 1 and 4, T 1..33; the output in query's memory order."""
    if fg.__name__ != "fastgrad" and math.prod(FLASH_CASES[case][:5]) > 5000:
        pytest.skip("the reference's loops: the small cases suffice")
    out, ours = _flash_run(fg, case, dtype)
    t_out, theirs = _flash_run(torch, case, dtype)
    assert out.grad_fn.name() == t_out.grad_fn.name() == FLASH
    if fg.__name__ == "fastgrad":
        assert out.stride() == t_out.stride()
    for got, expected in zip(ours, theirs):
        assert got.dtype == dtype
        if dtype == np.float64:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)
        else:
            # (atol at least 2e-6: with one key the query's and key's gradients are 0 plus PyTorch's rounding)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6 * max(np.abs(expected).max(), 1.0))


def test_fused_sdpa_gradcheck_and_gradgradcheck(fg):
    """float64 finite differences, first and second order (the second through the create_graph
    formulas), causal with L > S and not, heads read strided, a negative scale."""
    rng = rng_for("flash gradcheck")
    q, k, v = (
        fg.tensor(rng.standard_normal(s), requires_grad=True) for s in ((1, 4, 2, 3), (1, 3, 2, 3), (1, 3, 2, 3))
    )

    def fn(q, k, v):
        sdpa = fg.nn.functional.scaled_dot_product_attention
        heads = [t.transpose(1, 2) for t in (q, k, v)]
        return sdpa(*heads, is_causal=True) + sdpa(*heads, scale=-0.4)[:, :, :, :]

    assert fn(q, k, v).grad_fn.name() == "AddBackward0"
    assert fn(q, k, v).grad_fn.next_functions[0][0].name() == FLASH
    assert gradcheck_for(fg)(fn, [q, k, v], eps=1e-6, atol=1e-5)
    assert gradcheck_for(fg, "gradgradcheck")(fn, [q, k, v], eps=1e-6, atol=1e-5)


def test_fused_sdpa_gradients_only_for_inputs_that_require_them(fg):
    leaves, (q, k, v) = _flash_inputs(fg, "L < S causal", np.float64)
    expected = _flash_run(fg, "L < S causal", np.float64)[1]
    for wanted in range(3):
        inputs = [t if i == wanted else t.detach() for i, t in enumerate((q, k, v))]
        out = fg.nn.functional.scaled_dot_product_attention(*inputs, is_causal=True)
        assert out.grad_fn.name() == FLASH
        (grad,) = fg.autograd.grad(_weighted_sum(fg, out), [inputs[wanted]])
        np.testing.assert_array_equal(to_numpy(grad), expected[1 + wanted])


def test_fused_sdpa_without_grad_gives_the_same_values(fg):
    leaves, heads = _flash_inputs(fg, "split heads T 33 causal", np.float32)
    recorded = fg.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
    with fg.no_grad():
        plain = fg.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
    assert plain.grad_fn is None and not plain.requires_grad
    np.testing.assert_array_equal(to_numpy(plain), to_numpy(recorded))


def test_fused_sdpa_does_not_depend_on_the_thread_count():
    import fastgrad

    assert_same_bits_at_thread_counts(lambda: _flash_run(fastgrad, "batch 16 causal", np.float32)[1])


@pytest.mark.parametrize(
    "case", ["3-D", "4-D", "causal L > S", "bool mask", "float mask", "broadcast batch dims", "gqa"]
)
def test_sdpa_cases_outside_the_fused_op_stay_composed(fg, torch, case):
    """3-D inputs, a value width other than query's, broadcast batch dims and GQA take PyTorch's math
    path there too (the same node); masks, which PyTorch's flash kernel takes, are composed here."""
    arrays, kwargs = _sdpa_case(case)
    names = []
    for lib in (fg, torch):
        tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
        mask = kwargs.get("attn_mask")
        extra = dict(kwargs, attn_mask=_tensor(lib, mask)) if mask is not None else kwargs
        names.append(lib.nn.functional.scaled_dot_product_attention(*tensors, **extra).grad_fn.name())
    assert names[0] != FLASH
    assert names[0] == names[1] or "mask" in case


def test_fused_sdpa_dropout_zero_and_equal_head_gqa_are_fused(fg, torch):
    leaves, heads = _flash_inputs(fg, "square causal", np.float64)
    sdpa = fg.nn.functional.scaled_dot_product_attention
    assert sdpa(*heads, dropout_p=0.0).grad_fn.name() == FLASH
    assert sdpa(*heads, enable_gqa=True).grad_fn.name() == FLASH
    assert sdpa(*heads, dropout_p=0.5).grad_fn.name() != FLASH


def test_flash_attention_primitive_takes_only_its_cases(fg):
    """None for inputs it does not take (the caller composes those), a TypeError for wrong types."""
    prims = importlib.import_module(f"{fg.__name__}._prims")
    leaves, (q, k, v) = _flash_inputs(fg, "square causal", np.float64)
    assert prims.flash_attention(q, k, v, 0.5, True).grad_fn.name() == FLASH
    # no scale: ATen's default, 1 / sqrt(width)
    default = 1 / math.sqrt(q.shape[-1])
    assert prims.flash_attention(q, k, v, None, True).tolist() == prims.flash_attention(q, k, v, default, True).tolist()
    for args in [
        (q[0], k[0], v[0]),  # 3-D
        (q, k, v[..., :3]),  # another value width
        (q, k[:1], v[:1]),  # batch sizes differ
        (q.float(), k, v),  # dtypes differ
        (q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1)),  # last dims strided
        (q[:, :, :0], k, v),  # empty
        (q.to(fg.float16), k.to(fg.float16), v.to(fg.float16)),
    ]:
        assert prims.flash_attention(*args, 0.5, False) is None
    with pytest.raises(TypeError):
        prims.flash_attention(q, k, "v", 0.5, False)
    with pytest.raises(TypeError):
        prims.flash_attention(q, k, v, "0.5", False)


MHA = {  # id: (constructor kwargs, inputs "self" / "cross" (k is v) / "separate", forward kwargs)
    "self": ({}, "self", {}),
    "no weights": ({}, "self", {"need_weights": False}),
    "weights per head": ({}, "cross", {"average_attn_weights": False}),
    "batch_first": ({"batch_first": True}, "self", {}),
    "batch_first no weights": ({"batch_first": True}, "cross", {"need_weights": False}),
    "kdim vdim": ({"kdim": 5, "vdim": 3}, "separate", {}),
    "kdim vdim no weights": ({"kdim": 5, "vdim": 3, "batch_first": True}, "separate", {"need_weights": False}),
    "bias_kv zero_attn": ({"add_bias_kv": True, "add_zero_attn": True}, "separate", {"attn_mask": "bool 2-D"}),
    "bias_kv no weights": ({"add_bias_kv": True}, "self", {"need_weights": False, "key_padding_mask": "bool"}),
    "no bias": ({"bias": False}, "separate", {}),
    "key_padding_mask bool": ({}, "cross", {"key_padding_mask": "bool"}),
    "key_padding_mask float": ({}, "self", {"key_padding_mask": "float", "attn_mask": "float 2-D"}),
    "attn_mask bool": ({}, "self", {"attn_mask": "bool 2-D", "need_weights": False}),
    "attn_mask float 3-D": ({}, "cross", {"attn_mask": "float 3-D"}),
    "both masks bool": ({}, "self", {"attn_mask": "bool 3-D", "key_padding_mask": "bool", "need_weights": False}),
    "causal": ({}, "self", {"attn_mask": "causal", "is_causal": True, "need_weights": False}),
    "causal with weights": ({}, "self", {"attn_mask": "causal", "is_causal": True}),
    "unbatched": ({}, "cross", {"key_padding_mask": "bool", "attn_mask": "float 3-D"}),
    "unbatched no weights": ({"kdim": 5}, "separate", {"need_weights": False, "attn_mask": "bool 2-D"}),
}
E, HEADS, L, S, N = 6, 2, 4, 5, 3


def _mha_inputs(case):
    kwargs, kind, forward = MHA[case]
    unbatched = case.startswith("unbatched")
    batch = () if unbatched else (N,)
    rng = rng_for("mha", case)

    def seq(length, features):
        shape = (*batch, length, features) if kwargs.get("batch_first") else (length, *batch, features)
        return rng.uniform(-1, 1, shape if batch else (length, features))

    if kind == "self":
        arrays = [seq(L, E)]
    elif kind == "cross":
        arrays = [seq(L, E), seq(S, E)]
    else:
        arrays = [seq(L, E), seq(S, kwargs.get("kdim", E)), seq(S, kwargs.get("vdim", E))]
    src = L if kind == "self" else S
    masks = {}
    for name, spec in forward.items():
        if name == "key_padding_mask":
            shape = (*batch, src)
            masks[name] = rng.random(shape) < 0.3 if spec == "bool" else rng.uniform(-2, 0, shape)
            if spec == "bool":
                masks[name][..., 0] = False  # every row keeps a key
        elif name == "attn_mask" and spec == "causal":
            masks[name] = np.triu(np.ones((L, L), bool), 1)
        elif name == "attn_mask":
            kind_, rank = spec.split()
            shape = (L, src) if rank == "2-D" else (N * HEADS if batch else HEADS, L, src)
            masks[name] = rng.random(shape) < 0.3 if kind_ == "bool" else rng.uniform(-2, 0, shape)
            if kind_ == "bool":
                masks[name][..., 0] = False
    return arrays, {**forward, **masks}


def _mha_run(lib, module, arrays, forward):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    if len(tensors) == 1:  # self-attention: one tensor
        query = key = value = tensors[0]
    elif len(tensors) == 2:  # keys and values one tensor
        (query, key), value = tensors, tensors[1]
    else:
        query, key, value = tensors
    forward = {k: _tensor(lib, v) if isinstance(v, np.ndarray) else v for k, v in forward.items()}
    output, weights = module(query, key, value, **forward)
    loss = _weighted_sum(lib, output)
    if weights is not None:
        loss = loss + _weighted_sum(lib, weights) * 3
    loss.backward()
    results = [output] + ([] if weights is None else [weights])
    grads = [t.grad for t in tensors] + [p.grad for p in module.parameters()]
    return [to_numpy(r) for r in results + grads]


def _copy_of(lib, torch_module, make):
    module = make(lib).double()
    module.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()})
    return module


@pytest.mark.parametrize("case", list(MHA))
def test_multihead_attention_matches_pytorch(fg, torch, case):
    kwargs = MHA[case][0]

    def make(lib):
        return lib.nn.MultiheadAttention(E, HEADS, **kwargs)

    torch.manual_seed(0)
    theirs = make(torch).double()
    ours = _copy_of(fg, theirs, make)
    arrays, forward = _mha_inputs(case)
    _compare(_mha_run(fg, ours, arrays, forward), _mha_run(torch, theirs, arrays, forward))


def test_multihead_attention_gradcheck(fg):
    fg.manual_seed(0)
    module = fg.nn.MultiheadAttention(4, 2, kdim=3, add_bias_kv=True).double()
    rng = rng_for("mha gradcheck")
    q, k, v = (fg.tensor(rng.uniform(-1, 1, s), requires_grad=True) for s in ((3, 2, 4), (2, 2, 3), (2, 2, 4)))

    def fn(q, k, v):
        output, weights = module(q, k, v)
        return output.sum() + (weights * weights).sum()

    assert gradcheck_for(fg)(fn, [q, k, v], eps=1e-6, atol=1e-5)


LAYERS = {  # id: (maker over a library, forward inputs: "src" / "tgt memory" / "src tgt", forward kwargs)
    "encoder layer": (lambda nn: nn.TransformerEncoderLayer(E, HEADS, 10, dropout=0.0), "src", {}),
    "encoder layer norm_first gelu masks": (
        lambda nn: nn.TransformerEncoderLayer(E, HEADS, 10, 0.0, "gelu", norm_first=True),
        "src",
        {"src_mask": "float", "src_key_padding_mask": "bool"},
    ),
    "encoder layer batch_first causal": (
        lambda nn: nn.TransformerEncoderLayer(E, HEADS, 10, 0.0, batch_first=True, layer_norm_eps=1e-3),
        "src",
        {"src_mask": "causal", "is_causal": True},
    ),
    "encoder layer no bias callable activation": (
        lambda nn: nn.TransformerEncoderLayer(E, HEADS, 10, 0.0, activation=nn.functional.silu, bias=False),
        "src",
        {"src_key_padding_mask": "bool"},
    ),
    "encoder 2 layers norm eval": (
        lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, 10), 2, nn.LayerNorm(E)).eval(),
        "src",
        {"mask": "causal", "src_key_padding_mask": "bool"},
    ),
    "decoder layer memory masks": (
        lambda nn: nn.TransformerDecoderLayer(E, HEADS, 10, 0.0),
        "tgt memory",
        {
            "tgt_mask": "causal",
            "memory_mask": "bool",
            "memory_key_padding_mask": "bool",
            "tgt_key_padding_mask": "bool",
        },
    ),
    "decoder layer norm_first batch_first": (
        lambda nn: nn.TransformerDecoderLayer(E, HEADS, 10, 0.0, nn.GELU(), batch_first=True, norm_first=True),
        "tgt memory",
        {"tgt_mask": "causal", "tgt_is_causal": True},
    ),
    "decoder 2 layers detects causal": (
        lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, HEADS, 10, 0.0), 2),
        "tgt memory",
        {"tgt_mask": "causal", "memory_key_padding_mask": "bool"},
    ),
    "transformer": (
        lambda nn: nn.Transformer(E, HEADS, 2, 1, 10, 0.0),
        "src tgt",
        {"tgt_mask": "causal", "src_key_padding_mask": "bool", "memory_key_padding_mask": "bool"},
    ),
    "transformer unbatched": (lambda nn: nn.Transformer(E, HEADS, 1, 1, 10, 0.0, norm_first=True), "src tgt", {}),
}


def _layer_inputs(case, batch_first):
    _, kind, forward = LAYERS[case]
    rng = rng_for("layers", case)
    batch = () if case.endswith("unbatched") else (N,)

    def seq(length):
        return rng.uniform(-1, 1, (*batch, length, E) if batch_first else (length, *batch, E))

    arrays = {"src": [seq(S)], "tgt memory": [seq(L), seq(S)], "src tgt": [seq(S), seq(L)]}[kind]
    masks = {}
    for name, spec in forward.items():
        length = L if name.startswith("tgt") else S  # the sequence a mask's last dim runs over
        if spec == "causal":
            masks[name] = np.triu(np.full((length, length), -np.inf), 1)
        elif name.endswith("key_padding_mask"):
            masks[name] = rng.random((*batch, length)) < 0.3
            masks[name][..., 0] = False
        elif name == "memory_mask":
            masks[name] = rng.random((L, S)) < 0.3
            masks[name][..., 0] = False
        elif name == "src_mask":
            masks[name] = rng.uniform(-1, 0, (S, S))
    return arrays, {**forward, **masks}


def _layer_run(lib, module, arrays, forward):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    forward = {k: _tensor(lib, v) if isinstance(v, np.ndarray) else v for k, v in forward.items()}
    output = module(*tensors, **forward)
    _weighted_sum(lib, output).backward()
    grads = [t.grad for t in tensors] + [p.grad for p in module.parameters()]
    return [to_numpy(output)] + [to_numpy(g) for g in grads]


# The pure-Python reference runs the shared layer code over its own primitives; three cases cover it
# (the whole table there would take seconds).
ON_REFERENCE = ["encoder layer norm_first gelu masks", "decoder layer memory masks", "transformer unbatched"]


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("case", list(LAYERS))
def test_transformer_layers_match_pytorch(fg, torch, case):
    if fg.__name__ != "fastgrad" and case not in ON_REFERENCE:
        pytest.skip("the reference runs a subset of the table")
    make = LAYERS[case][0]
    torch.manual_seed(1)
    theirs = make(torch.nn).double()
    ours = _copy_of(fg, theirs, lambda lib: make(lib.nn))
    ours.train(theirs.training)
    assert repr(ours) == repr(theirs)
    first = next(m for m in theirs.modules() if isinstance(m, torch.nn.MultiheadAttention))
    arrays, forward = _layer_inputs(case, first.batch_first)
    _compare(_layer_run(fg, ours, arrays, forward), _layer_run(torch, theirs, arrays, forward))


def test_float32_decoder_layer_matches_pytorch(fg, torch):
    """Float32 end to end (PyTorch's sdpa takes its flash kernel): float32 rounding apart."""
    torch.manual_seed(3)
    theirs = torch.nn.TransformerDecoderLayer(E, HEADS, 10, 0.0, batch_first=True)
    ours = fg.nn.TransformerDecoderLayer(E, HEADS, 10, 0.0, batch_first=True)
    ours.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = rng_for("float32 decoder")
    tgt, memory = (rng.standard_normal((N, n, E)).astype(np.float32) for n in (L, S))
    mask = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    results = []
    for lib, module in ((fg, ours), (torch, theirs)):
        tensors = [lib.tensor(a, requires_grad=True) for a in (tgt, memory)]
        output = module(*tensors, tgt_mask=lib.tensor(mask), tgt_is_causal=True)
        output.pow(2).sum().backward()
        results.append([to_numpy(t) for t in [output] + [t.grad for t in tensors]])
    for got, expected in zip(*results):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("left_aligned", [True, False])
def test_encoder_in_eval_without_grad_zeros_padding_as_pytorch(fg, torch, left_aligned):
    """PyTorch's encoder runs on a nested tensor here (eval, no gradient, padding at the ends of the
    rows): the padded positions leave the layers as zeros."""

    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(E, HEADS, 10, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, lib.nn.LayerNorm(E)).eval()

    torch.manual_seed(2)
    theirs = make(torch).double()
    ours = _copy_of(fg, theirs, make).eval()
    rng = rng_for("nested", left_aligned)
    x = rng.uniform(-1, 1, (N, S, E))
    padding = np.zeros((N, S), bool)
    padding[0, 3:] = True
    padding[1, 1] = not left_aligned
    results = []
    for lib, module in ((fg, ours), (torch, theirs)):
        with lib.no_grad():
            results.append(to_numpy(module(lib.tensor(x), src_key_padding_mask=lib.tensor(padding))))
    _compare(*results)


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.MultiheadAttention(8, 2),
        lambda nn: nn.MultiheadAttention(8, 4, dropout=0.1, bias=False, add_bias_kv=True, kdim=3, vdim=5),
        lambda nn: nn.TransformerDecoderLayer(8, 2, 16, activation="gelu", bias=False),
    ],
)
def test_parameters_reprs_and_init_match_pytorch(fg, torch, make):
    ours, theirs = make(fg.nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    attention = next(m for m in ours.modules() if isinstance(m, fg.nn.MultiheadAttention))
    for name, p in attention.named_parameters():
        values = to_numpy(p)
        if name in ("in_proj_bias", "out_proj.bias"):
            assert not values.any()
        elif p.dim() == 2 and name != "out_proj.weight":  # xavier_uniform_: +-sqrt(6 / (fan_in + fan_out))
            bound = np.sqrt(6 / sum(values.shape))
            assert np.abs(values).max() <= bound and values.std() > bound / 3


def test_generate_square_subsequent_mask(fg, torch):
    ours = fg.nn.Transformer.generate_square_subsequent_mask(4)
    assert ours.dtype == fg.float32
    np.testing.assert_array_equal(to_numpy(ours), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    assert fg.nn.Transformer.generate_square_subsequent_mask(2, dtype=fg.float64).dtype == fg.float64


def test_warnings(fg):
    layer = fg.nn.TransformerEncoderLayer(4, 2, 8, norm_first=True, batch_first=True)
    with pytest.warns(UserWarning, match="use_nested_tensor is False because encoder_layer.norm_first was True"):
        encoder = fg.nn.TransformerEncoder(layer, 1)
    assert not encoder.use_nested_tensor and encoder.enable_nested_tensor
    mha = fg.nn.MultiheadAttention(4, 2)
    x = fg.zeros(3, 1, 4)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        mha(x, x, x, key_padding_mask=fg.zeros(1, 3, dtype=fg.bool), attn_mask=fg.zeros(3, 3))


def _sdpa(t, shapes, **kwargs):
    return t.nn.functional.scaled_dot_product_attention(*(t.ones(*s) for s in shapes), **kwargs)


def _mha(t, x_shape=(3, 2, 4), *args, module=None, **kwargs):
    module = module or t.nn.MultiheadAttention(4, 2)
    x = t.ones(*x_shape)
    return module(x, x, x, *args, **kwargs)


ERRORS = {
    "sdpa causal and mask": lambda t: _sdpa(t, [(2, 3, 4)] * 3, attn_mask=t.ones(3, 3, dtype=t.bool), is_causal=True),
    "sdpa dtypes": lambda t: t.nn.functional.scaled_dot_product_attention(
        t.ones(2, 3, 4), t.ones(2, 3, 4, dtype=t.float64), t.ones(2, 3, 4)
    ),
    "sdpa 1-D": lambda t: _sdpa(t, [(4,)] * 3),
    "sdpa head dims": lambda t: _sdpa(t, [(2, 3, 4), (2, 3, 5), (2, 3, 4)]),
    "sdpa value length": lambda t: _sdpa(t, [(2, 3, 4), (2, 5, 4), (2, 4, 4)]),
    "sdpa batch": lambda t: _sdpa(t, [(2, 2, 3, 4), (3, 2, 3, 4), (3, 2, 3, 4)]),
    "sdpa int mask": lambda t: _sdpa(t, [(2, 3, 4)] * 3, attn_mask=t.ones(3, 3, dtype=t.int64)),
    "sdpa double mask": lambda t: _sdpa(t, [(2, 3, 4)] * 3, attn_mask=t.ones(3, 3, dtype=t.float64)),
    "sdpa mask rank": lambda t: _sdpa(t, [(2, 3, 4)] * 3, attn_mask=t.ones(5, 2, 3, 3, dtype=t.bool)),
    "sdpa gqa": lambda t: _sdpa(t, [(1, 3, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)], enable_gqa=True),
    "sdpa gqa 2-D": lambda t: _sdpa(t, [(3, 4), (3, 4), (3, 4)], enable_gqa=True),
    "sdpa dropout": lambda t: _sdpa(t, [(2, 3, 4)] * 3, dropout_p=1.5),
    "sdpa query type": lambda t: t.nn.functional.scaled_dot_product_attention(1, t.ones(3, 4), t.ones(3, 4)),
    "sdpa scale positional": lambda t: t.nn.functional.scaled_dot_product_attention(
        *[t.ones(3, 4)] * 3, None, 0.0, 0, 1
    ),
    "mha embed_dim": lambda t: t.nn.MultiheadAttention(0, 2),
    "mha divisible": lambda t: t.nn.MultiheadAttention(5, 2),
    "mha query rank": lambda t: _mha(t, (2, 3, 2, 4)),
    "mha key rank": lambda t: t.nn.MultiheadAttention(4, 2)(t.ones(3, 2, 4), t.ones(3, 4), t.ones(3, 4)),
    "mha embed size": lambda t: _mha(t, (3, 2, 6)),
    "mha key value shapes": lambda t: t.nn.MultiheadAttention(4, 2)(t.ones(3, 2, 4), t.ones(3, 2, 4), t.ones(2, 2, 4)),
    "mha mask 2-D shape": lambda t: _mha(t, attn_mask=t.ones(3, 2, dtype=t.bool)),
    "mha mask 3-D shape": lambda t: _mha(t, attn_mask=t.ones(2, 3, 3, dtype=t.bool)),
    "mha mask rank": lambda t: _mha(t, attn_mask=t.ones(3, dtype=t.bool)),
    "mha mask dtype": lambda t: _mha(t, attn_mask=t.ones(3, 3, dtype=t.int64)),
    "mha padding rank": lambda t: _mha(t, key_padding_mask=t.ones(2, 3, 1, dtype=t.bool)),
    "mha padding batch": lambda t: _mha(t, key_padding_mask=t.zeros(3, 3, dtype=t.bool)),
    "mha padding length": lambda t: _mha(t, key_padding_mask=t.zeros(2, 4, dtype=t.bool)),
    "mha unbatched mask": lambda t: _mha(t, (3, 4), attn_mask=t.ones(3, 3, 3)),
    "mha causal without mask": lambda t: _mha(t, is_causal=True),
    "encoder activation": lambda t: t.nn.TransformerEncoderLayer(4, 2, activation="tanh"),
    "transformer batch": lambda t: t.nn.Transformer(4, 2, 1, 1, 8)(t.ones(3, 2, 4), t.ones(3, 3, 4)),
    "transformer d_model": lambda t: t.nn.Transformer(4, 2, 1, 1, 8)(t.ones(3, 2, 4), t.ones(3, 2, 5)),
}


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_causal_sdpa_rows_do_not_see_later_keys_or_values(fg, dtype):
    """A causal row sees keys j <= i only: NaN and inf in later rows of key and value change nothing
    before them (the kernel computes a tile's products past a row's keys and drops them)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((1, 2, 9, 5)) for _ in range(3)]
    sdpa = fg.nn.functional.scaled_dot_product_attention
    clean = sdpa(*(fg.tensor(a, dtype=getattr(fg, dtype)) for a in arrays), is_causal=True)
    arrays[1][:, :, 6], arrays[2][:, :, 6], arrays[2][:, :, 8] = np.nan, np.inf, np.nan
    dirty = sdpa(*(fg.tensor(a, dtype=getattr(fg, dtype)) for a in arrays), is_causal=True)
    assert dirty.grad_fn is None or dirty.grad_fn.name() == FLASH
    np.testing.assert_array_equal(to_numpy(dirty)[:, :, :6], to_numpy(clean)[:, :, :6])
    assert np.isnan(to_numpy(dirty)[:, :, 6:]).all()
