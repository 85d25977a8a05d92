"""Entity registry: declared parameters, registration by name or module:Class, and one-line errors naming where."""
from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.envs.entities import (
    ENTITY_REGISTRY,
    Chaser,
    Entity,
    EntityError,
    EntitySpace,
    Param,
    Runner,
    entity_from_spec,
    make_entity,
    register_entity,
    resolve_entity_class,
)

SPACE = EntitySpace(env="tag_arena", allowed=("runner", "chaser"))


class Sprinter(Runner):
    """An unregistered runner subclass, reachable only as tests.test_entities:Sprinter."""

    speed = 3


@pytest.fixture
def registry() -> Iterator[dict]:
    """The global registry, restored after the test so test-registered types do not leak."""
    saved = dict(ENTITY_REGISTRY)
    yield ENTITY_REGISTRY
    ENTITY_REGISTRY.clear()
    ENTITY_REGISTRY.update(saved)


def test_builtin_types_are_registered_with_defaults() -> None:
    assert ENTITY_REGISTRY["runner"] is Runner and ENTITY_REGISTRY["chaser"] is Chaser
    chaser = make_entity("chaser")
    assert chaser.type_name == "chaser" and chaser.role == "chaser"
    assert chaser.params == {"speed": 1, "sight": 16, "reach": 1}
    assert make_entity("runner", {"speed": 2}).speed == 2
    assert chaser.position.tolist() == [0, 0] and chaser.alive


def test_params_are_per_instance_and_converted() -> None:
    a = make_entity("chaser", {"reach": 3})
    b = make_entity("chaser")
    assert (a.reach, b.reach) == (3, 1)
    assert type(make_entity("runner", {"speed": np.int64(2)}).speed) is int


def test_subclass_overrides_default_and_inherits_validation() -> None:
    assert Sprinter().speed == 3
    assert Sprinter.param_specs["speed"].high == 8
    with pytest.raises(EntityError, match=r"^Bad\.speed: expected int in \[0, 8\], got -1 \(int\)$"):

        class Bad(Runner):
            speed = -1


def test_register_user_type_and_make_it(registry: dict) -> None:
    @register_entity("fast_runner")
    class FastRunner(Runner):
        speed = 2

    entity = make_entity("fast_runner", where="body[0].entity", space=SPACE)
    assert isinstance(entity, FastRunner) and entity.type_name == "fast_runner" and entity.speed == 2
    assert "fast_runner" in SPACE.allowed_names()


def test_register_rejects_a_different_class_under_a_taken_name(registry: dict) -> None:
    with pytest.raises(ValueError, match="already registered"):

        @register_entity("runner")
        class Other(Runner):
            pass

    with pytest.raises(TypeError, match="needs an Entity subclass"):
        register_entity("thing")(dict)
    with pytest.raises(ValueError, match="identifier"):
        register_entity("not a name")


def test_module_class_path() -> None:
    entity = make_entity("tests.test_entities:Sprinter", where="body[1].entity", space=SPACE)
    assert isinstance(entity, Sprinter) and entity.speed == 3
    assert resolve_entity_class("slm_lab_like.envs.entities:Chaser") is Chaser


def test_type_not_allowed_by_env_is_one_clear_line(registry: dict) -> None:
    @register_entity("tank")
    class Tank(Entity):
        armor = Param(3, int, low=0)

        def update(self, action: object, world: object) -> None:
            """Tanks do not move."""

    with pytest.raises(EntityError) as info:
        make_entity("tank", where="body[2].entity", space=SPACE)
    assert str(info.value) == 'body[2].entity: type "tank" is not allowed by env "tag_arena"; allowed: chaser, runner'
    assert info.value.path == "body[2].entity"
    assert "\n" not in str(info.value)


