"""The DCGAN of pytorch/examples (dcgan/main.py) at 32x32, trained the way it is: a generator of
transposed convolutions with BatchNorm2d and ReLU ending in Tanh, a discriminator of strided
convolutions with BatchNorm2d and LeakyReLU(0.2) ending in Sigmoid, weights_init applied with
model.apply (by class name), BCELoss, two Adam optimizers (lr 2e-4, betas (0.5, 0.999)); each step
updates D on a real and a fake batch (the fake one detached), then G against the real label, and
prints Loss_D, Loss_G, D(x), D(G(z)) before and after D's update.

A PyTorch program: synthetic 3x32x32 "real" images (coloured gradients) and latent vectors from a
formula in place of a dataset and torch.randn, and weights_init's normal draws replaced by a formula,
so that every library starts from the same models; run it on fastgrad unchanged with
`python -m fastgrad.run examples/dcgan_step.py`.
"""

import math

import torch
import torch.nn as nn
import torch.optim as optim

NZ, NGF, NDF, NC, BATCH = 16, 8, 8, 3, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
            nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False), nn.Tanh(),
        )  # fmt: skip

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, NDF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
        )  # fmt: skip

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def waves(shape, phase, scale):
    count = math.prod(shape)
    return torch.sin(torch.arange(count, dtype=torch.float32) * 0.613 + phase).view(shape) * scale


def weights_init(m, calls=[0]):
    """The example's weights_init: conv weights ~ N(0, 0.02), batch-norm weights ~ N(1, 0.02), biases 0
    (here the draws are a formula)."""
    calls[0] += 1
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.copy_(waves(m.weight.shape, calls[0], 0.04))
    elif classname.find("BatchNorm") != -1:
        m.weight.data.copy_(1.0 + waves(m.weight.shape, calls[0], 0.02))
        m.bias.data.fill_(0)


def real_images(step):
    y, x = torch.meshgrid(torch.linspace(-1, 1, 32), torch.linspace(-1, 1, 32), indexing="ij")
    batch = [
        torch.stack([torch.tanh(2 * (x * math.cos(a) + y * math.sin(a)) + c) for c in (-0.5, 0.0, 0.5)])
        for a in (0.4 * (step * BATCH + i) for i in range(BATCH))
    ]
    return torch.stack(batch)


def main():
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for step in range(4):
        # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real = real_images(step)
        label = torch.full((BATCH,), real_label, dtype=real.dtype)
        output = netD(real)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = waves((BATCH, NZ, 1, 1), 10 + step, 1.0)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        # (2) Update G: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        print(
            f"[{step}/4] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
            f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
        )
    print("fake sample", [round(v, 4) for v in fake[0, 0, 0, :6].tolist()])


if __name__ == "__main__":
    main()
