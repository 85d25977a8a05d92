"""An SLM Lab spec (v4 JSON, 5.x YAML) recognised by its shape and translated whole: agent, env, meta, search."""
from __future__ import annotations

import copy
import math
from typing import Any

import pydash

from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.slmlab.agent import agent as agent_block
from slm_lab_like.spec.slmlab.record import Block, Line, Translation, number

ENV_RESERVED = ("name", "num_envs", "max_t", "max_frame", "normalize_obs", "normalize_reward", "clip_obs",
                "clip_reward", "reward_scale", "device")
RANGE_KINDS = ("uniform", "loguniform")


def recognised(raw: Any) -> bool:
    """Whether a spec is shaped as SLM Lab's: its agent or env an object (5.x, the later v4), or a list whose agent
    names its net by `type` or whose env has `num_envs` (early v4); this lab's specs are lists with `net.name`."""
    if not isinstance(raw, dict):
        return False
    agents, envs = raw.get("agent"), raw.get("env")
    if isinstance(agents, dict) or isinstance(envs, dict):
        return True
    first_agent = agents[0] if isinstance(agents, list) and agents and isinstance(agents[0], dict) else {}
    first_env = envs[0] if isinstance(envs, list) and envs and isinstance(envs[0], dict) else {}
    return (isinstance(first_agent.get("net"), dict) and "type" in first_agent["net"]) or "num_envs" in first_env


def translate(raw: dict[str, Any], name: str) -> Translation:
    """This lab's raw spec for SLM Lab spec `name` of a file, with a line per key; SpecError at the SLM Lab key path
    (`name.agent.net.arc...`) for anything without a counterpart here."""
    out = Translation(name)
    try:
        return _translate(raw, name, out)
    except SpecError as e:  # a value quoted in the message stays on its line
        raise SpecError(e.path.replace("\n", "\\n"), e.message.replace("\n", "\\n"), e.source) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:  # a value of a type no rule expects
        why = f"a value this translation cannot read ({type(e).__name__}: {e})".replace("\n", "\\n")
        raise SpecError((out.last or name).replace("\n", "\\n"), why) from None


def _translate(raw: dict[str, Any], name: str, out: Translation) -> Translation:
    top = Block(raw, name, out)
    env = _one(top, "env")
    num_envs = env.num("num_envs", 1, True)
    _agent_and_env(top, env, num_envs)
    if top.has("body"):
        body = top.sub("body")
        body.map("product", "body.product")
        body.map("num", "body.num")
        body.done()
    meta(top.sub("meta") if top.has("meta") else Block({}, join(name, "meta"), out))
    if top.has("search"):
        search(raw, top, out)
    top.done()
    return out


def _one(top: Block, key: str) -> Block:
    """The single agent or env of the spec (an object, or a list of one), as a block."""
    value = top.peek(key)
    if isinstance(value, list):
        if len(value) != 1:
            raise SpecError(top.at(key), f"{len(value)} entries: only SLM Lab specs of one agent and one env are "
                                         "translated (write several here as this lab's own spec)")
        top.take(key)
        return Block(value[0], f"{top.at(key)}[0]", top.out)
    return top.sub(key)


def _agent_and_env(top: Block, env: Block, num_envs: int) -> None:
    agent = _one(top, "agent")
    agent_block(agent, num_envs)
    algo = top.out.spec["agent"][0]["algorithm"]["name"]
    environment(env, algo)


