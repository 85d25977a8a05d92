"""Nets from config: shapes, heads, hydra sharing, optimiser schedule and clipping, device errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from slm_lab_like.agents.net import ConvNet, ConvNetConfig, Hydra, HydraConfig, MLP, MLPConfig, Optim, OptimConfig, resolve_device
from slm_lab_like.agents.schedule import Schedule
from slm_lab_like.agents.net.base import SIGMOID_TANH_MIN, Tanh


def test_mlp_heads_and_shapes() -> None:
    net = MLP(MLPConfig(hid_layers=[32, 16]), [(4,)], [[2, 1]], [0.01, 1.0])
    logits, value = net(torch.randn(5, 4))
    assert logits.shape == (5, 2) and value.shape == (5, 1)
    assert [m.out_features for m in net.body if isinstance(m, torch.nn.Linear)] == [32, 16]
    # orthogonal init with gain 0.01 keeps the policy head's rows tiny (rows are orthonormal * gain)
    w = net.out.heads[0].weight
    np.testing.assert_allclose((w @ w.T).detach().numpy(), 1e-4 * np.eye(2), atol=1e-7)


def test_mlp_flattens_and_rejects_several_signatures() -> None:
    net = MLP(MLPConfig(hid_layers=[8]), [(2, 3)], [[4]])
    assert net(torch.randn(7, 2, 3))[0].shape == (7, 4)
    with pytest.raises(ValueError, match="Hydra"):
        MLP(MLPConfig(), [(4,), (6,)], [[2], [3]])


@pytest.mark.parametrize("shape", [(84, 84, 4), (4, 84, 84), (84, 84)])
def test_convnet_image_layouts(shape: tuple[int, ...]) -> None:
    net = ConvNet(ConvNetConfig(hid_layers=[64]), [shape], [[6, 1]])
    x = torch.randint(0, 255, (3,) + shape, dtype=torch.uint8)
    q, v = net(x)
    assert q.shape == (3, 6) and v.shape == (3, 1)
    assert torch.isfinite(q).all()


def test_hydra_shares_trunk_and_keeps_heads_apart() -> None:
    net = Hydra(HydraConfig(in_layers=[16], hid_layers=[32]), [(4,), (6,)], [[2], [3]])
    out0, out1 = net(torch.randn(5, 4), 0)[0], net(torch.randn(5, 6), 1)[0]
    assert out0.shape == (5, 2) and out1.shape == (5, 3)
    out0.sum().backward()
    trunk_grad = next(net.trunk.parameters()).grad
    assert trunk_grad is not None and trunk_grad.abs().sum() > 0
    assert all(p.grad is None for p in net.in_heads[1].parameters())
    assert all(p.grad is None for p in net.out_heads[1].parameters())
    assert next(net.in_heads[0].parameters()).grad is not None


def test_optim_lr_schedule_and_grad_clipping() -> None:
    net = MLP(MLPConfig(hid_layers=[8]), [(3,)], [[1]])
    cfg = OptimConfig(name="Adam", lr=Schedule("linear", start=1e-2, end=0.0, frames=100))
    opt = Optim(net.parameters(), cfg, clip_grad_norm=0.1)
    assert opt.set_frame(50) == pytest.approx(5e-3)
    assert opt.opt.param_groups[0]["lr"] == pytest.approx(5e-3)
    loss = (net(torch.randn(16, 3))[0] * 1000).sum()
    opt.step(loss)
    norm = torch.sqrt(sum((p.grad**2).sum() for p in net.parameters()))
    assert norm.item() == pytest.approx(0.1, rel=1e-4)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "SGD"])
def test_each_optimiser_reduces_a_loss(name: str) -> None:
    torch.manual_seed(0)
    net = MLP(MLPConfig(hid_layers=[16]), [(2,)], [[1]])
    opt = Optim(net.parameters(), OptimConfig(name=name, lr=0.01), clip_grad_norm=None)
    x, y = torch.randn(64, 2), torch.randn(64, 1)
    first = ((net(x)[0] - y) ** 2).mean().item()
    for _ in range(50):
        opt.step(((net(x)[0] - y) ** 2).mean())
    assert ((net(x)[0] - y) ** 2).mean().item() < first


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is absent")
def test_gpu_requested_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="net.gpu"):
        resolve_device(MLPConfig(gpu=True))


def test_cpu_device_sets_threads() -> None:
    before = torch.get_num_threads()
    try:
        assert resolve_device(MLPConfig(torch_threads=1)).type == "cpu"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_convnet_on_large_images_warns_once_of_its_dense_layer(caplog: pytest.LogCaptureFixture) -> None:
    """280x480 frames (PettingZoo's cooperative pong) under the Nature-DQN convs leave 111,104 features: a 57M-weight
    dense layer that trains at a few frames a second; the run is told why and what to change, once."""
    from slm_lab_like.agents.net import conv

    conv._warned.clear()
    with caplog.at_level("WARNING", logger="slm_lab_like"):
        ConvNet(ConvNetConfig(), [(84, 84, 4)], [[6]])
        assert not caplog.records
        for _ in range(2):  # torch's default init: an orthogonal one of 57M weights takes seconds, and warns the same
            ConvNet(ConvNetConfig(init="default"), [(280, 480, 3)], [[3]])
    assert len(caplog.records) == 1
    assert "111104 features of a 280x480 image" in caplog.text and "56.9M weights" in caplog.text


@pytest.mark.parametrize("shape", [(3, 5), (4096, 64), (64, 65), (512, 63)])
def test_the_lab_tanh_is_torchs_tanh_to_float32_rounding_with_its_gradient(shape: tuple[int, int]) -> None:
    """Large CPU batches go through the sigmoid (cheaper than torch's CPU tanh); values and gradients stay torch's
    tanh's to float32 rounding, and small batches are torch's own exactly."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * 3
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = Tanh()(a), torch.tanh(b)
    weights = torch.linspace(-1, 1, ya.numel()).reshape(shape)
    (ya * weights).sum().backward()
    (yb * weights).sum().backward()
    assert a.grad is not None and b.grad is not None
    if x.numel() < SIGMOID_TANH_MIN:
        assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)
    else:
        assert (ya - yb).abs().max() <= 2.5e-7 and (a.grad - b.grad).abs().max() <= 1e-6
    with torch.no_grad():
        assert torch.equal(Tanh()(x), ya.detach())
