"""What every net shares: its config (layers, activation, init, optimiser, grad clipping, device) and helpers."""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Literal, Sequence, TypedDict

import gymnasium as gym
import torch
from torch import nn

from slm_lab_like.agents.base import space_text
from slm_lab_like.agents.net.linear import Linear
from slm_lab_like.agents.schedule import Schedule, schedules_problem, value_at

SIGMOID_TANH_MIN = 32768  # elements from which a CPU tanh goes through the sigmoid (below, its extra calls cost more)


def _sigmoid_tanh(x: torch.Tensor) -> torch.Tensor:
    return x.mul(2).sigmoid_().mul_(2).sub_(1)


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) as 2 sigmoid(2x) - 1 (within 2e-7 of it in float32), its gradient from the output as tanh's is."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = _sigmoid_tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class Tanh(nn.Module):
    """The tanh activation. On CPU, batches of SIGMOID_TANH_MIN elements or more go through the sigmoid: torch's
    CPU tanh costs about twice a sigmoid and a scaling (1.1 ms against 0.4 ms for 4,096 x 64 floats on one thread;
    with the gradient 1.6 ms against 1.2 ms, and level near 512 x 64), and in a tanh MLP's PPO epochs it was half of
    the forward pass. Elsewhere torch's own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda or x.numel() < SIGMOID_TANH_MIN:
            return torch.tanh(x)
        if not torch.is_grad_enabled():
            return _sigmoid_tanh(x)
        return _SigmoidTanh.apply(x)


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU, "gelu": nn.GELU,
    "sigmoid": nn.Sigmoid, "selu": nn.SELU, "silu": nn.SiLU,
}
Activation = Literal["tanh", "relu", "elu", "leaky_relu", "gelu", "sigmoid", "selu", "silu"]


@dataclass
class OptimConfig:
    """Optimiser and learning rate (a number or a schedule over agent frames)."""

    name: Literal["Adam", "AdamW", "RMSprop", "SGD"] = "Adam"
    lr: float | Schedule = field(default=1e-3, metadata={"min": 0.0})
    eps: float = field(default=1e-5, metadata={"min": 0.0})
    weight_decay: float = field(default=0.0, metadata={"min": 0.0})
    alpha: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    momentum: float = field(default=0.0, metadata={"min": 0.0})


@dataclass
class NetConfig:
    """Fields common to every net: hidden layers, activation, init, optimiser, grad clipping and device.

    `init_gain`: with the orthogonal init, one gain for every layer, the output heads included (SLM Lab's
    `init_fn`); None: sqrt 2 in the hidden layers, 0.01 for a policy head and 1 for a value head.
    `critic_optim`: the critic's own optimiser (its own learning rate, its own gradient clipping) when an
    actor-critic's nets are separate ("same": its own, with `optim`'s settings); None: one optimiser for both."""

    hid_layers: list[int] = field(default_factory=lambda: [64, 64])
    activation: Activation = "tanh"
    init: Literal["orthogonal", "default"] = "orthogonal"
    init_gain: float | None = field(default=None, metadata={"min": 0.0})
    shared: bool = False
    optim: OptimConfig = field(default_factory=OptimConfig)
    critic_optim: OptimConfig | Literal["same"] | None = None
    clip_grad_norm: float | None = field(default=0.5, metadata={"min": 0.0})
    gpu: bool = False
    torch_threads: int | None = field(default=1, metadata={"min": 1})


def widths_problem(key: str, widths: Sequence[int], what: str = "layer widths") -> tuple[str, str] | None:
    """(key, reason) when a list of layer widths (or other sizes) holds one below 1, else None."""
    if all(w >= 1 for w in widths):
        return None
    return key, f"expected {what} >= 1; got {list(widths)}"


class Net(nn.Module):
    """Base of the registered nets: which observations and settings a net takes, asked before it is built.

    Subclasses are built as Net(config, in_shapes, out_dims, out_gains): one input shape and one list of
    head widths per observation/action signature of the agent; forward(x, sig) returns the heads' outputs.
    """

    Config: ClassVar[type] = NetConfig

    @classmethod
    def observation_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> str | None:
        """Why this net cannot take these observations (one space per signature of the agent), or None."""
        for space in observation_spaces:
            if not isinstance(space, gym.spaces.Box):
                return f"net {cls.__name__} takes Box observations; got {space_text(space)}"
        return None

    @classmethod
    def config_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> tuple[str, str] | None:
        """(field, one-line reason) for settings the build or training would fail on with these observations
        (base: hidden widths below 1, schedules that cannot be evaluated), or None."""
        return widths_problem("hid_layers", config.hid_layers) or schedules_problem(config)


def one_signature_problem(name: str, observation_spaces: Sequence[gym.Space]) -> str | None:
    """Why a net with one input and one output cannot serve these signatures (one observation space each)."""
    n = len(observation_spaces)
    if n <= 1:
        return None
    distinct: list[gym.Space] = []
    for space in observation_spaces:
        if not any(space == d for d in distinct):
            distinct.append(space)
    hint = "use the Hydra net (one head per signature)"
    if len(distinct) > 1:
        seen = ", ".join(space_text(d) for d in distinct[:3]) + (", ..." if len(distinct) > 3 else "")
        return (f"net {name} has one input but the agent's bodies see {len(distinct)} different observation spaces "
                f"({seen}); {hint}")
    return f"net {name} has one output but the agent's bodies have {n} different action spaces; {hint}"


def net_problem(net_cls: type, config: Any, observation_spaces: Sequence[gym.Space]) -> tuple[str, str] | None:
    """(field of the net spec, reason) when `net_cls` cannot be built for these observations or on this machine, else
    None."""
    if getattr(config, "gpu", False) and not torch.cuda.is_available():
        return "gpu", "true but no CUDA device is available here; set it to false"
    if not (isinstance(net_cls, type) and issubclass(net_cls, Net)):
        return None
    problem = net_cls.observation_problem(config, observation_spaces)
    if problem:
        return "name", problem
    return net_cls.config_problem(config, observation_spaces)


def resolve_device(config: NetConfig) -> torch.device:
    """CUDA when `net.gpu` is true and present; a ValueError naming `net.gpu` when asked for and absent."""
    if config.gpu:
        if not torch.cuda.is_available():
            raise ValueError("net.gpu is true but no CUDA device is available; set net.gpu to false")
        return torch.device("cuda")
    if config.torch_threads is not None:
        torch.set_num_threads(config.torch_threads)
    return torch.device("cpu")


def mlp(in_dim: int, layers: Sequence[int], activation: str) -> tuple[nn.Sequential, int]:
    """A stack of Linear+activation layers and its output width."""
    mods: list[nn.Module] = []
    for width in layers:
        mods += [Linear(in_dim, width), ACTIVATIONS[activation]()]
        in_dim = width
    return nn.Sequential(*mods), in_dim


def init_layers(module: nn.Module, init: str, gain: float = math.sqrt(2)) -> None:
    """Orthogonal weights (given gain) and zero biases for every Linear/Conv in `module`; 'default' keeps torch's."""
    if init != "orthogonal":
        return
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(m.weight, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def hidden_gain(config: NetConfig) -> float:
    """The orthogonal init's gain of the hidden layers: `init_gain`, else sqrt 2."""
    return math.sqrt(2) if config.init_gain is None else config.init_gain


def head_gains(config: NetConfig, gains: Sequence[float] | None, heads: int) -> Sequence[float] | None:
    """The output heads' gains: `init_gain` for each when set, else the algorithm's (e.g. 0.01 policy, 1 value)."""
    return gains if config.init_gain is None else [config.init_gain] * heads


class OutHeads(nn.Module):
    """One Linear output per head (e.g. policy logits and a value), each with its own init gain."""

    def __init__(self, in_dim: int, out_dims: Sequence[int], init: str, gains: Sequence[float] | None) -> None:
        super().__init__()
        self.heads = nn.ModuleList(Linear(in_dim, d) for d in out_dims)
        for i, head in enumerate(self.heads):
            init_layers(head, init, 1.0 if gains is None else gains[i])

    def forward(self, h: torch.Tensor) -> list[torch.Tensor]:
        return [head(h) for head in self.heads]


def flat_dim(shape: Sequence[int]) -> int:
    """Number of features of a flattened observation of `shape`."""
    return int(math.prod(shape)) if len(shape) else 1


class _FastKwargs(TypedDict, total=False):
    """The kernel choice handed to torch's optimizers."""

    fused: bool
    foreach: bool


class Optim:
    """An optimiser with a learning-rate schedule and gradient clipping, stepped on a loss."""

    def __init__(self, params: Iterable[torch.Tensor], config: OptimConfig, clip_grad_norm: float | None) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.config = config
        self.clip = clip_grad_norm
        lr = value_at(config.lr, 0)
        fast = self._fast_kwargs()
        if config.name == "Adam":
            self.opt: torch.optim.Optimizer = torch.optim.Adam(self.params, lr=lr, eps=config.eps,
                                                               weight_decay=config.weight_decay, **fast)
        elif config.name == "AdamW":
            self.opt = torch.optim.AdamW(self.params, lr=lr, eps=config.eps, weight_decay=config.weight_decay,
                                         **fast)
        elif config.name == "RMSprop":
            self.opt = torch.optim.RMSprop(self.params, lr=lr, alpha=config.alpha, eps=config.eps,
                                           weight_decay=config.weight_decay, momentum=config.momentum,
                                           foreach=True)
        else:
            self.opt = torch.optim.SGD(self.params, lr=lr, momentum=config.momentum,
                                       weight_decay=config.weight_decay, **fast)

    def _fast_kwargs(self) -> _FastKwargs:
        """Fused kernels when every parameter is a float32 tensor on CPU or CUDA (4x faster steps for small nets)."""
        ok = all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda") for p in self.params)
        return _FastKwargs(fused=True) if ok else _FastKwargs(foreach=True)

    def set_frame(self, frame: int) -> float:
        """Set the scheduled learning rate for `frame`; returns it."""
        lr = value_at(self.config.lr, frame)
        for group in self.opt.param_groups:
            group["lr"] = lr
        return lr

    def step(self, loss: torch.Tensor) -> torch.Tensor:
        """One gradient step on `loss`, with the grad norm clipped when configured; returns the norm before
        clipping (a tensor: read it only when reporting). zero_grad and clip_grad_norm_ as torch computes them
        (the same numbers), without their wrappers' overhead: together a fifth of a small net's step."""
        self.zero_grad()
        loss.backward()
        return self.apply()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def apply(self) -> torch.Tensor:
        """Clip the gradients in place (when configured) and step; the norm before clipping."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads:
            self.opt.step()
            return torch.zeros(())
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        if self.clip is not None:
            torch._foreach_mul_(grads, torch.clamp(self.clip / (norm + 1e-6), max=1.0))
        self.opt.step()
        return norm

    @property
    def lr(self) -> float:
        """The learning rate of the last step."""
        return float(self.opt.param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        return self.opt.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.opt.load_state_dict(state)


class SplitOptim:
    """Optimisers of disjoint parameter sets stepped on one loss, each clipping its own gradient norm: an actor and
    a critic trained apart (their losses touch only their own parameters) in one backward pass."""

    def __init__(self, parts: Sequence[Optim]) -> None:
        self.parts = list(parts)

    def set_frame(self, frame: int) -> float:
        """Set every part's scheduled learning rate; returns the first's (the actor's)."""
        return [part.set_frame(frame) for part in self.parts][0]

    def step(self, loss: torch.Tensor) -> torch.Tensor:
        """One backward pass, then each part clips and steps; the norm over all parts before clipping."""
        for part in self.parts:
            part.zero_grad()
        loss.backward()
        return torch.linalg.vector_norm(torch.stack([part.apply() for part in self.parts]))

    @property
    def lr(self) -> float:
        return self.parts[0].lr

    def state_dict(self) -> dict[str, Any]:
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Every part's state; or one optimiser's over the parts' parameters in order (an agent file from before
        the parts were apart), shared out among them."""
        parts = state["parts"] if "parts" in state else split_state(state, [len(part.params) for part in self.parts])
        for part, sub in zip(self.parts, parts):
            part.load_state_dict(sub)


def split_state(state: dict[str, Any], sizes: Sequence[int]) -> list[dict[str, Any]]:
    """A one-group torch optimiser state over consecutive parameter blocks of `sizes`, as one state per block."""
    group = state["param_groups"][0]
    ids, parts, start = group["params"], [], 0
    for n in sizes:
        mine = ids[start:start + n]
        parts.append({"state": {i: state["state"][k] for i, k in enumerate(mine) if k in state["state"]},
                      "param_groups": [{**group, "params": list(range(n))}]})
        start += n
    return parts
