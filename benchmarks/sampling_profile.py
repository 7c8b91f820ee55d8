"""Where a token of the bench's tiny GPT sampling row goes (`python -m fastgrad.bench --only seq`, issue 17):
each step of the sampling loop timed alone at the steady state (context = block = 32) in fastgrad and in
PyTorch, times its count per token; then the whole model forward three ways: fastgrad, PyTorch, and the
same forward as bare fastgrad._C primitive calls (no modules, no argument parsing, no checks). The last
is the floor of eager execution with today's kernels and bindings: what is left above it is the Python
layer's share.

    python benchmarks/sampling_profile.py [--calls 1000]

Times are the thread's CPU time (time.thread_time), the median of 7 runs of `calls` calls each, one thread
for both libraries, under no_grad: on a shared machine CPU time is steadier than wall time (preemption
is left out; cache sharing is not).
"""

import argparse
import statistics
import time

import numpy as np
import torch

import fastgrad
from fastgrad import _C, bench


# the steps of a token outside the model's forward
OUTSIDE_THE_MODEL = {
    "idx[:, -block:]",
    "logits[:, -1, :]",
    "topk(logits, 10)[0][:, [-1]]",
    "logits < kth",
    "masked_fill(-inf)",
    "softmax(dim=-1)",
    "multinomial(probs, 1)",
    "cat((idx, next), 1)",
}


def median_us(fn, calls, runs=7):
    for _ in range(min(calls, 50)):
        fn()
    times = []
    for _ in range(runs):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        times.append((time.thread_time() - start) / calls)
    return statistics.median(times) * 1e6


def sampling_state(lib):
    """The model in eval mode, a 40-token context, and one token's intermediate values."""
    F = lib.nn.functional
    lib.manual_seed(0)
    model = bench.tiny_gpt(lib, **bench.GPT_SIZES)
    model.eval()
    rng = np.random.default_rng(0)
    idx = lib.tensor(rng.integers(0, bench.GPT_SIZES["vocab"], (1, 40)))
    logits = model(idx[:, -32:])[:, -1, :]
    kth = lib.topk(logits, 10)[0][:, [-1]]
    probs = F.softmax(logits.masked_fill(logits < kth, -float("inf")), dim=-1)
    return model, idx, logits, kth, probs


def steps(lib):
    """(step, count per token, fn) for one token of bench.tiny_gpt_sampling at context 32."""
    F = lib.nn.functional
    model, idx, logits, kth, probs = sampling_state(lib)
    block, rng = model.blocks[0], np.random.default_rng(1)
    x, h = (lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((1, 32, 64), (1, 32, 256)))
    heads = lib.tensor(rng.standard_normal((1, 4, 32, 16)).astype(np.float32))
    context, positions, qkv = idx[:, -32:], lib.arange(32), block.qkv(x)
    logits3, following = model(context), lib.multinomial(probs, num_samples=1)
    return [
        ("idx[:, -block:]", 1, lambda: idx[:, -32:]),
        ("token Embedding", 1, lambda: model.wte(context)),
        ("arange(T)", 1, lambda: lib.arange(32)),
        ("position Embedding", 1, lambda: model.wpe(positions)),
        ("LayerNorm (1, 32, 64)", 5, lambda: block.ln_1(x)),
        ("Linear 64->192 (qkv)", 2, lambda: block.qkv(x)),
        ("split(64, dim=2)", 2, lambda: qkv.split(64, dim=2)),
        ("view(1, T, 4, 16).transpose(1, 2)", 6, lambda: x.view(1, 32, 4, 16).transpose(1, 2)),
        (
            "scaled_dot_product_attention causal",
            2,
            lambda: F.scaled_dot_product_attention(heads, heads, heads, is_causal=True),
        ),
        ("y.transpose(1, 2).contiguous().view", 2, lambda: heads.transpose(1, 2).contiguous().view(1, 32, 64)),
        ("Linear 64->64 (proj)", 2, lambda: block.proj(x)),
        ("residual add", 5, lambda: x + x),
        ("Linear 64->256 (up)", 2, lambda: block.up(x)),
        ("gelu (1, 32, 256)", 2, lambda: F.gelu(h)),
        ("Linear 256->64 (down)", 2, lambda: block.down(h)),
        ("head Linear 64->65, no bias", 1, lambda: model.head(x)),
        ("logits[:, -1, :]", 1, lambda: logits3[:, -1, :]),
        ("topk(logits, 10)[0][:, [-1]]", 1, lambda: lib.topk(logits, 10)[0][:, [-1]]),
        ("logits < kth", 1, lambda: logits < kth),
        ("masked_fill(-inf)", 1, lambda: logits.masked_fill(logits < kth, -float("inf"))),
        ("softmax(dim=-1)", 1, lambda: F.softmax(logits, dim=-1)),
        ("multinomial(probs, 1)", 1, lambda: lib.multinomial(probs, num_samples=1)),
        ("cat((idx, next), 1)", 1, lambda: lib.cat((idx, following), dim=1)),
    ]


