"""makemore's MLP language model trained the way its training loop does it: a character dataset whose
items are (x, y) rows padded with -1 targets, an endless DataLoader over a replacement sampler, an
embedding of the previous block_size characters into an MLP, cross_entropy with ignore_index=-1 and
AdamW with weight decay; a loss line per step, then a test loss under no_grad.

A PyTorch program (synthetic names in place of names.txt; initial weights from a formula so that
every library starts from the same model); run it on fastgrad unchanged with
`python -m fastgrad.run examples/makemore_mlp.py`. The sampler's draws come from Python's random
module with a fixed seed, the same under every library (the libraries' own random streams differ).
"""

import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

SYLLABLES = ["ka", "ri", "mo", "la", "ne", "so", "ta", "vi", "el", "an", "jo", "ru"]


def synthetic_names(count, rng):
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(count)]


class CharDataset(Dataset):
    def __init__(self, words, chars, max_word_length):
        self.words, self.max_word_length = words, max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}  # 0 is the start/end token

    def __len__(self):
        return len(self.words)

    def get_output_length(self):
        return self.max_word_length + 1

    def __getitem__(self, idx):
        ix = torch.tensor([self.stoi[ch] for ch in self.words[idx]], dtype=torch.long)
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1 : 1 + len(ix)] = ix
        y[: len(ix)] = ix
        y[len(ix) + 1 :] = -1  # no loss past the end token
        return x, y


class SeededReplacementSampler(Sampler):
    """Indices drawn with replacement, endlessly (makemore's RandomSampler(replacement=True))."""

    def __init__(self, size, seed):
        self.size, self.rng = size, random.Random(seed)

    def __iter__(self):
        while True:
            yield self.rng.randrange(self.size)


class InfiniteDataLoader:
    def __init__(self, dataset, **kwargs):
        self.loader = DataLoader(dataset, sampler=SeededReplacementSampler(len(dataset), 1), **kwargs)
        self.data_iter = iter(self.loader)

    def next(self):
        return next(self.data_iter)


class MLP(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, n_embd2):
        super().__init__()
        self.block_size, self.vocab_size = block_size, vocab_size
        self.wte = nn.Embedding(vocab_size + 1, n_embd)  # + a <BLANK> token before the start
        self.mlp = nn.Sequential(nn.Linear(block_size * n_embd, n_embd2), nn.Tanh(), nn.Linear(n_embd2, vocab_size))

    def forward(self, idx, targets=None):
        embs = []
        for _ in range(self.block_size):
            embs.append(self.wte(idx))
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size
        logits = self.mlp(torch.cat(embs, -1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def main():
    rng = random.Random(0)
    words = synthetic_names(300, rng)
    chars = sorted(set("".join(words)))
    max_len = max(len(w) for w in words)
    train, test = CharDataset(words[:270], chars, max_len), CharDataset(words[270:], chars, max_len)
    model = MLP(len(chars) + 1, block_size=train.get_output_length(), n_embd=8, n_embd2=32)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float32) * 0.71 + i).view(p.shape) * 0.2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    batches = InfiniteDataLoader(train, batch_size=16, pin_memory=True, num_workers=0)
    for step in range(20):
        X, Y = batches.next()
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print(f"step {step} | loss {loss.item():.4f}")
    with torch.no_grad():
        X, Y = next(iter(DataLoader(test, batch_size=len(test))))
        print(f"test loss {model(X, Y)[1].item():.4f}")


if __name__ == "__main__":
    main()
