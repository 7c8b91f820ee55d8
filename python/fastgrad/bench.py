"""Side-by-side benchmarks: fastgrad vs PyTorch (when importable, one thread) vs hand-written numpy vs
fastgrad.reference, measured in one run with a fixed method (warm-up, then the median of several
samples, each long enough to time). Prints markdown tables with a machine line and the ratios.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m fastgrad.bench [--quick] [--only NAME]

numpy's OpenBLAS runs on as many threads as the row says: OpenBLAS reads OPENBLAS_NUM_THREADS only
when it loads, so the bench calls its set_num_threads through ctypes before each row; where numpy's
BLAS is not a loaded OpenBLAS that exports it, numpy appears only in one-thread rows, and only when
OPENBLAS_NUM_THREADS=1 was set before the run.

A ratio is how many times faster fastgrad is than the peer (peer time / fastgrad time), so > 1 means
fastgrad wins. Each row names its target (the goals of issue 5, in TARGETS) and whether it is met.
"""

import argparse
import ctypes
import functools
import glob
import importlib
import os
import platform
import statistics
import sys
import time

import numpy as np

import fastgrad
import fastgrad.reference

PEERS = ("torch", "numpy", "reference")
# Goals of issue 5: row-name prefix -> [(peer, smallest fastgrad-over-peer ratio)]. Ratios are of times,
# for the throughput rows (matmul, elementwise) too, since the work is the same on both sides.
TARGETS = {
    "op forward": [("torch", 5.0)],
    "op forward+backward": [("torch", 8.0), ("numpy", 1.0)],
    "micrograd step": [("torch", 20.0)],
    "MLP 64-128-10": [("torch", 3.0), ("numpy", 1.0)],
    "MLP 784-256-10 b64 step": [("torch", 1.3)],
    "matmul 64": [("numpy", 1.0)],
    # issue 20: at least 0.95x the faster of MKL (torch) and OpenBLAS (numpy), i.e. 0.95x each
    **{f"matmul {n}": [("torch", 0.95), ("numpy", 0.95)] for n in (256, 512, 1024, 2048)},
    "add": [("numpy", 1.0)],
    "exp": [("numpy", 1.0)],
    "dot": [("numpy", 1.0)],  # issue 20
    "mv": [("numpy", 1.0)],
    "tanh": [("numpy", 1.0)],
    "sigmoid": [("numpy", 1.0)],
    # issue 20: float32 exp, tanh and sigmoid at least as fast as PyTorch at 1e6 elements
    "exp 1.0e+06": [("numpy", 1.0), ("torch", 1.0)],
    "tanh 1.0e+06": [("numpy", 1.0), ("torch", 1.0)],
    "sigmoid 1.0e+06": [("numpy", 1.0), ("torch", 1.0)],
    # issue 20: float32 sin and cos as native vector polynomials, at numpy's speed
    "sin": [("numpy", 1.0)],
    "cos": [("numpy", 1.0)],
    # session 24: float32 atan2 (in double lanes, kernels/float_binary_impl.h) at least as fast as PyTorch at 1e6
    "atan2 1.0e+06": [("torch", 1.0)],
    # issue 16: Conv2d forward+backward faster than PyTorch for 3x3 convs of 16-64 channels on 32x32
    **{f"conv2d 3x3 {c}->{c} 32x32 b{n} fwd+bwd": [("torch", 1.0)] for c in (16, 32, 64) for n in (8, 64)},
    # issue 16: a LeNet-5 training step at least 2x PyTorch's at batch 8, 1.2x at batch 64
    "LeNet-5 b8 step": [("torch", 2.0)],
    "LeNet-5 b64 step": [("torch", 1.2)],
    # issue 17: a character LSTM language model's training step at least 2x PyTorch's eager step, the
    # seq2seq tutorial's GRU encoder step at least 3x
    "char LSTM LM": [("torch", 2.0)],
    "GRU encoder": [("torch", 3.0)],
    # issue 17: a tiny GPT's training step with AdamW at least 1.5x PyTorch's eager step, sampling
    # 200 tokens with top-k at least 3x
    "tiny GPT": [("torch", 1.5)],
    "tiny GPT sampling": [("torch", 3.0)],
}


class Timer:
    """Median seconds per call: one warm-up call, then `samples` samples of `calls` calls each, with
    `calls` doubled until one sample lasts `min_seconds` (so short calls are timed in bulk)."""

    def __init__(self, min_seconds, samples):
        self.min_seconds, self.samples = min_seconds, samples

    def __call__(self, fn):
        return self.interleaved([fn])[0]

    def interleaved(self, fns):
        """The median of each of fns, their samples taken in turn (so a change in the machine's load
        falls on all of them alike: for ratios between them)."""
        counts = []
        for fn in fns:
            fn()
            calls = 1
            while True:
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                if time.perf_counter() - start >= self.min_seconds or calls >= 1 << 20:
                    break
                calls *= 2
            counts.append(calls)
        times = [[] for _ in fns]
        for _ in range(self.samples):
            for fn, calls, samples in zip(fns, counts, times):
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples.append((time.perf_counter() - start) / calls)
        return [statistics.median(samples) for samples in times]


class Row:
    """One benchmark row: seconds per call for each backend that ran it; `work` (flops or elements
    per call) turns times into a throughput in `unit`, and `peak` (the same unit per second, for
    the threads of the row) into a share of the machine's FMA peak."""

    def __init__(self, name, work=None, unit=None, peak=None):
        self.name, self.work, self.unit, self.peak, self.seconds = name, work, unit, peak, {}

    def show(self, backend):
        t = self.seconds.get(backend)
        if t is None:
            return "-"
        if self.work is not None:
            share = f" ({self.work / t / self.peak:.0%} of peak)" if self.peak else ""
            return f"{self.work / t / 1e9:,.2f} {self.unit}{share}"
        return f"{t * 1e6:,.1f} µs" if t < 1e-2 else f"{t * 1e3:,.1f} ms"

    def ratio(self, peer):
        if "fastgrad" not in self.seconds or peer not in self.seconds:
            return None
        return self.seconds[peer] / self.seconds["fastgrad"]

    def targets(self):
        """The targets of the longest TARGETS prefix that names this row."""
        prefixes = [p for p in TARGETS if self.name.startswith(p) and not self.name[len(p) :][:1].isalnum()]
        return TARGETS[max(prefixes, key=len)] if prefixes else []


# --- the problems, each written once per library --------------------------------------------------


def tiny_pair(lib, rng, n=8):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    if lib is np:
        return x, y
    return lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)


def op_forward(lib, rng):
    x, y = tiny_pair(lib, rng)
    return lambda: x * y + x


