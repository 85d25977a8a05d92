"""Judges the lab starts for an env entry (`remote: {"address": "spawn" | "ray", "judges": N}`): the bodies shared
out over them with the same episodes as local copies, a lost judge replaced with the episodes it cut dropped and
counted, and every option that cannot act refused by `check` in one line at its key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.cli import main
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate

RANDOM = {"name": "random", "algorithm": {"name": "Random"}}


def spec(remote: dict | None, bodies: int = 4, frames: int = 2000, meta: dict | None = None) -> dict:
    env = {"name": "CartPole-v1", "max_frame": frames, **({"remote": remote} if remote is not None else {})}
    return {"agent": [RANDOM], "env": [env], "body": {"product": "outer", "num": bodies},
            "meta": {"random_seed": 3, "log_frequency": 200, **(meta or {})}}


def rows(result) -> list[tuple]:
    return sorted((c, r["return"], r["t"]) for c, m in result.metrics.items() for r in m.rows)


def test_bodies_over_three_spawned_judges_play_the_episodes_of_local_copies() -> None:
    local = Session(validate(spec(None, bodies=5), "local"), seed=3).run()
    shared = Session(validate(spec({"address": "spawn", "judges": 3}, bodies=5), "shared"), seed=3).run()
    assert rows(shared) == rows(local) and rows(local)


def test_a_killed_judge_is_replaced_and_the_episodes_it_cut_are_dropped() -> None:
    remote = {"address": "spawn", "judges": 2, "heartbeat": 0.5, "timeout": 5.0}
    s = validate(spec(remote, bodies=4, frames=2000), "lost")
    space = AEBSpace.build(s, 3)
    lab_env = space.env_space.envs[0]
    shards = lab_env.venv
    first = shards.judges.procs[0]
    killed = []

    def kill_once(frame: int, wall: float, metrics: dict) -> None:
        if not killed:
            first.kill()
            killed.append(frame)

    session = Session(s, seed=3, on_progress=kill_once)
    try:
        result = session.run_space(space)
    finally:
        space.close()
    assert killed and shards.replaced == 1 and shards.judges.procs[0] is None  # closed with the env
    assert result.env_dropped == [2]  # judge 0's block of two bodies: their running episodes cut, dropped
    assert result.env_frames == [2000]
    assert result.summary()["envs"][0]["dropped"] == 2
    ends = [r for m in result.metrics.values() for r in m.rows]
    assert sum(r["t"] for r in ends) < 2000 and all(r["t"] <= 500 for r in ends)


@pytest.mark.parametrize("remote, key, message", [
    ({"address": "tcp://127.0.0.1:5555", "judges": 2}, "env[0].remote.judges",
     'a judge address is one judge; several are for judges the lab starts (address "spawn" or "ray")'),
    ({"address": "spawn", "resources": {"cpu": 1}}, "env[0].remote.resources",
     'for judges the lab places on Ray (address "ray"), not "spawn"'),
    ({"address": "spawn", "curve": True}, "env[0].remote.curve",
     'for judges the lab places on Ray (address "ray"), not "spawn"'),
    ({"address": "ray"}, "env[0].remote.address", "judges on Ray need the run on Ray: set meta.ray.address"),
    ({"address": "ray", "secret_env": "X"}, "env[0].remote", 'judges the lab starts ("ray") are its own'),
    ({"address": "spawn", "judges": 5}, "env[0].remote.judges", "5 judges for 4 bodies: each judge hosts at least one"),
    ({"address": "spawn", "judges": 0}, "env[0].remote.judges", "expected a value >= 1, got 0"),
    ({"address": "spawn", "judgs": 2}, "env[0].remote.judgs", "judges"),
])
def test_check_refuses_what_lab_judges_cannot_do_in_one_line(tmp_path: Path, capsys, remote: dict, key: str,
                                                             message: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"s": spec(remote)}))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {key}: ") and message in err and err.count("\n") == 1, err


def test_a_run_with_judges_on_ray_plays_here_without_a_cluster() -> None:
    """eval and enjoy of such a run play its env in the lab's own process; going on with it (resume) keeps Ray."""
    from slm_lab_like.spec.load import spec_of_run
    from slm_lab_like.spec.validate import to_plain

    raw = spec({"address": "ray", "judges": 2}, meta={"ray": {"address": "local"}})
    plain = json.loads(json.dumps(to_plain(validate(raw, "onray"))))
    assert spec_of_run(plain, play=True).env[0].remote is None
    assert spec_of_run(plain).env[0].remote.address == "ray"


def test_check_refuses_a_judge_a_private_ray_could_never_place(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    raw = spec({"address": "ray", "judges": 2, "resources": {"cpu": 64}}, meta={"ray": {"address": "local",
                                                                                       "num_cpus": 2}})
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"s": raw}))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: env[0].remote.resources.cpu: a judge of env[0] asks for 64 CPUs and the private "
                   "local Ray has 2 (meta.ray.num_cpus): it could never start\n")
