"""Who meets whom: round-robin tables and Swiss rounds, with seats rotated from game to game.

A table is a tuple of player indices, as many as the game seats; its `games` games seat them in rotation
(game g seats the table rotated by g), so every player takes every seat equally often when `games` is a multiple
of the seats (two players: alternate first and second).
"""
from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np


def rotations(table: tuple[int, ...], games: int) -> Iterator[tuple[int, ...]]:
    """The seat order of each of a table's games: the table rotated by the game's index."""
    k = len(table)
    for g in range(games):
        yield table[g % k:] + table[:g % k]


def round_robin(n_players: int, seats: int) -> list[tuple[int, ...]]:
    """Every table of `seats` players out of `n_players` (every pair for a two-player game)."""
    return list(itertools.combinations(range(n_players), seats))


def swiss_round(scores: list[float], met: dict[tuple[int, ...], int], seats: int,
                rng: np.random.Generator) -> list[tuple[int, ...]]:
    """One Swiss round: players ordered by score (ties in a seeded random order) and seated, table by table,
    with the next ones in that order whose table has met least often; players left over sit out (a bye)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], rng.random()))
    tables = []
    while len(order) >= seats:
        head, rest = order[0], order[1:]
        best = min(itertools.combinations(rest, seats - 1),
                   key=lambda others: (met.get(tuple(sorted((head, *others))), 0),
                                       sum(rest.index(o) for o in others)))
        table = (head, *best)
        tables.append(table)
        order = [i for i in order if i not in table]
    return tables
