"""Networks built from the spec's `net` section: MLP, ConvNet, Hydra; plus the optimiser wrapper."""
from agents.net.base import Net, NetConfig, Optim, OptimConfig, net_problem, resolve_device
from agents.net.conv import ConvNet, ConvNetConfig
from agents.net.hydra import Hydra, HydraConfig
from agents.net.mlp import MLP, MLPConfig

__all__ = ["ConvNet", "ConvNetConfig", "Hydra", "HydraConfig", "MLP", "MLPConfig", "Net", "NetConfig", "Optim",
           "OptimConfig", "net_problem", "resolve_device"]
