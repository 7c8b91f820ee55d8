"""The cubic fit as an nn.Sequential of Linear(3, 1) and Flatten over (x, x^2, x^3), MSELoss(sum),
updated by hand under no_grad (the tutorial's nn program; fewer steps). Linear's default init."""

import math

import torch

torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
powers = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))

model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")
lr = 1e-6
for step in range(300):
    loss = loss_fn(model(powers), y)
    if step % 30 == 29:
        print(step, loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
linear = model[0]
print(f"y = {linear.bias.item()} + {linear.weight[:, 0].item()} x + {linear.weight[:, 1].item()} x^2 "
      f"+ {linear.weight[:, 2].item()} x^3")  # fmt: skip
