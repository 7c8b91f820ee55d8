"""A polynomial whose degree is drawn anew at every forward pass (Python's random module): terms
of degree 4 and 5 reuse one weight, so the graph differs from step to step (the tutorial's dynamic
net; SGD with momentum, fewer steps)."""

import math
import random

import torch


class DynamicCubic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e = (torch.nn.Parameter(torch.randn(())) for _ in range(5))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x**2 + self.d * x**3
        for exponent in range(4, random.randint(4, 6)):
            y = y + self.e * x**exponent
        return y


random.seed(0)
torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
model = DynamicCubic()
loss_fn = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for step in range(600):
    loss = loss_fn(model(x), y)
    if step % 60 == 59:
        print(step, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(" ".join(f"{name}={p.item()}" for name, p in model.named_parameters()))
