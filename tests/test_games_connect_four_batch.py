"""The batched connect four LabEnv: step for step the same buffers as the turn-based PettingZoo adapter."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.envs.base import Clock  # noqa: E402
from slm_lab_like.envs.games.connect_four import ConnectFour  # noqa: E402
from slm_lab_like.envs.games.connect_four_batch import ConnectFourBatchEnv, is_win  # noqa: E402
from slm_lab_like.envs.make import multiagent_factory  # noqa: E402
from slm_lab_like.envs.pettingzoo_env import PettingZooEnv  # noqa: E402
from slm_lab_like.experiment.session import Session  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402

KEYS = ("obs", "mask", "acting", "completed", "reward", "terminated", "truncated")


def reference(max_t: int | None = None, **kwargs: Any) -> PettingZooEnv:
    """One game through the lab's turn-based PettingZoo adapter: what each game of the batch must match."""
    factory = multiagent_factory("connect_four")
    return PettingZooEnv("connect_four", lambda: factory(**kwargs), "aec", None, Clock(max_frame=10**9), max_t)


def buffers(blk: Any, parity: int, rows: slice) -> dict[str, np.ndarray]:
    """The buffers an agent sees after a step (obs / mask / acting of the coming step), for `rows`."""
    done = blk.terminated[rows] | blk.truncated[rows]
    completed = blk.completed[rows]
    return {"obs": blk.obs[parity][rows].copy(), "mask": blk.action_mask[parity][rows].copy(),
            "acting": blk.acting[parity][rows].copy(), "completed": completed.copy(), "reward": blk.reward[rows].copy(),
            "terminated": blk.terminated[rows].copy(), "truncated": blk.truncated[rows].copy(),
            "action": np.where(completed, blk.action[rows], -1),
            "final_obs": np.where(done[:, None, None, None], blk.final_obs[rows], 0),
            "final_mask": np.where(done[:, None], blk.final_action_mask[rows], False)}


