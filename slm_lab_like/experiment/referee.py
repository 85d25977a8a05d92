"""Play one game of a multi-agent env between seated players and say who won, or who forfeited and why.

The referee owns the env (a PettingZoo AEC game; a parallel one is played through PettingZoo's parallel_to_aec)
and asks each seat for its move in turn, timing each answer. A seat that searches (it has `bind_game`) is handed the
game at its start, to copy positions from. A move outside the action space or against the legal-action mask, a
seat that raises (a scripted player's bug) or a submission's Forfeit ends the game at once: that seat forfeits
and ranks below every other seat, which tie.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from slm_lab_like.experiment.players import Seat, split
from slm_lab_like.remote.seat import Forfeit


@dataclass
class GameResult:
    """One game: seat order (player names), its seed, each seat's total reward and rank (0 best, ties share),
    the moves played, a forfeit {seat, player, kind, reason} or None, its wall-clock seconds, and each seat's moves
    chosen (random openings not counted) and seconds spent choosing them."""

    players: list[str]
    seed: int
    rewards: list[float]
    ranks: list[int]
    moves: int
    forfeit: dict[str, Any] | None = None
    wall_s: float = 0.0
    seat_moves: list[int] = field(default_factory=list)
    seat_seconds: list[float] = field(default_factory=list)


def ranks_of(rewards: list[float]) -> list[int]:
    """Competition ranks by reward, higher first: [1, 0, 1] -> [0, 1, 0]."""
    return [sum(r > x for r in rewards) for x in rewards]


def as_aec(env: Any, api: str) -> Any:
    """The env as a PettingZoo AEC env (a parallel one converted)."""
    if api == "parallel":
        from pettingzoo.utils.conversions import parallel_to_aec

        return parallel_to_aec(env)
    return env


def play_game(make_env: Callable[[], Any], api: str, players: list[str], seats: list[Seat], seed: int,
              opening_moves: int = 0) -> GameResult:
    """Play one game, `seats[i]` at the game's i-th player, from `env.reset(seed=seed)`; the first `opening_moves`
    plies are uniform random legal moves drawn from `seed`. Every seat is closed at the end."""
    start = time.monotonic()
    env = as_aec(make_env(), api)
    rng = np.random.default_rng(seed)
    order = list(env.possible_agents)
    totals = {a: 0.0 for a in order}
    last_obs: dict[str, Any] = {}
    forfeit: dict[str, Any] | None = None
    moves = 0
    seat_moves, seat_seconds = [0] * len(order), [0.0] * len(order)
    try:
        env.reset(seed=seed)
        for seat in seats:
            bind = getattr(seat, "bind_game", None)
            if callable(bind):
                bind(env)
        for i, agent in enumerate(order):  # random openings without masks sample the spaces: seeded by the game
            env.action_space(agent).seed(seed + i)
        for agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            i = order.index(agent)
            last_obs[agent] = obs
            space = env.action_space(agent)
            _, mask = split(obs)
            try:
                if moves < opening_moves:
                    action: Any = int(rng.choice(np.flatnonzero(mask))) if mask is not None else space.sample()
                else:
                    thinking = time.perf_counter()
                    action = seats[i].act(obs)
                    seat_seconds[i] += time.perf_counter() - thinking
                    seat_moves[i] += 1
                    action = _checked(action, space, mask)
            except Forfeit as f:
                forfeit = {"seat": i, "player": players[i], "kind": f.kind, "reason": f.reason}
                break
            except Exception as e:  # noqa: BLE001 - any failure of an in-process player is its forfeit
                forfeit = {"seat": i, "player": players[i], "kind": "crash", "reason": f"{type(e).__name__}: {e}"}
                break
            env.step(action)
            moves += 1
            for a, r in env.rewards.items():
                totals[a] += float(r)
    finally:
        for i, agent in enumerate(order):
            seats[i].close(last_obs.get(agent), totals[agent])
        env.close()
    rewards = [totals[a] for a in order]
    if forfeit is not None:
        ranks = [1 if i == forfeit["seat"] else 0 for i in range(len(order))]
    else:
        ranks = ranks_of(rewards)
    return GameResult(players, seed, rewards, ranks, moves, forfeit, round(time.monotonic() - start, 3), seat_moves,
                      [round(t, 6) for t in seat_seconds])


def _checked(action: Any, space: Any, mask: np.ndarray | None) -> Any:
    """The action when the space holds it and the mask allows it; Forfeit("illegal_action") otherwise."""
    try:
        value = np.asarray(action, dtype=space.dtype) if space.shape else int(action)
        legal = space.contains(value)
    except (TypeError, ValueError, OverflowError):
        legal = False
    if not legal:
        raise Forfeit("illegal_action", f"{action!r} is not in {space}")
    if mask is not None and np.ndim(value) == 0 and not mask[int(value)]:
        raise Forfeit("illegal_action", f"{int(value)} is not a legal move (mask {mask.astype(int).tolist()})")
    return value
