"""The connect four strength bench's reading of a lost game (the first one-ply mistake of each move), and the earlier
checkpoints it judges an agent against."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.connect_four_strength import earlier_checkpoints, first_mistake
from slm_lab_like.envs.games.connect_four import ConnectFour
from slm_lab_like.spec.errors import SpecError


def played(*cols: int) -> ConnectFour:
    game = ConnectFour()
    for col in cols:
        game.apply(col)
    return game


def drawn(*rows: str, to_move: int) -> ConnectFour:
    """A game from its board, top row first, "." empty, "x" the first player, "o" the second."""
    board = np.array([[".xo".index(c) for c in row] for row in rows])
    return ConnectFour.from_board(board, to_move=to_move)


@pytest.mark.parametrize("game, right, wrong, mistake", [
    (played(0, 0, 1, 1, 2, 2), 3, 6, "missed win"),
    (played(0, 6, 1, 6, 2), 3, 5, "missed block"),
    (drawn(".......", ".......", ".......", ".......", "xxx...o", "oox..xo", to_move=1), 4, 3, "handed over"),
])
def test_a_move_is_read_by_what_it_gets_wrong_at_one_ply(game: ConnectFour, right: int, wrong: int,
                                                         mistake: str) -> None:
    assert first_mistake(game, right) is None
    assert first_mistake(game, wrong) == mistake


def test_two_threats_at_once_are_lost_whatever_is_played() -> None:
    game = played(1, 6, 2, 6, 3)
    assert {first_mistake(game, col) for col in game.legal_moves()} == {"faced a double threat"}


def test_earlier_means_every_checkpoint_the_run_kept_before_its_last(tmp_path: Path) -> None:
    from tests.test_tournament import kept_run

    run = kept_run(tmp_path / "runs")
    frames = [k["frame"] for k in json.loads((run / "session_0" / "checkpoint.json").read_text())["kept"]]
    assert earlier_checkpoints(str(run)) == {f"f{f}": {"checkpoint": str(run), "frame": f} for f in frames[:-1]}
    with pytest.raises(SpecError, match="kept no checkpoints"):
        earlier_checkpoints(str(kept_run(tmp_path / "plain", keep=False)))
