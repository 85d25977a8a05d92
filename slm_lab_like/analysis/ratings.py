"""Ratings with uncertainty from a tournament's games: openskill's Plackett-Luce model (N-player, ties), the games
taken in the order they were played, so the same games give the same table; plus head-to-head score rates, and the
Nash average of those rates (analysis.nash), which copies of a player cannot skew.
Tournament players do not learn while they play, so the model adds no drift between games (tau 0): a rating's
sigma shrinks with every game instead of settling at the drift's floor.

A game is a dict {"players": [names by seat], "ranks": [0 best, ties share], "forfeit": {...} or None}. A player's
`score` against another counts 1 for finishing above it, 0.5 for a tie, 0 for below, over the games they shared.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from openskill.models import PlackettLuce

from slm_lab_like.analysis.nash import nash_average

Z = 1.96  # the rating interval is mu +- Z sigma (about 95% under the model's normal belief)


def rate(games: list[dict[str, Any]], names: list[str]) -> dict[str, tuple[float, float]]:
    """Each player's (mu, sigma) after updating openskill on every game in order."""
    model = PlackettLuce(tau=0.0)
    ratings = {n: model.rating(name=n) for n in names}
    for game in games:
        teams = [[ratings[p]] for p in game["players"]]
        updated = model.rate(teams, ranks=[float(r) for r in game["ranks"]])
        for p, (r,) in zip(game["players"], updated):
            ratings[p] = r
    return {n: (float(r.mu), float(r.sigma)) for n, r in ratings.items()}


def head_to_head(games: list[dict[str, Any]], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(score, meetings): score[i, j] is player i's score rate against j over the games they shared (nan when
    they never met), meetings[i, j] how many such games."""
    index = {n: i for i, n in enumerate(names)}
    points = np.zeros((len(names), len(names)))
    meetings = np.zeros((len(names), len(names)), dtype=int)
    for game in games:
        for a, ra in zip(game["players"], game["ranks"]):
            for b, rb in zip(game["players"], game["ranks"]):
                if a != b:
                    i, j = index[a], index[b]
                    meetings[i, j] += 1
                    points[i, j] += 1.0 if ra < rb else 0.5 if ra == rb else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(meetings > 0, points / np.maximum(meetings, 1), np.nan)
    return score, meetings


def seat_records(games: list[dict[str, Any]], player: str) -> list[list[int]]:
    """[wins, draws, losses] of `player` from each seat of the two-player games it played: [first, second]."""
    out = [[0, 0, 0], [0, 0, 0]]
    for g in games:
        if player in g["players"]:
            seat = g["players"].index(player)
            mine, theirs = g["ranks"][seat], g["ranks"][1 - seat]
            out[seat][0 if mine < theirs else 1 if mine == theirs else 2] += 1
    return out


def record_score(record: list[int]) -> float:
    """The score rate of a [wins, draws, losses] record (win 1, draw 0.5); 0 for no games."""
    wins, draws, losses = record
    return (wins + 0.5 * draws) / max(1, wins + draws + losses)


def leaderboard(games: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """One row per player, best first by mu: rank, rating (mu, sigma, the interval mu +- Z sigma, openskill's
    ordinal mu - 3 sigma), games, wins / draws / losses (a multi-player game: first alone / tied first / not),
    forfeits, the overall score rate against the others, the Nash mixture's weight on the player and its score
    against that mixture, and its seconds per chosen move."""
    ratings = rate(games, names)
    score, meetings = head_to_head(games, names)
    weights, nash_scores = nash_average(score)
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        played = [g for g in games if name in g["players"]]
        wins = draws = forfeits = moves = 0
        seconds = 0.0
        for g in played:
            seat = g["players"].index(name)
            firsts = sum(r == 0 for r in g["ranks"])
            wins += g["ranks"][seat] == 0 and firsts == 1
            draws += g["ranks"][seat] == 0 and firsts > 1
            forfeits += bool(g.get("forfeit")) and g["forfeit"]["player"] == name
            if g.get("seat_moves"):
                moves += g["seat_moves"][seat]
                seconds += g["seat_seconds"][seat]
        mu, sigma = ratings[name]
        total = meetings[i].sum()
        overall = float(np.nansum(score[i] * meetings[i]) / total) if total else float("nan")
        rows.append({"player": name, "mu": round(mu, 3), "sigma": round(sigma, 3), "low": round(mu - Z * sigma, 3),
                     "high": round(mu + Z * sigma, 3), "ordinal": round(mu - 3 * sigma, 3), "games": len(played),
                     "wins": int(wins), "draws": int(draws), "losses": len(played) - int(wins) - int(draws),
                     "forfeits": int(forfeits), "score": round(overall, 4),
                     "nash_weight": round(float(weights[i]), 4), "nash_score": round(float(nash_scores[i]), 4),
                     "s_per_move": round(seconds / moves, 6) if moves else None})
    rows.sort(key=lambda r: -r["mu"])
    for k, row in enumerate(rows):
        row["rank"] = k + 1
    return rows
