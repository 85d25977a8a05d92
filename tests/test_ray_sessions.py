"""A trial's sessions as Ray tasks (`meta.ray.address`, `run --ray-address`): spread over the nodes of a cluster
simulated on loopback (`ray.cluster_utils.Cluster`, every process on 127.0.0.1), every file brought back to the
driver's directory, the same results as a local run, and a session lost with its node going on from its last
checkpoint. The file shipping they rest on is tested without Ray."""
from __future__ import annotations

import csv
import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.experiment.shipping import GONE, DirShipper, apply_changes, pack_dir

# 1. Shipping a directory's changes


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_appended_files_ship_their_new_bytes_and_replaced_ones_whole(tmp_path: Path) -> None:
    src, dst = tmp_path / "node", tmp_path / "driver"
    (src / "checkpoints" / "a").mkdir(parents=True)
    (src / "metrics.csv").write_bytes(b"frame,return\n")
    (src / "checkpoints" / "a" / "agent.pt").write_bytes(b"weights-1")
    shipper = DirShipper(src)
    apply_changes(dst, shipper.changes())
    with open(src / "metrics.csv", "ab") as f:
        f.write(b"10,1.0\n")
    (src / "checkpoint.json").write_text('{"folder": "a"}')
    first = shipper.changes()
    assert ("metrics.csv", len(b"frame,return\n"), b"10,1.0\n") in first  # only the appended bytes
    apply_changes(dst, first)
    tmp = src / "new.json"
    tmp.write_text("{}")
    os.replace(tmp, src / "checkpoint.json")  # an atomic rewrite: a new inode, shipped whole
    (src / "checkpoints" / "a" / "agent.pt").unlink()
    (src / "checkpoints" / "a").rmdir()
    second = shipper.changes()
    assert ("checkpoint.json", 0, b"{}") in second and ("checkpoints/a/agent.pt", GONE, b"") in second
    apply_changes(dst, second)
    assert tree(dst) == tree(src) and not (dst / "checkpoints" / "a").exists()
    assert shipper.changes() == []  # nothing changed since


def test_a_primed_shipper_sends_only_what_changed_after_its_files_came(tmp_path: Path) -> None:
    src, dst = tmp_path / "driver", tmp_path / "node"
    src.mkdir()
    (src / "rows.csv").write_bytes(b"a\nb\n")
    apply_changes(dst, pack_dir(src))
    shipper = DirShipper(dst)
    shipper.prime()
    assert shipper.changes() == []
    (dst / "rows.csv").write_bytes(b"a\n")  # a resume cuts rows back: shorter, shipped whole
    assert shipper.changes() == [("rows.csv", 0, b"a\n")]


def test_a_shipped_path_outside_the_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside the session directory"):
        apply_changes(tmp_path / "d", [("../escape", 0, b"x")])
    assert not (tmp_path / "escape").exists()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a.csv", "b.csv", "c/d.pt"]), st.sampled_from(["append", "replace",
                                                                                           "delete"]),
                          st.binary(max_size=8)), max_size=12))
def test_any_sequence_of_writes_arrives_as_written(tmp_path_factory, ops: list[tuple[str, str, bytes]]) -> None:
    base = tmp_path_factory.mktemp("ship")
    src, dst = base / "src", base / "dst"
    src.mkdir()
    shipper = DirShipper(src)
    for rel, op, data in ops:
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if op == "append":
            with open(path, "ab") as f:
                f.write(data)
        elif op == "replace":
            tmp = path.with_name(path.name + ".new")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        else:
            path.unlink(missing_ok=True)
        apply_changes(dst, shipper.changes())
        assert tree(dst) == tree(src)


# 2. Sessions on a Ray cluster of two nodes, on loopback

SPEC = {
    "agent": [{"name": "ppo", "algorithm": {"name": "PPO", "gamma": 0.98, "lam": 0.8, "n_epochs": 4,
                                             "minibatch_size": 64},
               "memory": {"name": "OnPolicyBatch", "n_steps": 16},
               "net": {"name": "MLP", "hid_layers": [32], "optim": {"name": "Adam", "lr": 0.001}}}],
    "env": [{"name": "CartPole-v1", "max_frame": 4000}],
    "body": {"product": "outer", "num": 4},
    "meta": {"max_session": 4, "random_seed": 7, "log_frequency": 1000, "checkpoint_frequency": 1000},
}


