"""LeNet with batch normalisation as d2l trains it (chapter "Batch Normalization", the concise
version): Conv2d 1->6 5x5, BatchNorm2d, Sigmoid, AvgPool2d 2, Conv2d 6->16 5x5, BatchNorm2d, Sigmoid,
AvgPool2d 2, Flatten, Linear 256->120, BatchNorm1d, Sigmoid, Linear 120->84, BatchNorm1d, Sigmoid,
Linear 84->10; cross-entropy loss, SGD with a large learning rate (batch norm allows it), the
training loss and accuracy per epoch, and a test accuracy in eval mode (running statistics).

A PyTorch program: synthetic 28x28 images (rings and crosses drawn from a formula) in place of
Fashion-MNIST and initial weights from a formula (d2l uses Xavier's uniform draw) so that every
library starts from the same model; run it on fastgrad unchanged with
`python -m fastgrad.run examples/lenet_batchnorm.py`.
"""

import math

import torch
from torch import nn

SIDE, CLASSES = 28, 10


def pattern_images(count, offset):
    """Image i: a ring of radius and centre set by its class (i % 10), plus a faint per-image ripple."""
    images, labels = [], []
    for i in range(offset, offset + count):
        label = i % CLASSES
        radius, cx = 3 + label, 10 + (label % 3) * 4
        image = [
            [
                math.exp(-(((math.hypot(x - cx, y - 14) - radius) / 1.5) ** 2)) + 0.1 * math.sin(0.9 * x + 1.3 * y + i)
                for x in range(SIDE)
            ]
            for y in range(SIDE)
        ]
        images.append(image)
        labels.append(label)
    return torch.tensor(images).unsqueeze(1), torch.tensor(labels)


def lenet_bn():
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5), nn.BatchNorm2d(6), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=5), nn.BatchNorm2d(16), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
        nn.Linear(256, 120), nn.BatchNorm1d(120), nn.Sigmoid(),
        nn.Linear(120, 84), nn.BatchNorm1d(84), nn.Sigmoid(),
        nn.Linear(84, CLASSES),
    )  # fmt: skip


def init_weights(module, index=[0]):
    """d2l's init_weights applied with net.apply: here a formula in place of xavier_uniform_ (and of
    the biases' default draw)."""
    if type(module) in (nn.Linear, nn.Conv2d):
        index[0] += 1
        weight = module.weight
        bound = math.sqrt(6.0 / (weight.size(0) + weight[0].numel()))
        with torch.no_grad():
            weight.copy_(
                torch.sin(torch.arange(weight.numel(), dtype=torch.float32) * 0.71 + index[0]).view(weight.shape)
                * bound
            )
            module.bias.copy_(torch.cos(torch.arange(module.bias.numel(), dtype=torch.float32) + index[0]) * 0.1)


def accuracy(y_hat, y):
    return float((y_hat.argmax(dim=1) == y).sum())


def main():
    train_x, train_y = pattern_images(64, 0)
    test_x, test_y = pattern_images(30, 500)
    net = lenet_bn()
    net.apply(init_weights)
    loss = nn.CrossEntropyLoss()
    trainer = torch.optim.SGD(net.parameters(), lr=1.0)
    batch_size = 16
    for epoch in range(3):
        net.train()
        total_loss, total_correct = 0.0, 0.0
        for start in range(0, len(train_y), batch_size):
            X, y = train_x[start : start + batch_size], train_y[start : start + batch_size]
            trainer.zero_grad()
            y_hat = net(X)
            batch_loss = loss(y_hat, y)
            batch_loss.backward()
            trainer.step()
            print(f"step loss {batch_loss.item():.6f}")
            total_loss += batch_loss.item() * len(y)
            total_correct += accuracy(y_hat, y)
        net.eval()
        with torch.no_grad():
            test_acc = accuracy(net(test_x), test_y) / len(test_y)
        print(
            f"epoch {epoch + 1}, loss {total_loss / len(train_y):.4f}, train acc "
            f"{total_correct / len(train_y):.3f}, test acc {test_acc:.3f}"
        )
    bn = net[1]
    print("running var", [f"{v:.6f}" for v in bn.running_var.tolist()], "batches", bn.num_batches_tracked.item())


if __name__ == "__main__":
    main()