def test_unknown_types_name_where_and_what_is_allowed() -> None:
    with pytest.raises(EntityError) as info:
        make_entity("runer", where="body[0].entity", space=SPACE)
    assert str(info.value) == 'body[0].entity: unknown entity type "runer" for env "tag_arena"; did you mean "runner"?'
    with pytest.raises(EntityError, match=r'^env\[1\]\.entity: unknown entity type "zzz"; known types: .*runner'):
        make_entity("zzz", where="env[1].entity")
    with pytest.raises(EntityError, match=r'^e: cannot import entity type "no_such_module:X"'):
        make_entity("no_such_module:X", where="e")
    with pytest.raises(EntityError, match=r'^e: "slm_lab_like.envs.entities:Param" is not an Entity subclass$'):
        make_entity("slm_lab_like.envs.entities:Param", where="e", space=SPACE)
    with pytest.raises(EntityError, match=r'^e: type "entity" is not allowed by env "tag_arena"; allowed: chaser, runner$'):
        make_entity("slm_lab_like.envs.entities:Entity", where="e", space=SPACE)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"speed": -1}, r"^body\[3\]\.entity\.speed: expected int in \[0, 8\], got -1 \(int\)$"),
        ({"speed": "fast"}, r'^body\[3\]\.entity\.speed: expected int in \[0, 8\], got "fast" \(str\)$'),
        ({"speed": 1.5}, r"^body\[3\]\.entity\.speed: expected int in \[0, 8\], got 1.5 \(float\)$"),
        ({"reach": True}, r"^body\[3\]\.entity\.reach: expected int in \[0, 8\], got True \(bool\)$"),
        ({"rech": 2}, r'^body\[3\]\.entity: unknown parameter "rech" for entity type "chaser"; did you mean "reach"\?$'),
        ({"armor": 2}, r'^body\[3\]\.entity: unknown parameter "armor" for entity type "chaser"; known parameters: '),
    ],
)
def test_bad_params_are_one_clear_line(params: dict, message: str) -> None:
    with pytest.raises(EntityError, match=message):
        make_entity("chaser", params, where="body[3].entity", space=SPACE)


def test_param_kinds() -> None:
    assert Param(0.5, float, low=0.0, high=1.0).check(1, "x") == 1.0
    with pytest.raises(EntityError, match=r"^x: expected float in \[0, 1\], got nan \(float\)$"):
        Param(0.5, float, low=0.0, high=1.0).check(float("nan"), "x")
    assert Param(False, bool).check(True, "x") is True
    with pytest.raises(EntityError, match=r"^x: expected bool, got 1 \(int\)$"):
        Param(False, bool).check(1, "x")
    with pytest.raises(EntityError, match=r"^x: expected str, one of 'a', 'b', got \"c\" \(str\)$"):
        Param("a", str, choices=("a", "b")).check("c", "x")
    with pytest.raises(EntityError, match=r"^default: "):
        Param(-1, int, low=0)
    assert "capture radius" in Chaser.describe()["reach"]


def test_entity_from_spec_forms() -> None:
    assert entity_from_spec("runner").type_name == "runner"
    assert entity_from_spec({"type": "chaser", "reach": 2}, space=SPACE).reach == 2
    with pytest.raises(EntityError, match=r'^entities\[0\]: missing "type"; allowed: chaser, runner$'):
        entity_from_spec({"speed": 2}, "entities[0]", SPACE)
    with pytest.raises(EntityError, match=r"^entities\[0\]: expected a type name or an object with \"type\", got 3 \(int\)$"):
        entity_from_spec(3, "entities[0]", SPACE)  # type: ignore[arg-type]
    runner = Runner()
    assert SPACE.make(runner, "entities[0]") is runner


def test_base_update_must_be_defined() -> None:
    class Rock(Entity):
        pass

    with pytest.raises(NotImplementedError, match="defines no update rule"):
        Rock().update(0, None)
    assert Rock.type_name.endswith("Rock") and not Rock().captures(Rock())


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-20, 20), st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.none()))
def test_speed_validation_accepts_exactly_ints_in_range(value: object) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 8
    if ok:
        assert make_entity("runner", {"speed": value}).speed == value
    else:
        with pytest.raises(EntityError) as info:
            make_entity("runner", {"speed": value}, where="w")
        assert re.match(r"^w\.speed: expected int in \[0, 8\], got ", str(info.value))
