"""Nets from config: shapes, heads, hydra sharing, optimiser schedule and clipping, device errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.net import ConvNet, ConvNetConfig, Hydra, HydraConfig, MLP, MLPConfig, Optim, OptimConfig, resolve_device
from slm_lab_like.agents.schedule import Schedule
from slm_lab_like.agents.net.base import SIGMOID_TANH_MIN, Tanh
from slm_lab_like.agents.net.linear import Linear, log_softmax_rows, narrow


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


def test_convnet_paddings_keep_a_small_board_through_its_layers() -> None:
    """Kernel 3 with padding 1 keeps connect four's 6x7 planes at 6x7 through every layer; without padding two
    layers leave 2x3, and the problem check counts the padding as the layers do."""
    config = ConvNetConfig(channels=[16, 16, 16], kernels=[3, 3, 3], strides=[1, 1, 1], paddings=[1, 1, 1],
                           hid_layers=[32])
    board = gym.spaces.Box(0.0, 1.0, (2, 6, 7), np.float32)
    assert ConvNet.config_problem(config, [board]) is None
    net = ConvNet(config, [(2, 6, 7)], [[7, 1]])
    assert net.conv(torch.zeros(5, 2, 6, 7)).shape == (5, 16 * 6 * 7)
    logits, value = net(torch.zeros(5, 2, 6, 7))
    assert logits.shape == (5, 7) and value.shape == (5, 1)
    assert ConvNet.config_problem(ConvNetConfig(channels=[16] * 3, kernels=[3] * 3, strides=[1] * 3, hid_layers=[32]),
                                  [board])[0] == "kernels"
    image = gym.spaces.Box(0, 255, (3, 20, 20), np.uint8)  # 20 -> 13 -> 6: an unpadded third kernel of 8 does not fit
    assert ConvNet.config_problem(ConvNetConfig(channels=[8] * 3, kernels=[8] * 3, strides=[1] * 3, paddings=[0, 0, 1]),
                                  [image]) is None


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


@settings(max_examples=40, deadline=None)
@given(rows=st.sampled_from([1, 2, 3, 31, 32, 33, 300]), inp=st.sampled_from([1, 2, 4, 31, 32, 64]),
       out=st.sampled_from([1, 2, 6, 31, 32, 64]), bias=st.booleans(), input_grad=st.booleans())
def test_the_lab_linear_is_torchs_linear_in_values_and_gradients(rows: int, inp: int, out: int, bias: bool,
                                                                 input_grad: bool) -> None:
    """Whichever order its products take (narrow results are computed transposed), the lab's Linear gives
    nn.Linear's outputs and gradients to float32 rounding, with the same parameters and state dict, with and
    without autograd; shapes straddle the narrow bound on every side of every product."""
    gen = torch.Generator().manual_seed(rows * 10_000 + inp * 100 + out)
    ours, ref = Linear(inp, out, bias=bias), torch.nn.Linear(inp, out, bias=bias)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(rows, inp, generator=gen)
    a, b = x.clone().requires_grad_(input_grad), x.clone().requires_grad_(input_grad)
    ya, yb = ours(a), ref(b)
    assert ya.shape == yb.shape == (rows, out)
    torch.testing.assert_close(ya, yb)
    weights = torch.randn(rows, out, generator=gen)
    (ya * weights).sum().backward()
    (yb * weights).sum().backward()
    for p, q in zip(ours.parameters(), ref.parameters()):
        assert p.grad is not None and q.grad is not None
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-4)  # sums over up to 300 rows, reordered
    if input_grad:
        assert a.grad is not None and b.grad is not None
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), yb.detach())


def test_the_lab_linear_takes_a_narrow_products_transpose_and_other_shapes_as_torch_does() -> None:
    """The order is the point: a 2-logit head's output over many rows comes transposed (a view of an (out, rows)
    tensor), a wide one row-major; batches of other ranks go through torch's own linear."""
    head, wide = Linear(64, 2), Linear(64, 64)
    x = torch.randn(4096, 64)
    assert head(x).t().is_contiguous() and not head(x).is_contiguous()
    assert wide(x).is_contiguous()
    assert head(torch.randn(5, 7, 64)).shape == (5, 7, 2)
    assert narrow(4096, 2) and narrow(64, 4) and not narrow(4096, 1) and not narrow(4096, 32) and not narrow(2, 4)


@pytest.mark.parametrize("shape", [(4096, 2), (5, 3), (300, 31), (300, 32), (2, 6)])
def test_the_row_log_softmax_is_torchs_with_its_gradient(shape: tuple[int, int]) -> None:
    """Few categories are taken along the transposed layout; the values and gradients are torch's log-softmax's."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) * 4
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    la, lb = log_softmax_rows(a), torch.log_softmax(b, dim=-1)
    torch.testing.assert_close(la, lb)
    w = torch.linspace(-2, 2, x.numel()).reshape(shape)
    (la * w).sum().backward()
    (lb * w).sum().backward()
    assert a.grad is not None and b.grad is not None
    torch.testing.assert_close(a.grad, b.grad)