def run_spec(spec: dict, out: Path, address: str | None):
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import validate

    raw = json.loads(json.dumps(spec))
    if address is not None:
        raw["meta"]["ray"] = {**raw["meta"].get("ray", {}), "address": address}
    return run_trial(validate(raw, "ray_sessions"), out)


def returns(session_dir: Path) -> dict[str, list[str]]:
    return {p.name: [r["return"] for r in csv.DictReader(open(p))] for p in sorted(session_dir.glob("metrics_*.csv"))}


@pytest.mark.long
def test_a_trials_sessions_run_on_both_nodes_and_match_a_local_run(cluster, tmp_path: Path) -> None:
    ray_run = run_spec(SPEC, tmp_path / "ray", cluster.address)
    local = run_spec(SPEC, tmp_path / "local", None)
    nodes = {w.node_id for w in cluster.workers}
    ran_on = [s.nodes for s in ray_run.sessions]
    assert all(len(n) == 1 and n[0] in nodes for n in ran_on) and {n[0] for n in ran_on} == nodes
    trial = json.loads((ray_run.out_dir / "trial.json").read_text())
    assert trial["nodes"] == ran_on
    for i in range(4):  # every file a local session writes, on the driver, with the same episodes
        here, there = ray_run.out_dir / f"session_{i}", local.out_dir / f"session_{i}"
        names = {p.name for p in there.iterdir() if not p.name.startswith("events.")}
        assert names <= {p.name for p in here.iterdir()}
        assert returns(here) == returns(there) and returns(here)
        assert json.loads((here / "summary.json").read_text())["nodes"] == ran_on[i]
    assert [s.pair_mean_return(0, 0) for s in ray_run.sessions] == [s.pair_mean_return(0, 0) for s in local.sessions]


