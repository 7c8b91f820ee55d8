"""The cubic fit to sin(x) with autograd computing the gradients (the tutorial's autograd program;
fewer steps): leaves with requires_grad, updates under no_grad, gradients reset to None."""

import math

import torch

torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
coefficients = [torch.randn((), requires_grad=True) for _ in range(4)]

lr = 1e-6
for step in range(300):
    a, b, c, d = coefficients
    loss = (a + b * x + c * x**2 + d * x**3 - y).pow(2).sum()
    if step % 30 == 29:
        print(step, loss.item())
    loss.backward()
    with torch.no_grad():
        for w in coefficients:
            w -= lr * w.grad
            w.grad = None
print("y = " + " + ".join(f"{w.item()} x^{i}" for i, w in enumerate(coefficients)))
