"""minGPT's training flow on its sorting demo: a small GPT (token + position embeddings, causal
self-attention blocks, a NewGELU MLP in a ModuleDict), AdamW over two parameter
groups chosen by module type (Linear weights decay; biases, LayerNorm and Embedding weights do not),
model.zero_grad(set_to_none=True), clip_grad_norm_ and a trainer loop with callbacks that restarts its
data iterator when the loader runs out; then greedy generation of a sorted sequence.

A PyTorch program (initial weights from a formula so that every library starts from the same model;
the sampler draws with Python's random module, the same under every library); run it on fastgrad
unchanged with `python -m fastgrad.run examples/mingpt_trainer.py`.
"""

import math
import random
from collections import defaultdict

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

LENGTH, DIGITS = 5, 3


class SortDataset(Dataset):
    """Input: LENGTH digits then their sorted order; the loss covers only the sorted half."""

    def __init__(self, count, seed):
        rng = random.Random(seed)
        self.rows = [[rng.randrange(DIGITS) for _ in range(LENGTH)] for _ in range(count)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        cat = torch.tensor(self.rows[idx] + sorted(self.rows[idx]), dtype=torch.long)
        x, y = cat[:-1].clone(), cat[1:].clone()
        y[: LENGTH - 1] = -1
        return x, y


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.mlp = nn.ModuleDict(
            dict(c_fc=nn.Linear(n_embd, 4 * n_embd), c_proj=nn.Linear(4 * n_embd, n_embd), act=NewGELU())
        )
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlpf(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer=2, n_head=2, n_embd=16):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def configure_optimizers(self, learning_rate, weight_decay, betas):
        decay, no_decay = set(), set()
        for mn, m in self.named_modules():
            for pn, p in m.named_parameters(recurse=False):
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("bias") or isinstance(m, (nn.LayerNorm, nn.Embedding)):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, nn.Linear):
                    decay.add(fpn)
        params = dict(self.named_parameters())
        assert not decay & no_decay and params.keys() == decay | no_decay
        groups = [
            {"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
            {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long).unsqueeze(0)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, new_tokens):
        for _ in range(new_tokens):
            logits, _ = self(idx[:, -self.block_size :])
            idx = torch.cat((idx, logits[:, -1, :].argmax(dim=-1, keepdim=True)), dim=1)
        return idx


class EpochSampler(Sampler):
    """Each pass over the data in a new order, from a seeded Python generator."""

    def __init__(self, size, seed):
        self.size, self.rng = size, random.Random(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        order = list(range(self.size))
        self.rng.shuffle(order)
        return iter(order)


class Trainer:
    def __init__(self, model, dataset, max_iters, batch_size, grad_norm_clip):
        self.model, self.dataset = model, dataset
        self.max_iters, self.batch_size, self.grad_norm_clip = max_iters, batch_size, grad_norm_clip
        self.callbacks = defaultdict(list)
        self.iter_num, self.loss = 0, None

    def add_callback(self, event, callback):
        self.callbacks[event].append(callback)

    def run(self):
        model = self.model
        optimizer = model.configure_optimizers(learning_rate=5e-3, weight_decay=0.1, betas=(0.9, 0.95))
        loader = DataLoader(
            self.dataset,
            sampler=EpochSampler(len(self.dataset), 3),
            shuffle=False,
            pin_memory=False,
            batch_size=self.batch_size,
            num_workers=0,
        )
        model.train()
        data_iter = iter(loader)
        while self.iter_num < self.max_iters:
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(loader)
                batch = next(data_iter)
            x, y = [t.to("cpu") for t in batch]
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.grad_norm_clip)
            optimizer.step()
            for callback in self.callbacks["on_batch_end"]:
                callback(self)
            self.iter_num += 1


def main():
    dataset = SortDataset(64, seed=0)
    model = GPT(vocab_size=DIGITS, block_size=2 * LENGTH - 1)
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(model.named_parameters())):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.53 + i).view(p.shape) * 0.2)
    print("parameters:", sum(p.numel() for p in model.parameters()))
    trainer = Trainer(model, dataset, max_iters=16, batch_size=16, grad_norm_clip=1.0)
    trainer.add_callback("on_batch_end", lambda t: print(f"iter {t.iter_num}: train loss {t.loss.item():.5f}"))
    trainer.run()
    model.eval()
    print("sorted:", model.generate(torch.tensor([[2, 0, 1, 1, 0]]), LENGTH)[0, LENGTH:].tolist())


if __name__ == "__main__":
    main()
