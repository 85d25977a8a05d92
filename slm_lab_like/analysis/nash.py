"""Nash averaging (Balduzzi et al. 2018, "Re-evaluating evaluation"): ratings that redundant players cannot skew.

From a tournament's score matrix S (row player's score rate against the column player, 0.5 on the diagonal), the
two-player zero-sum meta-game whose payoff is A = S - 0.5 (antisymmetric: one player's gain is the other's loss)
has a maximum-entropy Nash equilibrium p, a mixture over the players. A player's Nash-averaged score is its expected
score against that mixture, (S p)_i: 0.5 for every player in the mixture's support and below 0.5 for those it
leaves out, whatever copies of weak or strong players the field holds (copies split their weight and change no one's
score), where an average over the field or a rating fitted to all games moves with every copy added.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import linprog, minimize

TOLERANCE = 1e-6  # how far below the game's value a mixture may leave a pure strategy and still count as Nash


def maxent_nash(payoff: np.ndarray) -> np.ndarray:
    """The maximum-entropy equilibrium mixture of the symmetric zero-sum game with antisymmetric `payoff` (row's
    gain against column): a linear program gives the game's value and one equilibrium, then the entropy is maximised
    over the equilibria (SLSQP), kept only where it is still an equilibrium."""
    a = np.asarray(payoff, dtype=float)
    n = len(a)
    if n == 1:
        return np.ones(1)
    # maximise v: (A^T p)_j >= v for every column j, sum p = 1, p >= 0; variables [p, v]
    lp = linprog(c=np.r_[np.zeros(n), -1.0], A_ub=np.c_[-a.T, np.ones(n)], b_ub=np.zeros(n),
                 A_eq=np.r_[np.ones(n), 0.0][None], b_eq=[1.0], bounds=[(0, None)] * n + [(None, None)],
                 method="highs")
    if not lp.success:
        raise ValueError(f"the meta-game's linear program failed: {lp.message}")
    p0, value = lp.x[:n], lp.x[n]

    def negentropy(p: np.ndarray) -> float:
        q = np.clip(p, 1e-12, None)
        return float(np.sum(q * np.log(q)))

    def gradient(p: np.ndarray) -> np.ndarray:
        return np.log(np.clip(p, 1e-12, None)) + 1.0

    start = 0.5 * p0 + 0.5 / n
    result = minimize(negentropy, start, jac=gradient, method="SLSQP", bounds=[(0.0, 1.0)] * n,
                      constraints=[{"type": "eq", "fun": lambda p: np.sum(p) - 1.0, "jac": lambda p: np.ones(n)},
                                   {"type": "ineq", "fun": lambda p: a.T @ p - value + TOLERANCE,
                                    "jac": lambda p: a.T}],
                      options={"maxiter": 500, "ftol": 1e-12})
    p = np.clip(result.x, 0.0, None)
    p /= p.sum()
    if not result.success or np.min(a.T @ p) < value - 10 * TOLERANCE:
        p = np.clip(p0, 0.0, None) / np.clip(p0, 0.0, None).sum()
    return p


def nash_average(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mixture, scores): the max-entropy Nash mixture over the players of a score matrix and each player's expected
    score against it. Pairs that never met count as even (0.5); the diagonal is 0.5."""
    s = np.where(np.isnan(score), 0.5, np.asarray(score, dtype=float))
    np.fill_diagonal(s, 0.5)
    payoff = (s - s.T) / 2.0  # antisymmetric even where a pair's two rates do not sum to 1 (forfeits, unequal counts)
    p = maxent_nash(payoff)
    return p, s @ p
