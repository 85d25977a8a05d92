"""Load a spec file (one spec, or a map of named specs), fill defaults and validate every key."""
from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import logging
from importlib.resources import files
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym
import torch
import yaml

from slm_lab_like.agents.base import ComponentSpec, space_text
from slm_lab_like.agents.registry import ALGORITHMS, MEMORIES, NETS, Registry
from slm_lab_like.agents.selfplay import pool_problem
from slm_lab_like.spec import search, slmlab
from slm_lab_like.spec.coords import resolve
from slm_lab_like.spec.envs import agent_signatures, check_agents, check_game_seats, plan_envs
from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.overrides import apply as overrides_apply
from slm_lab_like.spec.schema import AgentSpec, BodySpec, EnvSpec, MetaSpec, OpponentPoolConfig, RemoteSpec, Spec, TournamentSpec
from slm_lab_like.spec.tournament import game_spaces, is_tournament, validate_tournament
from slm_lab_like.spec.validate import build_dataclass, show, unknown_key

log = logging.getLogger("slm_lab_like")

TOP_KEYS = ("agent", "env", "body", "meta", "search")
AGENT_KEYS = ("name", "algorithm", "memory", "net", "opponent_pool")


def shipped_specs() -> list[str]:
    """The names of the specs shipped with the lab (slm_lab_like.specs), as `locate` accepts them: demo, benchmark/..."""
    root = files("slm_lab_like.specs")
    names = [f.name[:-5] for f in root.iterdir() if f.name.endswith(".json")]
    names += [f"{d.name}/{f.name[:-5]}" for d in root.iterdir() if d.is_dir() and not d.name.startswith("_")
              for f in d.iterdir() if f.name.endswith(".json")]
    return sorted(names)


def find_spec(path: str | Path) -> Path | None:
    """A spec file: the path as given when it exists (a pipe too: `check <(...)`), else the shipped spec of that name
    (`demo`, `spec/demo.json`, `benchmark/ppo_cartpole`), so `slm-lab demo` works from any directory; None when
    neither is."""
    given = Path(path)
    if given.exists() and not given.is_dir():
        return given
    shipped = files("slm_lab_like.specs").joinpath(*f"{shipped_name(given)}.json".split("/"))
    return Path(str(shipped)) if shipped.is_file() else None


def shipped_name(given: Path) -> str:
    """The shipped spec a path would name: `spec/demo.json`, `demo.json` and `demo` all name `demo`."""
    return given.as_posix().removeprefix("spec/").removesuffix(".json")


def locate(path: str | Path) -> Path:
    """The spec file `find_spec` finds; SpecError naming the nearest spec file or shipped spec, or else the shipped
    ones, when it finds none."""
    found = find_spec(path)
    if found is not None:
        return found
    hint = near_spec(Path(path)) or f" (nor a shipped spec; shipped: {', '.join(shipped_specs())})"
    raise SpecError("", f"spec file not found{hint}", str(path))


def near_spec(given: Path) -> str | None:
    """'; did you mean "..."?' naming a spec file beside the missing one `given`, or a shipped spec, whose name is
    close to it (`demoo.json`, `spec/dmeo`); None when none is."""
    folder = given.parent
    here = [p for p in (folder.iterdir() if folder.is_dir() else ()) if p.suffix in (".json", ".yaml", ".yml")]
    beside = {p.name if given.suffix else p.stem: p.name for p in sorted(here)}  # `server` is close to server.json
    close = difflib.get_close_matches(given.name, list(beside), n=1, cutoff=0.75)
    if close:
        return f'; did you mean "{(folder / beside[close[0]]).as_posix()}"?'
    close = difflib.get_close_matches(shipped_name(given), shipped_specs(), n=1, cutoff=0.75)
    return f'; did you mean the shipped spec "{close[0]}"?' if close else None


_PIPED: dict[tuple[str, int], dict[str, dict]] = {}  # a pipe's specs by (path, inode): a pipe reads once


def read_file(path: str | Path) -> dict[str, dict]:
    """The named raw specs of a file: {name: raw} (a single-spec file is named after the file); a pipe's are kept,
    as a pipe reads once and a command reads its spec file more than once (`check <(...)`)."""
    path = locate(path)
    if not path.is_file():
        key = (str(path), path.stat().st_ino)
        if key not in _PIPED:
            _PIPED[key] = _read_specs(path)
        return copy.deepcopy(_PIPED[key])
    return _read_specs(path)


