"""Whether expert iteration could train on a thread beside its search, one session on two cores (issue 28's hour).

Two kinds of work, one torch thread each, timed alone and then at once (training on a thread, the search's kind of
work in the main thread), at several GIL switch intervals:
- learn: gradient steps of the shipped connect four net (128 of 4x4, 64 of 2x2, dense 256, 7 logits and a value) on
  minibatches of --batch positions, Adam;
- search: what a training move costs in Python: --rollouts random connect four playouts (bitboards) and one
  batch-128 forward of the same net (a search's leaf evaluation), repeated for --seconds (the learner thread steps
  for all of them).
Printed: each side's rate beside its rate alone. Both near 1.0 means a learner thread would use the second core
that two intra-op threads use poorly (1.3-1.4 times one thread's rate for this spec, 2026-12-04); well under it
means the GIL serialises them. ExpertIteration's `learner_thread` is the answer: in the lab, 40k frames of the
shipped spec took 127 s inline and 75-81 s with it (2026-12-04).

    python bench/learner_thread.py
"""
from __future__ import annotations

import argparse
import random
import sys
import threading
import time

import torch
from torch import nn

from slm_lab_like.envs.games.connect_four import ConnectFour


def shipped_net() -> nn.Module:
    """The layers of spec/expert_iteration_connect_four.json's net over the game's (2, 6, 7) planes."""
    return nn.Sequential(nn.Conv2d(2, 128, 4), nn.ReLU(), nn.Conv2d(128, 64, 2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(64 * 2 * 3, 256), nn.ReLU(), nn.Linear(256, 8))


def learn(net: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor, steps: int,
          until: threading.Event | None = None, out: list[float] | None = None) -> float:
    """Seconds a gradient step, over `steps` steps (or as many as run until `until` is set); also appended to `out`."""
    start, done = time.perf_counter(), 0
    while done < steps if until is None else not until.is_set():
        loss = net(batch).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
    seconds = (time.perf_counter() - start) / max(done, 1)
    if out is not None:
        out.append(seconds)
    return seconds


def search(net: nn.Module, leaves: torch.Tensor, rollouts: int, seconds: float) -> float:
    """Rounds a second of `rollouts` playouts and one leaf evaluation, over `seconds`."""
    rng, game, rounds, start = random.Random(0), ConnectFour(), 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(rollouts):
            game.playout(rng)
        with torch.no_grad():
            net(leaves)
        rounds += 1
    return rounds / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=40, help="gradient steps timed")
    p.add_argument("--rollouts", type=int, default=40, help="playouts a search round")
    p.add_argument("--seconds", type=float, default=3.0, help="search time timed")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    learner, actor = shipped_net(), shipped_net()
    opt = torch.optim.Adam(learner.parameters(), fused=True)
    batch, leaves = torch.randn(args.batch, 2, 6, 7), torch.randn(128, 2, 6, 7)
    learn(learner, opt, batch, 3)
    step_alone = learn(learner, opt, batch, args.steps)
    rate_alone = search(actor, leaves, args.rollouts, args.seconds)
    print(f"alone: a gradient step {step_alone * 1e3:.1f} ms, {rate_alone:.0f} search rounds/s")
    for interval in (0.005, 0.001, 0.0002):
        sys.setswitchinterval(interval)
        step: list[float] = []
        until = threading.Event()
        thread = threading.Thread(target=learn, args=(learner, opt, batch, 0, until, step))
        thread.start()
        rate = search(actor, leaves, args.rollouts, args.seconds)
        until.set()
        thread.join()
        print(f"at once, switch interval {interval * 1e3:.1f} ms: learn {step_alone / step[0]:.2f} of its rate alone, "
              f"search {rate / rate_alone:.2f}")


if __name__ == "__main__":
    main()
