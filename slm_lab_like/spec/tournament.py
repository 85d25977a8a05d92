"""Validate a tournament spec: its game, its players (each a scripted player, a run's checkpoint or a submission
file) and its pairing, every mistake a one-line SpecError at its key path (`tournament.players[2].checkpoint`)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from gymnasium import spaces as gym_spaces

from slm_lab_like.agents.scripted import load_policy
from slm_lab_like.envs.adapter import EntryError
from slm_lab_like.envs.registry import adapter_for
from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.schema import EnvSpec, MetaSpec, PlayerSpec, TournamentConfig, TournamentSpec
from slm_lab_like.spec.validate import build_dataclass, show, unknown_key

TOP_KEYS = ("tournament", "meta")
KINDS = ("scripted", "checkpoint", "submission")
RANDOM = "random"


def is_tournament(raw: Any) -> bool:
    """Whether a raw spec is a tournament spec (it has a `tournament` block)."""
    return isinstance(raw, dict) and "tournament" in raw


def validate_tournament(raw: Any, name: str, source: str = "") -> TournamentSpec:
    """A raw tournament spec to a TournamentSpec; SpecError at the key path otherwise. `source`: the spec file's
    directory, where relative player paths are also looked up."""
    if not isinstance(raw, dict):
        raise SpecError("", f"expected a spec object, got {show(raw)}")
    for key in raw:
        if key not in TOP_KEYS:
            raise unknown_key("", key, TOP_KEYS)
    config = build_dataclass(TournamentConfig, raw["tournament"], "tournament")
    seats = game_seats(config.game.name, config.game.kwargs)
    names = [p.name for p in config.players]
    for i, player in enumerate(config.players):
        path = join(join("tournament", "players"), i)
        if names.index(player.name) != i:
            raise SpecError(join(path, "name"), f'"{player.name}" names players[{names.index(player.name)}] already')
        config.players[i] = check_player(player, path, source)
    if len(config.players) < seats:
        raise SpecError(join("tournament", "players"), f"the game seats {seats} players; got {len(config.players)}")
    meta = build_dataclass(MetaSpec, raw.get("meta", {}), "meta")
    return TournamentSpec(name=name, tournament=config, meta=meta, source=source)


def game_seats(name: str, kwargs: dict[str, Any]) -> int:
    """How many players a game seats (its PettingZoo possible_agents); SpecError at tournament.game otherwise."""
    path = join("tournament", "game")
    try:
        hosting = adapter_for(EnvSpec(name=name, max_frame=1, kwargs=kwargs)).host()
    except EntryError as e:
        raise SpecError(join(path, e.key or "name"), e.message) from None
    if hosting.api not in ("aec", "parallel"):
        raise SpecError(join(path, "name"), f'"{name}" is a single-agent env; a tournament needs a multi-agent game '
                                            f"(a PettingZoo AEC or parallel env, or a built-in game)")
    try:
        env = hosting.make()
    except Exception as e:  # the env's own constructor refusing its kwargs
        raise SpecError(join(path, "kwargs"), f"{type(e).__name__}: {e}") from None
    try:
        seats = len(env.possible_agents)
    finally:
        env.close()
    if seats < 2:
        raise SpecError(join(path, "name"), f'"{name}" seats {seats} player; a tournament needs at least 2')
    return seats


def find(path: str, source: str) -> Path | None:
    """A player's file or directory: as given (from the current directory), else from the spec's directory."""
    given = Path(path)
    if given.exists():
        return given.resolve()
    if source and not given.is_absolute() and (Path(source) / given).exists():
        return (Path(source) / given).resolve()
    return None


def check_player(player: PlayerSpec, path: str, source: str) -> PlayerSpec:
    """The player with its paths resolved; SpecError at its key when it cannot play."""
    given = [k for k in KINDS if getattr(player, k) is not None]
    if len(given) != 1:
        raise SpecError(path, f"expected exactly one of {', '.join(KINDS)}, got {given or 'none'}")
    kind = given[0]
    for key in ("agent", "snapshot", "search"):
        if getattr(player, key) is not None and kind != "checkpoint":
            raise SpecError(join(path, key), f"only a checkpoint player takes {key}")
    if player.kwargs and (kind != "scripted" or player.scripted == RANDOM):
        raise SpecError(join(path, "kwargs"), "only a scripted player named by module:Class takes kwargs")
    if kind == "scripted":
        if player.scripted != RANDOM:
            try:
                load_policy(str(player.scripted), player.kwargs)
            except ValueError as e:
                raise SpecError(join(path, "kwargs" if player.kwargs else "scripted"),
                                str(e) if player.kwargs else f'{e} (or "random")') from None
        return player
    found = find(str(getattr(player, kind)), source)
    if kind == "submission":
        if found is None or not found.is_file() or found.suffix != ".py":
            raise SpecError(join(path, "submission"), f"no Python file {player.submission}")
        return dataclasses.replace(player, submission=str(found))
    if found is None or not found.is_dir():
        raise SpecError(join(path, "checkpoint"), f"no run directory {player.checkpoint}")
    session, agent = check_run(found, player, path)
    return dataclasses.replace(player, checkpoint=str(session), agent=agent)


def check_run(found: Path, player: PlayerSpec, path: str) -> tuple[Path, str]:
    """The session directory and agent name of a checkpoint player (a trial directory means its session_0)."""
    session = found if (found.parent / "spec.json").exists() and found.name.startswith("session_") else found / "session_0"
    record = session.parent / "spec.json"
    if not record.exists() or not session.is_dir():
        raise SpecError(join(path, "checkpoint"), f"{player.checkpoint} is not a trial or session directory of a run "
                                                  f"(no spec.json, or no session_0)")
    agents = [a.get("name") for a in json.loads(record.read_text())["spec"]["agent"]]
    agent = player.agent if player.agent is not None else agents[0]
    if agent not in agents:
        raise SpecError(join(path, "agent"), f'the run has no agent "{agent}"; its agents: {", ".join(agents)}')
    if player.frame is not None:
        kept = kept_frames(session)
        if player.frame not in kept:
            frames = ", ".join(map(str, kept)) or "none (its spec did not set meta.checkpoint_keep)"
            raise SpecError(join(path, "frame"), f"the run kept no checkpoint at frame {player.frame}; kept: {frames}")
    state_file = agent_file(session, agents.index(agent), player.frame)
    if state_file is None:
        raise SpecError(join(path, "checkpoint"), f"{session} holds no trained agent (no agent file, no checkpoint)")
    if player.snapshot is not None:
        import torch

        pool = torch.load(state_file, map_location="cpu", weights_only=True).get("pool", [])
        if not -len(pool) <= player.snapshot < len(pool):
            raise SpecError(join(path, "snapshot"), f"the agent's opponent pool holds {len(pool)} snapshots; "
                                                    f"got {player.snapshot}")
    return session, agent


def agent_file(session: Path, index: int, frame: int | None = None) -> Path | None:
    """An agent's saved state in a session: its final file, else its last checkpoint's, else None; with `frame`, the
    state of the checkpoint kept at that frame (meta.checkpoint_keep), else None."""
    final = session / f"agent_a{index}.pt"
    if frame is None and final.exists():
        return final
    saved = _manifest(session)
    if saved is None:
        return None
    folder = saved.get("folder") if frame is None else _kept_folders(saved).get(frame)
    candidate = session / "checkpoints" / str(folder) / f"agent_a{index}.pt"
    return candidate if folder is not None and candidate.exists() else None


def kept_frames(session: Path) -> dict[int, str]:
    """The checkpoints a session kept (meta.checkpoint_keep): their frames (summed over envs) and folders, in order."""
    saved = _manifest(session)
    return {} if saved is None else _kept_folders(saved)


def _manifest(session: Path) -> dict[str, Any] | None:
    """A session's checkpoint manifest, or None when it has none."""
    manifest = session / "checkpoint.json"
    return json.loads(manifest.read_text()) if manifest.exists() else None


