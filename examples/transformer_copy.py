"""The copy task of "The Annotated Transformer", with its training scaffolding: an encoder-decoder
Transformer (one layer each; its own LayerNorm with the unbiased std, sublayer connections,
multi-head attention with masked_fill(mask == 0, -1e9), sinusoidal position buffer), Batch objects
that build the source and subsequent masks, label smoothing as KLDivLoss(reduction='sum') against a
smoothed target made with fill_/scatter_/index_fill_, a loss computed per token, Adam with the
paper's warm-up schedule through LambdaLR, and greedy decoding at the end.

A PyTorch program (dropout 0 and initial weights from a formula so that every library starts from the
same model and computes the same steps; batches from Python's random module); run it on fastgrad
unchanged with `python -m fastgrad.run examples/transformer_copy.py`.
"""

import copy
import math
import random

import torch
import torch.nn as nn
from torch.nn.functional import log_softmax
from torch.optim.lr_scheduler import LambdaLR

V, D_MODEL, D_FF, HEADS = 11, 16, 32, 2


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2, self.b_2, self.eps = nn.Parameter(torch.ones(features)), nn.Parameter(torch.zeros(features)), eps

    def forward(self, x):
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.norm = LayerNorm(size)

    def forward(self, x, sublayer):
        return x + sublayer(self.norm(x))


def attention(query, key, value, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = clones(nn.Linear(d_model, d_model), 4)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # the same mask for every head
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_2(self.w_1(x).relu())


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward):
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer, self.size = clones(SublayerConnection(size), 2), size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward):
        super().__init__()
        self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
        self.sublayer, self.size = clones(SublayerConnection(size), 3), size

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, memory, memory, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut, self.d_model = nn.Embedding(vocab, d_model), d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, : x.size(1)].requires_grad_(False)


class EncoderDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        c = copy.deepcopy
        attn, ff = MultiHeadedAttention(HEADS, D_MODEL), PositionwiseFeedForward(D_MODEL, D_FF)
        self.encoder = EncoderLayer(D_MODEL, c(attn), c(ff))
        self.encoder_norm = LayerNorm(D_MODEL)
        self.decoder = DecoderLayer(D_MODEL, c(attn), c(attn), c(ff))
        self.decoder_norm = LayerNorm(D_MODEL)
        self.src_embed = nn.Sequential(Embeddings(D_MODEL, V), PositionalEncoding(D_MODEL))
        self.tgt_embed = nn.Sequential(Embeddings(D_MODEL, V), PositionalEncoding(D_MODEL))
        self.generator = nn.Linear(D_MODEL, V)

    def encode(self, src, src_mask):
        return self.encoder_norm(self.encoder(self.src_embed(src), src_mask))

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder_norm(self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask))

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)


def subsequent_mask(size):
    return torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.uint8) == 0


class Batch:
    def __init__(self, src, tgt, pad=2):
        self.src, self.src_mask = src, (src != pad).unsqueeze(-2)
        self.tgt, self.tgt_y = tgt[:, :-1], tgt[:, 1:]
        self.tgt_mask = (self.tgt != pad).unsqueeze(-2) & subsequent_mask(self.tgt.size(-1)).type_as(self.tgt.data)
        self.ntokens = (self.tgt_y != pad).data.sum()


def data_gen(rng, batch_size, nbatches):
    for _ in range(nbatches):
        data = torch.tensor([[rng.randrange(1, V) for _ in range(8)] for _ in range(batch_size)])
        data[:, 0] = 1
        src, tgt = data.requires_grad_(False).clone().detach(), data.requires_grad_(False).clone().detach()
        yield Batch(src, tgt, 0)


class LabelSmoothing(nn.Module):
    def __init__(self, size, padding_idx, smoothing=0.0):
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx, self.confidence, self.smoothing, self.size = padding_idx, 1.0 - smoothing, smoothing, size

    def forward(self, x, target):
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        return self.criterion(x, true_dist.clone().detach())


def rate(step, model_size, factor, warmup):
    step = max(step, 1)  # LambdaLR asks for step 0 first
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        next_word = log_softmax(model.generator(out[:, -1]), dim=-1).argmax(dim=1).item()
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
    return ys


def main():
    model = EncoderDecoder()
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(model.named_parameters())):
            p.copy_(
                torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.61 + i).view(p.shape) * 0.3 + (p.dim() == 1)
            )
    criterion = LabelSmoothing(size=V, padding_idx=0, smoothing=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    lr_scheduler = LambdaLR(optimizer, lr_lambda=lambda step: rate(step, D_MODEL, factor=1.0, warmup=40))
    rng = random.Random(7)
    for epoch in range(4):
        model.train()
        total_loss, total_tokens = 0, 0
        for batch in data_gen(rng, 8, 5):
            out = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
            x = log_softmax(model.generator(out), dim=-1)
            loss = criterion(x.contiguous().view(-1, x.size(-1)), batch.tgt_y.contiguous().view(-1)) / batch.ntokens
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            lr_scheduler.step()
            total_loss += loss.data * batch.ntokens
            total_tokens += batch.ntokens
            print(f"  step {lr_scheduler.last_epoch} | loss {loss.item():.5f}")
        print(
            f"epoch {epoch} | loss per token {total_loss / total_tokens:.5f} | lr {lr_scheduler.get_last_lr()[0]:.4e}"
        )
    model.eval()
    src = torch.LongTensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    print("decoded:", greedy_decode(model, src, torch.ones(1, 1, 8), max_len=8, start_symbol=1).tolist())


if __name__ == "__main__":
    main()
