"""AEB coordinate resolution: hand-worked outer / inner / custom cases and random shapes."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slm_lab_like.spec.coords import resolve
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.schema import BodySpec


def test_outer_int() -> None:
    assert resolve(BodySpec("outer", 2), 2, 2) == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1)]


def test_outer_per_env_list() -> None:
    assert resolve(BodySpec("outer", [1, 3]), 2, 2) == [
        (0, 0, 0), (0, 1, 0), (0, 1, 1), (0, 1, 2), (1, 0, 0), (1, 1, 0), (1, 1, 1), (1, 1, 2)]


def test_inner() -> None:
    assert resolve(BodySpec("inner", [2, 1, 1]), 3, 3) == [(0, 0, 0), (0, 0, 1), (1, 1, 0), (2, 2, 0)]


def test_inner_needs_square() -> None:
    with pytest.raises(SpecError, match=r'^body.product: "inner" pairs agent i with env i and needs as many agents as envs, got 2 agents and 3 envs$'):
        resolve(BodySpec("inner", 1), 2, 3)


def test_custom_sorted() -> None:
    coords = [[1, 0, 0], [0, 1, 1], [0, 1, 0], [0, 0, 0]]
    assert resolve(BodySpec("custom", coords=coords), 2, 2) == [(0, 0, 0), (0, 1, 0), (0, 1, 1), (1, 0, 0)]


@pytest.mark.parametrize("coords,message", [
    ([[0, 0, 1]], r"^body.coords: agent 0 in env 0 has a gap in its body indices: missing \[0\]$"),
    ([[0, 0, 0], [0, 0, 2]], r"missing \[1\]"),
    ([[0, 0, 0], [0, 0, 0]], r"^body.coords\[1\]: duplicate coordinate \[0, 0, 0\]$"),
    ([[2, 0, 0]], r"^body.coords\[0\]: agent index 2 out of range: the spec has 1 agent\(s\)$"),
    ([[0, 5, 0]], r"^body.coords\[0\]: env index 5 out of range: the spec has 1 env\(s\)$"),
    ([[0, 0, -1]], r"^body.coords\[0\]: body index -1 must be >= 0$"),
    ([[0, 0]], r"^body.coords\[0\]: expected an \[agent, env, body\] triple, got \[0, 0\]$"),
    ([], r'^body.coords: product "custom" needs a non-empty list'),
])
def test_custom_errors(coords: list, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        resolve(BodySpec("custom", coords=coords), 1, 1)


def test_every_agent_and_env_needs_a_body() -> None:
    with pytest.raises(SpecError, match=r"^agent\[1\]: this agent has no body"):
        resolve(BodySpec("custom", coords=[[0, 0, 0], [0, 1, 0]]), 2, 2)
    with pytest.raises(SpecError, match=r"^env\[1\]: this env has no body"):
        resolve(BodySpec("custom", coords=[[0, 0, 0], [1, 0, 0]]), 2, 2)


@given(n_agents=st.integers(1, 4), nums=st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_outer_random_shapes(n_agents: int, nums: list[int]) -> None:
    coords = resolve(BodySpec("outer", nums), n_agents, len(nums))
    assert coords == sorted(coords)
    assert len(coords) == n_agents * sum(nums)
    for a in range(n_agents):
        for e, n in enumerate(nums):
            assert [c[2] for c in coords if c[:2] == (a, e)] == list(range(n))


@given(st.data())
def test_custom_roundtrip(data: st.DataObject) -> None:
    """Any gap-free placement listed in any order resolves to itself, sorted."""
    n_agents, n_envs = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    counts = {(a, e): data.draw(st.integers(0, 3)) for a in range(n_agents) for e in range(n_envs)}
    for a in range(n_agents):
        counts[(a, a % n_envs)] = max(counts[(a, a % n_envs)], 1)
    for e in range(n_envs):
        counts[(e % n_agents, e)] = max(counts[(e % n_agents, e)], 1)
    expected = sorted((a, e, b) for (a, e), n in counts.items() for b in range(n))
    listed = data.draw(st.permutations([list(c) for c in expected]))
    assert resolve(BodySpec("custom", coords=listed), n_agents, n_envs) == expected