def run_both(n_games: int, steps: int, seed: int, max_t: int | None = None, full_column_bias: float = 0.0) -> None:
    """Step the batch and one reference env per game with the same moves; every buffer must agree."""
    rng = np.random.default_rng(seed)
    batch = ConnectFourBatchEnv("connect_four_batch", 2 * n_games, Clock(max_frame=10**9), max_t)
    refs = [reference(max_t) for _ in range(n_games)]
    batch.reset(seed=seed)
    for r in refs:
        r.reset(seed=seed)
    blk = batch.block
    for _ in range(steps):
        for k, r in enumerate(refs):
            rb = r.blocks[0]
            mask = rb.action_mask[r.parity][rb.acting[r.parity]][0]
            legal = np.flatnonzero(mask)
            col = int(rng.integers(7)) if rng.random() < full_column_bias else int(rng.choice(legal))
            rb.action[:] = rng.integers(7, size=2)  # the non-mover's action must not matter
            rb.action[rb.acting[r.parity]] = col
            blk.action[2 * k:2 * k + 2] = rb.action
        batch.step()
        for k, r in enumerate(refs):
            r.step()
            want = buffers(r.blocks[0], r.parity, slice(0, 2))
            got = buffers(blk, batch.parity, slice(2 * k, 2 * k + 2))
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=f"game {k}: {key}")
    ends = sorted((e.slot % 2, e.slot // 2, e.ret, e.length, e.truncated, e.body_frame) for e in batch.ended)
    want_ends = sorted((e.slot, k, e.ret, e.length, e.truncated, e.body_frame) for k, r in enumerate(refs)
                       for e in r.ended)
    assert ends == want_ends and len(ends) > 2 * n_games
    assert batch.clock.frame == sum(r.clock.frame for r in refs) == steps * n_games
    assert batch.slot_frames == [f for r in refs for f in r.slot_frames]


def test_batch_matches_the_turn_based_adapter_game_by_game() -> None:
    run_both(n_games=5, steps=300, seed=0)


def test_batch_matches_the_adapter_on_illegal_moves_and_time_limits() -> None:
    run_both(n_games=4, steps=200, seed=1, full_column_bias=0.3)  # full columns: the mover loses
    run_both(n_games=3, steps=100, seed=2, max_t=9)  # games cut after 9 moves: truncated, not terminated


def test_every_step_is_one_move_in_every_game_and_games_reset_themselves() -> None:
    env = ConnectFourBatchEnv("connect_four_batch", 6, Clock(max_frame=10**9))
    env.reset()
    blk = env.block
    assert blk.acting[env.parity].tolist() == [True, False] * 3 and blk.obs[env.parity].sum() == 0
    np.testing.assert_array_equal(blk.action_mask[env.parity], np.repeat([[True], [False]] * 3, 7, axis=1))
    moves = [0, 1, 0, 1, 0, 1, 0]  # seat 0 wins in column 0 at its 4th move, in every game
    for t, m in enumerate(moves):
        blk.action[:] = m
        env.step()
        assert blk.acting[env.parity].sum() == 3 and env.clock.frame == 3 * (t + 1)
    assert blk.completed.all() and blk.terminated.all() and not blk.truncated.any()
    assert blk.reward.tolist() == [1.0, -1.0] * 3 and blk.action.tolist() == [0, 1] * 3
    assert blk.final_obs[0][..., 0].sum() == 4 and blk.final_obs[1][..., 1].sum() == 4
    assert [(e.slot, e.ret, e.length) for e in env.ended] == [(i, 1.0 - 2 * (i % 2), 4 - i % 2) for i in range(6)]
    assert blk.obs[env.parity].sum() == 0 and blk.acting[env.parity].tolist() == [True, False] * 3


def test_illegal_move_raise_mode_and_bad_columns() -> None:
    env = ConnectFourBatchEnv("connect_four_batch", 2, Clock(max_frame=10**9), illegal_move="raise")
    env.reset()
    for _ in range(6):
        env.block.action[:] = 3
        env.step()
    env.block.action[:] = 3
    with pytest.raises(ValueError, match="column 3 is full"):
        env.step()
    env.block.action[:] = 7
    with pytest.raises(ValueError, match="columns in 0..6"):
        env.step()


def test_vectorised_win_check_matches_the_game() -> None:
    rng = np.random.default_rng(3)
    boards, wins = [], []
    for _ in range(300):
        game = ConnectFour()
        for _ in range(int(rng.integers(1, 30))):
            if game.done:
                break
            game.play(int(rng.choice(game.legal_moves())))
        boards.append(game.bitboards[1 - game.to_move])
        wins.append(game.winner is not None)
    assert is_win(np.array(boards, dtype=np.uint64)).tolist() == wins


def spec(num: int, frames: int = 2000, **env: Any) -> dict:
    return {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
            "env": [{"name": "connect_four_batch", "max_frame": frames, **env}],
            "body": {"product": "outer", "num": num}, "meta": {"log_frequency": 10**9}}


def test_spec_needs_two_bodies_per_game_and_a_known_illegal_move_mode() -> None:
    with pytest.raises(SpecError, match=r"env\[0\].*even number of bodies"):
        validate(spec(3), "t")
    with pytest.raises(SpecError, match=r"env\[0\].*illegal_move"):
        validate(spec(4, kwargs={"illegal_move": "ignore"}), "t")


def test_random_agents_play_legal_games_through_a_deterministic_lab_session() -> None:
    raw = spec(16, kwargs={"illegal_move": "raise"})
    runs = [Session(validate(raw, "t"), seed=5).run() for _ in range(2)]
    rows = [[(c, r["return"], r["frame"]) for c, m in sorted(res.metrics.items()) for r in m.rows] for res in runs]
    assert rows[0] == rows[1] and len(rows[0]) > 50
    assert runs[0].env_frames == [2000]
    returns = [r for _, r, _ in rows[0]]
    assert set(returns) <= {-1.0, 0.0, 1.0} and returns.count(1.0) == returns.count(-1.0)
