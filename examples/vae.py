"""The variational autoencoder of pytorch/examples (vae/main.py), trained the way it is: a DataLoader
over an image dataset, an encoder to mu / logvar, the reparameterisation trick, a decoder with a
sigmoid output, binary_cross_entropy(reduction='sum') plus the KL divergence as the loss, Adam; a
train loop printing the average loss per epoch and a test loop under no_grad.

A PyTorch program: synthetic 12x12 "images" (blurred blobs) in place of MNIST, initial weights from a
formula so that every library starts from the same model, and the reparameterisation noise drawn with
Python's random module (the libraries' own random streams differ); run it on fastgrad unchanged with
`python -m fastgrad.run examples/vae.py`.
"""

import math
import random

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

SIDE, HIDDEN, LATENT = 12, 48, 4
PIXELS = SIDE * SIDE
noise = random.Random(5)


def blob_images(count, seed):
    rng = random.Random(seed)
    images = []
    for _ in range(count):
        cx, cy, r = rng.uniform(3, 9), rng.uniform(3, 9), rng.uniform(1.5, 3.5)
        images.append(
            [[math.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r)) for x in range(SIDE)] for y in range(SIDE)]
        )
    return TensorDataset(torch.tensor(images).unsqueeze(1), torch.zeros(count, dtype=torch.long))


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, HIDDEN)
        self.fc21 = nn.Linear(HIDDEN, LATENT)
        self.fc22 = nn.Linear(HIDDEN, LATENT)
        self.fc3 = nn.Linear(LATENT, HIDDEN)
        self.fc4 = nn.Linear(HIDDEN, PIXELS)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.tensor([[noise.gauss(0.0, 1.0) for _ in range(std.size(1))] for _ in range(std.size(0))])
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, PIXELS))
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, PIXELS), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    train_loader = DataLoader(blob_images(96, 0), batch_size=32, shuffle=False)
    test_loader = DataLoader(blob_images(32, 1), batch_size=16)
    model = VAE()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.29 + i).view(p.shape) * 0.15)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(1, 4):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            seen = batch_idx * len(data)
            print(f"Train Epoch: {epoch} [{seen}/{len(train_loader.dataset)}]\tLoss: {loss.item() / len(data):.6f}")
        print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")
        model.eval()
        test_loss = 0
        with torch.no_grad():
            for data, _ in test_loader:
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
        print(f"====> Test set loss: {test_loss / len(test_loader.dataset):.4f}")


if __name__ == "__main__":
    main()