def _read_specs(path: Path) -> dict[str, dict]:
    data = _parse(path)
    if not isinstance(data, dict):
        raise SpecError("", f"expected an object (a spec or a map of named specs), got {show(data)}", str(path))
    if "agent" in data or "env" in data or is_tournament(data):
        return {path.stem: data}
    if any(slmlab.recognised(v) for v in data.values()):  # SLM Lab's files keep YAML anchors' homes at the top: _name
        data = {k: v for k, v in data.items() if not (str(k).startswith("_") and not slmlab.recognised(v))}
    if not data:
        raise SpecError("", "the file holds no spec", str(path))
    for name, raw in data.items():
        if not isinstance(raw, dict):
            raise SpecError(name, f"expected a spec object, got {show(raw)}", str(path))
    return data


def _parse(path: Path) -> Any:
    """A spec file's data: JSON, or YAML (anchors and merge keys, as SLM Lab 5 writes its specs) by its suffix."""
    yaml_file = path.suffix.lower() in (".yaml", ".yml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("", "spec file not found", str(path)) from None
    except UnicodeDecodeError as e:
        raise SpecError("", f"not UTF-8 text (byte {e.start}): a spec file is JSON or YAML in UTF-8", str(path)) from None
    except OSError as e:
        raise SpecError("", f"cannot read the spec file: {e.strerror or e}", str(path)) from None
    if yaml_file:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            raise SpecError("", f"invalid YAML{where}: {getattr(e, 'problem', None) or e}", str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError("", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", str(path)) from None


def pick(path: str | Path, name: str | None = None, overrides: Sequence[str] = ()) -> tuple[dict, str]:
    """The raw spec `name` of a file and its name (default: the one named after the file, as "demo" in demo.json,
    or the only one), with the command line's `--set KEY=VALUE` overrides applied (spec.overrides). An SLM Lab spec
    comes translated (spec.slmlab); the overrides then set this lab's keys."""
    raw, name, _ = picked(path, name, overrides)
    return raw, name


def picked(path: str | Path, name: str | None = None,
           overrides: Sequence[str] = ()) -> tuple[dict, str, slmlab.Translation | None]:
    """`pick`, with the translation of an SLM Lab spec (None for this lab's own)."""
    specs = read_file(path)
    if name is None:
        name = Path(path).stem if Path(path).stem in specs else None
    if name is None:
        if len(specs) > 1:
            raise SpecError("", f"the file holds several specs; name one of: {', '.join(specs)}", str(path))
        name = next(iter(specs))
    if name not in specs:
        raise SpecError("", f'no spec named "{name}"; the file holds: {", ".join(specs)}', str(path))
    translation = None
    if slmlab.recognised(specs[name]):
        try:
            translation = slmlab.translate(specs[name], name)
        except SpecError as e:
            raise e.in_file(str(path)) from None
        specs[name] = translation.spec
    return overrides_apply(specs[name], overrides), name, translation


def load(path: str | Path, name: str | None = None, overrides: Sequence[str] = ()) -> Spec:
    """Read and validate one session spec from a file; `name` picks from a map of named specs; `overrides` are
    `KEY=VALUE` settings of the command line's --set."""
    raw, name, translation = picked(path, name, overrides)
    if is_tournament(raw):
        raise SpecError("tournament", "a tournament spec: it runs as a tournament (run_lab.py FILE), not as sessions "
                                       "to search or resume", str(path))
    try:
        return validate(raw, name)
    except SpecError as e:
        raise (translation.located(e) if translation else e).in_file(str(path)) from None


def load_any(path: str | Path, name: str | None = None, overrides: Sequence[str] = ()) -> Spec | TournamentSpec:
    """Read and validate one spec of either kind: a session spec, or a tournament spec (a `tournament` block)."""
    raw, name = pick(path, name, overrides)
    if not is_tournament(raw):
        return load(path, name, overrides)
    try:
        return tournament_spec(raw, name, str(locate(path).resolve().parent))
    except SpecError as e:
        raise e.in_file(str(path)) from None


def tournament_spec(raw: Any, name: str, source: str = "") -> TournamentSpec:
    """A raw tournament spec validated, its checkpoint players' agents checked against the game's seats."""
    spec = validate_tournament(raw, name, source)
    check_checkpoints_fit(spec)
    return spec


def check_checkpoints_fit(spec: TournamentSpec) -> None:
    """SpecError at a checkpoint player whose agent's first group does not fit the game's seats (observation size
    and action space), asked of the run's own spec as the lab would build it."""
    config = spec.tournament
    seat_obs, seat_action = game_spaces(config.game.name, config.game.kwargs)
    for i, player in enumerate(config.players):
        if player.checkpoint is None:
            continue
        path = f"tournament.players[{i}].checkpoint"
        plain = json.loads((Path(player.checkpoint).parent / "spec.json").read_text())["spec"]
        try:
            run = spec_of_run(plain, play=True, warn=False)  # the player warns when it loads the agent to play
        except SpecError as e:
            raise SpecError(path, f"the run's spec no longer validates: {e}") from None
        a = 0 if player.agent is None else [x.name for x in run.agent].index(player.agent)
        obs, action = agent_signatures(a, plan_envs(run, resolve(run.body, len(run.agent), len(run.env))))[0]
        if gym.spaces.flatdim(obs) != gym.spaces.flatdim(seat_obs) or action != seat_action:
            raise SpecError(path, f'agent "{player.agent}" acts on {space_text(obs)} for {space_text(action)}; '
                                  f"the game's seats give {space_text(seat_obs)} and take {space_text(seat_action)}")


def spec_of_run(plain: dict[str, Any], play: bool = False, warn: bool = True) -> Spec:
    """The Spec of a run's spec.json (written by slm_lab_like.spec.validate.to_plain: components as {name, config}).

    With `play` (eval, enjoy, a tournament's checkpoint player) the agents only act, so nets trained on a GPU play on
    the CPU of a machine without CUDA (a warning says so, unless `warn` is False: a check of the run that plays
    nothing) instead of being refused: train on a GPU, watch anywhere. Playing needs no cluster either: an env whose
    judges were placed on Ray plays in the lab's own process (the same env, by its name)."""
    raw = {k: v for k, v in plain.items() if k != "name"}
    if play:
        raw["env"] = [{k: v for k, v in e.items() if k != "remote"} if (e.get("remote") or {}).get("address") == "ray"
                      else e for e in plain["env"]]
    raw["agent"] = [{**a, **{k: {"name": a[k]["name"], **(a[k]["config"] or {})}
                             for k in ("algorithm", "memory", "net") if a.get(k) is not None}}
                    for a in plain["agent"]]
    for i, agent in enumerate(raw["agent"]):
        if not (agent.get("net") or {}).get("gpu") or torch.cuda.is_available():
            continue
        if not play:
            raise SpecError(f"agent[{i}].net.gpu", f"{plain['name']} trained on a GPU and this machine has no CUDA: "
                                                   "go on with it where CUDA is (eval and enjoy play it on the CPU)")
        if warn:
            log.warning("agent[%d].net.gpu: %s trained on a GPU and this machine has no CUDA: it plays on the CPU", i,
                        plain["name"])
        agent["net"]["gpu"] = False
    return validate(raw, plain["name"])


def validate(raw: Any, name: str) -> Spec:
    """A raw spec dict to a validated Spec; SpecError naming the JSON path otherwise."""
    spec = _validate_plain(raw, name)
    variables = search.parse(raw.get("search", {}))
    plain = {k: v for k, v in raw.items() if k != "search"}
    search.check_targets(plain, variables, lambda r: _validate_plain(r, name))
    return spec


def _validate_plain(raw: Any, name: str) -> Spec:
    if not isinstance(raw, dict):
        raise SpecError("", f"expected a spec object, got {show(raw)}")
    for key in raw:
        if key not in TOP_KEYS:
            raise unknown_key("", key, TOP_KEYS)
    for key in ("agent", "env"):
        if key not in raw:
            raise SpecError(key, "missing required key (expected a non-empty list)")
        if not isinstance(raw[key], list) or not raw[key]:
            raise SpecError(key, f"expected a non-empty list, got {show(raw[key])}")
    agents = [_agent(a, join("agent", i), i) for i, a in enumerate(raw["agent"])]
    for i, agent in enumerate(agents):
        first = next(k for k, a in enumerate(agents) if a.name == agent.name)
        if first != i:  # results, checkpoints, by_agent and tournaments know an agent by its name
            raise SpecError(join(join("agent", i), "name"), f"{show(agent.name)} names agent[{first}] already; agent names "
                            "must differ")
    envs = [_env(e, join("env", i)) for i, e in enumerate(raw["env"])]
    spec = Spec(
        name=name,
        agent=agents,
        env=envs,
        body=build_dataclass(BodySpec, raw.get("body", {}), "body"),
        meta=build_dataclass(MetaSpec, raw.get("meta", {}), "meta"),
        search=copy.deepcopy(raw.get("search", {})),
    )
    check_ray_judges(spec)
    coords = resolve(spec.body, len(agents), len(envs))
    check_game_seats(spec, coords)
    check_agents(spec, plan_envs(spec, coords))
    return spec


def _agent(raw: Any, path: str, index: int) -> AgentSpec:
    if not isinstance(raw, dict):
        raise SpecError(path, f"expected an object, got {show(raw)}")
    for key in raw:
        if key not in AGENT_KEYS:
            raise unknown_key(path, key, AGENT_KEYS)
    name = raw.get("name", f"agent{index}")
    if not isinstance(name, str) or not name:
        raise SpecError(join(path, "name"), f"expected a non-empty string, got {show(name)}")
    if "algorithm" not in raw:
        raise SpecError(join(path, "algorithm"), 'missing required key (expected an object like {"name": "Random"})')
    return AgentSpec(
        name=name,
        algorithm=_component(ALGORITHMS, raw["algorithm"], join(path, "algorithm")),
        memory=_component(MEMORIES, raw["memory"], join(path, "memory")) if raw.get("memory") is not None else None,
        net=_component(NETS, raw["net"], join(path, "net")) if raw.get("net") is not None else None,
        opponent_pool=_pool(raw["opponent_pool"], join(path, "opponent_pool")) if raw.get("opponent_pool") is not None
        else None,
    )


def _pool(raw: Any, path: str) -> OpponentPoolConfig:
    """An opponent pool block: its keys, then whether its members can play (shares, scripted players)."""
    config = build_dataclass(OpponentPoolConfig, raw, path)
    problem = pool_problem(config)
    if problem:
        raise SpecError(f"{path}.{problem[0]}", problem[1])
    return config


def _component(registry: Registry, raw: Any, path: str) -> ComponentSpec:
    """A {name, ...params} block checked against the Config dataclass of the registered class."""
    if not isinstance(raw, dict):
        raise SpecError(path, f"expected an object with a \"name\", got {show(raw)}")
    name = raw.get("name")
    if not isinstance(name, str):
        raise SpecError(join(path, "name"), f"expected the name of a registered {registry.kind}, got {show(name)}")
    try:
        cls = registry.get(name)
    except KeyError as e:
        raise SpecError(join(path, "name"), str(e.args[0])) from None
    config_cls = getattr(cls, "Config", None)
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError(f"{registry.kind} {name} declares no Config dataclass")
    params = {k: v for k, v in raw.items() if k != "name"}
    return ComponentSpec(name=name, config=build_dataclass(config_cls, params, path))


def check_ray_judges(spec: Spec) -> None:
    """Judges placed on Ray live in the run's Ray cluster, so the run must be on Ray (its sessions are Ray tasks)."""
    from slm_lab_like.remote.lab import RAY

    for j, env in enumerate(spec.env):
        if isinstance(env.remote, RemoteSpec) and env.remote.address == RAY and spec.meta.ray.address is None:
            raise SpecError(f"env[{j}].remote.address", 'judges on Ray need the run on Ray: set meta.ray.address (a '
                                                        'cluster\'s address, or "local" for a private Ray here), or '
                                                        'run with --ray-address')


def _env(raw: Any, path: str) -> EnvSpec:
    env = build_dataclass(EnvSpec, raw, path)
    budgets = [k for k in ("max_frame", "max_episode") if getattr(env, k) is not None]
    if not budgets:
        raise SpecError(path, "expected a budget: max_frame, max_episode or both (whichever comes first ends it)")
    if env.remote is not None:
        from slm_lab_like.remote.lab import LAB_JUDGES, RAY, check_remote

        remote = env.remote
        assert isinstance(remote, RemoteSpec)  # EnvSpec makes an address alone one
        where = join(path, "remote" if isinstance(raw.get("remote"), str) else "remote.address")
        problem = check_remote(remote.address)
        if problem:
            raise SpecError(where, problem)
        if remote.address in LAB_JUDGES and (remote.secret_env or remote.curve_server_key or remote.token_env):
            raise SpecError(join(path, "remote"), f'judges the lab starts ("{remote.address}") are its own: secret_env, '
                                                  'curve_server_key and token_env are for a judge address')
        if remote.address not in LAB_JUDGES and remote.judges != 1:
            raise SpecError(join(path, "remote.judges"), 'a judge address is one judge; several are for judges the '
                                                         'lab starts (address "spawn" or "ray")')
        for key in ("resources", "curve"):
            if remote.address != RAY and getattr(remote, key) is not None:
                raise SpecError(join(path, f"remote.{key}"), f'for judges the lab places on Ray (address "ray"), not '
                                                             f'"{remote.address}"')
        if env.vector not in ("auto", "sync"):
            raise SpecError(join(path, "vector"), f'a remote env is stepped through its judge; expected "auto" or "sync", '
                                                  f'got "{env.vector}"')
    return env


def with_mode(spec: Spec, mode: str) -> Spec:
    """The spec as run in a mode: train as written, dev with a small budget, test with a few frames (a frame cap on
    each env's budget, which never lengthens it: an episode budget stays, whichever ends first)."""
    if mode == "train":
        return spec
    cap = {"dev": DEV_FRAMES, "test": TEST_FRAMES}[mode]
    envs = [dataclasses.replace(e, max_frame=min(e.max_frame or cap, cap)) for e in spec.env]
    meta = dataclasses.replace(spec.meta, max_session=1, log_frequency=min(spec.meta.log_frequency, cap))
    return dataclasses.replace(spec, env=envs, meta=meta)


DEV_FRAMES = 20_000
TEST_FRAMES = 300