def op_forward_backward(lib, rng):
    x, y = tiny_pair(lib, rng)
    if lib is np:  # dz/dx = y + 1, dz/dy = x, accumulated as autograd does
        gx, gy = np.zeros_like(x), np.zeros_like(y)

        def step():
            z = x * y + x
            z.sum()
            gx.__iadd__(y + 1)
            gy.__iadd__(x)

        return step

    def step():
        (x * y + x).sum().backward()

    return step


def mlp_data(rng, sizes, batch):
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], size=batch).astype(np.int64)
    weights = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        weights.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        weights.append(np.zeros(fan_out, dtype=np.float32))
    return x, labels, weights


LR = 0.1


def mlp_raw(lib, rng, sizes=(64, 128, 10), batch=32, forward_only=False):
    """One SGD step of a one-hidden-layer MLP with softmax cross-entropy, written with raw tensors
    (weights stored (in, out)); `forward_only`: the logits under no_grad."""
    x, labels, weights = mlp_data(rng, sizes, batch)
    if lib is np:
        return mlp_numpy(x, labels, weights)
    x, labels = lib.tensor(x), lib.tensor(labels)
    params = [lib.tensor(w, requires_grad=True) for w in weights]
    rows = lib.arange(batch)

    def forward():
        w1, b1, w2, b2 = params
        return (x @ w1 + b1).relu() @ w2 + b2

    if forward_only:
        return _under_no_grad(lib, forward)

    def step():
        logits = forward()
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        loss = -log_probs[rows, labels].mean()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= LR * p.grad
                p.grad = None
        return loss.item()

    return step


def _under_no_grad(lib, fn):
    def call():
        with lib.no_grad():
            return fn()

    return call


def mlp_numpy(x, labels, weights):
    """The same step by hand: forward, backward and update in numpy."""
    w1, b1, w2, b2 = weights
    rows = np.arange(len(x))

    def step():
        pre = x @ w1 + b1
        hidden = np.maximum(pre, 0)
        logits = hidden @ w2 + b2
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        total = exp.sum(axis=1, keepdims=True)
        loss = -(shifted[rows, labels] - np.log(total[:, 0])).mean()
        grad_logits = exp / total
        grad_logits[rows, labels] -= 1
        grad_logits /= len(x)
        grad_hidden = (grad_logits @ w2.T) * (pre > 0)
        for p, g in (
            (w2, hidden.T @ grad_logits),
            (b2, grad_logits.sum(0)),
            (w1, x.T @ grad_hidden),
            (b1, grad_hidden.sum(0)),
        ):
            p -= LR * g
        return float(loss)

    return step


def mlp_nn(lib, rng, sizes=(64, 128, 10), batch=32, forward_only=False):
    """The same step with nn.Linear layers (weights stored (out, in)), cross_entropy and optim.SGD;
    `forward_only`: the logits under no_grad."""
    x, labels, weights = mlp_data(rng, sizes, batch)
    if lib is np:
        return mlp_numpy(x, labels, weights)
    x, labels = lib.tensor(x), lib.tensor(labels)
    model = lib.nn.Sequential(lib.nn.Linear(sizes[0], sizes[1]), lib.nn.ReLU(), lib.nn.Linear(sizes[1], sizes[2]))
    if forward_only:
        return _under_no_grad(lib, lambda: model(x))
    optimizer = lib.optim.SGD(model.parameters(), lr=LR)
    loss_fn = lib.nn.functional.cross_entropy

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def matmul(n):
    def make(lib, rng):
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        if lib is not np:
            a, b = lib.tensor(a), lib.tensor(b)
        return lambda: a @ b

    return make


# Issue 23: a product with a transposed operand (nn.Linear's x @ W.t() with W stored (out, in), and
# the backward's A^T G and G B^T) against the contiguous x @ W: m x k @ k x n.
LAYOUT_SHAPES = ((64, 784, 256), (256, 1024, 1024), (1, 512, 512), (32, 64, 128), (256, 256, 256), (1024, 1024, 1024))
LAYOUT_FORMS = ("x @ W", "x @ W.t()", "x.t() @ W", "x.t() @ W.t()")
LAYOUT_TARGET = 1.05  # each transposed form's time at most this times x @ W's


def matmul_layout(m, k, n, form):
    """x @ W in one of LAYOUT_FORMS: a transposed operand is the .t() view of a contiguous tensor
    holding the transpose (so the values are those of x and W)."""

    def make(lib, rng):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        x_t, w_t = "x.t()" in form, "W.t()" in form
        x = lib.tensor(np.ascontiguousarray(x.T) if x_t else x)
        w = lib.tensor(np.ascontiguousarray(w.T) if w_t else w)
        if x_t and w_t:
            return lambda: x.t() @ w.t()
        if x_t:
            return lambda: x.t() @ w
        if w_t:
            return lambda: x @ w.t()
        return lambda: x @ w

    return make


def elementwise(op, n):
    def make(lib, rng):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        if lib is not np:
            a, b = lib.tensor(a), lib.tensor(b)
        if op == "add":
            return lambda: a + b
        if op == "atan2":  # numpy's spelling: arctan2
            return (lambda: np.arctan2(a, b)) if lib is np else (lambda: a.atan2(b))
        if lib is np:  # numpy has no sigmoid: its usual spelling
            return {"sigmoid": lambda: 1 / (1 + np.exp(-a))}.get(op, lambda: getattr(np, op)(a))
        return getattr(a, op)

    return make


def matrix_vector(n, matrix):
    """x . y for two n-vectors, or A @ x for an n x n matrix A (`matrix`)."""

    def make(lib, rng):
        a = rng.standard_normal((n, n) if matrix else n).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        if lib is not np:
            a, x = lib.tensor(a), lib.tensor(x)
        return (lambda: a @ x) if matrix else (lambda: lib.dot(a, x))

    return make


def micrograd_loss(lib, rng, sizes=(2, 16, 16, 1), batch=4):
    """karpathy's micrograd demo on 0-d tensors: an MLP of scalar neurons (ReLU hidden layers, linear
    output), max-margin loss over a few points, backward, SGD on every scalar parameter; the step
    returns the loss tensor."""

    def scalar(v, grad=False):
        return lib.tensor(float(v), requires_grad=grad)

    layers = [
        [([scalar(rng.uniform(-1, 1), True) for _ in range(fan_in)], scalar(0.0, True)) for _ in range(fan_out)]
        for fan_in, fan_out in zip(sizes, sizes[1:])
    ]
    params = [p for layer in layers for w, b in layer for p in (*w, b)]
    points = [[scalar(v) for v in rng.standard_normal(sizes[0])] for _ in range(batch)]
    targets = [float(rng.choice((-1.0, 1.0))) for _ in range(batch)]

    def forward(values):
        for i, layer in enumerate(layers):
            outs = []
            for w, b in layer:
                act = b
                for wi, xi in zip(w, values):
                    act = act + wi * xi
                outs.append(act.relu() if i < len(layers) - 1 else act)
            values = outs
        return values[0]

    def step():
        loss = sum((1 - t * forward(p)).relu() for p, t in zip(points, targets)) * (1.0 / batch)
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= 0.05 * p.grad
                p.grad = None
        return loss

    step.params = params  # for checks of the parameters after some steps (tests/test_compile.py)
    return step


