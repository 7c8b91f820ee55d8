"""The attention functions of torch.nn.functional (re-exported by nn/functional.py):
scaled_dot_product_attention and multi_head_attention_forward, with the mask helpers the
Transformer layers share (_canonical_mask, _none_or_dtype).

scaled_dot_product_attention runs one fused op (csrc/ops/attention.cpp, node
ScaledDotProductFlashAttentionForCpuBackward0) for the inputs PyTorch sends to its CPU flash kernel
without a mask: 4-D float32 / float64, equal batch and head sizes, value as wide as query, last dims
contiguous, no dropout. Other inputs (masks, dropout, 3-D, broadcast, GQA, another value width) are
composed as ATen's math path (_scaled_dot_product_attention_math) op for op: query and key each
scaled by sqrt(scale) before their product, the mask added to the scores in place, a softmax that
gives fully masked rows zeros (ATen's _safe_softmax), dropout, the product with value. PyTorch's
flash kernel also takes masks, which are composed here: other nodes, the same values to float
rounding. That kernel also accepts is_causal with an attn_mask (applying both) where the math path
raises, as documented; here it raises on every path.
multi_head_attention_forward is PyTorch's Python function, with its checks and messages.
"""

import math
import warnings

from .. import _factories, _linalg_ops, _prims
from . import functional as F  # partly imported: it imports this module; used at call time
from fastgrad._types import C_TYPE_NAME, bool as bool_, float32

Tensor = _prims.Tensor

__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]


def _check_sdpa_inputs(query, key, value, attn_mask):
    """ATen's validate_sdpa_input."""
    if not (isinstance(query, Tensor) and isinstance(key, Tensor) and isinstance(value, Tensor)):
        position, name, tensor = next(
            (i, name, t)
            for i, (name, t) in enumerate((("query", query), ("key", key), ("value", value)), 1)
            if not isinstance(t, Tensor)
        )
        raise TypeError(
            f"scaled_dot_product_attention(): argument '{name}' (position {position}) "
            f"must be Tensor, not {type(tensor).__name__}"
        )
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        raise TypeError(
            "scaled_dot_product_attention(): argument 'attn_mask' (position 4) "
            f"must be Tensor, not {type(attn_mask).__name__}"
        )
    dtype = query.dtype
    if key.dtype is not dtype or value.dtype is not dtype:  # one object per dtype
        q, k, v = (C_TYPE_NAME[t.dtype] for t in (query, key, value))
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got "
            f"query.dtype: {q} key.dtype: {k} and value.dtype: {v} instead."
        )
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead."
        )
    if attn_mask is not None and attn_mask.dtype not in (bool_, float32, query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {C_TYPE_NAME[attn_mask.dtype]} and  query.dtype: {C_TYPE_NAME[query.dtype]} instead."
        )


def _bias_from_bool_mask(mask, dtype):
    """A bool mask (True: takes part) as the additive bias ATen's convert_boolean_attn_mask makes."""
    return _factories.zeros(tuple(mask.shape), dtype=dtype).masked_fill_(mask.logical_not(), float("-inf"))


def _repeat_kv_heads(query, key, value):
    """Grouped-query attention: key and value heads (dim -3) repeated to the query's head count, as
    ATen's pre_process_group_query_attention_input."""
    q_heads, k_heads, v_heads = query.size(-3), key.size(-3), value.size(-3)
    if q_heads == k_heads == v_heads:
        return key, value
    if q_heads % k_heads or q_heads % v_heads:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
    return key.repeat_interleave(q_heads // k_heads, -3), value.repeat_interleave(q_heads // v_heads, -3)


def _safe_softmax(scores):
    """Softmax over the last dim whose rows of only -inf (fully masked) are zeros, not NaN: ATen's
    _safe_softmax. Such rows are softmaxed as zeros and zeroed after, so their gradient is zero."""
    masked_rows = (scores == float("-inf")).all(-1, keepdim=True)
    if not masked_rows.any():
        return scores.softmax(-1)
    return scores.masked_fill(masked_rows, 0.0).softmax(-1).masked_fill(masked_rows, 0.0)


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False
):
    """softmax(query key^T * scale + mask) value over the last two dims, batch dims broadcast. A bool
    mask's True takes part; a float mask is added; is_causal is a lower-triangular bool mask aligned
    to the top left."""
    # PyTorch's flash cases first (a sampling loop's per-token call): one fused op, which tells its
    # inputs (None for the others) and computes the default scale; its inputs pass the checks below
    flash = attn_mask is None and not dropout_p > 0.0
    if flash and isinstance(query, Tensor) and isinstance(key, Tensor) and isinstance(value, Tensor):
        output = _prims.flash_attention(query, key, value, scale, is_causal)
        if output is not None:
            return output
    _check_sdpa_inputs(query, key, value, attn_mask)
    *_, width = query.shape  # unpacked: Size's indexing is a Python call
    if scale is None:  # ATen's calculate_scale: 1 / sqrt(0) is inf there
        scale = 1.0 / math.sqrt(width) if width else math.inf
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if attn_mask is not None and attn_mask.dtype == bool_:
        attn_mask = _bias_from_bool_mask(attn_mask, query.dtype)
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key, value)
    # one primitive for the scaled product and its mask (the causal one written into the scores):
    # sampling loops call this per token
    scores = _prims.attention_scores(query, key, scale, attn_mask, is_causal)
    if attn_mask is not None:
        weights = _safe_softmax(scores)
    else:  # no row all -inf: the causal mask keeps each row's first key (infinite inputs give NaN anyway)
        weights = _prims.softmax(scores, -1)
    if dropout_p > 0.0:
        if dropout_p > 1.0:  # ATen's dropout: a RuntimeError, where F.dropout's is a ValueError
            raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
        weights = F.dropout(weights, dropout_p, True)
    return _prims.matmul(weights, value)


