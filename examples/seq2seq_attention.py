"""The sequence-to-sequence translation model of PyTorch's tutorial "NLP From Scratch: Translation with
a Sequence to Sequence Network and Attention", trained the way it is: an encoder (Embedding, Dropout,
a batch_first GRU) and a decoder with Bahdanau (additive) attention (query from the hidden state
permuted to batch-first, tanh(Wa q + Ua k), Va to scores, softmax, bmm with the encoder outputs, the
context concatenated with the embedded token into a GRU, a Linear to the vocabulary) run for
MAX_LENGTH steps with teacher forcing from the target, log_softmax with NLLLoss over the flattened
steps, one Adam per network, batches from a DataLoader over a TensorDataset; then greedy decoding
with topk(1) under no_grad, stopping at EOS.

A PyTorch program: a synthetic "language pair" (the target is the source reversed with every word
shifted) in place of the English-French pairs, batches in order (the tutorial's RandomSampler
draws from PyTorch's generator) and initial weights from a formula so that every library starts
from the same model; run it on fastgrad unchanged with
`python -m fastgrad.run examples/seq2seq_attention.py`.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, TensorDataset

SOS_token, EOS_token, MAX_LENGTH, WORDS, HIDDEN = 0, 1, 6, 14, 16


def pairs(count):
    """Sentence i: 2-5 words from a formula; its translation: reversed, each word + 3 (mod WORDS)."""
    sources, targets = [], []
    for i in range(count):
        words = [2 + int((WORDS - 2) * (0.5 + 0.5 * math.sin(1.3 * i + 0.7 * j))) % (WORDS - 2) for j in range(2 + i % 4)]
        translated = [2 + (w - 2 + 3) % (WORDS - 2) for w in reversed(words)]
        sources.append(words + [EOS_token] + [0] * (MAX_LENGTH - len(words) - 1))
        targets.append(translated + [EOS_token] + [0] * (MAX_LENGTH - len(translated) - 1))
    return torch.tensor(sources, dtype=torch.long), torch.tensor(targets, dtype=torch.long)


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs, attentions = [], []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:  # teacher forcing: the next input is the target word
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
        return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        return self.out(output), hidden, attn_weights


def train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    total_loss = 0
    for input_tensor, target_tensor in dataloader:
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        total_loss += loss.item()
    return total_loss / len(dataloader)


def evaluate(encoder, decoder, sentence):
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(sentence.view(1, -1))
        decoder_outputs, _, attentions = decoder(encoder_outputs, encoder_hidden)
        _, topi = decoder_outputs.topk(1)
        words = []
        for idx in topi.squeeze().tolist():
            if idx == EOS_token:
                words.append("<EOS>")
                break
            words.append(str(idx))
    return words, attentions


def main():
    sources, targets = pairs(24)
    dataloader = DataLoader(TensorDataset(sources, targets), batch_size=8)
    encoder, decoder = EncoderRNN(WORDS, HIDDEN), AttnDecoderRNN(HIDDEN, WORDS)
    with torch.no_grad():
        for i, p in enumerate(list(encoder.parameters()) + list(decoder.parameters())):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.53 + i).view(p.shape) * 0.3)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    for epoch in range(1, 6):
        loss = train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
        print(f"epoch {epoch} loss {loss:.6f}")
    encoder.eval()
    decoder.eval()
    for i in range(3):
        words, attentions = evaluate(encoder, decoder, sources[i])
        print(" ".join(map(str, sources[i].tolist())), "=>", " ".join(words), f"attention sum {attentions.sum().item():.4f}")


if __name__ == "__main__":
    main()
