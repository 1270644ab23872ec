"""Super-resolution in the style of pytorch/examples super_resolution (the efficient sub-pixel CNN): four
convolutions with orthogonal initialisation and a PixelShuffle that turns upscale_factor**2 channels into an
image upscale_factor times larger, trained with the mean squared error and Adam.

The high-resolution images are smooth random fields (NumPy, fixed seed); the inputs are their 3 x 3 block means.

    python super_resolution.py [--steps 6]
"""
import argparse
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def make_pairs(n, upscale_factor, size=8, seed=0):
    """(low-resolution input, high-resolution target) pairs, 1 x size x size and 1 x (size*f) x (size*f)."""
    rng = np.random.default_rng(seed)
    hr_size = size * upscale_factor
    t = np.linspace(0.0, 1.0, hr_size)
    fields = np.zeros((n, hr_size, hr_size))
    for k in range(1, 4):  # a few random low-frequency waves per image
        a = rng.normal(0.0, 1.0 / k, (n, 1, 1))
        fx, fy, ph = rng.uniform(0.5, 2.0 * k, (3, n, 1, 1))
        fields += a * np.sin(2 * np.pi * (fx * t[None, :, None] + fy * t[None, None, :]) + ph * 6.0)
    target = (1.0 / (1.0 + np.exp(-fields))).astype(np.float32)
    low = target.reshape(n, size, upscale_factor, size, upscale_factor).mean((2, 4))
    return TensorDataset(torch.from_numpy(low[:, None].copy()), torch.from_numpy(target[:, None]))


def main(steps=6, upscale_factor=3, batch_size=8, lr=0.001, seed=123):
    torch.manual_seed(seed)
    training_data_loader = DataLoader(make_pairs(batch_size * 2, upscale_factor), batch_size=batch_size,
                                      shuffle=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net(upscale_factor=upscale_factor).to(device)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=lr)
    losses = []
    while len(losses) < steps:
        for batch in training_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Sub-pixel CNN super-resolution (pytorch/examples super_resolution)")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps)):
        print(f"step {step}: loss {loss!r} (PSNR {10 * log10(1 / loss):.2f} dB)")