# ---- multi-head attention


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool or float mask as a float one: True (masked out) becomes -inf, False 0."""
    if mask is None:
        return None
    if mask.dtype != bool_ and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=2,
        )
    if mask.dtype == bool_:
        mask = _factories.zeros_like(mask, dtype=target_type).masked_fill_(mask, float("-inf"))
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the inputs are batched (3-D) or not (2-D), with PyTorch's checks of the other ranks."""
    if query.dim() not in (2, 3):
        raise AssertionError(
            f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query tensor"
        )
    batched = query.dim() == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(
            f"For {kind} `query`, expected `key` and `value` to be {query.dim()}-D"
            f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.dim() != query.dim() - 1:
        raise AssertionError(
            f"For {kind} `query`, expected `key_padding_mask` to be `None` or {query.dim() - 1}-D"
            f" but found {key_padding_mask.dim()}-D tensor instead"
        )
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(
                f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {attn_mask.dim()}-D tensor instead"
            )
        if not batched and attn_mask.dim() == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return batched


def _in_projection_packed(q, k, v, w, b):
    """q, k and v projected by the three row blocks of w (and b); one product when q, k and v are
    one tensor, two when k and v are."""
    E = q.size(-1)
    if k is v:
        if q is k:  # self-attention
            proj = F.linear(q, w, b).unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
            return proj[0], proj[1], proj[2]
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        kv_proj = F.linear(k, w_kv, b_kv).unflatten(-1, (2, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return F.linear(q, w_q, b_q), kv_proj[0], kv_proj[1]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q, b_k, b_v):
    """q, k and v projected by their own weights (kdim/vdim differ from embed_dim)."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    for what, tensor, expected in (
        ("query weights", w_q, (Eq, Eq)),
        ("key weights", w_k, (Eq, Ek)),
        ("value weights", w_v, (Eq, Ev)),
        ("query bias", b_q, (Eq,)),
        ("key bias", b_k, (Eq,)),
        ("value bias", b_v, (Eq,)),
    ):
        if tensor is not None and tuple(tensor.shape) != expected:
            raise AssertionError(f"expecting {what} shape of {expected}, but got {tensor.shape}")
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads):
    """A 2-D (L, S) mask as (1, L, S); a 3-D one must be (N * num_heads, L, S)."""
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {(tgt_len, src_len)}."
            )
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 3D attn_mask is {attn_mask.shape}, "
                f"but should be {(bsz * num_heads, tgt_len, src_len)}."
            )
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check,
    num_heads,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn,
    dropout_p,
    out_proj_weight,
    out_proj_bias,
    training=True,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    use_separate_proj_weight=False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights=True,
    is_causal=False,
):
    """nn.MultiheadAttention's computation on (L, N, E) inputs (or unbatched (L, E)): the in
    projections, bias_k/bias_v and zero attention appended to the keys and values, the masks merged
    into one additive mask, attention per head (explicit, with the weights returned, when
    need_weights; otherwise scaled_dot_product_attention), the out projection."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:  # a batch of one, squeezed from the results
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask", query.dtype
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. "
            "You may use the Transformer module method "
            "`generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention makes the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is not causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
            )
    elif key.shape != value.shape:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for name, weight in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if weight is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        biases = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, *biases)

    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads)
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _prims.cat([k, bias_k.repeat(1, bsz, 1)], 0)
        v = _prims.cat([v, bias_v.repeat(1, bsz, 1)], 0)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    # (batch * heads, sequence, head_dim)
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, "static_k", bsz * num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz * num_heads, head_dim)
    if add_zero_attn:
        zeros = (bsz * num_heads, 1, head_dim)
        k = _prims.cat([k, _factories.zeros(zeros, dtype=k.dtype)], 1)
        v = _prims.cat([v, _factories.zeros(zeros, dtype=v.dtype)], 1)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    src_len = k.size(1)
    if key_padding_mask is not None:
        for dim, expected in ((0, bsz), (1, src_len)):
            if key_padding_mask.shape[dim] != expected:
                raise AssertionError(
                    f"Expected key_padded_mask.shape[{dim}] to be {expected}, but got {key_padding_mask.shape[dim]}"
                )
        key_padding_mask = (
            key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        )
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(q.shape[2]))
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        if attn_mask is not None:
            weights = _linalg_ops.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            weights = q_scaled.bmm(k.transpose(-2, -1))
        weights = weights.softmax(-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p, True)
        output = weights.bmm(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        output = F.linear(output, out_proj_weight, out_proj_bias)
        output = output.view(tgt_len, bsz, output.size(1))
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            output, weights = output.squeeze(1), weights.squeeze(0)
        return output, weights
    if attn_mask is not None:  # (1 or N * heads, L, S) as (1 or N, heads, L, S)
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    output = output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    output = F.linear(output, out_proj_weight, out_proj_bias)
    output = output.view(tgt_len, bsz, output.size(1))
    return (output if batched else output.squeeze(1)), None


def _heads(x, static, name, batch_heads, head_dim):
    """Keys or values as (batch * heads, sequence, head_dim): the projection split into heads, or the
    caller's static tensor already in that layout."""
    if static is None:
        return x.view(x.shape[0], batch_heads, head_dim).transpose(0, 1)
    if static.size(0) != batch_heads:
        raise AssertionError(f"expecting {name}.size(0) of {batch_heads}, but got {static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.size(2)}")
    return static
