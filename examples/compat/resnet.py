"""A small ResNet in the style of torchvision's resnet and the classic CIFAR training recipe: BasicBlocks
(3x3 convolutions, BatchNorm2d, an in-place residual add, a 1x1 convolution shortcut where the shape changes),
Kaiming initialisation, adaptive average pooling, cross entropy, SGD with Nesterov momentum and weight decay,
and a MultiStepLR schedule (one step per epoch). main() returns the loss of every training step, then the loss
on held-out images in eval mode (BatchNorm's running statistics).

The images are 3 x 16 x 16, ten classes of coloured stripe patterns plus noise (NumPy, fixed seed).

    python resnet.py [--steps 6]
"""
import argparse

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, width=16):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 2 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def make_dataset(n, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    rows, cols = np.mgrid[0:16, 0:16]
    angle = labels * np.pi / 10
    phase = rng.uniform(0, 2 * np.pi, n)
    stripes = np.sin(0.8 * (np.cos(angle)[:, None, None] * rows + np.sin(angle)[:, None, None] * cols)
                     + phase[:, None, None])
    colour = rng.uniform(0.5, 1.0, (n, 3))
    images = colour[:, :, None, None] * stripes[:, None] + rng.normal(0.0, 0.3, (n, 3, 16, 16))
    return TensorDataset(torch.tensor(images, dtype=torch.float32), torch.tensor(labels))


def main(steps=6, batch_size=16, batches_per_epoch=2, seed=0):
    torch.manual_seed(seed)
    trainloader = DataLoader(make_dataset(batch_size * batches_per_epoch), batch_size=batch_size, shuffle=True)
    testloader = DataLoader(make_dataset(batch_size, seed=1), batch_size=batch_size)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = ResNet(BasicBlock, [1, 1]).to(device)
    if device == "cuda":
        net = torch.nn.DataParallel(net)
        cudnn.benchmark = True
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1, 2], gamma=0.1)
    losses = []
    while len(losses) < steps:
        net.train()
        for inputs, targets in trainloader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
        scheduler.step()
    net.eval()
    test_loss = 0.0
    with torch.no_grad():
        for inputs, targets in testloader:
            inputs, targets = inputs.to(device), targets.to(device)
            test_loss += criterion(net(inputs), targets).item() * len(targets)
    return losses + [test_loss / len(testloader.dataset)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="small ResNet (torchvision resnet, CIFAR recipe)")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    *losses, test_loss = main(args.steps)
    for step, loss in enumerate(losses):
        print(f"step {step}: loss {loss!r}")
    print(f"test: loss {test_loss!r}")
