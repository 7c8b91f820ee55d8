"""The cubic fit as a custom nn.Module whose four coefficients are Parameters drawn by randn,
trained by optim.SGD (the tutorial's custom-Module program; fewer steps)."""

import math

import torch


class Cubic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        return self.a + self.b * x + self.c * x**2 + self.d * x**3

    def string(self):
        return f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3"


torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
model = Cubic()
loss_fn = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
for step in range(300):
    loss = loss_fn(model(x), y)
    if step % 30 == 29:
        print(step, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.string())
