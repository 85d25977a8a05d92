"""Run a tournament spec: every table's games (round robin, or Swiss rounds), then the leaderboard.

Games are played one after another by the referee; a submission's faults cost it that game only and are bounded
by the move time limit. Game i of the tournament resets its env with seed `random_seed + i` and seats scripted
players with seeds drawn from it, so the same spec and seed give the same games and the same table.

Output under `<out>/<name>_<stamp>/`: tournament.json (the resolved spec, mode and seed; not spec.json, so no
run-directory mode takes it for a trial), games.json (every game: seat order, seed, rewards, ranks, moves,
forfeit, wall seconds; rewritten after each round), leaderboard.json / .csv / .md and winrate_matrix.png.
Progress: a tqdm bar on a terminal, else a log line every tenth of the games.
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab_like.analysis.atomic import write_json
from slm_lab_like.analysis.leaderboard import write_leaderboard
from slm_lab_like.analysis.ratings import leaderboard, rate
from slm_lab_like.envs.registry import adapter_for
from slm_lab_like.experiment.pairing import rotations, round_robin, swiss_round
from slm_lab_like.experiment.players import Player
from slm_lab_like.experiment.referee import play_game
from slm_lab_like.experiment.outdir import new_out_dir
from slm_lab_like.spec.schema import EnvSpec, TournamentSpec
from slm_lab_like.spec.validate import to_plain

log = logging.getLogger("slm_lab_like")
SEAT_SEED = 7919  # a scripted player at seat s of game seed g is seeded g * SEAT_SEED + s


@dataclass
class TournamentResult:
    """Where the tournament wrote, its games and its leaderboard rows (best first)."""

    out_dir: Path
    games: list[dict[str, Any]]
    leaderboard: list[dict[str, Any]]


class Progress:
    """Games done out of the expected total: a tqdm bar on a terminal, else a log line every tenth of the games
    naming the leader so far."""

    def __init__(self, name: str, total: int, names: list[str]) -> None:
        self.name, self.total, self.names = name, total, names
        self.every = max(1, total // 10)
        self.bar: Any = None
        if sys.stderr.isatty() and log.isEnabledFor(logging.INFO):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"tournament {name}", unit="game", leave=False)

    def game(self, games: list[dict[str, Any]]) -> None:
        forfeits = _forfeits(games)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(f"forfeits {forfeits}", refresh=False)
        elif len(games) % self.every == 0 or len(games) == self.total:
            ratings = rate(games, self.names)
            leader = max(self.names, key=lambda n: ratings[n][0])
            log.info("tournament %s | games %d/%d | forfeits %d | leader %s (mu %.1f)", self.name, len(games),
                     self.total, forfeits, leader, ratings[leader][0])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_tournament(spec: TournamentSpec, out_root: Path | str | None = "data", mode: str = "train") -> TournamentResult:
    """Play the spec's tournament and write its results (under `out_root`; nothing is written when None)."""
    config = spec.tournament
    seed = spec.meta.random_seed if spec.meta.random_seed is not None else secrets.randbelow(2**31 - 2**20)
    out_dir = new_out_dir(Path(out_root), spec.name) if out_root is not None else None
    if out_dir is not None:
        write_json(out_dir / "tournament.json", {"mode": mode, "seed": seed, "spec": to_plain(spec)})
    hosting = adapter_for(EnvSpec(name=config.game.name, max_frame=1, kwargs=config.game.kwargs)).host()
    probe = hosting.make()
    agents = list(probe.possible_agents)
    spaces = [(probe.observation_space(a), probe.action_space(a)) for a in agents]
    probe.close()
    seats = len(agents)
    names = [p.name for p in config.players]
    players: list[Player] = []
    try:
        players = [Player(p, config) for p in config.players]
        swiss = config.pairing == "swiss"
        tables_per_round = len(names) // seats if swiss else len(round_robin(len(names), seats))
        total = config.games * tables_per_round * (config.rounds if swiss else 1)
        progress = Progress(spec.name, total, names)
        games: list[dict[str, Any]] = []
        rng = np.random.default_rng(seed)
        met: dict[tuple[int, ...], int] = {}
        rounds = config.rounds if swiss else 1
        for r in range(rounds):
            if swiss:
                scores = _points(games, names)
                tables = swiss_round([scores[n] for n in names], met, seats, rng)
            else:
                tables = round_robin(len(names), seats)
            for t in tables:
                met[tuple(sorted(t))] = met.get(tuple(sorted(t)), 0) + 1
            for orders in zip(*(rotations(t, config.games) for t in tables)):  # game g of every table, then g + 1
                for order in orders:
                    game_seed = seed + len(games)
                    seated = [players[i].seat(game_seed * SEAT_SEED + s, *spaces[s]) for s, i in enumerate(order)]
                    result = play_game(hosting.make, hosting.api, [names[i] for i in order], seated, game_seed,
                                       config.opening_moves)
                    games.append({"round": r, **dataclasses.asdict(result)})
                    progress.game(games)
            if out_dir is not None:
                write_json(out_dir / "games.json", games)
        progress.close()
    finally:
        for p in players:
            p.close()
    chance = _chance(games, config.opening_moves)
    if chance:
        log.warning("tournament %s: %d of %d games ended within their %d random opening moves: their results are "
                    "chance (lower tournament.opening_moves)", spec.name, chance, len(games), config.opening_moves)
    meta = {"tournament": spec.name, "mode": mode, "seed": seed, "game": config.game.name,
            "pairing": config.pairing, "games": len(games), "forfeits": _forfeits(games),
            "opening_moves": config.opening_moves, "decided_by_opening": chance}
    rows = (write_leaderboard(out_dir, games, names, f"{spec.name}: {config.game.name}", meta) if out_dir is not None
            else leaderboard(games, names))
    return TournamentResult(out_dir or Path("."), games, rows)


def _forfeits(games: list[dict[str, Any]]) -> int:
    return sum(1 for g in games if g["forfeit"])


def _chance(games: list[dict[str, Any]], opening_moves: int) -> int:
    """Games that ended within their random opening moves (no player chose a move in them)."""
    return sum(1 for g in games if not g["forfeit"] and g["moves"] <= opening_moves) if opening_moves else 0


def _points(games: list[dict[str, Any]], names: list[str]) -> dict[str, float]:
    """Swiss standings: each game gives a player the share of the other seats it finished above (ties half)."""
    points = {n: 0.0 for n in names}
    for g in games:
        k = len(g["players"])
        for p, rank in zip(g["players"], g["ranks"]):
            above = sum(rank < other for other in g["ranks"])
            tied = sum(rank == other for other in g["ranks"]) - 1
            points[p] += (above + 0.5 * tied) / (k - 1)
    return points
