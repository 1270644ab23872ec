"""A variational autoencoder in the style of pytorch/examples vae: a linear encoder to a mean and a log-variance,
the reparameterisation trick, a linear decoder with a sigmoid, and the binary cross entropy plus the KL
divergence as the loss, trained with Adam.

The 28 x 28 images are made here (blurred random strokes in [0, 1], NumPy with a fixed seed).

    python vae.py [--steps 6]
"""
import argparse

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction (binary cross entropy, summed) plus the KL divergence of the code from N(0, I)."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def make_images(n, seed=0):
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), np.float32)
    rows, cols = np.mgrid[0:28, 0:28]
    for img in images:
        for _ in range(3):  # three soft blobs per image
            r, c, s = rng.uniform(6, 22), rng.uniform(6, 22), rng.uniform(2, 5)
            img += np.exp(-((rows - r) ** 2 + (cols - c) ** 2) / (2 * s * s)).astype(np.float32)
    return np.clip(images, 0.0, 1.0)[:, None]


def main(steps=6, batch_size=32, seed=1):
    torch.manual_seed(seed)
    images = torch.tensor(make_images(batch_size * 3))
    train_loader = DataLoader(TensorDataset(images), batch_size=batch_size, shuffle=True)
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    while len(losses) < steps:
        model.train()
        for (data,) in train_loader:
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            optimizer.step()
            losses.append(loss.item() / len(data))
            if len(losses) == steps:
                break
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="VAE (pytorch/examples vae)")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps)):
        print(f"step {step}: loss {loss!r}")
