"""Tag arena: PettingZoo parallel API, multi-step determinism, entity-driven dynamics, captures, clear entity errors."""
from __future__ import annotations

import warnings
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402

from slm_lab_like.envs.entities import ENTITY_REGISTRY, Entity, EntityError, Param, Runner, register_entity  # noqa: E402
from slm_lab_like.envs.games.tag_arena import ENTITY_SPACE, TagArenaEnv, TagWorld  # noqa: E402

STAY, UP, DOWN, LEFT, RIGHT = range(5)


@pytest.fixture
def registry() -> Iterator[dict]:
    """The global entity registry, restored after the test so test-registered types do not leak."""
    saved = dict(ENTITY_REGISTRY)
    yield ENTITY_REGISTRY
    ENTITY_REGISTRY.clear()
    ENTITY_REGISTRY.update(saved)


def positions(env: TagArenaEnv) -> dict[str, list[int]]:
    """Each player's cell as [row, col]."""
    return {name: e.position.tolist() for name, e in env.entities.items()}


# --------------------------------------------------------------------------- PettingZoo API


def test_parallel_api_and_seed_default_entities() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(TagArenaEnv(), num_cycles=300)
        parallel_seed_test(TagArenaEnv, num_cycles=300)


def test_parallel_api_with_captures_and_mixed_entities(registry: dict) -> None:
    @register_entity("fast_runner")
    class FastRunner(Runner):
        speed = 2

    spec = [{"type": "chaser", "reach": 2}, {"type": "chaser", "speed": 2}, {"type": "fast_runner"}, "runner", "runner"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(TagArenaEnv(entities=spec, size=4, max_cycles=50), num_cycles=200)
    env = TagArenaEnv(entities=spec, size=4)
    assert env.possible_agents == ["chaser_0", "chaser_1", "runner_0", "runner_1", "runner_2"]
    assert env.entities["runner_0"].type_name == "fast_runner"


def test_spaces_same_object_and_observations_fresh() -> None:
    env = TagArenaEnv()
    obs, infos = env.reset(seed=0)
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
        assert env.observation_space(agent).shape == (4 + 4 * 3,)
        assert env.observation_space(agent).contains(obs[agent])
    again, _ = env.reset(seed=0)
    assert all(np.array_equal(obs[a], again[a]) and obs[a] is not again[a] for a in obs)
    assert infos == {a: {} for a in env.possible_agents}


# --------------------------------------------------------------------------- determinism


def _trajectory(seed: int, steps: int = 300) -> list:
    """Every step's outputs, plus resets, for ``steps`` steps of seeded random joint actions."""
    env = TagArenaEnv(entities=["chaser", "chaser", "runner", {"type": "runner", "speed": 2}], size=5, max_cycles=25)
    obs, _ = env.reset(seed=seed)
    actions_rng = np.random.default_rng(1234)
    trace: list[Any] = [("reset", {a: o.tobytes() for a, o in obs.items()})]
    for _ in range(steps):
        actions = {a: int(actions_rng.integers(5)) for a in env.agents}
        obs, rew, term, trunc, info = env.step(actions)
        trace.append(({a: o.tobytes() for a, o in obs.items()}, rew, term, trunc, info, list(env.agents)))
        if not env.agents:
            obs, _ = env.reset()
            trace.append(("reset", {a: o.tobytes() for a, o in obs.items()}))
    return trace


def test_multi_step_determinism_across_episodes() -> None:
    first, second = _trajectory(3), _trajectory(3)
    assert first == second
    episodes = sum(1 for step in first if step[0] == "reset") - 1
    assert episodes >= 8  # the 300 steps cross many episode ends (captures and truncations)
    assert any(any(step[2].values()) for step in first if step[0] != "reset")  # some runner was caught
    assert _trajectory(4) != first


# --------------------------------------------------------------------------- entities drive the dynamics


def test_user_registered_fast_runner_moves_two_cells(registry: dict) -> None:
    @register_entity("fast_runner")
    class FastRunner(Runner):
        """Declared twice as fast as a runner."""

        speed = 2

    env = TagArenaEnv(
        entities=[
            {"type": "chaser", "start": [0, 0], "speed": 0},
            {"type": "fast_runner", "start": [6, 6]},
            {"type": "runner", "start": [6, 3]},
        ],
        size=7,
    )
    env.reset(seed=0)
    env.step({"chaser_0": RIGHT, "runner_0": UP, "runner_1": UP})
    assert positions(env) == {"chaser_0": [0, 0], "runner_0": [4, 6], "runner_1": [5, 3]}
    env.step({"runner_0": LEFT, "runner_1": LEFT})
    assert positions(env)["runner_0"] == [4, 4] and positions(env)["runner_1"] == [5, 2]
    for _ in range(3):
        env.step({"runner_0": RIGHT})
    assert positions(env)["runner_0"] == [4, 6]  # the wall stops it


def test_user_entity_with_its_own_update_rule(registry: dict) -> None:
    @register_entity("sleeper")
    class Sleeper(Runner):
        """A runner whose update ignores its action."""

        def update(self, action: object, world: object) -> None:
            """Stay put."""

    env = TagArenaEnv(entities=[{"type": "chaser", "start": [0, 0]}, {"type": "sleeper", "start": [3, 3]}], size=5)
    env.reset(seed=0)
    for action in (UP, LEFT, DOWN, RIGHT):
        env.step({"runner_0": action})
    assert positions(env)["runner_0"] == [3, 3]


def test_reach_is_the_capture_radius() -> None:
    def run(reach: int) -> tuple:
        env = TagArenaEnv(
            entities=[{"type": "chaser", "reach": reach, "start": [2, 0]}, {"type": "runner", "start": [2, 3]}], size=5
        )
        env.reset(seed=0)
        return env.step({"chaser_0": STAY, "runner_0": STAY})

    _, rew, term, _, _ = run(2)
    assert rew == {"chaser_0": 0.0, "runner_0": 0.0} and not any(term.values())
    _, rew, term, trunc, info = run(3)
    assert rew == {"chaser_0": 1.0, "runner_0": -1.0}
    assert term == {"chaser_0": True, "runner_0": True} and not any(trunc.values())
    assert info["runner_0"] == {"caught_by": ["chaser_0"]}


def test_caught_runner_leaves_and_others_go_on() -> None:
    env = TagArenaEnv(
        entities=[
            {"type": "chaser", "start": [0, 0]},
            {"type": "chaser", "start": [0, 2]},
            {"type": "runner", "start": [1, 1]},
            {"type": "runner", "start": [6, 6]},
        ],
        size=7,
    )
    env.reset(seed=0)
    obs, rew, term, trunc, info = env.step({a: STAY for a in env.agents})
    assert rew == {"chaser_0": 0.0, "chaser_1": 0.0, "runner_0": 0.0, "runner_1": 0.0}
    obs, rew, term, trunc, info = env.step({"chaser_0": DOWN, "chaser_1": DOWN, "runner_0": STAY, "runner_1": STAY})
    assert rew == {"chaser_0": 1.0, "chaser_1": 1.0, "runner_0": -1.0, "runner_1": 0.0}  # both chasers reached it
    assert term == {"chaser_0": False, "chaser_1": False, "runner_0": True, "runner_1": False}
    assert env.agents == ["chaser_0", "chaser_1", "runner_1"]
    assert not env.entities["runner_0"].alive
    seen_slot = 4 + 4 * 1  # chaser_0's slot for runner_0 (others in order: chaser_1, runner_0, runner_1)
    assert obs["chaser_0"][seen_slot + 2] == 0.0 and obs["chaser_0"][seen_slot : seen_slot + 2].tolist() == [0.0, 0.0]
    obs, rew, term, trunc, info = env.step({a: STAY for a in env.agents})
    assert set(obs) == {"chaser_0", "chaser_1", "runner_1"}


def test_truncation_at_max_cycles() -> None:
    env = TagArenaEnv(entities=[{"type": "chaser", "start": [0, 0]}, {"type": "runner", "start": [4, 4]}], size=5, max_cycles=3)
    obs, _ = env.reset(seed=0)
    assert obs["chaser_0"][3] == 1.0
    for k in range(3):
        obs, rew, term, trunc, _ = env.step({"chaser_0": STAY, "runner_0": STAY})
        assert not any(term.values())
        assert all(trunc.values()) == (k == 2)
    assert env.agents == [] and obs["runner_0"][3] == 0.0
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_sight_limits_what_a_player_sees() -> None:
    env = TagArenaEnv(
        entities=[{"type": "chaser", "start": [0, 0]}, {"type": "runner", "sight": 2, "start": [3, 0]}], size=5
    )
    obs, _ = env.reset(seed=0)
    assert obs["runner_0"][4:8].tolist() == [0.0, 0.0, 0.0, 1.0]  # chaser out of sight: only its role is known
    assert obs["chaser_0"][4:8].tolist() == [0.75, 0.0, 1.0, 0.0]  # the chaser (sight 16) sees the runner
    obs, *_ = env.step({"runner_0": UP, "chaser_0": STAY})
    assert obs["runner_0"][4:8].tolist() == [-0.5, 0.0, 1.0, 1.0]


def test_speed_zero_never_moves_and_missing_action_means_stay() -> None:
    env = TagArenaEnv(entities=[{"type": "chaser", "speed": 0, "start": [2, 2]}, {"type": "runner", "start": [4, 4]}], size=5)
    env.reset(seed=0)
    env.step({"chaser_0": UP})
    assert positions(env) == {"chaser_0": [2, 2], "runner_0": [4, 4]}


def test_bad_actions_raise() -> None:
    env = TagArenaEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be an int in 0..4"):
        env.step({"chaser_0": 5})
    with pytest.raises(ValueError, match="action must be an int in 0..4"):
        env.step({"chaser_0": 1.5})
    with pytest.raises(ValueError, match="unknown player 'ghost_0'"):
        env.step({"ghost_0": 0})
    env.step({"chaser_0": np.int64(1)})


def test_random_starts_are_distinct_and_respect_fixed_starts() -> None:
    spec = [{"type": "chaser", "start": [1, 1]}] + ["runner"] * 8
    env = TagArenaEnv(entities=spec, size=3)
    for seed in range(20):
        env.reset(seed=seed)
        cells = [tuple(p) for p in positions(env).values()]
        assert len(set(cells)) == 9 and cells[0] == (1, 1)


# --------------------------------------------------------------------------- clear entity errors


def test_entity_type_not_allowed_is_a_clear_error(registry: dict) -> None:
    @register_entity("tank")
    class Tank(Entity):
        armor = Param(3, int, low=0)

        def update(self, action: object, world: object) -> None:
            """Tanks do not move."""

    with pytest.raises(EntityError) as info:
        TagArenaEnv(entities=["chaser", "runner", {"type": "tank"}])
    assert str(info.value) == 'entities[2]: type "tank" is not allowed by env "tag_arena"; allowed: chaser, runner'
    with pytest.raises(EntityError) as info:
        ENTITY_SPACE.make({"type": "tank"}, where="body[2].entity")
    assert str(info.value) == 'body[2].entity: type "tank" is not allowed by env "tag_arena"; allowed: chaser, runner'
    with pytest.raises(EntityError, match=r'^body\[2\]: type "tank" is not allowed'):
        TagArenaEnv(entities=["chaser", "runner", "tank"], where="body")
    with pytest.raises(EntityError, match=r"^entities\[0\]: type \"tank\" is not allowed"):
        TagArenaEnv(entities=[Tank()])


def test_instances_made_by_the_lab_are_accepted() -> None:
    made = [ENTITY_SPACE.make({"type": "chaser", "reach": 0}, "body[0].entity"), ENTITY_SPACE.make("runner", "body[1].entity")]
    env = TagArenaEnv(entities=made, size=4)
    assert env.entities["chaser_0"] is made[0] and env.entities["chaser_0"].reach == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([{"type": "chaser", "reach": -2}], r"^entities\[0\]\.reach: expected int in \[0, 8\], got -2 \(int\)$"),
        ([{"type": "runner", "reach": 1}], r'^entities\[0\]: unknown parameter "reach" for entity type "runner"; known parameters: sight, speed$'),
        (["runner", {"type": "runner", "speed": "2"}], r'^entities\[1\]\.speed: expected int in \[0, 8\], got "2" \(str\)$'),
        ([{"type": "chasr"}], r'^entities\[0\]: unknown entity type "chasr" for env "tag_arena"; did you mean "chaser"\?$'),
        ([{"speed": 1}], r'^entities\[0\]: missing "type"; allowed: chaser, runner$'),
        ([{"type": "runner", "start": [9, 0]}], r"^entities\[0\]\.start: expected \[row, col\] inside the 7x7 grid, got \[9, 0\]$"),
        ([{"type": "runner", "start": [1, 1]}, {"type": "chaser", "start": [1, 1]}], r"^entities: two entities have the same start cell$"),
        ([], r"^entities: expected at least one entity$"),
        (["runner"] * 50, r"^entities: 50 entities do not fit on a 7x7 grid$"),
    ],
)
def test_bad_entity_specs_are_one_clear_line(spec: list, message: str) -> None:
    with pytest.raises(EntityError, match=message):
        TagArenaEnv(entities=spec, size=7)


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    actions=st.lists(st.lists(st.integers(0, 4), min_size=5, max_size=5), min_size=1, max_size=60),
    reach=st.integers(0, 2),
    size=st.integers(3, 6),
)
def test_random_play_keeps_the_arena_consistent(seed: int, actions: list[list[int]], reach: int, size: int) -> None:
    spec = [{"type": "chaser", "reach": reach}, {"type": "chaser", "speed": 2}, "runner", "runner", {"type": "runner", "speed": 2}]
    env = TagArenaEnv(entities=spec, size=size, max_cycles=40)
    env.reset(seed=seed)
    finished: set[str] = set()
    ever_caught: set[str] = set()
    for step_actions in actions:
        if not env.agents:
            break
        live = list(env.agents)
        obs, rew, term, trunc, info = env.step({a: step_actions[i] for i, a in enumerate(live)})
        assert set(obs) == set(rew) == set(term) == set(trunc) == set(info) == set(live)
        for agent in live:
            assert env.observation_space(agent).contains(obs[agent])
            assert not (term[agent] and trunc[agent])
        caught = [a for a in live if a.startswith("runner") and term[a]]
        assert all(rew[a] == -1.0 for a in caught)
        assert sum(rew[a] for a in live if a.startswith("chaser")) == sum(len(info[a]["caught_by"]) for a in caught)
        ever_caught |= set(caught)
        finished |= {a for a in live if term[a] or trunc[a]}
        assert env.agents == [a for a in live if a not in finished]
        for name, entity in env.entities.items():
            r, c = entity.position.tolist()
            assert 0 <= r < size and 0 <= c < size
            if name.startswith("runner"):
                assert entity.alive == (name not in ever_caught)


def test_pure_world_without_the_env() -> None:
    from slm_lab_like.envs.entities import make_entity

    world = TagWorld([make_entity("chaser"), make_entity("runner")], size=(3, 3), starts=[(0, 0), (0, 2)])
    world.reset(np.random.default_rng(0))
    assert world.step([RIGHT, STAY]) == [(0, 1)]
    assert world.runners_left() == 0
    assert world.render().splitlines()[0] == ".C."
