"""The seeds' models: the Otto MLP and a WideResNet with depth and width as arguments.

Explained in notebooks/10_ffcv_otto.ipynb and notebooks/11_ffcv_cifar.ipynb.
"""

from __future__ import annotations

from typing import Any

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
        layers += [
            WideBlock(widths[group] if i == 0 else widths[group + 1], widths[group + 1], stride if i == 0 else 1)
            for group, stride in enumerate((1, 2, 2))
            for i in range(n)
        ]
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


# ------------------------------------------------------------------- seed 003's WideResNet, as written
class SeedWideBlock(nn.Module):
    """Seed 003's `WideBlock` as written: convs with biases, the stride on the second conv, `out += shortcut`.

    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.block_layer = nn.Sequential(
            nn.BatchNorm2d(in_channels),
            nn.ReLU(),
            nn.Conv2d(in_channels, out_channels, 3, padding=1),  # full resolution: the stride comes second
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, 3, stride=stride, padding=1),
        )
        self.use_residual = stride != 1 or in_channels != out_channels
        res_conv_layer = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride))]
        self.res_conv = nn.Sequential(*(res_conv_layer if self.use_residual else []))  # empty: passes x through

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return block_layer(x) + res_conv(x)."""
        out = self.block_layer(x)
        out += self.res_conv(x)
        return out


class SeedWideResidualBlock(nn.Module):
    """Seed 003's `WideResidualBlock`: `num_blocks` SeedWideBlocks, the first one changing channels and stride."""

    def __init__(self, in_channels: int, out_channels: int, num_blocks: int, init_stride: int) -> None:
        super().__init__()
        layers = [SeedWideBlock(in_channels, out_channels, init_stride)]
        layers += [SeedWideBlock(out_channels, out_channels, 1) for _ in range(num_blocks - 1)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the blocks applied in turn."""
        return self.layers(x)


class SeedWideResNet(nn.Module):
    """Seed 003's `MyWideResNet28_10` with depth and widen_factor as arguments (28, 10: the seed's, 36,489,290 weights).

    The layers and their names are the seed's, so its state dicts load; 32x32 inputs only (`AvgPool2d(8)`).
    Explained in notebooks/11_ffcv_cifar.ipynb.
    """

    def __init__(self, depth: int = 28, widen_factor: int = 10, num_classes: int = 10) -> None:
        super().__init__()
        if depth < 10 or (depth - 4) % 6 or widen_factor < 1:
            raise ValueError(f"need depth = 6n + 4 >= 10 and widen_factor >= 1, got {depth} and {widen_factor}")
        n, w = (depth - 4) // 6, [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        self.model = nn.Sequential(
            nn.Conv2d(3, w[0], 3, padding=1),
            SeedWideResidualBlock(w[0], w[1], n, 1),
            SeedWideResidualBlock(w[1], w[2], n, 2),
            SeedWideResidualBlock(w[2], w[3], n, 2),
            nn.BatchNorm2d(w[3], momentum=0.9),  # torch's momentum weighs the new batch: 0.9 keeps 10 % of the old
            nn.ReLU(),
            nn.AvgPool2d(8),
        )
        self.linear = nn.Linear(w[3], num_classes)
        self.depth, self.widen_factor = depth, widen_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for a float batch (N, 3, 32, 32)."""
        x = self.model(x)
        return self.linear(x.view(x.shape[0], -1))

    def extra_repr(self) -> str:
        return f"seed WRN-{self.depth}-{self.widen_factor}"


def conv_macs(model: nn.Module, x: torch.Tensor) -> int:
    """Return the multiply-adds of `model`'s Conv2d layers in one forward pass of `x` (counted from their outputs).

    The forward runs without gradients in the model's current mode. Explained in notebooks/11_ffcv_cifar.ipynb.
    """
    total = 0

    def count(conv: nn.Conv2d, _: Any, out: torch.Tensor) -> None:
        nonlocal total
        total += out.numel() * conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv2d)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return total
