import pytest
import torch

from fastloops_helpers.models import MLP, WideResNet, count_parameters


def trains(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = 5) -> bool:
    """Return whether `steps` SGD steps on one batch lower the model's loss."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses[-1] < losses[0]


def test_mlp_is_the_seeds_shape():
    model = MLP()
    assert model(torch.randn(5, 93)).shape == (5, 9)
    assert count_parameters(model) == 93 * 256 + 256 + 256 * 256 + 256 + 256 * 9 + 9


@pytest.mark.parametrize("depth,width", [(10, 1), (16, 2)])
def test_wide_resnet_outputs_logits_and_trains(depth, width):
    torch.manual_seed(0)
    model = WideResNet(depth, width, num_classes=10)
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    assert model(x).shape == (4, 10)
    assert trains(model, x, y)


def test_wrn_28_10_has_the_papers_parameter_count():
    # Zagoruyko & Komodakis report 36.5M parameters for WRN-28-10
    assert 36.0e6 < count_parameters(WideResNet(28, 10)) < 37.0e6


def test_bad_depth_and_width_are_refused():
    with pytest.raises(ValueError, match="6n \\+ 4.*got 27"):
        WideResNet(27, 10)
    with pytest.raises(ValueError, match="widen_factor must be >= 1, got 0"):
        WideResNet(28, 0)


def test_the_seeds_wrn_28_10_has_its_parameters_and_the_difference_is_its_conv_biases():
    from fastloops_helpers.models import SeedWideResNet

    seed, project = SeedWideResNet(28, 10), WideResNet(28, 10)
    convs = [m for m in seed.modules() if isinstance(m, torch.nn.Conv2d)]
    assert count_parameters(seed) == 36_489_290 and count_parameters(project) == 36_479_194
    assert len(convs) == 28 and count_parameters(seed) - count_parameters(project) == sum(c.bias.numel() for c in convs)


def test_the_seeds_wrn_keeps_its_layer_names_stride_and_momentum():
    from fastloops_helpers.models import SeedWideBlock, SeedWideResNet

    keys = set(SeedWideResNet(16, 2).state_dict())  # the seed's attribute names: its state dicts load
    assert {"model.0.bias", "model.2.layers.0.res_conv.0.0.weight", "model.4.running_mean", "linear.weight"} <= keys
    assert not any(k.startswith("model.2.layers.1.res_conv") for k in keys)  # same shape, stride 1: no 1x1 conv
    block = SeedWideBlock(16, 32, 2)
    assert block.block_layer[2].stride == (1, 1) and block.block_layer[5].stride == (2, 2)  # stride on the second
    assert block(torch.randn(2, 16, 32, 32)).shape == (2, 32, 16, 16)
    assert SeedWideResNet(10, 1).model[4].momentum == 0.9
    with pytest.raises(ValueError, match="got 27 and 10"):
        SeedWideResNet(27, 10)


def test_the_seeds_wrn_trains_and_its_biases_do_not_change_its_training_mode_output():
    from fastloops_helpers.models import SeedWideResNet

    torch.manual_seed(0)
    model, x = SeedWideResNet(10, 1), torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        before = model(x)
        for conv in (m for m in model.modules() if isinstance(m, torch.nn.Conv2d)):
            conv.bias.normal_()
        assert torch.allclose(before, model(x), atol=1e-4)  # every bias reaches a BatchNorm, which cancels it
    assert trains(model, x, torch.arange(8) % 10)


def test_conv_macs_counts_each_output_and_the_seeds_extra_strided_convs():
    from fastloops_helpers.models import SeedWideResNet, conv_macs

    one = torch.zeros(1, 3, 32, 32)
    assert conv_macs(torch.nn.Conv2d(3, 8, 3, padding=1), one) == 32 * 32 * 8 * 3 * 9
    assert conv_macs(torch.nn.Conv2d(4, 8, 1, groups=2), torch.zeros(1, 4, 5, 5)) == 25 * 8 * 2
    # WRN-16-2: the first conv of the strided blocks runs at 32x32 (32 -> 64) and 16x16 (64 -> 128), not a quarter
    extra = 9 * 32 * 64 * (32**2 - 16**2) + 9 * 64 * 128 * (16**2 - 8**2)
    assert conv_macs(SeedWideResNet(16, 2), one) - conv_macs(WideResNet(16, 2), one) == extra
