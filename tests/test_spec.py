"""Spec loading and validation: good specs load with defaults, bad ones fail at the right JSON path."""
from __future__ import annotations

import copy
import json

import pytest

from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import TEST_FRAMES, load, load_any, validate, with_mode
from slm_lab_like.spec.search import grid, parse
from tests.conftest import random_spec


def test_good_spec_fills_defaults(raw_spec: dict) -> None:
    spec = validate(raw_spec, "x")
    assert spec.name == "x"
    assert spec.agent[0].algorithm.name == "Random"
    assert spec.env[0].max_frame == 200 and spec.env[0].max_t is None and spec.env[0].vector == "auto"
    assert spec.meta.max_session == 1 and spec.meta.random_seed == 7
    assert spec.body.product == "outer" and spec.body.num == 1


def test_agent_name_defaults_to_index() -> None:
    raw = random_spec()
    del raw["agent"][0]["name"]
    assert validate(raw, "x").agent[0].name == "agent0"


def test_file_with_named_specs(tmp_path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"a": random_spec(), "b": random_spec(n_agents=2)}))
    assert len(load(path, "b").agent) == 2
    with pytest.raises(SpecError, match=r"two.json: the file holds several specs; name one of: a, b"):
        load(path)
    with pytest.raises(SpecError, match=r'two.json: no spec named "c"; the file holds: a, b$'):
        load(path, "c")


def test_single_spec_file_named_after_file(tmp_path) -> None:
    path = tmp_path / "solo.json"
    path.write_text(json.dumps(random_spec()))
    assert load(path).name == "solo"


def test_spec_from_a_pipe(tmp_path) -> None:
    """A spec read from a pipe (the shell's `check <(...)` gives /dev/fd/N) is a spec file like any other, though a
    pipe reads once and load_any reads its file twice."""
    import os
    import threading

    fifo = tmp_path / "piped"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(json.dumps(random_spec())))
    writer.start()
    try:
        assert load_any(fifo).name == "piped" and load(fifo).name == "piped"
    finally:
        writer.join(5)


