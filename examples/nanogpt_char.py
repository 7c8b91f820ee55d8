"""nanoGPT's flow on a character-level model (its shakespeare_char setup, scaled down): a GPT with
token + position embeddings, pre-norm blocks (a LayerNorm with an optional bias through
F.layer_norm, causal self-attention through F.scaled_dot_product_attention with is_causal=True, a
GELU MLP), the token embedding tied to the output head, AdamW over two groups (2-D weights decay;
biases and norms do not), a warm-up + cosine learning rate set on the groups each step,
clip_grad_norm_, zero_grad(set_to_none=True), random windows of the encoded text for batches, an
estimate of the train/val losses under no_grad in eval mode; then sampling with a temperature and
top-k (torch.topk, logits below the k-th set to -inf, softmax, torch.multinomial).

A PyTorch program (dropout 0; initial weights from a formula so that every library starts from the
same model; batch offsets from Python's random module); run it on fastgrad unchanged with
`python -m fastgrad.run examples/nanogpt_char.py`.
"""

import math
import random
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 32
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0
    bias: bool = True


class LayerNorm(nn.Module):
    """nn.LayerNorm's computation, with the bias optional."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.out = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.out_dropout = nn.Dropout(config.dropout)
        self.heads, self.width, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x):
        batch, time, width = x.size()
        # (batch, heads, time, head width) for each of query, key, value
        q, k, v = (
            t.view(batch, time, self.heads, width // self.heads).transpose(1, 2)
            for t in self.qkv(x).split(self.width, dim=2)
        )
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=dropout, is_causal=True)
        return self.out_dropout(self.out(y.transpose(1, 2).contiguous().view(batch, time, width)))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.down(self.act(self.up(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1, self.ln_2 = LayerNorm(config.n_embd, config.bias), LayerNorm(config.n_embd, config.bias)
        self.attn, self.mlp = CausalSelfAttention(config), MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one parameter, two uses
        with torch.no_grad():  # a formula in place of the normal draws, the same under every library
            for i, (name, p) in enumerate(self.named_parameters()):
                scale = 0.02 / math.sqrt(2 * config.n_layer) if name.endswith(("out.weight", "down.weight")) else 0.2
                p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 + i).view(p.shape) * scale)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.config.block_size, (
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        )
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:  # generation: only the last position's logits
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        decay, no_decay = [p for p in params if p.dim() >= 2], [p for p in params if p.dim() < 2]
        print(f"decayed tensors: {len(decay)} ({sum(p.numel() for p in decay)} parameters), not: {len(no_decay)}")
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            context = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size :]
            logits, _ = self(context)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


def synthetic_text(rng, length):
    """Short lines of words from a small vocabulary: something with structure for a character model."""
    words = ["the", "king", "queen", "speak", "shall", "night", "lord", "my", "of", "and", "to", "thee"]
    lines = []
    while sum(len(line) + 1 for line in lines) < length:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 7))).capitalize() + ".")
    return "\n".join(lines)


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def main():
    rng = random.Random(0)
    text = synthetic_text(rng, 2000)
    chars = sorted(set(text))
    stoi, itos = {ch: i for i, ch in enumerate(chars)}, dict(enumerate(chars))
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    splits = {"train": data[:n], "val": data[n:]}
    config = GPTConfig(vocab_size=len(chars))
    batch_size, block_size = 8, config.block_size

    def get_batch(split):
        part = splits[split]
        ix = [rng.randrange(len(part) - block_size) for _ in range(batch_size)]
        x = torch.stack([part[i : i + block_size] for i in ix])
        y = torch.stack([part[i + 1 : i + 1 + block_size] for i in ix])
        return x, y

    @torch.no_grad()
    def estimate_loss(eval_iters=2):
        out = {}
        model.eval()
        for split in ("train", "val"):
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                losses[k] = model(*get_batch(split))[1].item()
            out[split] = losses.mean()
        model.train()
        return out

    model = GPT(config)
    print("parameters:", sum(p.numel() for p in model.parameters()))
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-2, betas=(0.9, 0.99))
    for it in range(12):
        lr = get_lr(it, 1e-2, warmup_iters=3, lr_decay_iters=12, min_lr=1e-3)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if it % 6 == 0:
            losses = estimate_loss()
            print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        X, Y = get_batch("train")
        logits, loss = model(X, Y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"iter {it}: loss {loss.item():.4f}, lr {lr:.5f}")
    model.eval()
    start = torch.tensor([[stoi["\n"]]], dtype=torch.long)
    sample = model.generate(start, 24, temperature=0.8, top_k=5)[0].tolist()
    print("sample:", repr("".join(itos[i] for i in sample)))


if __name__ == "__main__":
    main()
