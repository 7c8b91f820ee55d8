"""y = a + b * P3(c + d x) fitted to sin(x), P3 the Legendre polynomial of degree 3 as a custom
autograd Function with its own backward (the tutorial's custom-Function program; fewer steps)."""

import math

import torch


class Legendre3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return 0.5 * (5 * t**3 - 3 * t)

    @staticmethod
    def backward(ctx, grad_output):
        (t,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * t**2 - 1)


x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float)
y = torch.sin(x)
# starting values close enough to the answer for plain gradient descent to converge
a, b, c, d = (torch.full((), value, requires_grad=True) for value in (0.0, -1.0, 0.0, 0.3))

lr = 5e-6
for step in range(300):
    loss = (a + b * Legendre3.apply(c + d * x) - y).pow(2).sum()
    if step % 30 == 29:
        print(step, loss.item())
    loss.backward()
    with torch.no_grad():
        for w in (a, b, c, d):
            w -= lr * w.grad
            w.grad = None
print(f"y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")
