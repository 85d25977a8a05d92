"""Session checkpoints: every agent's state (optionally its replay memories), each env's clock, each body's
metric rows and the session's frame counters, committed at once by a small manifest.

In a session directory:
  checkpoint.json                the manifest, written last: the frame the checkpoint was taken at, the env
                                 clocks, how many metric rows of each body belong to it, its folder
  checkpoints/<id>/agent_a<A>.pt (and memory_a<A>.pt with meta.checkpoint_memory)
  metrics_a<A>_e<E>_b<B>.csv     every row so far, appended as episodes end (rows past the manifest's count
                                 are dropped on resume)
  train_a<A>.csv                 the agent's train stats, appended (cut back to the manifest's size on resume)
A checkpoint exists once the manifest names it: a write that fails or is killed half-way leaves the previous
manifest, its folder and its rows as they were (rows are only ever appended); folders the manifest does not
name are deleted after each commit. With meta.checkpoint_keep the manifest's `kept` lists every checkpoint's folder
and frames (summed over envs), this one's included, and those folders stay, their agents only (a kept memory
would cost a replay's size per checkpoint).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from slm_lab_like.envs.base import LabEnv
from slm_lab_like.aeb.space import PART_NOTE, AEBSpace
from slm_lab_like.analysis.atomic import write_json, write_with
from slm_lab_like.analysis.metrics import BodyMetrics, SessionMetrics, metrics_path, read_csv
from slm_lab_like.experiment.telemetry import train_path
from slm_lab_like.spec.coords import Coord

MANIFEST = "checkpoint.json"
FOLDER = "checkpoints"


@dataclass
class Checkpoint:
    """A committed checkpoint, as its manifest describes it.

    `body_frames`: each body's own frame count when it was taken (its unfinished episode is discarded on
    resume, so the body's next metric row lies that many frames further on than its own length says);
    `train_bytes`: the size of each agent's train CSV when it was taken (what a resume keeps of it);
    `resumes`: the checkpoints this session was resumed from so far, each {session_frame, body_frames};
    `kept`: with meta.checkpoint_keep, every checkpoint kept so far, this one's included, each {folder, frame}.
    """

    path: Path
    seed: int
    session_frame: int
    wall_time: float
    clocks: list[dict[str, Any]]
    rows: dict[Coord, int]
    body_frames: dict[Coord, int]
    train_bytes: dict[int, int]
    memory: bool
    finished: bool
    resumes: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)

    @property
    def resume_point(self) -> dict[str, Any]:
        """This checkpoint as an entry of a later manifest's `resumes`."""
        return {"session_frame": self.session_frame, "body_frames": {key(c): f for c, f in self.body_frames.items()}}


def key(coord: Coord) -> str:
    """A body coordinate as a JSON object key."""
    return ",".join(map(str, coord))


def parse_key(text: str) -> Coord:
    a, e, b = (int(x) for x in text.split(","))
    return a, e, b


def slot_frames(env: LabEnv) -> list[int]:
    """Each slot's own frames (see LabEnv.slot_frames)."""
    return list(env.slot_frames)


def body_frames(space: AEBSpace) -> dict[Coord, int]:
    """Every body's own frame count now."""
    out: dict[Coord, int] = {}
    for env, coords in zip(space.env_space.envs, space.env_space.slots):
        out.update(zip(coords, slot_frames(env)))
    return out


def resume_seed(seed: int, session_frame: int) -> int:
    """The seed a session resumed at `session_frame` runs on: fixed by (seed, frame), distinct from `seed`."""
    return int(np.random.SeedSequence([seed, session_frame]).generate_state(1)[0] >> 1)


def save_agents(folder: Path, space: AEBSpace, memory: bool = False) -> None:
    """Each agent's state as `agent_a<A>.pt` in `folder` (with `memory`, its replay memories too), each file written
    atomically; an agent whose state cannot be saved is named in the error's note, so its session fails in one line."""
    from slm_lab_like.agents.checkpoint import save_agent, save_memory

    for a, (agent, spec) in enumerate(zip(space.agent_space.agents, space.agent_space.specs)):
        try:
            write_with(folder / f"agent_a{a}.pt", partial(save_agent, agent))
            if memory:
                write_with(folder / f"memory_a{a}.pt", partial(save_memory, agent))
        except Exception as err:
            err.add_note(f'{PART_NOTE}agent[{a}] "{spec.name}" state_dict')
            raise


