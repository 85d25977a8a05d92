"""SLM Lab's schedule, optimiser and net blocks as this lab's values. SLM Lab's behaviour is reproduced, quirks
included, and each line says where that differs from what the spec seems to say (SLM Lab 5.3, master 96be3938)."""
from __future__ import annotations

from typing import Any

from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.slmlab.record import Block, number

ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "selu": "selu", "elu": "elu", "leakyrelu": "leaky_relu",
               "leaky_relu": "leaky_relu", "gelu": "gelu", "sigmoid": "sigmoid", "silu": "silu"}
ACTIVATION_NAMES = ", ".join(sorted(set(ACTIVATIONS.values())))
ARC_LAYERS = ("LazyLinear", "Linear")
# torch's defaults, which SLM Lab's optim_spec leaves in place (this lab's own defaults differ: Adam eps 1e-5)
OPTIM_DEFAULTS: dict[str, dict[str, float]] = {
    "Adam": {"lr": 1e-3, "eps": 1e-8, "weight_decay": 0.0},
    "AdamW": {"lr": 1e-3, "eps": 1e-8, "weight_decay": 0.01},
    "RMSprop": {"lr": 1e-2, "eps": 1e-8, "weight_decay": 0.0, "alpha": 0.99, "momentum": 0.0},
    "SGD": {"weight_decay": 0.0, "momentum": 0.0},
}


def schedule(block: Block, key: str) -> tuple[Any, str]:
    """An SLM Lab `*_spec` schedule (frames, as SLM Lab's clock counts them) as a number or a schedule here, and a
    note on SLM Lab's quirks where they decide the value."""
    spec = block.peek(key)
    if spec is None:
        return None, ""
    where = block.at(key)
    if not isinstance(spec, dict):
        raise SpecError(where, "expected a schedule object {name, start_val, end_val, start_step, end_step}")
    name = spec.get("name")
    start = number(spec.get("start_val"), f"{where}.start_val")
    unknown = set(spec) - {"name", "start_val", "end_val", "start_step", "end_step"}
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", "this SLM Lab schedule key has no counterpart in this lab")
    end = number(spec["end_val"], f"{where}.end_val") if spec.get("end_val") is not None else None
    note = ""
    if not end:  # SLM Lab's VarScheduler takes a falsy end_val (0) as unset: start_val throughout
        end, note = start, "SLM Lab takes end_val 0 as unset: start_val throughout"
    if name == "no_decay":
        return float(end), note or "no_decay: SLM Lab's end_val throughout"
    if name != "linear_decay":
        raise SpecError(f"{where}.name", f'"{name}": only linear_decay and no_decay schedules have a counterpart here')
    begin = number(spec.get("start_step", 0), f"{where}.start_step", True)
    stop = number(spec.get("end_step", 0), f"{where}.end_step", True)
    if end > start or stop <= begin:  # SLM Lab's max(slope * step + start, end) is end_val at once
        return float(end), note or "SLM Lab's linear_decay is end_val at once when it rises or has no length"
    if end == start:
        return float(start), note
    return ({"name": "linear", "start": float(start), "end": float(end), "frames": stop - begin, "start_frame": begin},
            note or "frames, as SLM Lab counts them")


def optim(block: Block, key: str, scheduler: Any) -> dict[str, Any]:
    """An SLM Lab `optim_spec` (torch's defaults where it is silent) as an `optim` block here, the learning rate
    made a schedule when an `lr_scheduler_spec` LinearToZero goes with it."""
    spec = block.peek(key)
    where = block.at(key)
    if not isinstance(spec, dict) or spec.get("name") not in OPTIM_DEFAULTS:
        raise SpecError(f"{where}.name", f"{spec.get('name') if isinstance(spec, dict) else spec}: the optimisers "
                                         f"here are {', '.join(OPTIM_DEFAULTS)}")
    name = spec["name"]
    out: dict[str, Any] = {"name": name, **OPTIM_DEFAULTS[name]}
    for k, v in spec.items():
        if k == "name":
            continue
        if k in ("lr", "eps", "weight_decay", "alpha", "momentum"):
            out[k] = number(v, f"{where}.{k}")
        elif k == "betas" and list(v) == [0.9, 0.999]:
            continue
        elif k == "amsgrad" and not v:
            continue
        else:
            raise SpecError(f"{where}.{k}", f"{v}: this optimiser setting has no counterpart here")
    if "lr" not in out:
        raise SpecError(f"{where}.lr", "SGD needs an lr")
    if scheduler is not None:
        out["lr"] = {"name": "linear", "start": out["lr"], "end": 0.0, "frames": scheduler}
    return out


