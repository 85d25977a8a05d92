"""Tournaments: pairings, seats and seeds, ratings and leaderboards, players of every kind, and submissions that
crash, hang or send invalid actions (real subprocesses) forfeiting only their own games."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from slm_lab_like.analysis.ratings import head_to_head, leaderboard  # noqa: E402
from slm_lab_like.experiment.pairing import rotations, round_robin, swiss_round  # noqa: E402
from slm_lab_like.experiment.tournament import run_tournament  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import tournament_spec as validate_tournament  # noqa: E402
from tests.helpers import as_if_trained_on_a_gpu  # noqa: E402

WIN_BLOCK = "slm_lab_like.envs.games.connect_four:WinBlockPlayer"
SUBMISSIONS = {
    "crash.py": "def policy(obs):\n    raise RuntimeError('boom')\n",
    "hang.py": "import time\n\n\ndef policy(obs):\n    time.sleep(3600)\n",
    "invalid.py": "def policy(obs):\n    return 99\n",
    "center.py": "import numpy as np\n\n\ndef policy(obs):\n"
                 "    return next(c for c in (3, 2, 4, 1, 5, 0, 6) if np.asarray(obs['action_mask'])[c])\n",
}


def tournament(players: list[dict], games: int = 2, seed: int = 1, source: str = "", **extra: Any) -> Any:
    raw = {"tournament": {"game": {"name": "connect_four"}, "players": players, "games": games, **extra},
           "meta": {"random_seed": seed}}
    return validate_tournament(raw, "t", source)


def submissions(tmp_path: Path) -> Path:
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, text in SUBMISSIONS.items():
        (folder / name).write_text(text)
    return folder


def test_round_robin_seats_alternate_and_every_pair_meets() -> None:
    tables = round_robin(4, 2)
    assert len(tables) == 6 and len(set(tables)) == 6
    assert list(rotations((0, 1), 4)) == [(0, 1), (1, 0), (0, 1), (1, 0)]
    assert list(rotations((0, 1, 2), 3)) == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    assert len(round_robin(5, 3)) == 10


def test_swiss_pairs_like_scores_and_avoids_rematches() -> None:
    rng = np.random.default_rng(0)
    first = swiss_round([3.0, 2.0, 1.0, 0.0], {}, 2, rng)
    assert first == [(0, 1), (2, 3)]
    second = swiss_round([3.0, 2.0, 1.0, 0.0], {(0, 1): 1, (2, 3): 1}, 2, rng)
    assert sorted(tuple(sorted(t)) for t in second) == [(0, 2), (1, 3)]
    assert len(swiss_round([0.0] * 5, {}, 2, rng)) == 2  # one bye


def test_ratings_order_players_and_head_to_head_counts() -> None:
    games = [{"players": ["a", "b"], "ranks": [0, 1], "forfeit": None}] * 30
    games += [{"players": ["b", "c"], "ranks": [0, 1], "forfeit": None}] * 30
    games += [{"players": ["a", "c"], "ranks": [0, 0], "forfeit": None}] * 2
    rows = leaderboard(games, ["c", "b", "a"])
    assert [r["player"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["low"] > rows[2]["high"]  # lopsided: intervals apart
    score, meetings = head_to_head(games, ["a", "b", "c"])
    assert score[0, 1] == 1.0 and score[1, 0] == 0.0 and score[0, 2] == 0.5 and meetings[0, 2] == 2
    assert np.isnan(score[0, 0])


def test_scripted_tournament_ranks_win_block_over_random_and_is_reproducible(tmp_path: Path) -> None:
    players = [{"name": "random", "scripted": "random"}, {"name": "win_block", "scripted": WIN_BLOCK}]
    first = run_tournament(tournament(players, games=30), tmp_path / "a")
    again = run_tournament(tournament(players, games=30), tmp_path / "b")
    assert [g["seed"] for g in first.games] == list(range(1, 31))
    assert [g["players"] for g in first.games[:2]] == [["random", "win_block"], ["win_block", "random"]]
    assert [(g["rewards"], g["moves"]) for g in first.games] == [(g["rewards"], g["moves"]) for g in again.games]
    untimed = [[{k: v for k, v in row.items() if k != "s_per_move"} for row in t.leaderboard] for t in (first, again)]
    assert untimed[0] == untimed[1]  # the same games give the same table; only the seconds a move took differ
    assert all(row["s_per_move"] > 0 for row in first.leaderboard)
    top, bottom = first.leaderboard
    assert top["player"] == "win_block" and top["wins"] >= 25 and top["low"] > bottom["high"]
    for name in ("leaderboard.json", "leaderboard.csv", "leaderboard.md", "winrate_matrix.png", "games.json",
                 "tournament.json"):
        assert (first.out_dir / name).stat().st_size > 0, name
    saved = json.loads((first.out_dir / "leaderboard.json").read_text())
    assert saved["players"] == ["win_block", "random"] and saved["score_matrix"][0][1] > 0.8
    assert (first.out_dir / "leaderboard.csv").read_text().splitlines()[0].startswith("rank,player,mu,sigma")
    other = run_tournament(tournament(players, games=30, seed=2), None)
    assert [g["moves"] for g in other.games] != [g["moves"] for g in first.games]  # the seed matters


@pytest.mark.slow
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_faulty_submissions_forfeit_only_their_games_within_the_time_limit(tmp_path: Path) -> None:
    subs = submissions(tmp_path)
    players = [{"name": "random", "scripted": "random"}, {"name": "crash", "submission": str(subs / "crash.py")},
               {"name": "hang", "submission": str(subs / "hang.py")},
               {"name": "invalid", "submission": str(subs / "invalid.py")}]
    start = time.monotonic()
    result = run_tournament(tournament(players, games=2, move_time_limit=1.0, startup_timeout=30.0), tmp_path / "o")
    wall = time.monotonic() - start
    assert len(result.games) == 12  # every game of every pair was played
    kinds = {"crash": "crash", "hang": "timeout", "invalid": "invalid_action"}
    for g in result.games:
        assert g["forfeit"] is not None  # each game has a faulty player; the first one to move forfeits
        assert g["forfeit"]["kind"] == kinds[g["forfeit"]["player"]], g["forfeit"]
        assert g["ranks"][g["forfeit"]["seat"]] == 1 and g["wall_s"] < 30.0
        if "random" in g["players"]:
            assert g["ranks"][g["players"].index("random")] == 0
    rows = {r["player"]: r for r in result.leaderboard}
    assert rows["random"]["wins"] == 6 and rows["random"]["forfeits"] == 0
    assert rows["hang"]["forfeits"] >= 2 and rows["crash"]["forfeits"] >= 2 and rows["invalid"]["forfeits"] >= 2
    hung = [g["wall_s"] for g in result.games if g["forfeit"]["kind"] == "timeout"]
    assert hung and all(1.0 <= w < 15.0 for w in hung)  # bounded by the move time limit (plus start-up)
    assert wall < 120.0


def test_a_submission_plays_whole_games_through_its_judge(tmp_path: Path) -> None:
    subs = submissions(tmp_path)
    players = [{"name": "center", "submission": str(subs / "center.py")}, {"name": "random", "scripted": "random"}]
    result = run_tournament(tournament(players, games=2, move_time_limit=5.0), tmp_path / "o")
    assert all(g["forfeit"] is None and g["moves"] >= 7 for g in result.games)
    assert result.leaderboard[0]["player"] == "center"


def test_an_illegal_move_forfeits_the_game(tmp_path: Path) -> None:
    players = [{"name": "stacker", "scripted": "tests.tournament_games:Stack0"}, {"name": "random", "scripted": "random"}]
    result = run_tournament(tournament(players, games=6), None)
    forfeits = [g["forfeit"] for g in result.games if g["forfeit"]]
    assert forfeits and all(f["player"] == "stacker" and f["kind"] == "illegal_action" for f in forfeits)


def test_three_player_game_rotates_seats_and_rates_by_rank() -> None:
    players = [{"name": f"bid{k}", "scripted": f"tests.tournament_games:Bid{k}"} for k in range(3)]
    players.append({"name": "random", "scripted": "random"})
    raw = {"tournament": {"game": {"name": "tests.tournament_games:BidEnv"}, "players": players, "games": 3},
           "meta": {"random_seed": 0}}
    result = run_tournament(validate_tournament(raw, "bid"), None)
    assert len(result.games) == 4 * 3  # every table of three out of four, three seatings each
    for g in result.games:
        assert len(g["players"]) == 3
    seats = {tuple(g["players"]) for g in result.games if set(g["players"]) == {"bid0", "bid1", "bid2"}}
    assert len(seats) == 3
    assert [r["player"] for r in result.leaderboard][0] == "bid2"
    assert [r["player"] for r in result.leaderboard][-1] == "bid0"


def test_swiss_tournament_plays_its_rounds() -> None:
    players = [{"name": f"p{k}", "scripted": "random" if k % 2 else WIN_BLOCK} for k in range(5)]
    result = run_tournament(tournament(players, games=2, pairing="swiss", rounds=3), None)
    assert len(result.games) == 3 * 2 * 2  # two tables a round (one bye), two games a table
    pairs = {frozenset(g["players"]) for g in result.games}
    assert len(pairs) == 3 * 2  # no rematch while one can be avoided
    assert all(len({frozenset(g["players"]) for g in result.games if g["round"] == r}) == 2 for r in range(3))


@pytest.mark.parametrize("player,where,message", [
    ({"name": "x"}, "tournament.players[1]", "expected exactly one of"),
    ({"name": "x", "scripted": "random", "submission": "a.py"}, "tournament.players[1]", "exactly one"),
    ({"name": "x", "checkpoint": "no/such/dir"}, "tournament.players[1].checkpoint", "no run directory"),
    ({"name": "x", "submission": "no_such.py"}, "tournament.players[1].submission", "no Python file"),
    ({"name": "x", "scripted": "nowhere:Nothing"}, "tournament.players[1].scripted", "cannot load policy"),
    ({"name": "x", "scripted": "random", "snapshot": 1}, "tournament.players[1].snapshot", "only a checkpoint"),
    ({"name": "random", "scripted": "random"}, "tournament.players[1].name", "names players[0] already"),
], ids=["none", "two", "checkpoint", "submission", "scripted", "snapshot", "name"])
def test_bad_players_are_one_line_errors_at_their_key(player: dict, where: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        tournament([{"name": "random", "scripted": "random"}, player])
    assert err.value.path == where and message in err.value.message


def test_a_single_agent_env_or_too_few_players_is_refused() -> None:
    raw = {"tournament": {"game": {"name": "CartPole-v1"}, "players": []}}
    with pytest.raises(SpecError, match="single-agent env") as err:
        validate_tournament(raw, "t")
    assert err.value.path == "tournament.game.name"
    with pytest.raises(SpecError, match="seats 2 players; got 1"):
        tournament([{"name": "random", "scripted": "random"}])


def selfplay_run(tmp_path: Path) -> Path:
    """A short PPO self-play run of connect four whose opponent pool holds three snapshots; its trial directory."""
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import validate

    raw = {"agent": [{"name": "sp", "algorithm": {"name": "PPO", "n_epochs": 1, "minibatch_size": 32},
                      "memory": {"name": "OnPolicyBatch", "n_steps": 8}, "net": {"name": "MLP", "hid_layers": [16]},
                      "opponent_pool": {"size": 3, "refresh_frames": 60, "prob": 0.5, "game_seats": 2}}],
           "env": [{"name": "connect_four_batch", "max_frame": 800}], "body": {"product": "outer", "num": 8},
           "meta": {"random_seed": 3, "log_frequency": 10**6}}
    return run_trial(validate(raw, "sp"), tmp_path, "train").out_dir


def test_checkpoint_players_play_a_run_and_its_pool_snapshots(tmp_path: Path) -> None:
    run = selfplay_run(tmp_path / "runs")
    players = [{"name": "final", "checkpoint": str(run)},
               {"name": "oldest", "checkpoint": str(run / "session_0"), "agent": "sp", "snapshot": 0},
               {"name": "random", "scripted": "random"}]
    spec = tournament(players, games=2, opening_moves=2)
    assert spec.tournament.players[0].checkpoint == str((run / "session_0").resolve())
    result = run_tournament(spec, None)
    assert len(result.games) == 6 and not any(g["forfeit"] for g in result.games)
    with pytest.raises(SpecError) as err:
        tournament([players[2], {"name": "x", "checkpoint": str(run), "snapshot": 3}])
    assert err.value.path == "tournament.players[1].snapshot" and "holds 3 snapshots" in err.value.message
    with pytest.raises(SpecError) as err:
        tournament([players[2], {"name": "x", "checkpoint": str(run), "agent": "nobody"}])
    assert err.value.path == "tournament.players[1].agent"
    with pytest.raises(SpecError, match="not a trial or session directory"):
        tournament([players[2], {"name": "x", "checkpoint": str(tmp_path)}])


@pytest.mark.skipif(torch.cuda.is_available(), reason="plays a GPU run where there is no CUDA")
def test_a_checkpoint_trained_on_a_gpu_plays_on_the_cpu(tmp_path: Path, caplog: Any) -> None:
    """Each checkpoint player of a GPU run says once that it plays on the CPU (when it loads, not when checked)."""
    run = selfplay_run(tmp_path / "runs")
    as_if_trained_on_a_gpu(run)
    players = [{"name": "final", "checkpoint": str(run)},
               {"name": "oldest", "checkpoint": str(run), "agent": "sp", "snapshot": 0}]
    with caplog.at_level(logging.WARNING, logger="slm_lab_like"):
        result = run_tournament(tournament(players, games=2, opening_moves=2), None)
    assert len(result.games) == 2 and not any(g["forfeit"] for g in result.games)
    assert sum("it plays on the CPU" in r.getMessage() for r in caplog.records) == 2


def test_a_checkpoint_that_does_not_fit_the_game_is_refused(tmp_path: Path) -> None:
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import validate

    raw = {"agent": [{"name": "cart", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 50}], "meta": {"random_seed": 0, "log_frequency": 10**6}}
    run = run_trial(validate(raw, "cart"), tmp_path, "train").out_dir
    with pytest.raises(SpecError) as err:
        tournament([{"name": "random", "scripted": "random"}, {"name": "cart", "checkpoint": str(run)}])
    assert err.value.path == "tournament.players[1].checkpoint"
    assert "the game's seats give Box(0, 1, (6, 7, 2), int8)" in err.value.message


def test_run_lab_checks_and_runs_a_tournament_spec_in_test_mode(tmp_path: Path, capsys: Any) -> None:
    from slm_lab_like.cli import main

    spec = Path(__file__).resolve().parent.parent / "spec" / "tournament" / "connect_four_league.json"
    assert main(["check", str(spec)]) == 0
    assert main([str(spec), "--mode", "test", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| rank | player |" in out and "6 games, 0 forfeits" in out
    (run,) = tmp_path.iterdir()
    assert json.loads((run / "leaderboard.json").read_text())["games"] == 6


def test_games_decided_by_their_random_opening_are_counted_and_warned(tmp_path: Path, caplog: Any) -> None:
    """Tic-tac-toe ends within 9 plies: with 9 random opening moves no player ever chooses, and the run says so."""
    players = [{"name": "a", "scripted": "random"}, {"name": "b", "scripted": "random"}]
    raw = {"tournament": {"game": {"name": "pettingzoo.classic.tictactoe_v3:env"}, "players": players, "games": 4,
                          "opening_moves": 9}, "meta": {"random_seed": 2}}
    with caplog.at_level("WARNING", logger="slm_lab_like"):
        result = run_tournament(validate_tournament(raw, "ttt", ""), tmp_path)
    assert all(g["moves"] <= 9 for g in result.games)
    board = json.loads((result.out_dir / "leaderboard.json").read_text())
    assert board["decided_by_opening"] == 4
    assert "4 of 4 games ended within their 9 random opening moves" in caplog.text
    caplog.clear()
    raw["tournament"]["opening_moves"] = 2
    with caplog.at_level("WARNING", logger="slm_lab_like"):
        result = run_tournament(validate_tournament(raw, "ttt", ""), None)
    assert "opening moves" not in caplog.text


def kept_run(tmp_path: Path, keep: bool = True) -> Path:
    """A short DQN self-play run of connect four with a checkpoint every 200 frames (memories included), every one kept
    when `keep`; its trial directory."""
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import validate

    raw = {"agent": [{"name": "dqn", "algorithm": {"name": "DQN", "learning_starts": 64},
                      "memory": {"name": "Replay", "capacity": 2000, "batch_size": 32}, "net": {"name": "MLP", "hid_layers": [16]}}],
           "env": [{"name": "connect_four_batch", "max_frame": 900}], "body": {"product": "outer", "num": 8},
           "meta": {"random_seed": 3, "log_frequency": 10**6, "checkpoint_frequency": 400, "checkpoint_memory": True,
                    "checkpoint_keep": keep}}
    return run_trial(validate(raw, "kept"), tmp_path, "train").out_dir


def test_a_run_keeps_every_checkpoints_agents_and_only_the_last_ones_memory(tmp_path: Path) -> None:
    session = kept_run(tmp_path / "runs") / "session_0"
    manifest = json.loads((session / "checkpoint.json").read_text())
    kept = manifest["kept"]
    frames = [k["frame"] for k in kept]
    assert len(kept) >= 3 and frames == sorted(set(frames)) and frames[-1] == sum(manifest["env_frames"])
    assert kept[-1]["folder"] == manifest["folder"]
    folders = sorted(p.name for p in (session / "checkpoints").iterdir())
    assert folders == sorted(k["folder"] for k in kept)
    for k in kept:
        files = sorted(p.name for p in (session / "checkpoints" / k["folder"]).iterdir())
        assert files == (["agent_a0.pt", "memory_a0.pt"] if k is kept[-1] else ["agent_a0.pt"])
    plain = kept_run(tmp_path / "plain", keep=False) / "session_0"
    assert json.loads((plain / "checkpoint.json").read_text())["kept"] == []
    assert len(list((plain / "checkpoints").iterdir())) == 1


def test_checkpoint_players_play_the_checkpoints_a_run_kept_and_name_them_when_one_is_missing(tmp_path: Path) -> None:
    from slm_lab_like.experiment.players import Player

    run = kept_run(tmp_path / "runs")
    frames = [k["frame"] for k in json.loads((run / "session_0" / "checkpoint.json").read_text())["kept"]]
    players = [{"name": "first", "checkpoint": str(run), "frame": frames[0]},
               {"name": "last", "checkpoint": str(run), "frame": frames[-1]}, {"name": "final", "checkpoint": str(run)}]
    spec = tournament(players, games=2, opening_moves=2)
    result = run_tournament(spec, None)
    assert len(result.games) == 6 and not any(g["forfeit"] for g in result.games)
    weights = [[p.detach().clone() for m in vars(Player(s, spec.tournament).policy.agent).values()
                if isinstance(m, torch.nn.Module) for p in m.parameters()] for s in spec.tournament.players]
    assert weights[0]
    assert all(torch.equal(a, b) for a, b in zip(weights[1], weights[2]))  # the last kept is the final agent
    assert not all(torch.equal(a, b) for a, b in zip(weights[0], weights[2]))
    with pytest.raises(SpecError) as err:
        tournament([players[2], {"name": "x", "checkpoint": str(run), "frame": frames[0] + 1}])
    assert err.value.path == "tournament.players[1].frame"
    assert f"kept: {', '.join(map(str, frames))}" in err.value.message and "\n" not in str(err.value)
    plain = kept_run(tmp_path / "plain", keep=False)
    with pytest.raises(SpecError, match=r"kept: none \(its spec did not set meta.checkpoint_keep\)"):
        tournament([players[2], {"name": "x", "checkpoint": str(plain), "frame": frames[0]}])
