"""Many bodies at the speed of the env itself: the lab against gymnasium's vector envs, CartPole-v1, random actions.

For 64 to 16,384 bodies, frames per second of this process's CPU time (time.process_time) over a run of
max(--min-steps, --frames / N) vector steps (so a run is long enough at every N for building a session to weigh
little, and short enough at 16,384 bodies) of:
- lab: a session of one Random agent with N bodies in CartPole-v1 (`vector: "auto"`, so gymnasium's native
  numpy-vectorized CartPoleVectorEnv), building the session included;
- native: that vector env alone (`gym.make_vec(..., vectorization_mode="vector_entry_point")`), stepped with
  random actions drawn as its action space draws them, making and resetting it included (so every side pays for
  what it builds, as the lab does);
- sync: gymnasium's SyncVectorEnv of N CartPoleEnv copies (a tenth of the steps: it is the slow side; up to 1,024
  bodies);
- envpool (when installed; up to 1,024 bodies): envpool's CartPole-v1 with N envs, alone and as the lab's
  `vector: "envpool"` kind (its threads' CPU time counted: tens of seconds a run beyond that).
Frames are body-steps that took an action, on every side: a vector env's reset step of a sub-env (gymnasium's
NEXT_STEP autoreset, envpool) is not one, as in the lab, so those sides count their ends (one count_nonzero a step,
about 1% of their time). Runs alternate (lab, native, sync, ..., then the same backwards), the median of --repeats
runs is taken per side, and the ratios are printed: lab / native (targets: >= 0.9 up to 1,024 bodies, >= 0.8 at
4,096 and beyond) and lab / sync (target >= 5 at 64), each as the ratio of the medians and, in brackets, as the
median of the rounds' own ratios ("paired": the two sides of a round ran seconds apart, so a machine whose speed
drifts between rounds moves it less).
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
import warnings
from typing import Callable

import gymnasium as gym
import numpy as np

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate

SLOW_PEERS_MAX = 1024  # sync and envpool beyond this: minutes a run (SyncVectorEnv steps its copies one by one in Python)


def lab_fps(bodies: int, frames: int, seed: int, vector: str = "auto") -> float:
    """Frames per CPU second of a lab session: one Random agent with `bodies` bodies in CartPole-v1."""
    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": frames, "vector": vector}],
           "body": {"product": "outer", "num": bodies}, "meta": {"log_frequency": 10 * frames, "random_seed": seed}}
    session = Session(validate(raw, "bench"), seed=seed)
    start = time.process_time()
    result = session.run()
    return result.env_frames[0] / (time.process_time() - start)


def vector_fps(make: Callable[[], gym.vector.VectorEnv], bodies: int, frames: int, seed: int) -> float:
    """Frames per CPU second of a gymnasium vector env stepped with random actions (it auto-resets itself), making
    and resetting it included (as the lab's session is timed with its build)."""
    start = time.process_time()
    venv = make()
    venv.reset(seed=seed)
    venv.action_space.seed(seed)
    steps = max(1, frames // bodies)
    resets = ending = 0
    for _ in range(steps):
        _, _, terminated, truncated, _ = venv.step(venv.action_space.sample())
        resets += ending
        ending = np.count_nonzero(terminated | truncated)
    cpu = time.process_time() - start
    if venv.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP) != gym.vector.AutoresetMode.NEXT_STEP:
        resets = 0
    venv.close()
    return (steps * bodies - resets) / cpu


def envpool_fps(bodies: int, frames: int, seed: int) -> float:
    """Frames per CPU second of envpool's CartPole-v1 (its threads' CPU time counts too), making it included."""
    import envpool

    start = time.process_time()
    with warnings.catch_warnings():  # envpool's own float64 space bounds, cast by gymnasium (as the lab's kind does)
        warnings.simplefilter("ignore", UserWarning)
        env = envpool.make_gymnasium("CartPole-v1", num_envs=bodies, seed=seed)
        env.reset()
    rng = np.random.default_rng(seed)
    steps = max(1, frames // bodies)
    resets = ending = 0
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.integers(2, size=bodies))
        resets += ending
        ending = np.count_nonzero(terminated | truncated)
    cpu = time.process_time() - start
    env.close()
    return (steps * bodies - resets) / cpu


def alternate(sides: dict[str, Callable[[int], float]], repeats: int) -> dict[str, list[float]]:
    """Each side's fps in every round of alternating runs, the order reversed every other round (so that no side
    always runs first or last)."""
    runs: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(repeats):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            runs[name].append(sides[name](i))
    return runs


def ratios(runs: dict[str, list[float]], a: str, b: str) -> tuple[float, float]:
    """a / b as the ratio of the medians and as the median of the rounds' ratios (runs side by side in time: less
    moved by the machine's load drifting between rounds)."""
    paired = statistics.median(x / y for x, y in zip(runs[a], runs[b]))
    return statistics.median(runs[a]) / statistics.median(runs[b]), paired


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=2_000_000, help="frames per run (at least --min-steps steps)")
    p.add_argument("--min-steps", type=int, default=600, help="vector steps per run at least")
    p.add_argument("--repeats", type=int, default=9)  # 5 rounds left the ratios to a noisy machine
    p.add_argument("--bodies", type=int, nargs="+", default=[64, 256, 1024, 4096, 16384])
    a = p.parse_args()
    has_envpool = importlib.util.find_spec("envpool") is not None
    for n in a.bodies:
        frames = n * max(a.min_steps, a.frames // n)
        sides: dict[str, Callable[[int], float]] = {
            "lab": lambda s, n=n, f=frames: lab_fps(n, f, s),
            "native": lambda s, n=n, f=frames: vector_fps(
                lambda: gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point"), n, f, s),
        }
        if n <= SLOW_PEERS_MAX:
            sides["sync"] = lambda s, n=n, f=frames: vector_fps(
                lambda: gym.make_vec("CartPole-v1", n, vectorization_mode="sync"), n, f // 10, s)
        if has_envpool and n <= SLOW_PEERS_MAX:
            sides["envpool"] = lambda s, n=n, f=frames: envpool_fps(n, f, s)
            sides["lab_envpool"] = lambda s, n=n, f=frames: lab_fps(n, f, s, "envpool")
        runs = alternate(sides, a.repeats)
        line = ", ".join(f"{k} {statistics.median(v):,.0f}" for k, v in runs.items())
        print(f"{n:>5} bodies: fps {line}")
        shown = [("lab", "native", " (target >= 0.9)" if n <= 1024 else " (target >= 0.8)")]
        if "sync" in sides:
            shown.append(("lab", "sync", " (target >= 5)" if n == 64 else ""))
        if "envpool" in sides:
            shown += [("lab", "envpool", ""), ("lab_envpool", "envpool", "")]
        print(f"{n:>5} bodies: " + ", ".join(f"ratio {x}/{y} {r:.3f}{target} [paired {p:.3f}]"
                                              for x, y, target in shown for r, p in [ratios(runs, x, y)]))


if __name__ == "__main__":
    main()
