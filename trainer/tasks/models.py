"""The small models the tasks train: an MLP for vectors and two CNNs for 8x8 and 28x28 images."""

from __future__ import annotations

from torch import nn


class MLP(nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
        )

    def forward(self, x):
        return self.net(x)


class DigitsCNN(nn.Module):
    """For 1x8x8 images."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, x):
        return self.head(self.features(x))


class MnistCNN(nn.Module):
    """The network of PyTorch's MNIST example (without dropout), for 1x28x28 images."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, x):
        return self.head(self.features(x))
