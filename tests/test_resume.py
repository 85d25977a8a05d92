"""Checkpoints and resume: a SIGKILLed run resumed with `resume DIR`, state round trips, atomic commits, errors."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import slm_lab_like.experiment.checkpoint as checkpoint
from slm_lab_like.agents.checkpoint import load_agent, load_memory
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.metrics import metrics_path, read_csv
from slm_lab_like.cli import main
from slm_lab_like.experiment.checkpoint import MANIFEST, read_checkpoint, write_checkpoint
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import load, read_file, spec_of_run, validate
from slm_lab_like.spec.validate import to_plain
from tests.processes import kill_lab_at

ROOT = Path(__file__).resolve().parent.parent
NET = {"name": "MLP", "hid_layers": [16]}


def ppo_spec(max_frame: int, ckpt: int | None, num: int = 2) -> dict:
    return {"agent": [{"name": "ppo", "algorithm": {"name": "PPO", "n_epochs": 2, "minibatch_size": 64},
                       "memory": {"name": "OnPolicyBatch", "n_steps": 64}, "net": NET}],
            "env": [{"name": "CartPole-v1", "max_frame": max_frame}], "body": {"product": "outer", "num": num},
            "meta": {"random_seed": 3, "log_frequency": 10**6, "checkpoint_frequency": ckpt}}


def algo_spec(algorithm: dict, memory: dict | None = None) -> dict:
    raw = ppo_spec(600, 250)
    raw["agent"][0] = {"name": "x", "algorithm": algorithm, "net": NET, **({"memory": memory} if memory else {})}
    return raw


ALGOS = {
    "PPO": ({"name": "PPO", "n_epochs": 2}, {"name": "OnPolicyBatch", "n_steps": 32}),
    "A2C": ({"name": "A2C"}, {"name": "OnPolicyBatch", "n_steps": 8}),
    "REINFORCE": ({"name": "REINFORCE", "normalize_obs": True}, {"name": "OnPolicyBatch", "n_steps": 32}),
    "DQN": ({"name": "DQN", "learning_starts": 100, "train_freq": 4}, {"name": "Replay", "capacity": 1000}),
    "DoubleDQN": ({"name": "DoubleDQN", "learning_starts": 100, "n_step": 3},
                  {"name": "PrioritizedReplay", "capacity": 1000}),
}


def assert_same(a, b, where: str = "state") -> None:
    """Nested state dicts equal: tensors elementwise, containers recursively, the rest by ==."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), where


@pytest.mark.slow
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_sigkill_then_train_at_dir_continues_without_gaps_or_duplicates(tmp_path: Path, monkeypatch) -> None:
    max_frame, num = 20000, 2
    spec_file = tmp_path / "k.json"
    spec_file.write_text(json.dumps(ppo_spec(max_frame, 2000, num)))
    manifest = kill_lab_at(spec_file, tmp_path / "out", f"*/session_0/{MANIFEST}")
    session_dir = manifest.parent
    ckpt = read_checkpoint(session_dir)
    assert not ckpt.finished and ckpt.session_frame < max_frame and not (session_dir / "summary.json").exists()
    saved = torch.load(ckpt.path / "agent_a0.pt", weights_only=True)
    kept = {c: read_csv(metrics_path(session_dir, c))[:n] for c, n in ckpt.rows.items()}

    loaded = {}
    original_restore = checkpoint.restore

    def spy(ckpt_, space, session_dir_):
        metrics = original_restore(ckpt_, space, session_dir_)
        loaded["state"] = copy.deepcopy(space.agent_space.agents[0].state_dict())
        return metrics

    monkeypatch.setattr("slm_lab_like.experiment.session.restore", spy)
    assert main(["resume", f"{session_dir.parent}", "-q"]) == 0

    # right after the load, the agent is the checkpoint's: weights, optimiser, counters, generators
    assert_same(loaded["state"], saved)
    assert saved["opt_step"] > 0 and saved["frame"] == sum(clock["frame"] for clock in ckpt.clocks)
    final = read_checkpoint(session_dir)
    assert final.finished and final.resumes == [ckpt.resume_point]
    summary = json.loads((session_dir / "summary.json").read_text())
    assert max_frame <= summary["envs"][0]["frames"] < max_frame + num  # the clock reached the budget
    assert (session_dir.parent / "trial.json").exists()
    final_agent = torch.load(session_dir / "agent_a0.pt", weights_only=True)
    assert final_agent["frame"] == summary["envs"][0]["frames"] and final_agent["opt_step"] > saved["opt_step"]

    for coord, n in ckpt.rows.items():
        rows = read_csv(metrics_path(session_dir, coord))
        assert json.dumps(rows[:n]) == json.dumps(kept[coord])  # rows up to the checkpoint unchanged (nan loss too)
        assert len(rows) > n
        assert [r["episode"] for r in rows] == list(range(1, len(rows) + 1))  # contiguous, none lost or repeated
        frames = [r["frame"] for r in rows]
        assert all(b > a for a, b in zip(frames, frames[1:]))  # strictly increasing: no duplicate frames
        # no gaps: every frame of the body is in exactly one row's episode, except the episode cut by the
        # checkpoint, discarded on resume (its frames are counted by the clock and show up once, here)
        discarded = ckpt.body_frames[coord] - (frames[n - 1] if n else 0)
        assert 0 <= discarded < 500
        for i, r in enumerate(rows):
            before = frames[i - 1] if i else 0
            assert r["frame"] - before == r["t"] + (discarded if i == n else 0), (coord, i)
        assert rows[n]["frame"] > ckpt.body_frames[coord]
        steps = [r["opt_step"] for r in rows]
        assert all(b >= a for a, b in zip(steps, steps[1:]))  # the learner went on from the checkpoint, not from 0
        assert rows[n]["opt_step"] >= saved["opt_step"]
        env_frames = [r["env_frame"] for r in rows]
        assert all(b > a for a, b in zip(env_frames, env_frames[1:]))
        assert frames[-1] <= summary["envs"][0]["frames"] // num


