"""`run_lab.py enjoy DIR`: watch trained agents play a few episodes, deterministically and without learning.

Each env's first body is rendered (rgb frames): in a window when a display is available ($DISPLAY), otherwise
into a video file in DIR, enjoy_e<E>.mp4 with imageio-ffmpeg (the `render` extra) or enjoy_e<E>.gif. Envs that
cannot render rgb frames (remote envs, envs without "rgb_array" among their render modes, a missing renderer
such as pygame) get a one-line message and are played without pictures.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from slm_lab_like.envs.registry import adapter_for
from slm_lab_like.analysis.atomic import FILE_MODE, write_with
from slm_lab_like.experiment.evaluate import EVAL_SEED, load_space, play
from slm_lab_like.experiment.record import RecordError, read_trial
from slm_lab_like.spec.schema import EnvSpec

if TYPE_CHECKING:
    from slm_lab_like.envs.base import LabEnv
    from matplotlib.image import AxesImage
    from PIL.Image import Image as PILImage

log = logging.getLogger("slm_lab_like")
GIF_WIDTH = 320  # GIF frames are scaled down to this width at most, to keep memory and files small


def with_rgb(env: EnvSpec) -> tuple[EnvSpec, str | None, int]:
    """The env entry asking for rgb frames, or unchanged with the reason it cannot render; and its frame rate."""
    adapter = adapter_for(env)
    meta = adapter.metadata()
    fps = int(meta.get("render_fps") or 30)
    modes = list(meta.get("render_modes", []))
    if "rgb_array" not in modes:
        return env, (f"env {env.name}: a {adapter.kind} env that cannot render rgb frames (render modes: {modes}); "
                     "played without pictures"), fps
    return dataclasses.replace(env, kwargs={**env.kwargs, "render_mode": "rgb_array"}), None, fps


class Video:
    """Frames to a video file: mp4 through imageio-ffmpeg when installed, else an animated GIF (Pillow)."""

    def __init__(self, stem: Path, fps: int) -> None:
        self.fps = fps
        self.frames: list[PILImage]  # the GIF's frames (without imageio-ffmpeg)
        try:
            import imageio.v2 as iio
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            self.path, self.writer, self.frames = stem.with_suffix(".gif"), None, []
            return
        self.path = stem.with_suffix(".mp4")
        fd, self.tmp = tempfile.mkstemp(dir=stem.parent, prefix=f".{stem.name}.", suffix=".mp4")
        os.close(fd)
        self.writer = iio.get_writer(self.tmp, fps=fps, macro_block_size=1)

    def add(self, frame: np.ndarray) -> None:
        if self.writer is not None:
            self.writer.append_data(frame)
            return
        from PIL import Image

        img = Image.fromarray(frame)
        if img.width > GIF_WIDTH:
            img = img.resize((GIF_WIDTH, round(img.height * GIF_WIDTH / img.width)))
        self.frames.append(img.convert("P", palette=Image.Palette.ADAPTIVE))

    def close(self) -> Path:
        """Finish the file (atomically) and return its path."""
        if self.writer is not None:
            self.writer.close()
            os.chmod(self.tmp, FILE_MODE)
            os.replace(self.tmp, self.path)
        else:
            first, *rest = self.frames
            write_with(self.path, lambda tmp: first.save(tmp, format="GIF", save_all=True, append_images=rest,
                                                         duration=round(1000 / self.fps), loop=0))
        return self.path


class Window:
    """Frames shown live in a matplotlib window."""

    def __init__(self, title: str, fps: int) -> None:
        import matplotlib.pyplot as plt

        plt.switch_backend("TkAgg")
        self.plt, self.pause = plt, 1.0 / fps
        self.fig, self.ax = plt.subplots()
        self.ax.set_title(title)
        self.ax.axis("off")
        self.image: AxesImage | None = None

    def add(self, frame: np.ndarray) -> None:
        if self.image is None:
            self.image = self.ax.imshow(frame)
        else:
            self.image.set_data(frame)
        self.plt.pause(self.pause)

    def close(self) -> None:
        self.plt.close(self.fig)


def sink(show: bool, stem: Path, title: str, fps: int) -> Window | Video:
    """A window when asked for and one can open, else a video file at `stem`."""
    if show:
        try:
            return Window(title, fps)
        except Exception as err:  # no usable GUI toolkit: say so and write the video
            print(f"no window ({str(err).splitlines()[0]}); writing a video instead")
    return Video(stem, fps)


def enjoy(path: str | Path, episodes: int = 3, show: bool | None = None) -> list[Path]:
    """Play `episodes` episodes with the first picked session's agents, rendering each env's first body; shown
    in a window (`show`, default: $DISPLAY is set) or written as videos into `path`, whose paths are returned.
    Envs that cannot render are played without pictures: their first body's returns are printed all the same."""
    if episodes < 1:
        raise RecordError(f"--episodes must be at least 1, got {episodes}")
    record = read_trial(path, play=True)
    if not (os.environ.get("DISPLAY") if show is None else show):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws rgb frames off-screen, without a display
    index = record.sessions[0]
    spec = record.spec
    entries = [with_rgb(e) for e in spec.env]
    for _, reason, _ in entries:
        if reason:
            print(reason)
    spec = dataclasses.replace(spec, env=[e for e, _, _ in entries])
    seed = record.seeds[index] + EVAL_SEED
    space, label = load_space(spec, record.session_dir(index), seed)
    log.info("%s: enjoy session %d (%s), %d episode(s)", spec.name, index, label, episodes)
    sinks: dict[int, Window | Video] = {}
    try:
        space.env_space.reset(seed)
        renderers = _renderers(space.env_space.envs, [reason for _, reason, _ in entries])
        show = bool(os.environ.get("DISPLAY")) if show is None else show
        sinks = {e: sink(show, Path(path) / f"enjoy_e{e}", f"{spec.name}: {space.env_space.envs[e].name}",
                         entries[e][2]) for e in renderers}
        firsts = {e: slots[0] for e, slots in enumerate(space.env_space.slots) if slots}
        quota = {c: episodes if c in firsts.values() else 0 for c in space.coords}

        def on_step(stepped: list[int]) -> None:
            for e in stepped:
                if e in sinks:
                    sinks[e].add(np.asarray(renderers[e]()))  # an array already (checked above): no copy

        ends = play(space, quota, seed, on_step)
    finally:
        space.close()
    for e, c in firsts.items():
        returns = ", ".join(f"{end.ret:g}" for end in ends[c])
        print(f"{spec.name}: agent {spec.agent[c[0]].name} in {spec.env[e].name}: returns {returns}")
    return [p for p in (s.close() for s in sinks.values()) if p is not None]


def _renderers(envs: list[LabEnv], reasons: list[str | None]) -> dict[int, Callable[[], object]]:
    """The render call of each env that draws rgb frames; the others are named in one line each (no pictures)."""
    renderers: dict[int, Callable[[], object]] = {}
    for e, env in enumerate(envs):
        if reasons[e] is not None:
            continue
        try:
            frame = env.render()
        except Exception as err:  # a missing renderer (pygame) or a broken render: say so, play on
            print(f"env {env.name}: cannot render: {str(err).splitlines()[0]}; played without pictures")
            continue
        if isinstance(frame, np.ndarray) and frame.ndim == 3:
            renderers[e] = env.render
        else:
            print(f"env {env.name}: render gave no rgb frame; played without pictures")
    return renderers