def environment(env: Block, algorithm: str) -> None:
    """The env: its gymnasium id, kwargs (every key SLM Lab does not reserve goes to gym.make, as there), the vector
    width as bodies, the frame budget; SLM Lab's normalising wrappers as the algorithm's normalisers here."""
    name = env.peek("name")
    if isinstance(name, str) and "${" in name:
        raise SpecError(env.at("name"), f'"{name}" is a placeholder SLM Lab fills from its command line (-s); give the '
                                        "env here with --set env[0].name=ID")
    env.map("name", "env[0].name")
    env.map("num_envs", "body.num", note="bodies of the one agent in the one env, stepped as one vector env")
    env.out.set("body.product", "outer")
    if "num_envs" not in env.data:
        env.out.set("body.num", 1)
    budget = env.num("max_frame", None, True)
    if budget is None:
        raise SpecError(env.at("max_frame"), "expected a frame budget")
    env.map("max_frame", "env[0].max_frame", budget, "frames over all bodies, as SLM Lab counts them")
    env.note("max_t", "informational in SLM Lab: gymnasium's own time limit ends episodes, as here")
    for key in ("normalize_obs", "normalize_reward"):
        if not env.peek(key):
            env.note(key, "off")
            continue
        if key == "normalize_reward" and algorithm in ("DQN", "SAC"):
            raise env.refuse(key, f"{algorithm} here has no reward normaliser")
        env.map(key, f"agent[0].algorithm.{key}", True, "a running normaliser in the agent (clipped at 10, as SLM "
                                                         "Lab's default clip)")
    for key in ("clip_obs", "clip_reward"):
        env.expect(key, (None, 10, 10.0), "SLM Lab's default", "only the default clip (10) has a counterpart here")
    env.note("reward_scale", "SLM Lab applies it only to playground envs")
    env.expect("device", (None,), "none", "playground devices have no counterpart here")
    kwargs = {k: v for k, v in env.data.items() if k not in ENV_RESERVED}
    for key in kwargs:
        env.map(key, f"env[0].kwargs.{key}", note="passed to gymnasium.make, as SLM Lab does")
    env.done()


def meta(block: Block) -> None:
    """Sessions, trials, logging; SLM Lab's Ray Tune search settings as this lab's (ASHA, resources per trial)."""
    block.expect("distributed", (False, None), "sessions run apart, " + "as this lab does",
                 "Hogwild (shared or synced) sessions have no counterpart here")
    block.map("max_session", "meta.max_session")
    block.map("max_trial", "meta.max_trial")
    block.map("log_frequency", "meta.log_frequency")
    block.map("random_seed", "meta.random_seed")
    block.note("eval_frequency", "SLM Lab's score (rigorous_eval 0) is the training episodes' moving mean, as here")
    block.expect("rigorous_eval", (0, False, None), "the score is the training episodes'",
                 "a separate evaluation env has no counterpart here")
    block.note("resume", "set by SLM Lab's command line")
    block.note("num_gpus", "unused by SLM Lab")
    if block.has("search_resources"):
        res = block.sub("search_resources")
        each = "SLM Lab reserves it for a trial, whose sessions share it; here each session is a Ray task with it"
        res.map("cpu", "meta.ray.resources_per_session.cpu", note=each)
        res.map("gpu", "meta.ray.resources_per_session.gpu", note=each)
        res.done()
    if block.has("search_scheduler"):
        sched = block.sub("search_scheduler")
        sched.map("grace_period", "meta.ray.asha.grace_frame", sched.num("grace_period", 1, True),
                  "ASHA on Ray Tune (search --backend ray)")
        sched.map("reduction_factor", "meta.ray.asha.reduction_factor")
        sched.done()
    block.done()


