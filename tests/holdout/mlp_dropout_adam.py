"""A small classifier trained from torch.manual_seed(0) with nothing pinned: data drawn by randn,
the layers' default initialisation, dropout masks, a shuffled DataLoader's batches and Adam."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(96, 10)
labels = (features[:, :3].sum(1) > 0).long() + (features[:, 3] > 1).long()
loader = DataLoader(TensorDataset(features, labels), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(4):
    model.train()
    for batch, (x, target) in enumerate(loader):
        loss = F.cross_entropy(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(epoch, batch, loss.item())
    model.eval()
    with torch.no_grad():
        accuracy = (model(features).argmax(1) == labels).float().mean().item()
    print("epoch", epoch, "accuracy", accuracy)
