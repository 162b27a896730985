"""The seeds' models: the Otto MLP and a WideResNet with depth and width as arguments.

Explained in notebooks/10_ffcv_otto.ipynb and notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Sequential):
    """The seed's Otto classifier: in_features -> hidden -> hidden -> out_features with ReLUs.

    Explained in notebooks/10_ffcv_otto.ipynb.
    """

    def __init__(self, in_features: int = 93, out_features: int = 9, hidden: int = 256) -> None:
        super().__init__(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )


class WideBlock(nn.Module):
    """One pre-activation residual block: BN-ReLU-conv3x3, BN-ReLU-conv3x3, plus a (projected) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        )
        project = stride != 1 or in_channels != out_channels
        self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False) if project else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return body(x) + shortcut(x)."""
        return self.body(x) + self.shortcut(x)


class WideResNet(nn.Module):
    """WRN-depth-widen_factor for 32x32 images (Zagoruyko & Komodakis); 28/10 is the seed's model.

    Three groups of (depth - 4) / 6 blocks with 16k, 32k and 64k channels (k = widen_factor),
    strides 1, 2, 2, then BN-ReLU, global average pooling and a linear classifier.
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, depth: int = 28, widen_factor: int = 10, num_classes: int = 10) -> None:
        super().__init__()
        if depth < 10 or (depth - 4) % 6:
            raise ValueError(f"depth must be 6n + 4 with n >= 1 (10, 16, 22, 28, ...), got {depth}")
        if widen_factor < 1:
            raise ValueError(f"widen_factor must be >= 1, got {widen_factor}")
        n = (depth - 4) // 6
        widths = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        layers: list[nn.Module] = [nn.Conv2d(3, widths[0], 3, padding=1, bias=False)]
        for group, stride in zip(range(3), (1, 2, 2)):
            for i in range(n):
                layers.append(
                    WideBlock(
                        widths[group] if i == 0 else widths[group + 1], widths[group + 1], stride if i == 0 else 1
                    )
                )
        layers += [nn.BatchNorm2d(widths[3]), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(widths[3], num_classes)
        self.depth, self.widen_factor = depth, widen_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for a float batch (N, 3, H, W)."""
        return self.classifier(self.features(x))

    def extra_repr(self) -> str:
        return f"WRN-{self.depth}-{self.widen_factor}"


def count_parameters(model: nn.Module) -> int:
    """Return the number of trainable parameters of `model`."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
