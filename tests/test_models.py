import pytest
import torch

from fastloops_helpers.models import MLP, WideResNet, count_parameters


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
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_wrn_28_10_has_the_papers_parameter_count():
    # Zagoruyko & Komodakis report 36.5M parameters for WRN-28-10
    assert 36.0e6 < count_parameters(WideResNet(28, 10)) < 37.0e6


def test_bad_depth_and_width_are_refused():
    with pytest.raises(ValueError, match="6n \\+ 4.*got 27"):
        WideResNet(27, 10)
    with pytest.raises(ValueError, match="widen_factor must be >= 1, got 0"):
        WideResNet(28, 0)
