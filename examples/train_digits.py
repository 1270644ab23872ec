"""Train a small CNN on scikit-learn's handwritten digits (8x8 images, shipped inside scikit-learn: no
download) with ember, checkpointing every epoch.

    python examples/train_digits.py [--epochs 15] [--checkpoint digits.pt] [--resume] [--amp]

The last line printed is the test accuracy, e.g. ``test accuracy: 98.3%``. ``--resume`` continues
from the checkpoint (model, optimizer, epoch and the shuffling generator's state) to ``--epochs``.
``--amp`` runs the forward pass and loss under ``ember.autocast("cpu", dtype=ember.bfloat16)`` with a
``GradScaler`` (needs ember-amp).
"""
import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import ember
import ember.nn as nn
from ember.utils.data import DataLoader, TensorDataset


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 4 x 4
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 64 x 2 x 2
        nn.Flatten(), nn.Linear(64 * 2 * 2, 10),
    )


def load_data(seed):
    """The 1797 digits as (N, 1, 8, 8) float32 in [0, 1]; a fixed 80/20 train/test split."""
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    as_set = lambda idx: TensorDataset(ember.from_numpy(x[idx]), ember.from_numpy(y[idx]))  # noqa: E731
    return as_set(train), as_set(test)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with ember.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
            total += len(labels)
    model.train()
    return correct / total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--checkpoint", default="digits_checkpoint.pt", help="written after every epoch")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast and a GradScaler (ember-amp)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    ember.manual_seed(args.seed)
    train_set, test_set = load_data(args.seed)
    model = make_model()
    optimizer = ember.optim.Adam(model.parameters(), lr=args.lr)
    # a schedule that does not depend on --epochs, so that a resumed run continues the same schedule
    scheduler = ember.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.85)
    shuffle = ember.Generator().manual_seed(args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=shuffle,
                        num_workers=args.workers)
    test_loader = DataLoader(test_set, batch_size=256)
    loss_fn = nn.CrossEntropyLoss()
    scaler = ember.amp.GradScaler("cpu") if args.amp else None

    first_epoch = 0
    if args.resume:
        if not os.path.exists(args.checkpoint):
            parser.error(f"--resume: no checkpoint at {args.checkpoint}")
        ckpt = ember.load(args.checkpoint)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        shuffle.set_state(ckpt["shuffle_rng"])
        first_epoch = ckpt["epoch"] + 1
        if scaler is not None and "scaler" in ckpt:
            scaler.load_state_dict(ckpt["scaler"])
        print(f"resumed from {args.checkpoint} after epoch {first_epoch}")

    for epoch in range(first_epoch, args.epochs):
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{args.epochs}", leave=False, mininterval=0.5)
        running = 0.0
        for i, (images, labels) in enumerate(bar, 1):
            optimizer.zero_grad()
            if scaler is None:
                loss = loss_fn(model(images), labels)
                loss.backward()
                optimizer.step()
            else:
                with ember.autocast("cpu", dtype=ember.bfloat16):
                    loss = loss_fn(model(images), labels)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            running += loss.item()
            if i % 10 == 0:
                bar.set_postfix(loss=f"{running / i:.4f}")
        scheduler.step()
        accuracy = evaluate(model, test_loader)
        tqdm.write(f"epoch {epoch + 1}: train loss {running / len(loader):.4f}, test accuracy {accuracy:.1%}")
        ember.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "shuffle_rng": shuffle.get_state(), "epoch": epoch,
                    **({"scaler": scaler.state_dict()} if scaler is not None else {})}, args.checkpoint)

    accuracy = evaluate(model, test_loader)
    print(f"time: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.1%}")


if __name__ == "__main__":
    main()