# the recurrent case takes 10 s: under long (a recurrent net's states in checkpoints are held by the default run's
# tests/test_recurrent.py)
@pytest.mark.parametrize("vector,net", [("sync", "MLP"), ("native", "MLP"),
                                        pytest.param("native", "Recurrent", marks=pytest.mark.long)])
def test_resume_drops_rows_past_the_checkpoint_and_is_deterministic(tmp_path: Path, vector: str, net: str) -> None:
    """Episodes counted as they end (sync) or read off a tape (native); a recurrent net's states come back too."""
    num = 2 if vector == "sync" else 4 if net == "Recurrent" else 16  # a recurrent net steps slower: fewer bodies
    raw = ppo_spec(600 * num, 250 * num, num)
    raw["env"][0]["vector"] = vector
    if net == "Recurrent":
        raw["agent"][0]["net"] = {"name": "Recurrent", "hid_layers": [16], "rnn_hidden": 8}
    raw["meta"]["log_frequency"] = 350 * num
    spec = validate(raw, "t")
    first, second = tmp_path / "a", tmp_path / "b"

    class Stop(Exception):
        pass

    def stop_at(frame, wall, metrics):
        raise Stop

    for d in (first, second):
        with pytest.raises(Stop):
            Session(spec, 0, 3, d, on_progress=stop_at).run()
    ckpt = read_checkpoint(first)
    assert 250 * num <= sum(c["frame"] for c in ckpt.clocks) < 251 * num  # env frames (a native reset step is none)
    if net == "Recurrent":  # the states the bodies had at the checkpoint (actor's and critic's), not zeros
        saved = torch.load(ckpt.path / "agent_a0.pt", weights_only=True)
        assert saved["hidden"][0].shape == (num, 16) and saved["hidden"][0].abs().sum() > 0
    path = metrics_path(first, (0, 0, 0))
    with open(path, "a") as f:  # rows a killed run wrote after its checkpoint
        f.write("9999,999,1,1.0,1.0,9999,1,0.0,1.0,1.0\n")
    results = [Session(spec, 0, 3, d, resume=True).run() for d in (first, second)]
    rows = [read_csv(metrics_path(d, (0, 0, 0))) for d in (first, second)]
    assert all(r["frame"] != 9999 for r in rows[0])
    strip = [[{k: v for k, v in r.items() if k not in ("wall_time", "fps")} for r in rs] for rs in rows]
    assert json.dumps(strip[0]) == json.dumps(strip[1]) and len(strip[0]) > 5
    assert 600 * num <= results[0].env_frames[0] < 600 * num + num


@pytest.mark.parametrize("name", list(ALGOS))
def test_checkpoint_round_trip_of_each_algorithm(tmp_path: Path, name: str) -> None:
    algorithm, memory = ALGOS[name]
    raw = algo_spec(algorithm, memory)
    raw["meta"]["checkpoint_memory"] = True
    spec = validate(raw, name)
    Session(spec, 0, 5, tmp_path).run()
    ckpt = read_checkpoint(tmp_path)
    saved = torch.load(ckpt.path / "agent_a0.pt", weights_only=True)
    assert saved["opt_step"] > 0
    space = AEBSpace.build(spec, 99)
    try:
        agent = space.agent_space.agents[0]
        load_agent(agent, ckpt.path / "agent_a0.pt")
        load_memory(agent, ckpt.path / "memory_a0.pt")
        assert_same(agent.state_dict(), saved)
        assert_same(agent.memory_state_dict(), torch.load(ckpt.path / "memory_a0.pt", weights_only=True))
    finally:
        space.close()


def test_optimiser_state_is_in_the_checkpoint(tmp_path: Path) -> None:
    spec = validate(algo_spec(*ALGOS["PPO"]), "t")
    Session(spec, 0, 5, tmp_path).run()
    saved = torch.load(read_checkpoint(tmp_path).path / "agent_a0.pt", weights_only=True)
    flat = json.dumps(saved["optim"], default=lambda t: "tensor")
    assert "exp_avg" in flat  # Adam moments, not only hyperparameters


