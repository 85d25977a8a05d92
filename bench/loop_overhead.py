"""Loop overhead of the lab against bare gymnasium loops on CartPole-v1, random actions on both sides.

Speeds are frames per second of this process's CPU time (time.process_time), which other load on a
shared machine disturbs far less than wall-clock; the lab side includes building its session.
Both sides draw uniform random actions: the peers by their env's action space's sample(), the lab's Random
agent as Discrete.sample does (Generator.integers), a chunk of steps for all its bodies at a time. Runs alternate, the median of
--repeats runs is taken per side, and the ratios lab fps / peer fps are printed:
  1 body : lab / bare `env.step` loop            (target >= 0.95, issue 12)
  8 bodies: lab / gymnasium SyncVectorEnv of 8   (target >= 1.0)
"""
from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate


def lab_fps(bodies: int, frames: int, seed: int) -> float:
    """Frames per second of a lab session: one Random agent with `bodies` bodies in CartPole-v1."""
    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": frames}],
           "body": {"product": "outer", "num": bodies}, "meta": {"log_frequency": 10 * frames}}
    session = Session(validate(raw, "bench"), seed=seed)
    start = time.process_time()
    result = session.run()
    return result.env_frames[0] / (time.process_time() - start)


def bare_fps(frames: int, seed: int) -> float:
    """Frames per second of the plain gymnasium loop: step, reset on episode end."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    start = time.process_time()
    for _ in range(frames):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    wall = time.process_time() - start
    env.close()
    return frames / wall


def sync_vector_fps(bodies: int, frames: int, seed: int) -> float:
    """Frames per second of gymnasium's SyncVectorEnv (it auto-resets itself)."""
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * bodies)
    venv.reset(seed=seed)
    venv.action_space.seed(seed)
    start = time.process_time()
    for _ in range(frames // bodies):
        venv.step(venv.action_space.sample())
    wall = time.process_time() - start
    venv.close()
    return (frames // bodies) * bodies / wall


def compare(name: str, lab, peer, repeats: int, target: float) -> float:
    labs, peers = [], []
    for i in range(repeats):
        labs.append(lab(i))
        peers.append(peer(i))
    ratio = statistics.median(labs) / statistics.median(peers)
    print(f"{name}: lab {statistics.median(labs):,.0f} fps, peer {statistics.median(peers):,.0f} fps, "
          f"ratio {ratio:.3f} (target >= {target})")
    return ratio


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    compare("1 body  vs bare gymnasium loop", lambda s: lab_fps(1, a.frames, s), lambda s: bare_fps(a.frames, s),
            a.repeats, 0.95)
    compare("8 bodies vs SyncVectorEnv(8)   ", lambda s: lab_fps(8, a.frames, s),
            lambda s: sync_vector_fps(8, a.frames, s), a.repeats, 1.0)


if __name__ == "__main__":
    main()
