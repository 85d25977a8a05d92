"""The examples the docs walk through, run as their readers run them: a user's algorithm in a module beside its spec
(examples/write_an_algorithm, docs/write-an-algorithm.md), checked, trained, killed and resumed from its directory;
a user's lab env; a user's game searched by expert iteration (examples/search_your_own_game)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slm_lab_like.analysis.ratings import seat_records
from tests.processes import kill_lab_at

ROOT = Path(__file__).resolve().parent.parent
ALGORITHM = ROOT / "examples" / "write_an_algorithm"
SPEC = "tiny_ppo_cartpole.json"


def lab(*args: str, cwd: Path = ALGORITHM, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_lab.py"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_a_user_algorithm_beside_its_spec_is_checked(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """check from the example's directory, as the tutorial runs it (the lab imports modules from there)."""
    import sys

    from slm_lab_like.cli import main

    elsewhere = lab("check", str(ALGORITHM / SPEC), cwd=ROOT)  # its module is not importable from there
    assert elsewhere.returncode == 2 and 'cannot import module "tiny_ppo"' in elsewhere.stderr
    monkeypatch.chdir(ALGORITHM)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() makes the current directory importable, for this test
    assert main(["check", SPEC]) == 0
    assert capsys.readouterr().out == f"{SPEC}: tiny_ppo_cartpole: ok\n"
    assert main(["check", SPEC, "--set", "agent[0].algorithm.n_step=64"]) == 2
    assert capsys.readouterr().err == f'error: {SPEC}: agent[0].algorithm.n_step: unknown key; did you mean "n_steps"?\n'
    sys.modules.pop("tiny_ppo", None)


def resumed_trial(out: Path, args: tuple[str, ...]) -> dict:
    """Run the example until its first checkpoint, kill it, resume it from its directory; its trial.json."""
    kill_lab_at(Path(SPEC), out, "*/session_0/checkpoint.json", cwd=ALGORITHM, args=args, timeout=300)
    (trial,) = out.iterdir()
    done = lab("resume", str(trial), "-q")
    assert done.returncode == 0, done.stderr
    return json.loads((trial / "trial.json").read_text())


@pytest.mark.slow
@pytest.mark.long  # 20 s; resume after a kill is held in the default run by tests/test_resume.py
def test_a_user_algorithm_is_checkpointed_killed_and_resumed(tmp_path: Path) -> None:
    record = resumed_trial(tmp_path / "out", ("--set", "env[0].max_frame=3000", "--set", "meta.max_session=1",
                                              "--set", "meta.checkpoint_frequency=1000"))
    manifest = json.loads(next((tmp_path / "out").glob("*/session_0/checkpoint.json")).read_text())
    assert manifest["finished"] and len(manifest["resumes"]) == 1 and manifest["env_frames"][0] >= 3000
    assert record["pairs"][0]["agent"] == "tiny_ppo"


@pytest.mark.slow
@pytest.mark.long
def test_a_user_algorithm_learns_cartpole_through_a_kill_and_resume(tmp_path: Path) -> None:
    """The example spec as shipped (3 sessions, 200k frames each), killed at its first checkpoint and resumed: every
    session's final 100-episode mean return is at least 475."""
    record = resumed_trial(tmp_path / "out", ())
    print(f"TinyPPO, seeds {record['seeds']}: {record['pairs'][0]['per_session']} in {record['wall_time']} s")
    assert min(record["pairs"][0]["per_session"]) >= 475


LAB_ENV = ROOT / "examples" / "write_a_lab_env"


def test_the_lab_env_example_keeps_the_contract_and_learns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Corridors passes check_lab_env as docs/write-a-lab-env.md runs it, and its spec learns: the 64 bodies' PPO
    reaches its target_return of 0.9 (seed 1) well within the budget."""
    from slm_lab_like.envs.base import Clock
    from slm_lab_like.envs.checker import check_lab_env
    from slm_lab_like.experiment.session import Session
    from slm_lab_like.spec.load import load

    monkeypatch.syspath_prepend(str(LAB_ENV))
    monkeypatch.chdir(LAB_ENV)
    from corridor import Corridors

    check_lab_env(lambda: Corridors("corridor", 8, Clock(max_frame=10**9), length=6))
    result = Session(load("ppo_corridor.json"), seed=1).run()
    reached = result.first_reach(0, 0, 0.9)
    assert reached is not None and reached[0] < 20_000, reached


SEARCH_GAME = ROOT / "examples" / "search_your_own_game"


def test_a_users_game_class_rebuilds_every_position_the_pettingzoo_env_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/search_your_own_game/tictactoe.py against PettingZoo's own tictactoe_v3 over random games: each
    observation rebuilds to a position with the env's legal moves and the same observation back."""
    from pettingzoo.classic import tictactoe_v3

    monkeypatch.syspath_prepend(str(SEARCH_GAME))
    from tictactoe import TicTacToe

    env, rng, positions = tictactoe_v3.env(), np.random.default_rng(0), 0
    for episode in range(50):
        env.reset(seed=episode)
        for _ in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            game = TicTacToe.from_observation(obs)
            assert game.legal_actions() == np.flatnonzero(obs["action_mask"]).tolist()
            assert (game.observation()["observation"] == obs["observation"]).all()
            positions += 1
            env.step(int(rng.choice(game.legal_actions())))
    assert positions > 200


def test_expert_iteration_over_a_users_game_draws_or_wins_from_both_seats(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's spec as shipped (12k frames of expert iteration on PettingZoo's tictactoe_v3 through the user's
    game class, ~25 s on one core): its greedy raw policy loses at most 2 of 40 games a seat to random play and to
    MCTS with 200 random-rollout simulations (seeds 1 and 2 lost 1 of 80 to each at most, 2026-12-04)."""
    from slm_lab_like.experiment.tournament import run_tournament
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import load, tournament_spec

    monkeypatch.syspath_prepend(str(SEARCH_GAME))
    monkeypatch.chdir(SEARCH_GAME)
    run = run_trial(load("exit_tictactoe.json"), tmp_path).out_dir
    for name, player in {"random": {"scripted": "random"},
                         "mcts_200": {"scripted": "slm_lab_like.envs.mcts:MCTSPlayer", "kwargs": {"simulations": 200}}
                         }.items():
        raw = {"tournament": {"game": {"name": "pettingzoo.classic.tictactoe_v3:env"}, "games": 80,
                              "players": [{"name": "agent", "checkpoint": str(run)}, {"name": name, **player}]},
               "meta": {"random_seed": 1}}
        result = run_tournament(tournament_spec(raw, name), tmp_path / name)
        first, second = seat_records(result.games, "agent")
        assert first[2] <= 2 and second[2] <= 2, (name, first, second)
