"""Networks built from the spec's `net` section: MLP, ConvNet, Hydra; plus the optimiser wrapper."""
from slm_lab_like.agents.net.base import Net, NetConfig, Optim, OptimConfig, net_problem, resolve_device
from slm_lab_like.agents.net.conv import ConvNet, ConvNetConfig
from slm_lab_like.agents.net.hydra import Hydra, HydraConfig
from slm_lab_like.agents.net.mlp import MLP, MLPConfig

__all__ = ["ConvNet", "ConvNetConfig", "Hydra", "HydraConfig", "MLP", "MLPConfig", "Net", "NetConfig", "Optim",
           "OptimConfig", "net_problem", "resolve_device"]
