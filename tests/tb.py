"""Reading TensorBoard event files back in tests, with TensorBoard's own reader."""
from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2


def scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the event files directly in `log_dir`: [(step, value), ...]."""
    ea = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    ea.Reload()
    return {tag: [(e.step, e.value) for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}


def hparams(log_dir: Path) -> dict[str, object]:
    """The hyperparameters written for TensorBoard's hparams view in `log_dir`."""
    ea = EventAccumulator(str(log_dir))
    ea.Reload()
    for content in ea.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("session_start_info"):
            out: dict[str, object] = {}
            for name, value in data.session_start_info.hparams.items():
                kind = value.WhichOneof("kind")
                out[name] = getattr(value, kind) if kind else None
            return out
    return {}
