"""Nash averaging: the max-entropy equilibrium of a score matrix's meta-game, and scores against it that copies of a
player cannot move, where an average over the field does move."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.analysis.nash import maxent_nash, nash_average
from slm_lab_like.analysis.ratings import leaderboard

RPS = np.array([[0.5, 1.0, 0.0], [0.0, 0.5, 1.0], [1.0, 0.0, 0.5]])


def games_between(a: str, b: str, a_wins: int, b_wins: int) -> list[dict]:
    """Two-player games: a wins a_wins of them, b wins b_wins, seats alternating."""
    out = []
    for k in range(a_wins + b_wins):
        winner_a = k < a_wins
        players = [a, b] if k % 2 == 0 else [b, a]
        ranks = [0, 1] if (players[0] == a) == winner_a else [1, 0]
        out.append({"players": players, "ranks": ranks, "forfeit": None})
    return out


def field_of(weak_copies: int) -> tuple[list[dict], list[str]]:
    """A strong player, a middling one, and copies of a weak one that both beat."""
    names = ["strong", "middle"] + [f"weak{k}" for k in range(weak_copies)]
    games = games_between("strong", "middle", 7, 3)
    for w in names[2:]:
        games += games_between("strong", w, 9, 1) + games_between("middle", w, 8, 2)
    return games, names


def test_a_cycle_is_played_evenly_and_copies_split_their_weight() -> None:
    p, scores = nash_average(RPS)
    assert np.allclose(p, 1 / 3, atol=1e-4) and np.allclose(scores, 0.5, atol=1e-4)
    copies = RPS[np.ix_([0, 1, 2, 0, 0], [0, 1, 2, 0, 0])]
    p, scores = nash_average(copies)
    assert np.isclose(p[[0, 3, 4]].sum(), 1 / 3, atol=1e-4) and np.allclose(p[[0, 3, 4]], 1 / 9, atol=1e-4)
    assert np.allclose(scores, 0.5, atol=1e-4)


def test_copies_of_a_weak_player_skew_openskill_and_the_field_average_but_not_the_nash_average() -> None:
    rows = {}
    for copies in (1, 8):
        games, names = field_of(copies)
        rows[copies] = {r["player"]: r for r in leaderboard(games, names)}
    one, many = rows[1], rows[8]
    assert one["strong"]["nash_weight"] == 1.0 and one["strong"]["nash_score"] == 0.5
    for name in ("strong", "middle", "weak0"):
        assert one[name]["nash_score"] == many[name]["nash_score"]
    assert one["middle"]["nash_score"] == 0.3 and one["weak0"]["nash_score"] == 0.1
    # the overall score rate of the middle player rises with every weak copy it beats
    assert many["middle"]["score"] - one["middle"]["score"] > 0.15  # 0.55 to 0.74


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.lists(st.floats(0.0, 1.0), min_size=n * n, max_size=n * n)))
def test_the_mixture_is_an_equilibrium_of_any_score_matrix(cells: list[float]) -> None:
    n = int(round(len(cells) ** 0.5))
    s = np.array(cells).reshape(n, n)
    s = np.triu(s, 1) + np.tril(1.0 - s.T, -1)  # score rates of two-player games: s_ij + s_ji = 1
    np.fill_diagonal(s, 0.5)
    p, scores = nash_average(s)
    assert p.min() >= 0 and np.isclose(p.sum(), 1.0)
    assert scores.max() <= 0.5 + 1e-4  # no player scores above even against the mixture
    assert np.all(scores[p > 1e-3] >= 0.5 - 1e-3)  # and every player in its support scores even (SLSQP's precision)
    assert np.isclose(maxent_nash(np.zeros((n, n))), 1 / n, atol=1e-4).all()  # all even: the uniform mixture