def lr_frames(block: Block, key: str) -> int | None:
    """The frames of an `lr_scheduler_spec` LinearToZero (the lr goes linearly to 0 over them), None without one."""
    spec = block.peek(key)
    if spec is None:
        return None
    if not isinstance(spec, dict) or spec.get("name") != "LinearToZero" or set(spec) - {"name", "frame"}:
        raise SpecError(block.at(key), "only LinearToZero {frame} has a counterpart here (a linear lr schedule)")
    return number(spec.get("frame"), f"{block.at(key)}.frame", True)


def activation(block: Block) -> str:
    """The activation hid_layers_activation names (SLM Lab's default relu), as this lab names it; SpecError at the
    key for one without a counterpart here."""
    act = str(block.peek("hid_layers_activation", "relu"))
    if act.lower() not in ACTIVATIONS:
        raise SpecError(block.at("hid_layers_activation"), f'"{act}": the activations here are {ACTIVATION_NAMES}')
    return ACTIVATIONS[act.lower()]


def body_layers(block: Block) -> tuple[list[int], str]:
    """(hidden widths, activation) of an MLPNet's hid_layers or a TorchArcNet whose arc is one Sequential of
    Linear layers each followed by the same activation; SpecError at the arc's key path for any other graph."""
    if block.peek("type") == "MLPNet":
        return list(block.peek("hid_layers", [])), activation(block)
    arc = block.peek("arc")
    where = block.at("arc")
    if not isinstance(arc, dict):
        raise SpecError(where, "expected the arc inline (an arc_file has no counterpart here)")
    modules = arc.get("modules")
    graph = arc.get("graph", {})
    if not isinstance(modules, dict) or len(modules) != 1:
        raise SpecError(f"{where}.modules", "only an arc of one module, a Sequential of Linear and activation layers, "
                                            "has a counterpart here")
    (mod_name, module), = modules.items()
    if graph != {"input": "x", "modules": {mod_name: ["x"]}, "output": mod_name}:
        raise SpecError(f"{where}.graph", f"only the plain graph input x -> {mod_name} -> output has a counterpart here")
    if not isinstance(module, dict) or list(module) != ["Sequential"] or not isinstance(module["Sequential"], list):
        raise SpecError(f"{where}.modules.{mod_name}", "only a Sequential of Linear and activation layers has a "
                                                         "counterpart here")
    return _sequential(module["Sequential"], f"{where}.modules.{mod_name}.Sequential")


def _sequential(layers: list[Any], where: str) -> tuple[list[int], str]:
    widths: list[int] = []
    acts: list[str] = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict) or len(layer) != 1:
            raise SpecError(f"{where}[{i}]", "expected one layer {Class: args}")
        (cls, args), = layer.items()
        expect_linear = i % 2 == 0
        if expect_linear and cls in ARC_LAYERS and isinstance(args, dict) and "out_features" in args \
                and set(args) <= {"out_features", "in_features", "bias"} and args.get("bias", True):
            widths.append(number(args["out_features"], f"{where}[{i}]", True))
        elif not expect_linear and str(cls).lower() in ACTIVATIONS and not args:
            acts.append(ACTIVATIONS[str(cls).lower()])
        else:
            raise SpecError(f"{where}[{i}]", f"{cls}: only Linear layers, each followed by one activation "
                                             f"({ACTIVATION_NAMES}), have a counterpart here")
    if not widths or len(acts) != len(widths) or len(set(acts)) != 1:
        raise SpecError(where, "expected Linear layers each followed by the same activation")
    return widths, acts[0]
