"""Fits a cubic to sin(x) with tensors only, the gradients written out by hand (the flow of the
"Learning PyTorch with examples" tutorial's tensor program; fewer steps). Random start: randn."""

import math

import torch

torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float)
y = torch.sin(x)
a, b, c, d = (torch.randn((), dtype=torch.float) for _ in range(4))

lr = 1e-6
for step in range(300):
    prediction = a + b * x + c * x**2 + d * x**3
    loss = (prediction - y).pow(2).sum().item()
    if step % 30 == 29:
        print(step, loss)
    residual_grad = 2.0 * (prediction - y)
    a -= lr * residual_grad.sum()
    b -= lr * (residual_grad * x).sum()
    c -= lr * (residual_grad * x**2).sum()
    d -= lr * (residual_grad * x**3).sum()
print(f"y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")