def search(raw: dict[str, Any], top: Block, out: Translation) -> None:
    """SLM Lab's search block (dotted or nested keys, Ray Tune's distributions) as this lab's, each variable's key
    found by translating the spec with the variable's values and seeing which key of this lab they move."""
    block = top.sub("search")
    plain = {k: v for k, v in raw.items() if k != "search"}
    base = _leaves(out.spec)  # the spec as translated so far: all of it but this search block
    for key, args in _flatten(block.data).items():
        path, sep, dist = key.rpartition("__")
        where = join(block.path, key)
        if not sep or not path:
            raise SpecError(where, "expected KEY__DISTRIBUTION")
        values, kind = _reach(dist, args, where)
        moved = [_probe(plain, base, top.path, path, v, where) for v in values]
        targets = {t for m in moved for t in m}
        if not targets:  # e.g. the start_val of a no_decay schedule, which SLM Lab never reads either
            block.taken.add(key)
            out.lines.append(Line(where, args, None, "its values change nothing here, nor in SLM Lab: not searched"))
            continue
        if len(targets) != 1:
            raise SpecError(where, f"its values move {len(targets) or 'no'} keys here; only a variable of one key is "
                                   "translated")
        target = targets.pop()
        mapped = [m.get(target, base.get(target)) for m in moved]
        if kind in RANGE_KINDS and mapped != values:
            raise SpecError(where, f"a range whose values change in translation ({values} -> {mapped}) is not "
                                   "translated; give a choice")
        out.set(f"search.{target}__{kind}", args if kind in RANGE_KINDS else mapped)
        block.taken.add(key)
        out.lines.append(Line(where, args, f"search.{target}", kind if kind in RANGE_KINDS else f"choice of {mapped}"))
    for key in block.data:
        block.taken.add(key)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """SLM Lab's search keys, nested blocks joined with dots as SLM Lab does."""
    flat: dict[str, Any] = {}
    for key, value in node.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and "__" not in str(key):
            flat.update(_flatten(value, full))
        else:
            flat[full] = value
    return flat


def _reach(dist: str, args: Any, where: str) -> tuple[list[Any], str]:
    """The values a variable takes (a range by its ends) and the kind it becomes here."""
    if dist in ("choice", "grid_search"):
        if not isinstance(args, list) or not args:
            raise SpecError(where, "expected a non-empty list")
        return list(args), "choice"
    if not isinstance(args, list) or len(args) < 2:
        raise SpecError(where, "expected [low, high] or [low, high, q]")
    if dist in RANGE_KINDS and len(args) == 2:
        return [args[0], args[1]], dist
    if dist in ("randint", "qrandint", "lograndint", "qlograndint"):
        low, high = (number(a, where, True) for a in args[:2])
        q = number(args[2], where, True) if len(args) > 2 else 1
        grid = range(low, high + 1 if dist.startswith("q") else high, q) if q > 0 else range(0)
        return list(_few(grid, len(grid), where)), "choice"
    if dist == "quniform" and len(args) == 3:
        low, high, step = (number(a, where) for a in args)
        n = int(math.floor((high - low) / step + 1e-9)) + 1 if step > 0 and math.isfinite(high - low) else 0
        return [round(low + i * step, 12) for i in _few(range(n), n, where)], "choice"
    raise SpecError(where, f'"{dist}": the distributions translated are choice, uniform, loguniform, randint, '
                           "qrandint, lograndint, qlograndint and quniform")


def _few(values: range, n: int, where: str) -> range:
    """A discrete range small enough to translate value by value (counted before any value is made)."""
    if not 0 < n <= 64:
        raise SpecError(where, f"{n} values: a discrete range of 1 to 64 values is translated")
    return values


def _probe(plain: dict[str, Any], base: dict[str, Any], name: str, path: str, value: Any,
           where: str) -> dict[str, Any]:
    """The keys of this lab (and their values) that change from `base` (the leaves of `plain` translated) when SLM Lab
    key `path` of `plain` (the spec without its search block) takes `value`."""
    probe = copy.deepcopy(plain)
    if pydash.get(probe, path) is None and not pydash.has(probe, path):
        raise SpecError(where, f"{path}: the spec has no such key")
    pydash.set_(probe, path, value)
    try:
        after = _leaves(translate(probe, name).spec)
    except SpecError as e:
        raise SpecError(where, f"with {value}: {e.message}") from None
    return {k: after.get(k) for k in set(base) | set(after) if base.get(k) != after.get(k)}


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf keys of a spec by dotted path (lists of objects indexed; other lists are leaf values)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(node, list) and node and all(isinstance(x, dict) for x in node):
        out = {}
        for i, v in enumerate(node):
            out.update(_leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: node}