def micrograd(lib, rng):
    """micrograd_loss's step, reading the loss."""
    step = micrograd_loss(lib, rng)
    return lambda: step().item()


# --- the cnn group's whole models (issue 16) ------------------------------------------------------


def lenet(batch):
    """An SGD training step of LeNet-5 on 1x28x28 images: Conv 1->6 5x5 (padded to keep 28x28), ReLU,
    MaxPool 2, Conv 6->16 5x5, ReLU, MaxPool 2, Linear 400-120-84-10, cross-entropy."""

    def make(lib, rng):
        nn = lib.nn
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
        )  # fmt: skip
        optimizer = lib.optim.SGD(model.parameters(), lr=LR)
        x = lib.tensor(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        labels = lib.tensor(rng.integers(0, 10, batch))

        def step():
            optimizer.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(x), labels)
            loss.backward()
            optimizer.step()
            return loss

        return step

    return make


def reading_loss(make):
    """A model row's make(lib, rng) whose step reads the loss back (item(), as a training loop logs
    it) from `make`'s step, which returns the loss tensor: what fastgrad.compile captures."""

    def make_reading(lib, rng):
        step = make(lib, rng)
        return lambda: step().item()

    return make_reading


def dcgan(lib, rng, batch=16, latent=64, width=32):
    """A DCGAN step at 32x32 as pytorch/examples' dcgan: the discriminator on a real and a detached
    fake batch, then the generator (ConvTranspose2d/Conv2d 4x4, BatchNorm2d, ReLU/LeakyReLU, BCE,
    Adam with betas (0.5, 0.999))."""
    nn = lib.nn
    generator = nn.Sequential(
        nn.ConvTranspose2d(latent, width * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(width * 4), nn.ReLU(True),
        nn.ConvTranspose2d(width * 4, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.ReLU(True),
        nn.ConvTranspose2d(width * 2, width, 4, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
        nn.ConvTranspose2d(width, 3, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    discriminator = nn.Sequential(
        nn.Conv2d(3, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width * 2, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid(), nn.Flatten(0),
    )  # fmt: skip
    adam = {"lr": 2e-4, "betas": (0.5, 0.999)}
    opt_d, opt_g = lib.optim.Adam(discriminator.parameters(), **adam), lib.optim.Adam(generator.parameters(), **adam)
    real = lib.tensor(rng.uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32))
    noise = lib.tensor(rng.standard_normal((batch, latent, 1, 1)).astype(np.float32))
    ones, zeros = lib.ones(batch), lib.zeros(batch)
    bce = lib.nn.functional.binary_cross_entropy

    def step():
        opt_d.zero_grad()
        fake = generator(noise)
        loss_d = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = bce(discriminator(fake), ones)
        loss_g.backward()
        opt_g.step()
        return loss_g.item()

    return step


def model_rows(quick):
    rows = [(f"LeNet-5 b{n} step (SGD)", reading_loss(lenet(n)), None, None, NO_NUMPY[:2]) for n in (8, 64)]
    return rows if quick else rows + [("DCGAN 32x32 b16 G+D step (Adam)", dcgan, None, None, NO_NUMPY[:2])]


# --- the seq group's models (issue 17) ------------------------------------------------------------


def char_lstm_lm(lib, rng, vocab=65, embedding=64, hidden=128, steps=32, batch=16):
    """An Adam training step of a character language model: Embedding, a one-layer LSTM, Linear to
    the vocabulary, cross-entropy over every position of a (time, batch) batch; returns the loss."""
    nn = lib.nn
    embed, lstm, decoder = nn.Embedding(vocab, embedding), nn.LSTM(embedding, hidden), nn.Linear(hidden, vocab)
    params = [*embed.parameters(), *lstm.parameters(), *decoder.parameters()]
    optimizer = lib.optim.Adam(params, lr=1e-3)
    x = lib.tensor(rng.integers(0, vocab, (steps, batch)))
    targets = lib.tensor(rng.integers(0, vocab, steps * batch))

    def step():
        optimizer.zero_grad()
        output, _ = lstm(embed(x))
        loss = lib.nn.functional.cross_entropy(decoder(output).view(-1, vocab), targets)
        loss.backward()
        optimizer.step()
        return loss

    return step


def gru_encoder(lib, rng, vocab=100, hidden=128, steps=16):
    """An SGD step of the PyTorch seq2seq tutorial's encoder (Embedding, GRU batch_first, batch 1)
    on the sum of its outputs and final state."""
    nn = lib.nn
    embed, gru = nn.Embedding(vocab, hidden), nn.GRU(hidden, hidden, batch_first=True)
    optimizer = lib.optim.SGD([*embed.parameters(), *gru.parameters()], lr=0.01)
    x = lib.tensor(rng.integers(0, vocab, (1, steps)))

    def step():
        optimizer.zero_grad()
        output, h = gru(embed(x))
        loss = output.sum() + h.sum()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def layer_norm_step(lib, rng, shape=(16 * 64, 384)):
    """nn.LayerNorm on a float32 batch (a transformer's activations, batch x time rows): forward and
    backward of a fixed upstream gradient, to the input, weight and bias."""
    norm = lib.nn.LayerNorm(shape[-1])
    x = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    upstream = lib.tensor(rng.standard_normal(shape).astype(np.float32))
    return lambda: norm(x).backward(upstream)


def tiny_gpt(lib, vocab, block, layers, heads, embd):
    """nanoGPT's model (examples/nanogpt_char.py, with bias and no dropout): token and position
    embeddings, pre-norm blocks of causal self-attention (F.scaled_dot_product_attention) and a GELU
    MLP, a final LayerNorm and a head tied to the token embedding."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(embd), nn.LayerNorm(embd)
            self.qkv, self.proj = nn.Linear(embd, 3 * embd), nn.Linear(embd, embd)
            self.up, self.down = nn.Linear(embd, 4 * embd), nn.Linear(4 * embd, embd)

        def forward(self, x):
            batch, time, width = x.shape
            q, k, v = (
                t.view(batch, time, heads, width // heads).transpose(1, 2)
                for t in self.qkv(self.ln_1(x)).split(embd, dim=2)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(batch, time, width))
            return x + self.down(F.gelu(self.up(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, embd), nn.Embedding(block, embd)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f, self.head = nn.LayerNorm(embd), nn.Linear(embd, vocab, bias=False)
            self.wte.weight = self.head.weight

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1]))
            for layer in self.blocks:
                x = layer(x)
            return self.head(self.ln_f(x))

    return GPT()


# The tiny GPT's sizes: issue 17's
GPT_SIZES = dict(vocab=65, block=32, layers=2, heads=4, embd=64)
GPT_NAME = "tiny GPT 65 block 32, 2 layers, 4 heads, 64 embd"


def tiny_gpt_step(lib, rng, batch=16):
    """An AdamW training step of tiny_gpt on random (batch, block) windows: cross-entropy over every
    position; the step returns the loss tensor (what fastgrad.compile captures: no item() inside)."""
    model = tiny_gpt(lib, **GPT_SIZES)
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    vocab, block = GPT_SIZES["vocab"], GPT_SIZES["block"]
    x, y = (lib.tensor(rng.integers(0, vocab, (batch, block))) for _ in range(2))

    def step():
        optimizer.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        loss.backward()
        optimizer.step()
        return loss

    return step


def tiny_gpt_sampling(lib, rng, tokens=200, top_k=10):
    """nanoGPT's generate under no_grad: `tokens` tokens from one, the context cropped to the block,
    the last position's logits kept to their top k, softmax, multinomial."""
    model = tiny_gpt(lib, **GPT_SIZES)
    model.eval()
    block = GPT_SIZES["block"]
    start = lib.tensor([[int(rng.integers(0, GPT_SIZES["vocab"]))]])

    def sample():
        with lib.no_grad():
            idx = start
            for _ in range(tokens):
                logits = model(idx[:, -block:])[:, -1, :]
                kth = lib.topk(logits, top_k)[0][:, [-1]]
                probs = lib.nn.functional.softmax(logits.masked_fill(logits < kth, -float("inf")), dim=-1)
                idx = lib.cat((idx, lib.multinomial(probs, num_samples=1)), dim=1)
        return idx

    return sample


# GELU of a transformer MLP's hidden activations: the tiny GPT's (batch 16, block 32, 4 x 64) and a
# larger model's (16, 256, 4 x 256)
GELUS = {
    "gelu": lambda F, x: F.gelu(x),
    "gelu tanh": lambda F, x: F.gelu(x, approximate="tanh"),
}


def seq_rows(quick):
    """The models' steps and GELU; --quick: sampling 20 tokens (200 take most of a second a call) and
    only the small GELU rows."""
    tokens = 20 if quick else 200
    return (
        [
            ("char LSTM LM 65-64-128 seq 32 b16 step (Adam)", reading_loss(char_lstm_lm), None, None, NO_NUMPY[:2]),
            ("GRU encoder 128 seq 16 b1 step (SGD)", gru_encoder, None, None, NO_NUMPY[:2]),
            ("LayerNorm (1024, 384) forward+backward", layer_norm_step, None, None, NO_NUMPY[:2]),
            (f"{GPT_NAME} b16 step (AdamW)", reading_loss(tiny_gpt_step), None, None, NO_NUMPY[:2]),
            (
                f"tiny GPT sampling {tokens} tokens top-k 10 (the step's model)",
                lambda lib, rng: tiny_gpt_sampling(lib, rng, tokens),
                None,
                None,
                NO_NUMPY[:2],
            ),
        ]
        + batch_rows(GELUS, (16, 32, 256), quick)
        + ([] if quick else batch_rows(GELUS, (16, 256, 1024), quick))  # --quick: 4M elements take too long
    )


# --- the cnn group's normalization rows (issue 16) ------------------------------------------------

# (row name, the layer from an nn module, input shape)
NORM_LAYERS = [
    ("BatchNorm1d (8, 256)", lambda nn: nn.BatchNorm1d(256), (8, 256)),
    ("BatchNorm1d (64, 256)", lambda nn: nn.BatchNorm1d(256), (64, 256)),
    ("BatchNorm2d (8, 16, 28, 28)", lambda nn: nn.BatchNorm2d(16), (8, 16, 28, 28)),
    ("BatchNorm2d (64, 16, 28, 28)", lambda nn: nn.BatchNorm2d(16), (64, 16, 28, 28)),
    ("BatchNorm2d (64, 64, 8, 8)", lambda nn: nn.BatchNorm2d(64), (64, 64, 8, 8)),
    ("GroupNorm 8 groups (8, 32, 16, 16)", lambda nn: nn.GroupNorm(8, 32), (8, 32, 16, 16)),
    ("InstanceNorm2d affine (8, 16, 28, 28)", lambda nn: nn.InstanceNorm2d(16, affine=True), (8, 16, 28, 28)),
]


def norm_layer(layer, shape, backward):
    """A training-mode normalization layer on a float32 batch: its forward (recorded: the layer's
    parameters require grad), or forward and backward of a fixed upstream gradient."""

    def make(lib, rng):
        module = layer(lib.nn)
        x = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=backward)
        if not backward:
            return lambda: module(x)
        upstream = lib.tensor(rng.standard_normal(shape).astype(np.float32))
        return lambda: module(x).backward(upstream)

    return make


# Issue 16's convolutions: (batch, in channels, out channels, image side, kernel side, padding). The
# 3x3 convs of 16-64 channels on 32x32 images, and LeNet-5's two (1->6 5x5 on 28x28 padded to keep
# the size; 6->16 5x5 on the 14x14 pooled maps).
CONV_SHAPES = [(n, c, c, 32, 3, 1) for c in (16, 32, 64) for n in (8, 64)] + [
    (n, c, o, side, 5, pad) for n in (8, 64) for c, o, side, pad in ((1, 6, 28, 2), (6, 16, 14, 0))
]


def conv2d(n, c, o, side, k, pad, backward):
    """F.conv2d with a bias; with `backward`, the output's sum backpropagated to the input, weight
    and bias (their gradients reset each call, so none accumulates)."""

    def make(lib, rng):
        x = lib.tensor(rng.standard_normal((n, c, side, side)).astype(np.float32), requires_grad=backward)
        w = lib.tensor(rng.standard_normal((o, c, k, k)).astype(np.float32) * 0.1, requires_grad=backward)
        b = lib.tensor(np.zeros(o, np.float32), requires_grad=backward)
        conv = lib.nn.functional.conv2d
        if not backward:
            return _under_no_grad(lib, lambda: conv(x, w, b, padding=pad))

        def step():
            x.grad = w.grad = b.grad = None
            conv(x, w, b, padding=pad).sum().backward()

        return step

    return make


def norm_rows(quick):
    """Every layer forward and forward+backward; --quick: BatchNorm2d's and GroupNorm's forward+backward."""
    return [
        (
            f"{name} {'forward+backward' if backward else 'forward'}",
            norm_layer(layer, shape, backward),
            None,
            None,
            NO_NUMPY[:2],
        )
        for name, layer, shape in NORM_LAYERS
        for backward in (False, True)
        if not quick or (backward and name.startswith(("BatchNorm2d (8", "GroupNorm")))
    ]


def conv_rows(quick):
    """Forward+backward of every CONV_SHAPES row, and LeNet's forward alone; the work counts the
    forward's multiply-adds once per pass (forward, input gradient, weight gradient)."""
    rows = []
    for n, c, o, side, k, pad in CONV_SHAPES[:2] + CONV_SHAPES[-2:] if quick else CONV_SHAPES:
        out_side = side + 2 * pad - k + 1
        flops = 2 * n * o * out_side * out_side * c * k * k
        name = f"conv2d {k}x{k} {c}->{o} {side}x{side} b{n}"
        rows.append((f"{name} fwd+bwd", conv2d(n, c, o, side, k, pad, True), 3 * flops, "GFLOP/s", NO_NUMPY[:2]))
        if k == 5:
            rows.append((f"{name} forward", conv2d(n, c, o, side, k, pad, False), flops, "GFLOP/s", NO_NUMPY[:2]))
    return rows


def _mlp_784(make, forward_only=False):
    """Issue 23's pair: the same 784-256-10 MLP (batch 64) as nn.Linear layers and as raw tensors."""
    return lambda lib, rng: make(lib, rng, (784, 256, 10), 64, forward_only)


# --- the cnn group (issue 16) ----------------------------------------------------------------------


# pooling rows: the pool of a float32 (64, 16, 28, 28) batch (a LeNet/MNIST-sized activation), forward
# and backward of the sum of its output, or the forward alone without grad
POOL_SHAPE = (64, 16, 28, 28)
POOLS = {
    "max_pool2d 2x2": lambda F, x: F.max_pool2d(x, 2),
    "max_pool2d 3x3 s2 p1": lambda F, x: F.max_pool2d(x, 3, 2, 1),
    "avg_pool2d 2x2": lambda F, x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d 7x7": lambda F, x: F.adaptive_avg_pool2d(x, 7),
}

# resizing rows: F.interpolate of a float32 (8, 16, 32, 32) batch (a decoder's feature maps) to twice
# its size, and to half of it antialiased (an image pyramid), measured as the pools
RESIZE_SHAPE = (8, 16, 32, 32)
RESIZES = {
    "interpolate nearest x2": lambda F, x: F.interpolate(x, scale_factor=2),
    "interpolate bilinear x2": lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "interpolate bicubic x2": lambda F, x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    "interpolate bicubic antialias /2": lambda F, x: F.interpolate(x, scale_factor=0.5, mode="bicubic", antialias=True),
}


def batch_step(ops, shape, op, backward):
    """make(lib, rng) for ops[op] on a float32 batch of `shape`: forward and backward of the sum of its
    output, or the forward alone without grad."""

    def make(lib, rng):
        data = rng.standard_normal(shape).astype(np.float32)
        x = lib.tensor(data, requires_grad=backward)
        F = lib.nn.functional

        def forward_backward():
            ops[op](F, x).sum().backward()
            x.grad = None

        def forward():
            with lib.no_grad():
                return ops[op](F, x)

        return forward_backward if backward else forward

    return make


def batch_rows(ops, shape, quick):
    """Every op of `ops` forward+backward and forward; --quick: the first one's."""
    size = "x".join(map(str, shape))
    return [
        (
            f"{op} {'forward+backward' if backward else 'forward no_grad'} {size}",
            batch_step(ops, shape, op, backward),
            None,
            None,
            ("fastgrad", "torch"),
        )  # fmt: skip
        for op in (list(ops)[:1] if quick else ops)
        for backward in (True, False)
    ]


# name -> [(row name, make(lib, rng) -> fn, work, unit, backends)]
NUMPY_TOO = ("fastgrad", "torch", "numpy", "reference")
NO_NUMPY = ("fastgrad", "torch", "reference")


def random_draw(draw, n):
    """One random call making n values from the library's default generator (seeded alike: since
    issue 19 fastgrad's numbers are PyTorch's, so both do the same work)."""

    def make(lib, rng):
        lib.manual_seed(0)
        ones = lib.ones(n)
        return lambda: draw(lib, n, ones)

    return make


RANDOM_DRAWS = {
    "rand": lambda m, n, ones: m.rand(n),
    "randn": lambda m, n, ones: m.randn(n),
    "randn float64": lambda m, n, ones: m.randn(n, dtype=m.float64),
    "randint": lambda m, n, ones: m.randint(0, 1000, (n,)),
    "randperm": lambda m, n, ones: m.randperm(n),
    "dropout(p=0.1)": lambda m, n, ones: m.nn.functional.dropout(ones, 0.1),
    "multinomial (1 of 1000 per row)": lambda m, n, ones: m.multinomial(ones.view(-1, 1000), 1),
}


def random_rows(quick):
    n = 64_000 if quick else 1_024_000  # whole rows of 1000 for multinomial
    return [(f"{name} {n:.1e}", random_draw(draw, n), None, None, NO_NUMPY[:2]) for name, draw in RANDOM_DRAWS.items()]


def groups(quick):
    big = 1 << 20 if quick else 16_000_000
    small = 1 << 16 if quick else 1_000_000
    return {
        "op": [
            ("op forward z=x*y+x (8 elems, grad recorded)", op_forward, None, None, NUMPY_TOO),
            ("op forward+backward z.sum().backward()", op_forward_backward, None, None, NUMPY_TOO),
        ],
        "mlp": [
            ("MLP 64-128-10 b32 step, raw tensors", mlp_raw, None, None, NUMPY_TOO),
            ("MLP 64-128-10 b32 step, nn.Linear+optim.SGD", mlp_nn, None, None, NO_NUMPY),
            ("MLP 784-256-10 b64 step, nn.Linear+optim.SGD", _mlp_784(mlp_nn), None, None, NUMPY_TOO[:3]),
            ("MLP 784-256-10 b64 step, raw tensors", _mlp_784(mlp_raw), None, None, NUMPY_TOO[:3]),
            ("MLP 784-256-10 b64 forward no_grad, nn.Linear", _mlp_784(mlp_nn, True), None, None, NO_NUMPY[:2]),
            ("MLP 784-256-10 b64 forward no_grad, raw tensors", _mlp_784(mlp_raw, True), None, None, NO_NUMPY[:2]),
        ],
        "matmul": [
            (f"matmul {n} x {n} float32", matmul(n), 2 * n**3, "GFLOP/s", NUMPY_TOO if n <= 64 else NUMPY_TOO[:3])
            for n in ((64, 256) if quick else (64, 256, 512, 1024, 2048))
        ],
        "elementwise": [
            (
                f"{op} {n:.1e} float32",
                elementwise(op, n),
                n,
                "Gelem/s",
                NUMPY_TOO if n <= small and op == "add" else NUMPY_TOO[:3],
            )
            for op in ("add", "exp", "tanh", "sigmoid", "sin", "cos", "atan2")
            for n in (small, big)
        ],
        "mv": [
            (f"dot {n} float32", matrix_vector(n, False), 2 * n, "GFLOP/s", NUMPY_TOO[:3])
            for n in ((256, 4096) if quick else (256, 1024, 4096))
        ]
        + [
            (f"mv {n} x {n} float32", matrix_vector(n, True), 2 * n * n, "GFLOP/s", NUMPY_TOO[:3])
            for n in ((256, 1024) if quick else (256, 1024, 4096))
        ],
        "micrograd": [("micrograd step 2-16-16-1, 4 points, 0-d tensors", micrograd, None, None, NO_NUMPY)],
        "cnn": model_rows(quick)
        + conv_rows(quick)
        + batch_rows(POOLS, POOL_SHAPE, quick)
        + batch_rows(RESIZES, RESIZE_SHAPE, quick)
        + norm_rows(quick),
        "seq": seq_rows(quick),
        "random": random_rows(quick),
    }


# --- running and reporting ------------------------------------------------------------------------


OPENBLAS_SET_THREADS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def find_numpy_blas_threads():
    """A function setting the threads of numpy's OpenBLAS through ctypes (the library numpy loaded,
    found in /proc/self/maps or numpy's bundled libraries), or None where there is none to call;
    each candidate is checked by reading the count back."""
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy loads its BLAS on first use on some builds
    paths = []
    try:
        with open("/proc/self/maps") as f:
            paths = [line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()]
    except OSError:
        pass
    numpy_dir = os.path.dirname(np.__file__)
    for bundle in (os.path.join(numpy_dir, os.pardir, "numpy.libs"), os.path.join(numpy_dir, ".dylibs")):
        paths += sorted(glob.glob(os.path.join(bundle, "*openblas*")))
    for path in dict.fromkeys(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in OPENBLAS_SET_THREADS:
            setter, getter = getattr(lib, name, None), getattr(lib, name.replace("_set_", "_get_"), None)
            if setter is None or getter is None:
                continue
            before = getter()
            setter(1)
            if getter() == 1:
                setter(before)
                return setter
    return None


NUMPY_BLAS_THREADS = find_numpy_blas_threads()


def set_threads(n, torch):
    """Threads for fastgrad (when it has a pool), torch and numpy's OpenBLAS (when the bench can set
    them); False if fastgrad cannot change them."""
    if torch is not None:
        torch.set_num_threads(n)
    if NUMPY_BLAS_THREADS is not None:
        NUMPY_BLAS_THREADS(n)
    if hasattr(fastgrad, "set_num_threads"):
        fastgrad.set_num_threads(n)
        return True
    return n == 1


def numpy_threads_known(n):
    """Whether numpy's BLAS runs on n threads in a row of n threads."""
    if NUMPY_BLAS_THREADS is not None:
        return True
    return n == 1 and os.environ.get("OPENBLAS_NUM_THREADS") == "1"


def run_group(rows, libs, timer, reference_timer, threads, torch, peak=None):
    """peak: one thread's FMA peak in FLOP/s, for the rows that count flops."""
    results = []
    for name, make, work, unit, backends in rows:
        for n in threads:
            if not set_threads(n, torch):
                continue
            row_peak = peak * n if peak and unit == "GFLOP/s" else None
            row = Row(name if len(threads) == 1 else f"{name}, {n} thread{'s' * (n > 1)}", work, unit, row_peak)
            for backend in backends:
                if backend not in libs or (n > 1 and backend == "reference"):
                    continue
                if backend == "numpy" and work is not None and not numpy_threads_known(n):
                    continue
                step = make(libs[backend], np.random.default_rng(0))
                row.seconds[backend] = (reference_timer if backend == "reference" else timer)(step)
            results.append(row)
    set_threads(1, torch)
    return results


def machine_line(torch):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    config = fastgrad.config() if hasattr(fastgrad, "config") else {}
    parts = [
        f"CPU: {cpu} ({os.cpu_count()} logical)",
        f"ISA: {config.get('isa', 'n/a')}",
        f"fastgrad threads: {config.get('num_threads', 1)}",
        f"torch threads: {torch.get_num_threads() if torch else '-'}",
        "numpy BLAS threads: "
        + (
            "as the row says (set through OpenBLAS's set_num_threads)"
            if NUMPY_BLAS_THREADS is not None
            else os.environ.get("OPENBLAS_NUM_THREADS", "default")
        ),
        f"python {platform.python_version()}",
        f"numpy {np.__version__}",
        f"fastgrad {fastgrad.__version__}",
        f"torch {torch.__version__ if torch else 'not installed'}",
    ]
    return "Machine: " + "; ".join(parts)


def fmt_ratio(r):
    return "-" if r is None else f"{r:,.2f}x"


def form_ratios(rows):
    """Issue 23's target under the mlp table: the nn.Linear form's time over the raw form's, per
    backend, for each pair of rows that differ only in the form (within 5%: at most 1.05)."""
    times = {row.name: row.seconds for row in rows}
    lines = []
    for name, linear in times.items():
        what, _, form = name.partition(", ")
        raw = times.get(f"{what}, raw tensors")
        if form.startswith("nn.Linear") and raw:
            ratios = ", ".join(
                f"{b} {linear[b] / raw[b]:.2f}" for b in ("fastgrad", "torch") if b in linear and b in raw
            )
            lines.append(f"- {what}: nn.Linear / raw tensors time: {ratios} (issue 23 target: fastgrad <= 1.05)")
    return "\n".join(lines)


def table(title, rows):
    lines = [
        f"### {title}",
        "",
        "| benchmark | fastgrad | torch | numpy | reference | vs torch | vs numpy | vs reference | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row.name] + [row.show(b) for b in ("fastgrad",) + PEERS] + [fmt_ratio(row.ratio(p)) for p in PEERS]
        goals = [(peer, goal, row.ratio(peer)) for peer, goal in row.targets()]
        cells.append(", ".join(f">= {goal:g}x vs {peer}" for peer, goal, _ in goals) or "-")
        cells.append(
            ", ".join("n/a" if r is None else ("met" if r >= goal else "not met") for _, goal, r in goals) or "-"
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- the compile group (issue 18) ---------------------------------------------------------------


def mlp_training_step(lib, sizes, batch, optimizer):
    """An nn.Linear MLP's training step (zero_grad, forward, cross_entropy, backward, the optimizer's
    step) returning the loss tensor: what fastgrad.compile captures (no item() inside)."""
    rng = np.random.default_rng(0)
    x, labels, _ = mlp_data(rng, sizes, batch)
    x, labels = lib.tensor(x), lib.tensor(labels)
    layers = [lib.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
    model = lib.nn.Sequential(*[m for layer in layers for m in (layer, lib.nn.ReLU())][:-1])
    opt = lib.optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam" else lib.optim.SGD(model.parameters(), LR)

    def step():
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss

    return step


def jax_mlp_step(jax, sizes, batch, optimizer):
    """mlp_training_step's step in JAX, jitted whole: forward, cross-entropy, gradients and the update
    as PyTorch's Adam (lr 1e-3) or SGD (LR) computes it, the parameters and the optimizer's state
    donated (updated in place). The step returns the loss once computed (JAX dispatches
    asynchronously). Its weights are mlp_data's: `step.params()` gives them (in, out) and biases."""
    jnp = jax.numpy
    x, labels, weights = mlp_data(np.random.default_rng(0), sizes, batch)
    x, labels = jnp.asarray(x), jnp.asarray(labels)

    def loss_of(params):
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            h = jax.nn.relu(h) if i + 2 < len(params) else h
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h), labels[:, None], axis=1))

    def adam(params, state, grads, beta1=0.9, beta2=0.999, lr=1e-3, eps=1e-8):
        m, v, t = state
        t = t + 1
        m = [mi + (g - mi) * (1 - beta1) for mi, g in zip(m, grads)]
        v = [vi * beta2 + (1 - beta2) * g * g for vi, g in zip(v, grads)]
        step_size, root = lr / (1 - beta1**t), jnp.sqrt(1 - beta2**t)
        params = [p - step_size * mi / (jnp.sqrt(vi) / root + eps) for p, mi, vi in zip(params, m, v)]
        return params, (m, v, t)

    def sgd(params, state, grads):
        return [p - LR * g for p, g in zip(params, grads)], state

    update = adam if optimizer == "adam" else sgd

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def train(params, state):
        loss, grads = jax.value_and_grad(loss_of)(params)
        params, state = update(params, state, grads)
        return params, state, loss

    params = [jnp.asarray(w) for w in weights]
    zeros = [jnp.zeros_like(p) for p in params]
    carry = [params, (zeros, [jnp.zeros_like(p) for p in params], jnp.float32(0)) if optimizer == "adam" else ()]

    def step():
        carry[0], carry[1], loss = train(*carry)
        return loss.block_until_ready()

    step.params = lambda: [np.asarray(p) for p in carry[0]]
    return step


# (row, make(lib) -> step, matmul FLOPs per step or None, [(peer, smallest compiled-over-peer ratio)],
# make_jax(jax) -> the same step in JAX, or None)
COMPILE_ROWS = [
    (
        "MLP 64-128-10 b32 step, nn.Linear+CrossEntropyLoss+Adam",
        lambda lib: mlp_training_step(lib, (64, 128, 10), 32, "adam"),
        3 * 2 * 32 * (64 * 128 + 128 * 10),
        [("eager", 3.0), ("JAX jit", 2.0)],
        lambda jax: jax_mlp_step(jax, (64, 128, 10), 32, "adam"),
    ),
    (
        "MLP 64-128-10 b32 step, nn.Linear+CrossEntropyLoss+SGD",
        lambda lib: mlp_training_step(lib, (64, 128, 10), 32, "sgd"),
        3 * 2 * 32 * (64 * 128 + 128 * 10),
        [],
        lambda jax: jax_mlp_step(jax, (64, 128, 10), 32, "sgd"),
    ),
    (
        "MLP 784-256-10 b64 step, nn.Linear+CrossEntropyLoss+SGD",
        lambda lib: mlp_training_step(lib, (784, 256, 10), 64, "sgd"),
        3 * 2 * 64 * (784 * 256 + 256 * 10),
        [],
        lambda jax: jax_mlp_step(jax, (784, 256, 10), 64, "sgd"),
    ),
    (
        "LeNet-5 b64 step (SGD)",
        lambda lib: lenet(64)(lib, np.random.default_rng(0)),
        None,
        [],
        None,
    ),
    (
        "char LSTM LM 65-64-128 seq 32 b16 step (Adam)",
        lambda lib: char_lstm_lm(lib, np.random.default_rng(0)),
        None,
        [],
        None,
    ),
    (
        f"{GPT_NAME} b16 step (AdamW)",
        lambda lib: tiny_gpt_step(lib, np.random.default_rng(0)),
        None,
        [],
        None,
    ),
    (
        "micrograd step 2-16-16-1, 4 points, 0-d tensors",
        lambda lib: micrograd_loss(lib, np.random.default_rng(0)),
        None,
        [("torch", 50.0)],
        None,
    ),
]


def torch_compile_works(torch):
    """Whether torch.compile (inductor) compiles a small function here (it needs a C++ compiler, and
    no network); False when it raises."""
    try:
        return bool(torch.compile(lambda t: t * 2)(torch.ones(2)).sum() == 4)
    except Exception:  # noqa: BLE001  any failure of the inductor stack means: no peer row
        return False


def import_jax():
    """jax, its XLA computations on one thread (flags it reads when it loads), or None."""
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    try:
        return importlib.import_module("jax")
    except ImportError:
        return None


def compile_table(libs, timer, torch, peak, quick):
    """Issue 18's rows: a compiled fastgrad step against the same step eagerly, PyTorch's eager step,
    torch.compile's and JAX jit's (when they work here, and not in a quick run: their compilers take
    seconds; JAX only for the rows written for it), one thread; the capturing call's cost and the
    memory plan's bytes."""
    set_threads(1, torch)
    peers = {"eager": "fastgrad eager"}
    if torch is not None:
        peers["torch"] = "torch eager"
    if torch is not None and not quick and torch_compile_works(torch):
        peers["torch.compile"] = "torch.compile"
    jax = None if quick else import_jax()
    if jax is not None:
        peers["JAX jit"] = "JAX jit"
    lines = [
        "### compile: fastgrad.compile'd steps (one thread; ratio = peer time / compiled time)",
        "",
        "| benchmark | fastgrad compiled | "
        + " | ".join(peers.values())
        + " | "
        + " | ".join(f"vs {p}" for p in peers.values())
        + " | capture call | memory plan | FLOP time at peak | target | met |",
        "|---|" + "---|" * (2 * len(peers) + 6),
    ]
    rows = COMPILE_ROWS[:2] + COMPILE_ROWS[3:] if quick else COMPILE_ROWS  # quick: not the 784 MLP
    for name, make, flops, targets, make_jax in rows:
        compiled = fastgrad.compile(make(fastgrad))
        fns = {"eager": make(fastgrad)}
        if "torch" in peers:
            fns["torch"] = make(torch)
        if "torch.compile" in peers:
            fns["torch.compile"] = torch.compile(make(torch))
        if jax is not None and make_jax is not None:
            fns["JAX jit"] = make_jax(jax)
        seconds = timer.interleaved([compiled, *fns.values()])
        times = dict(zip(fns, seconds[1:]))
        ratios = {peer: t / seconds[0] for peer, t in times.items()}
        capture = capture_seconds(make, timer.samples)
        met = [("met" if ratios[p] >= goal else "not met") if p in ratios else "n/a" for p, goal in targets]
        if compiled.eager_reason is not None:
            name += f" (fell back to eager: {compiled.eager_reason[0]})"
        lines.append(
            "| "
            + " | ".join(
                [name, f"{seconds[0] * 1e6:,.1f} µs"]
                + [f"{times[p] * 1e6:,.1f} µs" if p in times else "-" for p in peers]
                + [f"{ratios[p]:.2f}x" if p in ratios else "-" for p in peers]
                + [
                    f"{capture * 1e6:,.0f} µs ({capture / times['eager']:.1f}x eager)",
                    plan_summary(compiled),
                    f"{flops / peak * 1e6:,.1f} µs" if flops else "-",
                    ", ".join(f">= {goal:g}x vs {peer}" for peer, goal in targets) or "report",
                    ", ".join(met) or "-",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def plan_summary(compiled):
    """The planned and unplanned bytes of a compiled step's programs (fastgrad.compiler.memory_plans),
    and the float operations of those lowered to arithmetic on registers (lowered_programs)."""
    plans = fastgrad.compiler.memory_plans(compiled)
    planned, unplanned = sum(p.planned_bytes for p in plans), sum(p.unplanned_bytes for p in plans)
    summary = f"{planned / 1024:,.1f} KiB planned, {unplanned / 1024:,.1f} KiB not" if plans else "-"
    lowered = [p for p in fastgrad.compiler.lowered_programs(compiled) if p.state == "checked"]
    if lowered:
        summary += f"; lowered to {sum(p.operations for p in lowered):,} float operations"
    return summary


def capture_seconds(make, samples):
    """The median time of a capturing call (a new compiled function's first call after a warm-up
    eager call of its own step)."""
    times = []
    for _ in range(samples):
        step = make(fastgrad)
        step()
        compiled = fastgrad.compile(step)
        start = time.perf_counter()
        compiled()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def layout_table(shapes, libs, timer, torch):
    """Issue 23's rows: each form of LAYOUT_FORMS, its time and its ratio to x @ W, one thread."""
    set_threads(1, torch)
    backends = [b for b in ("fastgrad", "torch") if b in libs]
    lines = [
        "### matmul: a transposed operand against x @ W (float32, one thread; time and ratio to x @ W)",
        "",
        "| m x k @ k x n | "
        + " | ".join(f"{b} {form}" for b in backends for form in LAYOUT_FORMS)
        + " | target | met |",
        "|---|" + "---|" * (len(backends) * len(LAYOUT_FORMS) + 2),
    ]
    for m, k, n in shapes:
        cells, met = [f"{m}x{k} @ {k}x{n}"], True
        for backend in backends:
            seconds = timer.interleaved(
                [matmul_layout(m, k, n, form)(libs[backend], np.random.default_rng(0)) for form in LAYOUT_FORMS]
            )
            for form, t in zip(LAYOUT_FORMS, seconds):
                ratio = t / seconds[0]
                cells.append(f"{t * 1e6:,.1f} µs" + ("" if form == LAYOUT_FORMS[0] else f" ({ratio:.2f}x)"))
                if backend == "fastgrad" and ratio > LAYOUT_TARGET:
                    met = False
        cells += [f"fastgrad <= {LAYOUT_TARGET:g}x x @ W", "met" if met else "not met"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fastgrad.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="few, short samples and smaller sizes (for CI)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these groups (op, mlp, matmul, elementwise, mv, micrograd, cnn, seq, random, compile); "
        "repeatable",
    )
    args = parser.parse_args(argv)
    selected = groups(args.quick)
    selected["compile"] = []  # its own table (compile_table)
    only = [n for names in args.only for n in names.split(",")]
    unknown = set(only) - set(selected)
    if unknown:
        parser.error(f"unknown group(s) {', '.join(sorted(unknown))}; choose from {', '.join(selected)}")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(
                f"warning: {var}={os.environ[var]} is set and slows numpy (OpenBLAS); run "
                "`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m fastgrad.bench`",
                file=sys.stderr,
            )
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        torch = None
    libs = {"fastgrad": fastgrad, "numpy": np, "reference": fastgrad.reference}
    if torch is not None:
        libs["torch"] = torch
    timer = Timer(0.002, 3) if args.quick else Timer(0.05, 7)
    reference_timer = Timer(0.0, 1) if args.quick else Timer(0.05, 3)
    threads = (1, 2) if hasattr(fastgrad, "set_num_threads") and not args.quick else (1,)
    set_threads(1, torch)
    print(
        f"## fastgrad benchmarks ({'quick' if args.quick else 'full'}; median per call; ratio = peer time / "
        "fastgrad time, > 1 means fastgrad is faster)\n"
    )
    print(machine_line(torch) + "\n")
    for name, rows in selected.items():
        if only and name not in only:
            continue
        if name == "compile":
            print(compile_table(libs, timer, torch, fastgrad._C._fma_peak(0.1) * 1e9, args.quick) + "\n", flush=True)
            continue
        group_threads = threads if name in ("elementwise", "matmul", "cnn", "seq") else (1,)
        peak = None
        if name in ("matmul", "cnn"):
            peak = fastgrad._C._fma_peak(0.1) * 1e9
            isa = fastgrad.config()["isa"]
            print(f"Per-core float32 FMA peak (register-only loop, {isa}): {peak / 1e9:,.1f} GFLOP/s\n")
        results = run_group(rows, libs, timer, reference_timer, group_threads, torch, peak)
        print(table(name, results) + "\n", flush=True)
        if name == "matmul":
            shapes = LAYOUT_SHAPES[:3] if args.quick else LAYOUT_SHAPES
            print(layout_table(shapes, libs, timer, torch) + "\n", flush=True)
        if name == "mlp":
            print(form_ratios(results) + "\n", flush=True)


if __name__ == "__main__":
    main()