def test_file_errors(tmp_path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"agent": [}')
    with pytest.raises(SpecError, match=r"bad.json: invalid JSON at line 1 column 12"):
        load(bad)


def _set(raw: dict, path: list, value) -> dict:
    node = raw
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return raw


_DELETE = object()

# (where to change, new value, expected message: the path and what was found / expected)
MALFORMED = [
    ([], {"agent": []}, None),  # replaced below: whole-spec cases
    (["agent"], [], r'^agent: expected a non-empty list, got \[\]$'),
    (["agent"], "random", r'^agent: expected a non-empty list, got "random"$'),
    (["env"], _DELETE, r"^env: missing required key \(expected a non-empty list\)$"),
    (["agnet"], [], r'^agnet: unknown key; did you mean "agent"\?$'),
    (["agent", 0, "algorithm"], _DELETE, r"^agent\[0\]\.algorithm: missing required key"),
    (["agent", 0, "algorithm", "name"], "Randm", r'^agent\[0\]\.algorithm\.name: unknown algorithm "Randm"; did you mean "Random"\?$'),
    (["agent", 0, "algorithm", "name"], 3, r"^agent\[0\]\.algorithm\.name: expected the name of a registered algorithm, got 3$"),
    (["agent", 0, "algorithm", "gamma"], 0.9, r'^agent\[0\]\.algorithm\.gamma: unknown key'),
    (["agent", 0, "algorithm"], "Random", r'^agent\[0\]\.algorithm: expected an object with a "name", got "Random"$'),
    (["agent", 0, "brain"], {}, r'^agent\[0\]\.brain: unknown key; allowed keys: algorithm, memory, name, net, opponent_pool$'),
    (["agent", 0, "name"], "", r"^agent\[0\]\.name: expected a non-empty string"),
    (["agent", 0, "memory"], {"name": "NoSuchMemory"}, r'^agent\[0\]\.memory\.name: unknown memory "NoSuchMemory"'),
    (["agent", 0, "net"], {"name": "NoSuchNet"}, r'^agent\[0\]\.net\.name: unknown net "NoSuchNet"'),
    (["env", 0, "name"], "CartPol-v1", r'^env\[0\]\.name: unknown env "CartPol-v1"; did you mean "CartPole-v1"\?$'),
    (["env", 0, "name"], "nosuchmodule:Env", r'^env\[0\]\.name: cannot import module "nosuchmodule"'),
    (["env", 0, "name"], "gymnasium:NoSuchEnv", r'^env\[0\]\.name: module "gymnasium" has no attribute "NoSuchEnv"$'),
    (["env", 0, "name"], "pettingzoo.classic.tictactoe_v2:env",
     r'^env\[0\]\.name: cannot import module "pettingzoo\.classic\.tictactoe_v2": .*; did you mean "pettingzoo\.classic\.tictactoe_v3"\?$'),
    (["env", 0, "name"], "pettingzoo.clasic.tictactoe_v3:env",
     r'^env\[0\]\.name: cannot import module .*; did you mean "pettingzoo\.classic"\?$'),
    (["env", 0, "name"], "pettingzo.classic.tictactoe_v3:env", r'^env\[0\]\.name: cannot import .*; did you mean "pettingzoo"\?$'),
    (["env", 0, "name"], "pettingzoo.classic.tictactoe_v3:raw_evn",
     r'^env\[0\]\.name: module "pettingzoo\.classic\.tictactoe_v3" has no attribute "raw_evn"; did you mean '
     r'"pettingzoo\.classic\.tictactoe_v3:raw_env"\?$'),
    (["env", 0, "name"], "pettingzoo.classic:tictactoe_v3",
     r'^env\[0\]\.name: "pettingzoo\.classic:tictactoe_v3" is not an env: a module, expected a gymnasium\.Env subclass; '
     r'did you mean "pettingzoo\.classic\.tictactoe_v3:env"\?$'),
    (["env", 0, "max_frame"], "1000", r'^env\[0\]\.max_frame: expected an integer or null, got "1000"$'),
    (["env", 0, "max_frame"], 0, r"^env\[0\]\.max_frame: expected a value >= 1, got 0$"),
    (["env", 0, "max_frame"], 1.5, r"^env\[0\]\.max_frame: expected an integer or null, got 1.5$"),
    (["env", 0, "max_frame"], _DELETE, r"^env\[0\]: expected a budget: max_frame, max_episode or both \(whichever comes first ends it\)$"),
    (["env", 0, "max_t"], -5, r"^env\[0\]\.max_t: expected a value >= 1, got -5$"),
    (["env", 0, "vector"], "threads", r'^env\[0\]\.vector: expected one of "auto", "native", "sync", "async", "envpool", got "threads"$'),
    (["env", 0, "kwargs"], [1], r"^env\[0\]\.kwargs: expected an object of any value, got \[1\]$"),
    (["env", 0, "max_fame"], 10, r'^env\[0\]\.max_fame: unknown key; did you mean "max_frame"\?$'),
    (["body", "product"], "cross", r'^body\.product: expected one of "outer", "inner", "custom", got "cross"$'),
    (["body", "num"], "2", r'^body\.num: expected an integer or a list of integers, got "2"$'),
    (["body", "num"], [1, "2"], r'^body\.num: expected an integer or a list of integers, got \[1, "2"\]$'),
    (["body", "num"], 0, r"^body\.num: expected an integer >= 1, got 0$"),
    (["body", "num"], [1, 2], r"^body\.num: expected one count per env \(1\), got 2: \[1, 2\]$"),
    (["body", "coords"], [[0, 0, 0]], r'^body\.coords: only used with product "custom", got product "outer"$'),
    (["meta", "max_session"], 0, r"^meta\.max_session: expected a value >= 1, got 0$"),
    (["meta", "max_session"], True, r"^meta\.max_session: expected an integer, got true$"),
    (["meta", "random_seed"], "42", r'^meta\.random_seed: expected an integer or null, got "42"$'),
    (["meta", "log_freq"], 10, r'^meta\.log_freq: unknown key; did you mean "log_frequency"\?$'),
    (["search"], {"env": [{"max_frame__grid": [1, 2]}]}, r'^search\.env\[0\]\.max_frame__grid: unknown search kind "grid"; expected one of grid_search, choice'),
    (["search"], {"env": [{"max_t__unifrom": [5, 10]}]},
     r'^search\.env\[0\]\.max_t__unifrom: unknown search kind "unifrom"; did you mean "uniform"\?$'),
    (["search"], {"env": [{"max_frame__grid_search": []}]}, r"^search\.env\[0\]\.max_frame__grid_search: expected a non-empty list, got \[\]$"),
    (["search"], {"env": [{"max_t__uniform": [5, 1]}]}, r"^search\.env\[0\]\.max_t__uniform: expected low < high, got \[5, 1\]$"),
    (["search"], {"env": [{"max_frame__randint": [1.5, 10]}]}, r"^search\.env\[0\]\.max_frame__randint: expected \[low, high\] integers"),
    (["search"], {"env": [{"max_frame": 5}]}, r"^search\.env\[0\]\.max_frame: expected a search variable KEY__KIND or a nested block, got 5$"),
    (["search"], {"env": [{"max_frame__grid_search": ["a", "b"]}]}, r'^search\.env\[0\]\.max_frame__grid_search: a trial would set env\[0\]\.max_frame to "a": expected an integer or null, got "a"$'),
    (["search"], {"meta": {"max_sesion__choice": [1, 2]}}, r'^search\.meta\.max_sesion__choice: a trial would set meta\.max_sesion to 1: unknown key; did you mean "max_session"\?$'),
]
MALFORMED = MALFORMED[1:]


@pytest.mark.parametrize("where,value,message", MALFORMED,
                         ids=[".".join(map(str, m[0])) + ("-deleted" if m[1] is _DELETE else f"={m[1]!r}"[:30])
                              for m in MALFORMED])
def test_malformed_spec_reported_at_path(where: list, value, message: str) -> None:
    raw = copy.deepcopy(random_spec())
    _set(raw, where, value)
    with pytest.raises(SpecError, match=message):
        validate(raw, "x")


def test_error_names_the_file(tmp_path) -> None:
    raw = random_spec()
    raw["agent"][0]["algorithm"]["name"] = "Randm"
    path = tmp_path / "x.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(SpecError) as info:
        load(path)
    assert str(info.value) == f'{path}: agent[0].algorithm.name: unknown algorithm "Randm"; did you mean "Random"?'
    assert "\n" not in str(info.value)


def test_not_an_object() -> None:
    with pytest.raises(SpecError, match=r"^expected a spec object, got \[1\]$"):
        validate([1], "x")


def test_search_variables_parsed_and_grid_expanded() -> None:
    block = {"env": [{"max_frame__grid_search": [100, 200], "max_t__randint": [5, 50]}],
             "meta": {"random_seed__choice": [1, 2, 3]}}
    variables = parse(block)
    assert [(v.path, v.kind) for v in variables] == [
        ("env[0].max_frame", "grid_search"), ("env[0].max_t", "randint"), ("meta.random_seed", "choice")]
    assert grid(variables) == [{"env[0].max_frame": 100}, {"env[0].max_frame": 200}]
    raw = random_spec()
    raw["search"] = block
    assert validate(raw, "x").search == block


def test_modes_cap_budgets() -> None:
    raw = random_spec(max_frame=10**6)
    raw["env"].append({"name": "CartPole-v1", "max_episode": 1000})
    raw["meta"]["max_session"] = 4
    spec = with_mode(validate(raw, "x"), "test")
    assert [e.max_frame for e in spec.env] == [TEST_FRAMES, TEST_FRAMES]
    assert [e.max_episode for e in spec.env] == [None, 1000]  # kept: the frame cap ends it first, never later
    assert spec.meta.max_session == 1
    assert with_mode(validate(raw, "x"), "train").env[0].max_frame == 10**6