def test_replay_memory_round_trip_samples_the_same(tmp_path: Path) -> None:
    raw = algo_spec(*ALGOS["DoubleDQN"])
    raw["meta"]["checkpoint_memory"] = True
    spec = validate(raw, "t")
    Session(spec, 0, 5, tmp_path).run()
    ckpt = read_checkpoint(tmp_path)
    spaces = [AEBSpace.build(spec, s) for s in (1, 2)]
    try:
        mems = []
        for space in spaces:
            agent = space.agent_space.agents[0]
            load_memory(agent, ckpt.path / "memory_a0.pt")
            mems.append(agent.memories[0])
        assert len(mems[0]) > 0 and mems[0].pos == mems[1].pos
        a, b = mems[0].sample(100), mems[1].sample(100)
        assert np.array_equal(a.obs, b.obs) and np.array_equal(a.indices, b.indices)
        assert np.array_equal(a.weights, b.weights)
    finally:
        for space in spaces:
            space.close()


def test_failed_checkpoint_write_leaves_the_previous_one_intact(tmp_path: Path, monkeypatch) -> None:
    spec = validate(ppo_spec(300, None, num=1), "t")
    Session(spec, 0, 5, tmp_path).run()
    before = (tmp_path / MANIFEST).read_text()
    ckpt = read_checkpoint(tmp_path)
    weights = torch.load(ckpt.path / "agent_a0.pt", weights_only=True)

    def broken(algo, path):
        Path(path).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr("slm_lab_like.agents.checkpoint.save_agent", broken)
    space = AEBSpace.build(spec, 5)
    try:
        metrics = checkpoint.restore(ckpt, space, tmp_path)
        with pytest.raises(OSError):
            write_checkpoint(tmp_path, space, metrics, seed=5, session_frame=999, wall_time=1.0, memory=False,
                             finished=False, resumes=[])
    finally:
        space.close()
    assert (tmp_path / MANIFEST).read_text() == before
    assert_same(torch.load(read_checkpoint(tmp_path).path / "agent_a0.pt", weights_only=True), weights)


def test_resume_errors_are_one_line(tmp_path: Path, capsys) -> None:
    def error(*args: str) -> str:
        assert main([*args, "-q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
        return err

    assert "no such directory" in error("resume", f"{tmp_path / 'missing'}")
    assert "not a trial or session directory" in error("resume", f"{tmp_path}")
    spec_file = tmp_path / "s.json"
    spec_file.write_text(json.dumps(ppo_spec(200, None, num=1)))
    assert main([str(spec_file), "--out", str(tmp_path / "out"), "-q"]) == 0
    trial = next((tmp_path / "out").iterdir())
    capsys.readouterr()
    assert "already finished" in error("resume", f"{trial}")
    assert "already finished" in error("resume", f"{trial / 'session_0'}")
    for name in ("summary.json", MANIFEST):
        (trial / "session_0" / name).unlink()
    assert "no checkpoint" in error("resume", f"{trial}")
    assert error("--mode", "train@x") == "error: --mode train@x: a command now: run_lab.py resume DIR\n"
    assert "expected one of train, dev, test" in error("--mode", "bogus")


def test_resume_takes_every_session_of_the_trial_those_not_started_too(tmp_path: Path) -> None:
    """A trial killed before its last session started (more sessions than cores start in turn) has no directory for
    it; `resume DIR` runs it too, not only the sessions with a directory."""
    from slm_lab_like.experiment.record import read_trial

    spec = validate(ppo_spec(200, None, num=1), "t")
    trial = tmp_path / "t_2026_01_01_000000"
    (trial / "session_0").mkdir(parents=True)
    (trial / "spec.json").write_text(json.dumps({"mode": "train", "seeds": [1, 2, 3], "spec": to_plain(spec)}))
    assert read_trial(trial).sessions == [0, 1, 2]
    assert read_trial(trial / "session_0").sessions == [0]


def test_specs_round_trip_through_spec_json() -> None:
    for path in sorted((ROOT / "spec").rglob("*.json")):
        for name, raw in read_file(path).items():
            if "tournament" in raw:  # a tournament spec is not a session spec
                continue
            spec = load(path, name)
            assert spec_of_run(json.loads(json.dumps(to_plain(spec)))) == spec, (path, name)


def test_a_resumed_run_goes_on_keeping_its_checkpoints(tmp_path: Path) -> None:
    """meta.checkpoint_keep across a stop and a resume: the kept list goes on from the manifest, and every folder on
    disk is one it names."""
    raw = ppo_spec(2400, 400, 2)
    raw["meta"].update(checkpoint_keep=True, log_frequency=1100)
    spec = validate(raw, "t")

    class Stop(Exception):
        pass

    def stop_at(frame, wall, metrics):
        raise Stop

    with pytest.raises(Stop):
        Session(spec, 0, 3, tmp_path, on_progress=stop_at).run()
    before = json.loads((tmp_path / MANIFEST).read_text())["kept"]
    Session(spec, 0, 3, tmp_path, resume=True).run()
    after = json.loads((tmp_path / MANIFEST).read_text())["kept"]
    assert len(before) == 2 and after[:2] == before and len(after) > len(before)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == sorted(k["folder"] for k in after)
