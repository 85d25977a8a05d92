"""Searches over trials: a 2x2 grid x 2 sessions on the local pool and on Ray Tune (ASHA too), trial planning
and sampling, the fitness analysis on hand-made sessions, the progress display, and spec errors."""
from __future__ import annotations

import copy
import csv
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.analysis.fitness import Reference, session_metrics, trial_metrics
from slm_lab_like.analysis.metrics import BodyMetrics
from slm_lab_like.cli import main
from slm_lab_like.experiment.progress import SearchProgress
from slm_lab_like.experiment.search import plan_trials, run_experiment
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from slm_lab_like.spec.search import SearchVar
from tests.conftest import random_spec
from tests.tb import hparams, scalars

ROOT = Path(__file__).resolve().parent.parent
LAM, LR = "agent[0].algorithm.lam", "agent[0].net.optim.lr"


def tiny_search_spec() -> dict:
    """spec/search_cartpole.json (PPO, lam x lr grid, 2 sessions) cut to 300 frames per session."""
    raw = json.loads((ROOT / "spec/search_cartpole.json").read_text())
    raw["env"][0]["max_frame"] = 300
    raw["body"]["num"] = 2
    raw["meta"]["log_frequency"] = 100
    return raw


def check_experiment(out_dir: Path, records: list[dict]) -> None:
    """The files of a finished 2x2 x 2-session search, and what they hold."""
    assert [r["status"] for r in records] == ["done"] * 4
    assert sorted((r["values"][LAM], r["values"][LR]) for r in records) == [
        (0.8, 0.0003), (0.8, 0.001), (0.95, 0.0003), (0.95, 0.001)]
    fitness = [r["fitness"] for r in records]
    assert fitness == sorted(fitness, reverse=True) and all(math.isfinite(f) for f in fitness)
    experiment = json.loads((out_dir / "experiment.json").read_text())
    assert [t["trial"] for t in experiment["trials"]] == [r["trial"] for r in records]
    assert experiment["variables"] == [LAM, LR]
    with open(out_dir / "experiment_table.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["trial"]) for r in rows] == [r["trial"] for r in records]
    assert [int(r["rank"]) for r in rows] == [1, 2, 3, 4] and {LAM, LR, "fitness", "consistency"} <= set(rows[0])
    table = (out_dir / "experiment_table.md").read_text().splitlines()
    assert len(table) == 6 and table[0].startswith("| rank | trial | status |")
    for var in ("agent_0_algorithm_lam", "agent_0_net_optim_lr"):
        png = (out_dir / f"search_{var}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    for r in records:
        trial = Path(r["dir"])
        summary = json.loads((trial / "trial.json").read_text())
        assert summary["values"] == r["values"] and summary["seeds"] == [42, 43]
        assert summary["metrics"]["fitness"] == pytest.approx(r["fitness"])
        assert [s["session"] for s in summary["sessions"]] == [0, 1]
        assert all(s["frames"] >= 300 for s in summary["sessions"])
        assert r["references"][0]["threshold"] == 475 and 15 < r["references"][0]["random_return"] < 30
        spec = json.loads((trial / "spec.json").read_text())
        assert spec["values"] == r["values"] and spec["spec"]["agent"][0]["algorithm"]["config"]["lam"] == r["values"][LAM]
        assert (trial / "trial_returns.png").exists()
        assert hparams(trial) == pytest.approx(r["values"])  # TensorBoard's hparams view of the trial
        assert "rollout/return_mean_100" in scalars(trial / "session_0")
        for i in (0, 1):
            assert json.loads((trial / f"session_{i}" / "summary.json").read_text())["seed"] == 42 + i


@pytest.fixture(scope="module")
def local_search(tmp_path_factory) -> tuple[Path, list[dict], str]:
    """The tiny search run through the command line on the local pool: (experiment dir, records, stdout)."""
    tmp = tmp_path_factory.mktemp("local")
    path = tmp / "search_cartpole.json"
    path.write_text(json.dumps(tiny_search_spec()))
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["search", str(path), "--out", str(tmp / "data"), "-q"]) == 0
    (exp,) = (tmp / "data").iterdir()
    return exp, json.loads((exp / "experiment.json").read_text())["trials"], out.getvalue()


@pytest.mark.slow
def test_local_pool_grid_2x2_with_2_sessions(local_search) -> None:
    exp, records, stdout = local_search
    assert exp.name.startswith("search_cartpole_")
    check_experiment(exp, records)
    assert json.loads((exp / "experiment.json").read_text())["backend"] == "local"
    assert stdout.startswith("| rank | trial |") and f"results: {exp}" in stdout


@pytest.fixture(scope="module")
def ray_cluster():
    """One private Ray for the module (its start-up is the slow part)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}  # on loopback (tests/conftest.py)
    yield ray
    ray.shutdown()


@pytest.mark.long  # a private Ray's start-up and Tune: half a minute and more on 2 cores
def test_ray_tune_grid_2x2_with_2_sessions(ray_cluster, local_search, tmp_path: Path) -> None:
    result = run_experiment(tiny_search_spec(), "search_cartpole", tmp_path, backend="ray")
    check_experiment(result.out_dir, result.records)
    assert (result.out_dir / "ray" / "tune").is_dir()
    by_trial = {r["trial"]: r["fitness"] for r in local_search[1]}
    assert {r["trial"]: r["fitness"] for r in result.records} == pytest.approx(by_trial)  # same trials, same seeds
    node = ray_cluster.get_runtime_context().get_node_id()
    for trial in result.out_dir.glob("trial_*"):  # each session a Ray task, its files written here
        summary = json.loads((trial / "trial.json").read_text())
        assert summary["nodes"] == [[node], [node]] and (trial / "session_1" / "summary.json").exists()


@pytest.mark.long
def test_ray_asha_reports_progress_and_ranks(ray_cluster, tmp_path: Path) -> None:
    raw = random_spec(max_frame=600)
    raw["meta"].update(log_frequency=100, search_backend="ray",
                       ray={"asha": {"grace_frame": 100, "reduction_factor": 2}})
    raw["search"] = {"env": [{"max_t__grid_search": [5, 20, 50, 200]}]}
    result = run_experiment(raw, "asha", tmp_path)
    assert sorted(r["trial"] for r in result.records) == [0, 1, 2, 3]
    assert {r["status"] for r in result.records} <= {"done", "stopped"} and result.records[0]["status"] == "done"
    reports = {}
    for trial in (result.out_dir / "ray" / "tune").glob("ray_trial_*"):
        lines = [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]
        reports[lines[0]["config"]["trial"]] = [r["frame"] for r in lines]
    for r in result.records:  # progress reports from the sessions reach Tune; stopped trials end short
        frames = reports[r["trial"]]
        assert frames == sorted(frames) and (len(frames) >= 6 if r["status"] == "done" else frames[-1] < 600)


def test_trials_are_grid_times_max_trial_draws_and_reproducible() -> None:
    raw = random_spec()
    raw["meta"].update(max_trial=3, random_seed=5)
    raw["search"] = {"meta": {"log_frequency__grid_search": [10, 20], "max_session__randint": [1, 4]}}
    plans = plan_trials(raw, "p")
    assert [p.values["meta.log_frequency"] for p in plans] == [10, 20] * 3  # Ray's order: the grid, repeated
    assert [p.spec.meta.log_frequency for p in plans] == [10, 20] * 3
    assert all(p.spec.meta.max_session == p.values["meta.max_session"] in (1, 2, 3) for p in plans)
    assert all(p.spec.meta.random_seed == 5 for p in plans)
    assert [p.values for p in plan_trials(raw, "p")] == [p.values for p in plans]
    del raw["meta"]["random_seed"]
    assert len({p.spec.meta.random_seed for p in plan_trials(raw, "p")}) == 1  # drawn once, shared by all trials


@settings(max_examples=60, deadline=None)
@given(low=st.floats(1e-4, 10), width=st.floats(1e-3, 10), lo=st.integers(-50, 50), n=st.integers(1, 20),
       seed=st.integers(0, 2**32 - 1))
def test_sampled_values_lie_in_range(low: float, width: float, lo: int, n: int, seed: int) -> None:
    kinds = {"uniform": [low, low + width], "loguniform": [low, low + width], "randint": [lo, lo + n],
             "normal": [low, width], "choice": ["a", [1], 3.5]}
    draws = {k: [SearchVar("x", k, args).sample(np.random.default_rng(seed)) for _ in range(2)]
             for k, args in kinds.items()}
    for kind, (a, b) in draws.items():
        assert a == b  # the same seed draws the same value
    assert low <= draws["uniform"][0] <= low + width and low <= draws["loguniform"][0] <= low + width
    assert lo <= draws["randint"][0] < lo + n and isinstance(draws["randint"][0], int)
    assert math.isfinite(draws["normal"][0]) and draws["choice"][0] in kinds["choice"]


def session(returns: list[float], index: int = 0) -> SessionResult:
    """A hand-made session: one body, episode k (1-based) ends at env frame 10k and wall time k/2 s."""
    body = BodyMetrics((0, 0, 0))
    for k, ret in enumerate(returns, 1):
        body.add(10 * k, 10, ret, 10 * k, 0, math.nan, k / 2, 20.0)
    return SessionResult("hand", index, 100 + index, [10 * len(returns)], [len(returns)], {(0, 0, 0): body},
                         len(returns) / 2, ["a"], ["e"])


def test_session_and_trial_metrics_on_hand_made_sessions() -> None:
    ref = {(0, 0): Reference(random_return=10.0, threshold=15.0)}
    # moving mean: 10 until episode 100, +0.2 per episode to 20 at 150 (15 first at 125), then down to 15
    a = session_metrics(session([10.0] * 100 + [30.0] * 50 + [0.0] * 50), ref)
    assert a["mean_return_100"] == 15.0 and a["strength"] == 1.0
    assert a["frames_to_threshold"] == 1250 and a["seconds_to_threshold"] == 62.5
    assert a["stability"] == 0.5  # keeps (15 - 10) of its best gain (20 - 10) over random
    b = session_metrics(session([25.0] * 100, 1), ref)
    assert (b["strength"], b["frames_to_threshold"], b["seconds_to_threshold"], b["stability"]) == (3.0, 1000, 50.0, 1.0)
    t = trial_metrics([a, b])
    assert t["strength"] == 2.0 and t["strength_std"] == 1.0 and t["consistency"] == 0.5 and t["fitness"] == 1.0
    assert t["frames_to_threshold"] == 1125 and t["stability"] == 0.75 and t["reached"] == 1.0


def test_metrics_without_threshold_or_gain() -> None:
    ref = {(0, 0): Reference(random_return=-20.0)}
    m = session_metrics(session([-30.0] * 50), ref)
    assert m["strength"] == -0.5 and m["frames_to_threshold"] is None and m["stability"] is None
    t = trial_metrics([m, m])
    assert t["consistency"] == 1.0 and t["fitness"] == -0.5 and t["reached"] == 0.0
    assert trial_metrics([session_metrics(session([]), ref)])["fitness"] is None


def test_progress_display_logs_each_change(caplog) -> None:
    progress = SearchProgress("s", 3)
    with caplog.at_level(logging.INFO, logger="slm_lab_like"):
        progress.started({0, 1})
        progress.started({0, 1})
        progress.finished({"trial": 1, "values": {"agent[0].algorithm.gamma": 0.9}, "fitness": 0.25})
        progress.finished({"trial": 0, "values": {"agent[0].algorithm.gamma": 0.99}, "fitness": None})
    assert [r.getMessage() for r in caplog.records] == [
        "search s | trials 0/3 done, 2 running",
        "search s | trials 1/3 done, 1 running | best fitness 0.250 (trial 1: gamma=0.9)",
        "search s | trials 2/3 done, 0 running | best fitness 0.250 (trial 1: gamma=0.9)"]


def with_ppo(raw: dict) -> dict:
    """The random spec with a PPO agent (whose gamma a search may set)."""
    raw["agent"][0]["algorithm"] = {"name": "PPO"}
    return raw


@pytest.mark.parametrize("edit,message", [
    (lambda r: r.update(search={"agent": [{"algorithm": {"gamma__grid": [0.9]}}]}),
     r'^search\.agent\[0\]\.algorithm\.gamma__grid: unknown search kind "grid"'),
    (lambda r: with_ppo(r).update(search={"agent": [{"algorithm": {"gamma__uniform": [0.9, 1.5]}}]}),
     r"^search\.agent\[0\]\.algorithm\.gamma__uniform: a trial would set agent\[0\]\.algorithm\.gamma to 1\.5: "
     r"expected a value <= 1\.0, got 1\.5$"),
    (lambda r: with_ppo(r).update(search={"agent": [{"algorithm": {"gamma__choice": [0.9, "0.99"]}}]}),
     r'^search\.agent\[0\]\.algorithm\.gamma__choice: a trial would set agent\[0\]\.algorithm\.gamma to "0\.99"'),
    (lambda r: with_ppo(r).update(search={"agent": [{"algorithm": {"gama__grid_search": [0.9]}}]}),
     r'^search\.agent\[0\]\.algorithm\.gama__grid_search: .*unknown key; did you mean "gamma"\?$'),
    (lambda r: r.update(search={"env": [{"max_frame__randint": [0, 100]}]}),
     r"^search\.env\[0\]\.max_frame__randint: a trial would set env\[0\]\.max_frame to 0: "),
    (lambda r: r["meta"].update(search_backend="dask"), r'^meta\.search_backend: expected one of "local", "ray"'),
    (lambda r: r["meta"].update(ray={"adress": "auto"}), r'^meta\.ray\.adress: unknown key; did you mean "address"\?$'),
    (lambda r: r["meta"].update(ray={"asha": {"grace_frme": 10}}), r"^meta\.ray\.asha\.grace_frme: unknown key"),
    (lambda r: r["meta"].update(ray={"asha": {"reduction_factor": 1}}),
     r"^meta\.ray\.asha\.reduction_factor: expected a value >= 2, got 1$"),
    (lambda r: r["meta"].update(ray={"resources_per_session": {"cpu": -1}}),
     r"^meta\.ray\.resources_per_session\.cpu: expected a value >= 0, got -1$"),
])
def test_bad_search_and_ray_keys_name_their_path(edit, message) -> None:
    raw = copy.deepcopy(random_spec())
    edit(raw)
    with pytest.raises(SpecError, match=message):
        validate(raw, "bad")