def _kept_folders(manifest: dict[str, Any]) -> dict[int, str]:
    return {int(k["frame"]): str(k["folder"]) for k in manifest.get("kept", [])}


TEST_GAMES = 2  # games per table in test mode (one per seat order of a two-player game)
DEV_GAMES = 4


def tournament_with_mode(spec: TournamentSpec, mode: str) -> TournamentSpec:
    """The tournament as run in a mode: train as written, dev and test with few games per table and one Swiss round."""
    if mode == "train":
        return spec
    cap = {"dev": DEV_GAMES, "test": TEST_GAMES}[mode]
    config = dataclasses.replace(spec.tournament, games=min(spec.tournament.games, cap),
                                 rounds=min(spec.tournament.rounds, 1 if mode == "test" else 2))
    return dataclasses.replace(spec, tournament=config)


def game_spaces(name: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The observation (its "observation" part where the game gives legal-action masks) and action space of a
    game's first seat, as a lab agent sees them."""
    env = adapter_for(EnvSpec(name=name, max_frame=1, kwargs=kwargs)).host().make()
    try:
        agent = env.possible_agents[0]
        obs, action = env.observation_space(agent), env.action_space(agent)
    finally:
        env.close()
    if isinstance(obs, gym_spaces.Dict) and "action_mask" in obs.spaces:
        obs = obs["observation"]
    return obs, action