@pytest.mark.long
def test_a_session_lost_with_its_node_goes_on_from_its_last_checkpoint(cluster, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="slm_lab_like")
    spec = json.loads(json.dumps(SPEC))
    spec["meta"].update(max_session=1, checkpoint_frequency=500, log_frequency=500)
    spec["env"][0]["max_frame"] = 30_000
    out = tmp_path / "ray"
    done: dict = {}
    driver = threading.Thread(target=lambda: done.update(result=run_spec(spec, out, cluster.address)))
    driver.start()
    deadline = time.monotonic() + 120
    while not list(out.glob("*/session_0/checkpoint.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    manifest = json.loads(next(out.glob("*/session_0/checkpoint.json")).read_text())
    assert manifest["session_frame"] < 30_000
    where = [r.getMessage().rsplit(" ", 1)[1] for r in caplog.records if "runs on Ray node" in r.getMessage()]
    victim = next(w for w in cluster.workers if w.node_id == where[0])
    cluster.remove_node(victim)
    driver.join(timeout=300)
    result = done["result"]
    session = result.sessions[0]
    assert session.nodes[0] == victim.node_id and session.nodes[-1] != victim.node_id and len(session.nodes) >= 2
    assert session.env_frames == [30_000]
    final = json.loads((result.out_dir / "session_0" / "checkpoint.json").read_text())
    assert final["finished"] and final["resumes"], "the second try went on from a checkpoint, not from the start"
    assert final["resumes"][0]["session_frame"] >= manifest["session_frame"]


@pytest.mark.long
def test_a_session_lost_past_its_retries_fails_in_one_line(cluster, tmp_path: Path, caplog) -> None:
    from slm_lab_like.experiment.failures import SessionFailed

    caplog.set_level(logging.INFO, logger="slm_lab_like")
    spec = json.loads(json.dumps(SPEC))
    spec["meta"].update(max_session=1, log_frequency=500)
    spec["env"][0]["max_frame"] = 30_000
    out = tmp_path / "ray"
    done: dict = {}

    def drive() -> None:
        raw = json.loads(json.dumps(spec))
        raw["meta"]["ray"] = {"address": cluster.address, "max_retries": 0}
        from slm_lab_like.experiment.trial import run_trial
        from slm_lab_like.spec.load import validate

        try:
            run_trial(validate(raw, "lost"), out)
        except SessionFailed as err:
            done["error"] = err

    driver = threading.Thread(target=drive)
    driver.start()
    deadline = time.monotonic() + 120
    where: list[str] = []
    while not where and time.monotonic() < deadline:
        where = [r.getMessage().rsplit(" ", 1)[1] for r in caplog.records if "runs on Ray node" in r.getMessage()]
        time.sleep(0.2)
    cluster.remove_node(next(w for w in cluster.workers if w.node_id == where[0]))
    driver.join(timeout=300)
    text = str(done["error"])
    assert text.startswith("session 0: lost on Ray 1 time(s), the last: ") and "\n" not in text, text


@pytest.mark.long
def test_ctrl_c_stops_ray_sessions_with_checkpoints_here_and_resume_goes_on(tmp_path: Path) -> None:
    """SIGINT to `run_lab.py run --ray-address local`: every session checkpoints where it is, the checkpoints reach
    the driver's directory before the run ends (exit 130, one line), and `resume DIR` finishes the run on Ray."""
    import signal
    import subprocess
    import sys

    spec = json.loads(json.dumps(SPEC))
    spec["meta"].update(max_session=2, log_frequency=500, checkpoint_frequency=100_000)  # no periodic checkpoint
    spec["env"][0]["max_frame"] = 150_000
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"s": spec}))
    out = tmp_path / "data"
    lab = str(Path(__file__).resolve().parent.parent / "run_lab.py")
    cmd = [sys.executable, lab, "run", str(path), "--ray-address", "local", "--out", str(out)]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    deadline = time.monotonic() + 120
    while len(list(out.glob("*/session_*/metrics_a0_e0_b0.csv"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # both sessions have sent files: they run
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted: session 0 stopped at frame ") and "with a checkpoint" in line, line
    frames = [json.loads(p.read_text())["session_frame"] for p in sorted(out.glob("*/session_*/checkpoint.json"))]
    assert len(frames) == 2 and all(0 < f < 150_000 for f in frames)
    trial = next(out.glob("s_*"))
    done = subprocess.run([sys.executable, lab, "resume", str(trial)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    assert done.returncode == 0, done.stderr
    for i in range(2):
        summary = json.loads((trial / f"session_{i}" / "summary.json").read_text())
        assert summary["envs"][0]["frames"] == 150_000 and len(summary["nodes"]) == 1


@pytest.mark.long
def test_resuming_one_session_of_a_ray_trial_runs_that_one_on_ray(tmp_path: Path, monkeypatch) -> None:
    from slm_lab_like.experiment.resume import resume_trial

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    spec = json.loads(json.dumps(SPEC))
    spec["meta"]["max_session"] = 2
    first = run_spec(spec, tmp_path, "local")
    (first.out_dir / "session_1" / "summary.json").unlink()  # as if session 1 was killed after its last checkpoint
    resumed = resume_trial(first.out_dir)
    assert [s.index for s in resumed.sessions] == [0, 1] and resumed.sessions[1].nodes
    assert json.loads((first.out_dir / "session_1" / "summary.json").read_text())["nodes"] == resumed.sessions[1].nodes


@pytest.mark.long  # a private Ray's start-up and its workers: half a minute of the default run's 2 cores
def test_a_trial_on_a_private_ray_with_its_judges_there_matches_a_local_run(tmp_path: Path, monkeypatch) -> None:
    """`meta.ray.address: "local"`: 2 sessions as Ray tasks, each env entry's 4 bodies in 2 judges that are Ray actors;
    the files come to the driver's directory and the episodes are those of a local run without Ray."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 2000}], "body": {"product": "outer", "num": 4},
           "meta": {"max_session": 2, "random_seed": 5, "log_frequency": 500}}
    local = run_spec(raw, tmp_path / "local", None)
    raw["env"][0]["remote"] = {"address": "ray", "judges": 2, "resources": {"cpu": 0.25}}
    raw["meta"]["ray"] = {"num_cpus": 2, "resources_per_session": {"cpu": 0.5}}
    on_ray = run_spec(raw, tmp_path / "ray", "local")
    for i in range(2):
        assert returns(on_ray.out_dir / f"session_{i}") == returns(local.out_dir / f"session_{i}")
        assert json.loads((on_ray.out_dir / f"session_{i}" / "summary.json").read_text())["nodes"] == on_ray.sessions[i].nodes
    assert len({n for s in on_ray.sessions for n in s.nodes}) == 1 and (on_ray.out_dir / "trial.json").exists()
