"""The nn cubic fit trained by optim.RMSprop (the tutorial's optim program; fewer steps): a step
size of 1e-3 whatever the gradient's scale, so the losses fall fast and every rounding shows."""

import math

import torch

torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
powers = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))

model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
for step in range(1000):
    loss = loss_fn(model(powers), y)
    if step % 100 == 99:
        print(step, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
weight, bias = model[0].weight.flatten().tolist(), model[0].bias.item()
print(f"y = {bias} + {weight[0]} x + {weight[1]} x^2 + {weight[2]} x^3")
