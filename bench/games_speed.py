"""Speed of the built-in games, random (legal) actions, CPU time (time.process_time) of this process.

Prints steps per second of: the pure ConnectFour game, the AEC ConnectFourEnv, and, as a peer measured in
the same run, PettingZoo's own classic connect_four_v3 (ratio ours / peer); then TagArenaEnv (default two
chasers and two runners) in env steps and player-steps per second. Median of --repeats runs per side.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

from slm_lab_like.envs.games.connect_four import ConnectFour, ConnectFourEnv, random_legal_action
from slm_lab_like.envs.games.tag_arena import TagArenaEnv


def pure_connect_four(steps: int, seed: int) -> float:
    """Moves per second of the bare game object."""
    rng = np.random.default_rng(seed)
    game = ConnectFour()
    start = time.process_time()
    for _ in range(steps):
        if game.done:
            game.reset()
        legal = game.legal_moves()
        game.play(legal[int(rng.integers(len(legal)))])
    return steps / (time.process_time() - start)


def aec_steps(make_env: Callable[[], Any], steps: int, seed: int) -> float:
    """AEC steps per second (dead steps included) of an env with an ``action_mask`` in its observations."""
    rng = np.random.default_rng(seed)
    env = make_env()
    env.reset(seed=seed)
    start = time.process_time()
    for _ in range(steps):
        if not env.agents:
            env.reset()
        obs, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else random_legal_action(obs["action_mask"], rng))
    return steps / (time.process_time() - start)


def tag_steps(steps: int, seed: int) -> tuple[float, float]:
    """Env steps and player-steps per second of the default tag arena."""
    rng = np.random.default_rng(seed)
    env = TagArenaEnv()
    env.reset(seed=seed)
    actions = rng.integers(5, size=(steps, len(env.possible_agents))).tolist()
    players = 0
    start = time.process_time()
    for k in range(steps):
        if not env.agents:
            env.reset()
        players += len(env.agents)
        env.step({a: actions[k][i] for i, a in enumerate(env.agents)})
    elapsed = time.process_time() - start
    return steps / elapsed, players / elapsed


def main() -> None:
    """Run every measurement ``--repeats`` times and print medians and the ratio against the peer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        from pettingzoo.classic import connect_four_v3

        peer: Callable[[], Any] | None = connect_four_v3.env
        missing = ""
    except ImportError as exc:
        peer, missing = None, str(exc)
    pure, ours, theirs, tag, tag_players = [], [], [], [], []
    for r in range(args.repeats):
        pure.append(pure_connect_four(args.steps, r))
        ours.append(aec_steps(ConnectFourEnv, args.steps, r))
        if peer is not None:
            theirs.append(aec_steps(peer, args.steps, r))
        steps, players = tag_steps(args.steps, r)
        tag.append(steps)
        tag_players.append(players)
    med = statistics.median
    print(f"connect four, pure game       : {med(pure):>10,.0f} moves/s")
    print(f"connect four, AEC env         : {med(ours):>10,.0f} steps/s")
    if theirs:
        print(f"pettingzoo connect_four_v3    : {med(theirs):>10,.0f} steps/s   ratio ours/peer {med(ours) / med(theirs):.2f}")
    else:
        print(f"pettingzoo connect_four_v3    : not measured ({missing})")
    print(f"tag arena (2 chasers, 2 runners): {med(tag):>8,.0f} steps/s ({med(tag_players):,.0f} player-steps/s)")


if __name__ == "__main__":
    main()
