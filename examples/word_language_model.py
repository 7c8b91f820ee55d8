"""The word-level language model of pytorch/examples (word_language_model/), trained the way it is:
a corpus of token ids batchified into columns with narrow/view/t, truncated backpropagation through
time over bptt-long slices (get_batch), the hidden state detached between slices
(repackage_hidden), an Embedding -> Dropout -> LSTM -> Dropout -> Linear model with its
uniform(-0.1, 0.1) init and optional tied weights (and the Transformer variant: positional
encoding, a TransformerEncoder under a causal mask), NLLLoss over log_softmax, clip_grad_norm_ and a
hand-written SGD update (p.data.add_(p.grad, alpha=-lr)), evaluation under no_grad with the
perplexity, and the learning rate divided by 4 when the validation loss stops improving.

A PyTorch program: a synthetic corpus (a word sequence from a formula) in place of Wikitext-2 and
initial weights from a formula so that every library starts from the same model; the LSTM's own
between-layer dropout is 0 (it draws inside PyTorch's kernel, where no wrapper can fix its mask);
run it on fastgrad unchanged with `python -m fastgrad.run examples/word_language_model.py`.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, EMBEDDING, HIDDEN, LAYERS, BPTT, CLIP = 40, 16, 24, 2, 7, 0.25


def corpus(length, offset):
    """Token i: a word chosen by a slow and a fast wave, so that the next word is partly predictable."""
    return torch.tensor([int(VOCAB * (0.5 + 0.3 * math.sin(0.31 * i) + 0.2 * math.sin(1.7 * i))) % VOCAB
                         for i in range(offset, offset + length)])  # fmt: skip


def batchify(data, batch_size):
    columns = data.size(0) // batch_size
    data = data.narrow(0, 0, columns * batch_size)
    return data.view(batch_size, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].view(-1)


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=0.0)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers
        self.init_weights()

    def init_weights(self):
        """The example's uniform(-0.1, 0.1) draws (and the LSTM's own) replaced by a formula."""
        with torch.no_grad():
            for i, p in enumerate(self.parameters()):
                p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.61 + i).view(p.shape) * 0.1)
            self.decoder.bias.zero_()

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (
                weight.new_zeros(self.nlayers, batch_size, self.nhid),
                weight.new_zeros(self.nlayers, batch_size, self.nhid),
            )
        return weight.new_zeros(self.nlayers, batch_size, self.nhid)


class PositionalEncoding(nn.Module):
    """The sine/cosine position table added to the embeddings (a buffer), then dropout."""

    def __init__(self, d_model, dropout=0.1, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(0), :])


class TransformerModel(nn.Module):
    """The example's Transformer variant: embeddings scaled by sqrt(ninp), positions, a
    TransformerEncoder under a causal float mask (log of a lower triangle: 0 and -inf), a Linear
    decoder, log_softmax. Its attention dropout runs inside PyTorch's fused attention, where no
    wrapper can fix its mask, so the encoder layers' dropout is 0 here."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, 0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        with torch.no_grad():
            for i, p in enumerate(self.parameters()):
                p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.47 + i).view(p.shape) * 0.1)

    def forward(self, src, has_mask=True):
        if has_mask and (self.src_mask is None or self.src_mask.size(0) != len(src)):
            self.src_mask = torch.log(torch.tril(torch.ones(len(src), len(src))))
        src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        output = self.transformer_encoder(src, self.src_mask if has_mask else None)
        return F.log_softmax(self.decoder(output), dim=-1)


def repackage_hidden(h):
    """The hidden state cut from the graph of the slice that made it."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, source, batch_size, criterion):
    model.eval()
    total_loss = 0.0
    recurrent = not isinstance(model, TransformerModel)
    hidden = model.init_hidden(batch_size) if recurrent else None
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            data, targets = get_batch(source, i)
            if recurrent:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            else:
                output = model(data).view(-1, VOCAB)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(source) - 1)


def train_epoch(model, source, batch_size, criterion, lr, epoch):
    model.train()
    recurrent = not isinstance(model, TransformerModel)
    hidden = model.init_hidden(batch_size) if recurrent else None
    for batch, i in enumerate(range(0, source.size(0) - 1, BPTT)):
        data, targets = get_batch(source, i)
        model.zero_grad()
        if recurrent:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        else:
            output = model(data).view(-1, VOCAB)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print(f"| epoch {epoch} | batch {batch} | lr {lr:.2f} | loss {loss.item():.5f} | ppl {math.exp(loss.item()):.4f}")


def main():
    train_data = batchify(corpus(400, 0), 8)
    val_data = batchify(corpus(120, 7000), 4)
    for model_type, tied in (("LSTM", False), ("GRU", True), ("Transformer", False)):
        if model_type == "Transformer":
            model, lr = TransformerModel(VOCAB, EMBEDDING, 2, HIDDEN, LAYERS, 0.2), 1.0
        else:
            model, lr = RNNModel(model_type, VOCAB, EMBEDDING if not tied else HIDDEN, HIDDEN, LAYERS, 0.2, tied), 20.0
        criterion = nn.NLLLoss()
        best_val_loss = None
        for epoch in range(1, 4):
            train_epoch(model, train_data, 8, criterion, lr, epoch)
            val_loss = evaluate(model, val_data, 4, criterion)
            print(f"| end of epoch {epoch} | {model_type} | valid loss {val_loss:.5f} | valid ppl {math.exp(val_loss):.4f}")
            if best_val_loss is None or val_loss < best_val_loss:
                best_val_loss = val_loss
            else:
                lr /= 4.0


if __name__ == "__main__":
    main()
