"""Bodies of multi-agent envs in specs: entity mapping (user types change dynamics), clear errors at JSON paths."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.envs.entities import ENTITY_REGISTRY, Runner, register_entity  # noqa: E402
from slm_lab_like.aeb.space import AEBSpace  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class AnchoredRunner(Runner):
    """A runner that never moves, whatever its action (a user-registered type for these tests)."""

    def update(self, action: Any, world: Any) -> None:
        """Stay put."""


@pytest.fixture
def anchored() -> Any:
    """AnchoredRunner registered as "anchored_runner" for one test, then removed from the registry."""
    register_entity("anchored_runner", replace=True)(AnchoredRunner)
    yield AnchoredRunner
    ENTITY_REGISTRY.pop("anchored_runner", None)


def tag(bodies: list[dict] | None = None, **env: Any) -> dict:
    entry = {"name": "tag_arena", "max_frame": 1000, "kwargs": {"size": 6}, **env}
    if bodies is not None:
        entry["bodies"] = bodies
    return {"agent": [{"name": "chasers", "algorithm": {"name": "Random"}},
                      {"name": "runners", "algorithm": {"name": "Random"}}],
            "env": [entry], "body": {"product": "outer", "num": 2}, "meta": {"log_frequency": 10**9}}


FOUR = [{"entity": "chaser"}, {"entity": "chaser"}, {"entity": "runner"}, {"entity": "runner"}]


def runner_rows(runner_type: str) -> list[list[float]]:
    """Own (row, col) of runner_0 over 4 steps of moving right, through a spec mapping it to `runner_type`."""
    bodies = [{"entity": {"type": "chaser", "start": [5, 5]}}, {"entity": {"type": "chaser", "start": [5, 4]}},
              {"entity": {"type": runner_type, "start": [0, 0], "speed": 1}}, {"entity": {"type": "runner", "start": [0, 5]}}]
    space = AEBSpace.build(validate(tag(bodies), "t"), seed=0)
    try:
        space.env_space.reset(0)
        env = space.env_space.envs[0]
        blk = env.blocks[0]
        out = []
        for _ in range(4):
            blk.action[:] = [0, 0, 4, 0]
            env.step()
            out.append([round(float(v) * 5) for v in blk.obs[env.parity][2][:2]])
        return out
    finally:
        space.close()


def test_user_registered_entity_type_changes_the_dynamics_through_a_spec(anchored: Any) -> None:
    assert runner_rows("runner") == [[0, 1], [0, 2], [0, 3], [0, 4]]
    assert runner_rows("anchored_runner") == [[0, 0]] * 4


def test_entity_params_from_the_spec_reach_the_env() -> None:
    bodies = copy.deepcopy(FOUR)
    bodies[0] = {"entity": {"type": "chaser", "speed": 3, "reach": 2}}
    space = AEBSpace.build(validate(tag(bodies), "t"), seed=0)
    try:
        world = space.env_space.envs[0].env.world
        assert (world.entities[0].speed, world.entities[0].reach) == (3, 2)
        assert [type(e).__name__ for e in world.entities] == ["Chaser", "Chaser", "Runner", "Runner"]
    finally:
        space.close()


def test_entities_by_agent() -> None:
    raw = tag(by_agent={"chasers": {"entity": "chaser"}, "runners": {"entity": {"type": "runner", "speed": 2}}})
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        env = space.env_space.envs[0]
        assert [s.players for s in env.slots] == [("chaser_0",), ("chaser_1",), ("runner_0",), ("runner_1",)]
        assert env.env.world.entities[3].speed == 2
    finally:
        space.close()


BAD = [
    (tag([*FOUR[:2], {"entity": "tank"}, FOUR[3]]),
     r'^env\[0\]\.bodies\[2\]\.entity: unknown entity type "tank" for env "tag_arena"; allowed: chaser, runner$'),
    (tag([*FOUR[:2], {"entity": {"type": "slm_lab_like.envs.entities:GridEntity"}}, FOUR[3]]),
     r'^env\[0\]\.bodies\[2\]\.entity: type "slm_lab_like\.envs\.entities:GridEntity" is not allowed by env "tag_arena"; allowed: '),
    (tag([*FOUR[:3], {"entity": {"type": "runner", "speed": 99}}]),
     r"^env\[0\]\.bodies\[3\]\.entity\.speed: expected int in \[0, 8\], got 99 \(int\)$"),
    (tag([*FOUR[:3], {"entity": {"type": "runner", "reach": 1}}]),
     r'^env\[0\]\.bodies\[3\]\.entity: unknown parameter "reach" for entity type "runner"'),
    (tag([*FOUR[:3], {}]), r"^env\[0\]\.bodies\[3\]\.entity: missing: env \"tag_arena\" makes one player per body entity"),
    (tag(FOUR[:3]), r"^env\[0\]\.bodies: expected one entry per body placed in this env \(4: a0e0b0, a0e0b1, a1e0b0, a1e0b1\), got 3$"),
    (tag([{"player": "chaser_9"}, {}, {}, {}]), r'^env\[0\]\.bodies\[0\]\.player: env "tag_arena" has no player "chaser_9"; players: '),
    (tag([{"player": "runner_0"}, {"player": "runner_0"}, {}, {}]),
     r'^env\[0\]\.bodies\[1\]\.player: player "runner_0" is already taken by another body$'),
    (tag([{"role": "referee"}, {}, {}, {}]), r'^env\[0\]\.bodies\[0\]\.role: no free player of role "referee"'),
    (tag([{}, {}, {}, {"null_action": 7}]), r"^env\[0\]\.bodies\[3\]\.null_action: 7 is not in the action space Discrete\(5\)$"),
    (tag([{}, {}, {}, {"null_obs": [0, 1]}]), r"^env\[0\]\.bodies\[3\]\.null_obs: expected 16 numbers \(the observation's size\), got 2$"),
    (tag([{}, {}, {}, {"sight": 3}]), r'^env\[0\]\.bodies\[3\]\.sight: unknown key'),
    (tag(by_agent={"hunters": {"entity": "chaser"}}), r'^env\[0\]\.by_agent\.hunters: no agent named "hunters"; agents: chasers, runners$'),
    (tag([{"entity": "chaser"}, {"entity": "chaser"}, {"entity": "runner"}, {"entity": "runner", "player": "runner_1"}]),
     r"^env\[0\]\.bodies\[3\]: a body with an entity is that entity's player; remove player / role$"),
    (tag(FOUR, kwargs={"entities": ["runner"]}), r"^env\[0\]\.kwargs\.entities: entities are given per body in this spec"),
    (tag(kwargs={"entities": ["chaser", "tank", "runner", "runner"]}),
     r'^env\[0\]\.kwargs\.entities\[1\]: unknown entity type "tank" for env "tag_arena"'),
]


@pytest.mark.parametrize("raw,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_bodies_are_spec_errors_at_their_path(raw: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        validate(raw, "t")


def test_player_counts_must_match() -> None:
    raw = tag()
    raw["body"]["num"] = 1
    with pytest.raises(SpecError, match=r'^env\[0\]: env "tag_arena" has players no body takes: runner_0, runner_1'):
        validate(raw, "t")
    raw["body"]["num"] = 3
    with pytest.raises(SpecError, match=r"^env\[0\]\.bodies\[4\]: env \"tag_arena\" has 4 player\(s\)"):
        validate(raw, "t")


def test_body_options_on_a_gymnasium_env_are_an_error() -> None:
    raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 100, "bodies": [{"player": "x"}]}]}
    with pytest.raises(SpecError, match=r"^env\[0\]\.bodies: per-body options are for multi-agent envs"):
        validate(raw, "t")


def test_entity_error_is_caught_by_the_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slm_lab_like.cli import main

    raw = tag([*FOUR[:2], {"entity": "tank"}, FOUR[3]])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    assert main(["check", str(path)]) == 2
    assert capsys.readouterr().err == (
        f'error: {path}: env[0].bodies[2].entity: unknown entity type "tank" for env "tag_arena"; allowed: chaser, '
        "runner\n")


def test_opponent_pool_keys_are_validated() -> None:
    raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}, "opponent_pool": {"size": 0}}],
           "env": [{"name": "connect_four", "max_frame": 100}], "body": {"num": 2}}
    with pytest.raises(SpecError, match=r"^agent\[0\]\.opponent_pool\.size: expected a value >= 1, got 0$"):
        validate(raw, "t")
    raw["agent"][0]["opponent_pool"] = {"refresh": 10}
    with pytest.raises(SpecError, match=r'^agent\[0\]\.opponent_pool\.refresh: unknown key; did you mean "refresh_frames"\?$'):
        validate(raw, "t")


def test_game_seats_must_make_whole_games() -> None:
    raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}, "opponent_pool": {"game_seats": 3}}],
           "env": [{"name": "connect_four_batch", "max_frame": 100}], "body": {"num": 8}}
    with pytest.raises(SpecError, match=r'^agent\[0\]\.opponent_pool\.game_seats: 8 bodies in env\[0\] '
                                        r'"connect_four_batch" are not whole games of 3 seats$'):
        validate(raw, "t")
    raw["agent"][0]["opponent_pool"]["game_seats"] = 2
    validate(raw, "t")


def test_body_options_on_a_batched_game_are_an_error() -> None:
    raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
           "env": [{"name": "connect_four_batch", "max_frame": 100, "by_agent": {"r": {"player": "player_0"}}}],
           "body": {"num": 4}}
    with pytest.raises(SpecError, match=r'^env\[0\]\.by_agent: "connect_four_batch" takes no per-body options'):
        validate(raw, "t")
