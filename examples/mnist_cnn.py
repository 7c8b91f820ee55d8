"""The MNIST classifier of pytorch/examples (mnist/main.py), trained the way it is: two 3x3
convolutions with ReLU, max_pool2d, dropout, two linear layers, log_softmax with nll_loss, Adadelta
with a StepLR schedule stepped once per epoch, a train loop printing the loss every few batches
and a test loop under no_grad that counts correct predictions with argmax(keepdim=True).

A PyTorch program: synthetic 28x28 digits-like images (strokes drawn from a formula) in place of
MNIST and initial weights from a formula so that every library starts from the same model; run it
on fastgrad unchanged with `python -m fastgrad.run examples/mnist_cnn.py`.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

SIDE, CLASSES = 28, 10


def stroke_images(count, offset):
    """Image i shows a stroke whose angle says its class (i % 10), with a little per-image shift."""
    images, labels = [], []
    for i in range(offset, offset + count):
        label = i % CLASSES
        angle = math.pi * label / CLASSES
        cx, cy = 13.5 + 3 * math.sin(i * 1.7), 13.5 + 3 * math.cos(i * 2.3)
        dx, dy = math.cos(angle), math.sin(angle)
        image = [
            [
                math.exp(-(((x - cx) * dy - (y - cy) * dx) ** 2) / 2.0) * (abs((x - cx) * dx + (y - cy) * dy) < 9)
                for x in range(SIDE)
            ]
            for y in range(SIDE)
        ]
        images.append(image)
        labels.append(label)
    data = (torch.tensor(images).unsqueeze(1) - 0.1307) / 0.3081  # the example's Normalize
    return TensorDataset(data, torch.tensor(labels))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, loader, optimizer, epoch, log_interval=1):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            seen = batch_idx * len(data)
            print(
                f"Train Epoch: {epoch} [{seen}/{len(loader.dataset)} "
                f"({100.0 * batch_idx / len(loader):.0f}%)]\tLoss: {loss.item():.6f}"
            )


def test(model, loader):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(loader.dataset)}")


def main():
    train_loader = DataLoader(stroke_images(48, 0), batch_size=16)
    test_loader = DataLoader(stroke_images(20, 1000), batch_size=10)
    model = Net()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            scale = 0.5 / math.sqrt(p[0].numel()) if p.dim() > 1 else 0.02
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 + i).view(p.shape) * scale)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, 3):
        train(model, train_loader, optimizer, epoch)
        test(model, test_loader)
        scheduler.step()


if __name__ == "__main__":
    main()
