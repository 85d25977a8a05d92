"""`run_lab.py eval DIR`: trained agents play N episodes per agent-env pair, deterministically and without
learning, and the returns and lengths go to eval.json (also the rollout loop that enjoy renders)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from slm_lab_like.envs.episodes import EpisodeEnd
from slm_lab_like.spec.coords import Coord
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.atomic import write_json
from slm_lab_like.experiment.record import RecordError, TrialRecord, agent_files, read_trial
from slm_lab_like.spec.schema import Spec

EVAL_SEED = 1_000_000  # eval episodes reset with seed + EVAL_SEED: not the training episodes' seeds


def load_space(spec: Spec, session_dir: Path, seed: int) -> tuple[AEBSpace, str]:
    """The spec's space with every agent loaded from the session (final state, else last checkpoint) and set to
    act deterministically without learning (Algorithm.set_training(False)); and which state was loaded."""
    from slm_lab_like.agents.checkpoint import load_agent

    files, label = agent_files(session_dir, len(spec.agent))
    space = AEBSpace.build(spec, seed)
    try:
        for agent, path in zip(space.agent_space.agents, files):
            load_agent(agent, path)
            agent.set_training(False)
    except BaseException:
        space.close()
        raise
    return space, label


def split_quota(space: AEBSpace, episodes: int) -> dict[Coord, int]:
    """Episodes per body so that each agent-env pair plays `episodes`, spread evenly over its bodies (each body
    plays its first ones: no bias towards bodies whose episodes are short)."""
    quota = {}
    for a, e in sorted({c[:2] for c in space.coords}):
        bodies = [c for c in space.coords if c[:2] == (a, e)]
        quota.update({c: episodes // len(bodies) + (j < episodes % len(bodies)) for j, c in enumerate(bodies)})
    return quota


def play(space: AEBSpace, quota: dict[Coord, int], seed: int,
         on_step: Callable[[list[int]], None] | None = None) -> dict[Coord, list[EpisodeEnd]]:
    """Step the space (agents act, nothing learns) until every body has finished its quota of episodes; returns
    them. `on_step(envs)` is called after each step with the indices of the envs just stepped (rendering)."""
    envs = space.env_space.envs
    slots = space.env_space.slots
    ends: dict[Coord, list[EpisodeEnd]] = {c: [] for c in space.coords}
    space.env_space.reset(seed)
    live = [e for e in range(len(envs)) if any(quota[c] for c in slots[e])]
    parity = 0
    while live:
        for ln in space.agent_space.links:
            if ln.env_index in live:
                ln.act(parity)
        for e in live:
            envs[e].step()
        for ln in space.agent_space.links:
            if ln.env_index in live:
                ln.ended(parity)
        if on_step is not None:
            on_step(live)
        parity ^= 1
        for e in live:
            for end in envs[e].flush_ends():
                coord = slots[e][end.slot]
                if len(ends[coord]) < quota[coord]:
                    ends[coord].append(end)
            envs[e].ended.clear()
        live = [e for e in live if any(len(ends[c]) < quota[c] for c in slots[e])]
    return ends


def _stats(values: Sequence[float]) -> dict[str, float]:
    x = np.asarray(values, np.float64)
    return {"mean": float(x.mean()), "std": float(x.std()), "min": float(x.min()), "max": float(x.max())}


def evaluate_session(record: TrialRecord, index: int, episodes: int) -> dict:
    """Play `episodes` evaluation episodes per agent-env pair with the session's trained agents; a report entry."""
    spec = record.spec
    seed = record.seeds[index] + EVAL_SEED
    space, label = load_space(spec, record.session_dir(index), seed)
    try:
        ends = play(space, split_quota(space, episodes), seed)
    finally:
        space.close()
    pairs = []
    for a, e in sorted({c[:2] for c in ends}):
        done = [end for c, es in sorted(ends.items()) if c[:2] == (a, e) for end in es]
        returns, lengths = [float(d.ret) for d in done], [int(d.length) for d in done]
        pairs.append({"agent": spec.agent[a].name, "env": spec.env[e].name, "coord": [a, e], "episodes": len(done),
                      "return": _stats(returns), "length": _stats(lengths), "returns": returns, "lengths": lengths})
    return {"session": index, "seed": seed, "checkpoint": label, "pairs": pairs}


def evaluate(path: str | Path, episodes: int = 100) -> tuple[Path, dict]:
    """Evaluate every session picked by `path` (a trial or a session directory); write eval.json there."""
    if episodes < 1:
        raise RecordError(f"--episodes must be at least 1, got {episodes}")
    record = read_trial(path, play=True)
    report = {"spec": record.spec.name, "dir": str(record.dir), "episodes": episodes, "deterministic": True,
              "sessions": [evaluate_session(record, i, episodes) for i in record.sessions]}
    out = Path(path) / "eval.json"
    write_json(out, report)
    return out, report
