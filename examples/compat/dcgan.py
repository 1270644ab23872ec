"""A DCGAN in the style of pytorch/examples dcgan, shrunk to 16 x 16 images: a generator of ConvTranspose2d,
BatchNorm2d and ReLU layers ending in Tanh, a discriminator of Conv2d, BatchNorm2d and LeakyReLU layers ending in
Sigmoid, DCGAN's normal initialisation applied by class name, BCELoss, and one Adam optimiser per network.

The "real" images are soft discs of random place and size in [-1, 1] (NumPy, fixed seed). Each iteration gives
two losses, the discriminator's and the generator's; main() returns them in turn.

    python dcgan.py [--steps 4]
"""
import argparse

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

nc = 1  # channels of the images
nz = 16  # size of the latent vector
ngf = 16
ndf = 16


def weights_init(m):
    """Custom weights initialization called on netG and netD."""
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def make_images(n, seed=0):
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:16, 0:16]
    centre = rng.uniform(4, 12, (n, 2))
    radius = rng.uniform(2, 5, n)
    dist = np.sqrt((rows - centre[:, 0, None, None]) ** 2 + (cols - centre[:, 1, None, None]) ** 2)
    discs = 1.0 / (1.0 + np.exp(2.0 * (dist - radius[:, None, None])))
    return (discs * 2.0 - 1.0).astype(np.float32)[:, None]


def main(steps=4, batch_size=16, lr=0.0002, beta1=0.5, seed=999):
    torch.manual_seed(seed)
    cudnn.benchmark = True
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(make_images(batch_size * 2)))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)

    netG = Generator().to(device)
    netG.apply(weights_init)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    criterion = nn.BCELoss()

    real_label = 1.0
    fake_label = 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(beta1, 0.999))

    losses = []
    while len(losses) < 2 * steps:
        for data in dataloader:
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            netD.zero_grad()
            real = data[0].to(device)
            b_size = real.size(0)
            label = torch.full((b_size,), real_label, dtype=real.dtype, device=device)
            output = netD(real)
            errD_real = criterion(output, label)
            errD_real.backward()

            noise = torch.randn(b_size, nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()

            losses += [errD.item(), errG.item()]
            if len(losses) == 2 * steps:
                break
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DCGAN on 16x16 images (pytorch/examples dcgan)")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    losses = main(args.steps)
    for step in range(len(losses) // 2):
        print(f"step {step}: loss_D {losses[2 * step]!r} loss_G {losses[2 * step + 1]!r}")