def bare_forward(model, idx):
    """fastgrad's model forward as fastgrad._C calls, op for op (the causal bias built once)."""
    p = dict(model.named_parameters())
    rows = _C.arange(0, 32, 1, fastgrad.int64)
    causal = _C.where(_C.lt(_C.sub(_C.view(rows, [32, 1]), rows), 0), float("-inf"), 0.0)  # -inf above the diagonal

    def norm(x, name):
        return _C.layer_norm(x, [64], p[f"{name}.weight"], p[f"{name}.bias"], 1e-5)

    def linear(x, name):
        return _C.linear(x, p[f"{name}.weight"], p[f"{name}.bias"])

    def forward():
        x = _C.add(p["wte.weight"][idx[:, -32:]], p["wpe.weight"][rows])
        for i in range(bench.GPT_SIZES["layers"]):
            qkv = linear(norm(x, f"blocks.{i}.ln_1"), f"blocks.{i}.qkv")
            q, k, v = (_C.transpose(_C.view(qkv[:, :, j : j + 64], [1, 32, 4, 16]), 1, 2) for j in (0, 64, 128))
            scores = _C.matmul(_C.mul(q, 0.5), _C.mul(_C.transpose(k, -2, -1), 0.5))  # scale 1/sqrt(16), split
            _C.add_(scores, causal)
            y = _C.view(_C.contiguous(_C.transpose(_C.matmul(_C.softmax(scores, -1), v), 1, 2)), [1, 32, 64])
            x = _C.add(x, linear(y, f"blocks.{i}.proj"))
            up = _C.gelu(linear(norm(x, f"blocks.{i}.ln_2"), f"blocks.{i}.up"), "none")
            x = _C.add(x, linear(up, f"blocks.{i}.down"))
        return _C.matmul(norm(x, "ln_f"), _C.t(model.head.weight))

    return forward


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed run (the model forwards: a fifth)")
    args = parser.parse_args()
    fastgrad.set_num_threads(1)
    torch.set_num_threads(1)
    times = {}
    for lib in (fastgrad, torch):
        with lib.no_grad():
            for name, count, fn in steps(lib):
                times.setdefault(name, [count]).append(median_us(fn, args.calls))
    print(f"{bench.machine_line(torch)}\n")
    print("| step | per token | fastgrad µs | torch µs | fastgrad µs/token | torch µs/token | torch / fastgrad |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (count, ours, theirs) in times.items():
        each = f"{ours:.2f} | {theirs:.2f}"
        print(f"| {name} | {count} | {each} | {ours * count:.1f} | {theirs * count:.1f} | {theirs / ours:.2f}x |")
    ours, theirs = (sum(t[0] * t[i] for t in times.values()) for i in (1, 2))
    sampled = times["multinomial(probs, 1)"]
    print(f"| sum of the steps | | | | {ours:.1f} | {theirs:.1f} | {theirs / ours:.2f}x |")
    print(
        f"| sum without multinomial | | | | {ours - sampled[1]:.1f} | {theirs - sampled[2]:.1f} | "
        f"{(theirs - sampled[2]) / (ours - sampled[1]):.2f}x |\n"
    )
    forwards = {}
    with fastgrad.no_grad(), torch.no_grad():
        for lib in (fastgrad, torch):
            model, idx = sampling_state(lib)[:2]
            forwards[lib.__name__] = median_us(lambda: model(idx[:, -32:]), args.calls // 5)
            if lib is fastgrad:
                bare = bare_forward(model, idx)
                np.testing.assert_allclose(bare().numpy(), model(idx[:, -32:]).numpy(), rtol=1e-5, atol=1e-5)
                forwards["bare"] = median_us(bare, args.calls // 5)
    print("| model forward (context 32) | µs |\n|---|---:|")
    print(f"| fastgrad | {forwards['fastgrad']:.1f} |")
    print(f"| torch | {forwards['torch']:.1f} |")
    print(f"| fastgrad._C primitives alone (the eager floor) | {forwards['bare']:.1f} |")
    share = 1 - forwards["bare"] / forwards["fastgrad"]
    print(f"\nPython layer's share of fastgrad's forward: {share:.0%}\n")
    # a token: the forward, then the steps outside the model (slicing, top-k, sampling, cat)
    outside = [t for name, t in times.items() if name in OUTSIDE_THE_MODEL]
    tail = {i: sum(t[i] for t in outside) for i in (1, 2)}
    token = {"fastgrad": forwards["fastgrad"] + tail[1], "torch": forwards["torch"] + tail[2]}
    print("| a token | fastgrad µs | torch µs | torch / fastgrad | 3x target: fastgrad at most |")
    print("|---|---:|---:|---:|---:|")
    for what, drop in (("with multinomial", (0, 0)), ("without multinomial", sampled[1:])):
        ours, theirs = token["fastgrad"] - drop[0], token["torch"] - drop[1]
        print(f"| {what} | {ours:.1f} | {theirs:.1f} | {theirs / ours:.2f}x | {theirs / 3:.1f} |")
    floor = forwards["bare"] + tail[1]
    print(f"| eager floor (bare primitives + fastgrad's steps outside the model) | {floor:.1f} | | | |")


if __name__ == "__main__":
    main()
