"""A character bigram model of names, two ways, as in the first lessons of building a language model:
counting (an int32 count table, smoothed and normalized into probabilities) and a one-layer network
trained by gradient descent to the same probabilities. Both sample new names with multinomial and
report the average negative log likelihood of the training names.

A PyTorch program; run it on fastgrad unchanged with `python -m fastgrad.run examples/bigram_names.py`.
"""

import torch
import torch.nn.functional as F

NAMES = "emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily ella anna".split()
CHARS = sorted(set("".join(NAMES)))
STOI = {c: i + 1 for i, c in enumerate(CHARS)}
STOI["."] = 0  # the start and end of a name
ITOS = {i: c for c, i in STOI.items()}
SIZE = len(STOI)


def pairs():
    for name in NAMES:
        chars = ["."] + list(name) + ["."]
        yield from ((STOI[a], STOI[b]) for a, b in zip(chars, chars[1:]))


def sample(probabilities, generator, count):
    names = []
    for _ in range(count):
        index, out = 0, []
        while True:
            row = probabilities[index]
            index = torch.multinomial(row, num_samples=1, replacement=True, generator=generator).item()
            if index == 0:
                break
            out.append(ITOS[index])
        names.append("".join(out))
    return names


def average_nll(probabilities):
    total, count = 0.0, 0
    for a, b in pairs():
        total -= torch.log(probabilities[a, b]).item()
        count += 1
    return total / count


def main():
    counts = torch.zeros((SIZE, SIZE), dtype=torch.int32)
    for a, b in pairs():
        counts[a, b] += 1
    probabilities = (counts + 1).float()
    probabilities /= probabilities.sum(1, keepdims=True)
    generator = torch.Generator().manual_seed(2147483647)
    print(counts.dtype, counts.sum().item(), counts[0].tolist())
    print(sample(probabilities, generator, 5))
    print(f"{average_nll(probabilities):.6f}")

    xs = torch.tensor([a for a, _ in pairs()])
    ys = torch.tensor([b for _, b in pairs()])
    encoded = F.one_hot(xs, num_classes=SIZE).float()
    weights = (torch.cos(torch.arange(SIZE * SIZE, dtype=torch.float32)) * 0.1).view(SIZE, SIZE)
    weights.requires_grad = True
    for step in range(30):
        logits = encoded @ weights
        counts_estimate = logits.exp()
        network_probabilities = counts_estimate / counts_estimate.sum(1, keepdims=True)
        loss = -network_probabilities[torch.arange(len(xs)), ys].log().mean() + 0.01 * (weights**2).mean()
        weights.grad = None
        loss.backward()
        weights.data += -20 * weights.grad
        if step % 10 == 0:
            print(f"{loss.item():.6f}")
    with torch.no_grad():
        learned = F.softmax(weights, dim=1)
    print(sample(learned, generator, 5))
    print(f"{average_nll(learned):.6f}")


if __name__ == "__main__":
    main()