def write_checkpoint(session_dir: Path, space: AEBSpace, metrics: Mapping[Coord, BodyMetrics], *, seed: int,
                     session_frame: int, wall_time: float, memory: bool, finished: bool,
                     resumes: list[dict[str, Any]], keep: bool = False) -> Path:
    """Write a checkpoint of the session now and commit it with the manifest; returns its folder. `keep`: the
    folders of the checkpoints before stay (meta.checkpoint_keep), without their memories."""
    session_dir = Path(session_dir)
    root = session_dir / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"f{session_frame}_", dir=root))
    save_agents(folder, space, memory)
    envs = space.env_space.envs
    previous = read_checkpoint(session_dir) if keep else None
    kept = previous.kept if previous is not None else []
    if keep:
        kept.append({"folder": folder.name, "frame": sum(e.clock.frame for e in envs)})
    write_json(session_dir / MANIFEST, {
        "folder": folder.name, "seed": seed, "session_frame": session_frame, "wall_time": wall_time,
        "env_frames": [e.clock.frame for e in envs], "env_episodes": [e.clock.epi for e in envs],
        "clocks": [{"frame": e.clock.frame, "epi": e.clock.epi, "target_reached": e.clock.target_reached}
                   for e in envs],
        "rows": {key(c): len(m) for c, m in sorted(metrics.items())},
        "body_frames": {key(c): f for c, f in sorted(body_frames(space).items())},
        "train_bytes": {str(a): _size(train_path(session_dir, a)) for a in range(len(space.agent_space.agents))},
        "memory": memory, "finished": finished, "resumes": resumes, "kept": kept})
    names = {k["folder"] for k in kept}
    for other in root.iterdir():
        if other == folder:
            continue
        if other.name not in names:
            shutil.rmtree(other, ignore_errors=True)
        else:
            for saved in other.glob("memory_a*.pt"):
                saved.unlink()
    return folder


def _size(path: Path) -> int:
    """A file's size in bytes; 0 when it does not exist."""
    return path.stat().st_size if path.exists() else 0


def read_checkpoint(session_dir: Path) -> Checkpoint | None:
    """The session's committed checkpoint, or None when it has none."""
    manifest = Path(session_dir) / MANIFEST
    if not manifest.exists():
        return None
    m = json.loads(manifest.read_text())
    return Checkpoint(
        path=Path(session_dir) / FOLDER / m["folder"], seed=int(m["seed"]), session_frame=int(m["session_frame"]),
        wall_time=float(m["wall_time"]), clocks=m["clocks"],
        rows={parse_key(k): int(v) for k, v in m["rows"].items()},
        body_frames={parse_key(k): int(v) for k, v in m["body_frames"].items()},
        train_bytes={int(a): int(n) for a, n in m.get("train_bytes", {}).items()},  # none in older manifests
        memory=bool(m["memory"]), finished=bool(m["finished"]), resumes=list(m["resumes"]),
        kept=list(m.get("kept", [])))  # none in older manifests


def restore(ckpt: Checkpoint, space: AEBSpace, session_dir: Path) -> SessionMetrics:
    """Load the checkpoint into a freshly built space (agents, memories, env clocks and per-slot frame counts)
    and return each body's metrics with its rows up to the checkpoint."""
    from slm_lab_like.agents.checkpoint import load_agent, load_memory

    for a, agent in enumerate(space.agent_space.agents):
        load_agent(agent, ckpt.path / f"agent_a{a}.pt")
        if ckpt.memory:
            load_memory(agent, ckpt.path / f"memory_a{a}.pt")
    for env, coords, clock in zip(space.env_space.envs, space.env_space.slots, ckpt.clocks):
        env.clock.frame, env.clock.epi = int(clock["frame"]), int(clock["epi"])
        env.clock.target_reached = bool(clock["target_reached"])
        env.restore_slot_frames([ckpt.body_frames[c] for c in coords])
    metrics = {}
    for coord in space.coords:
        n = ckpt.rows.get(coord, 0)
        path = metrics_path(session_dir, coord)
        written = read_csv(path) if path.exists() else []
        if len(written) < n:
            raise ValueError(f"{path}: {len(written)} rows, the checkpoint needs {n}")
        metrics[coord] = BodyMetrics.from_rows(coord, written[:n])
        if len(written) > n:  # rows appended after the checkpoint are dropped from the file too
            metrics[coord].write_csv(path)
    for a, size in ckpt.train_bytes.items():  # and the train stats written after it
        path = train_path(session_dir, a)
        if _size(path) > size:
            os.truncate(path, size)
    return SessionMetrics(space.coords, metrics)
