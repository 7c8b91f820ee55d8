"""Sampling from a small character-level transformer, the way GPT training scripts generate text:
crop the context to the block size, take the last position's logits, divide by a temperature, keep
the top k, softmax, draw the next token with multinomial, append it, repeat.

A PyTorch program; run it on fastgrad unchanged with `python -m fastgrad.run examples/gpt_sampling.py`.
The weights are set from a formula, so that the untrained model's predictions are the same on every
library; the draws come from each library's own random stream.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = "\n abcdefghijklmnopqrstuvwxyz"
BLOCK_SIZE, WIDTH, HEADS = 8, 16, 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.register_buffer("mask", torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE)).view(1, 1, BLOCK_SIZE, BLOCK_SIZE))

    def forward(self, x):
        batch, time, channels = x.size()
        q, k, v = self.qkv(x).split(WIDTH, dim=2)
        # (batch, heads, time, head width)
        q, k, v = (t.view(batch, time, HEADS, channels // HEADS).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.mask[:, :, :time, :time] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, time, channels))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding = nn.Embedding(len(VOCAB), WIDTH)
        self.position_embedding = nn.Embedding(BLOCK_SIZE, WIDTH)
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attention = CausalSelfAttention()
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
        self.head = nn.Linear(WIDTH, len(VOCAB), bias=False)

    def forward(self, idx):
        positions = torch.arange(idx.size(1), dtype=torch.long)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x)

    @torch.no_grad()
    def generate(self, idx, new_tokens, temperature=1.0, top_k=None):
        for _ in range(new_tokens):
            context = idx if idx.size(1) <= BLOCK_SIZE else idx[:, -BLOCK_SIZE:]
            logits = self(context)[:, -1, :] / temperature
            if top_k is not None:
                kth, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < kth[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            next_token = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, next_token), dim=1)
        return idx


def main():
    model = TinyGPT()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 + i).view(p.shape) * 0.3)
    model.eval()
    torch.manual_seed(1337)
    prompt = torch.tensor([[VOCAB.index(c) for c in "\nhello"]], dtype=torch.long)
    for temperature, top_k in [(1.0, None), (0.8, 5), (1.5, 1)]:
        tokens = model.generate(prompt, 12, temperature=temperature, top_k=top_k)
        print(repr("".join(VOCAB[i] for i in tokens[0].tolist())))
    logits = model(prompt)[:, -1, :]
    print(" ".join(f"{p:.6f}" for p in F.softmax(logits, dim=-1)[0, :6].tolist()))


if __name__ == "__main__":
    main()
