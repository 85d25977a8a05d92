"""PettingZoo envs (parallel and turn-based AEC) as LabEnvs: each body slot is one env player, or several.

Slot plans (`SlotPlan`) say which player(s) each body takes; `plan_slots` makes them from per-body
options (player name, role, or the free players in order). A body covering several players is a super
body: its observation is the concatenation of theirs (flattened, float32; a done player's part is its
null observation) followed by one done flag per covered player; its action is a MultiDiscrete (or a
concatenated Box) over theirs, or with `super_action="joint"` one Discrete over every combination.

Each step the lab gives actions for every slot; the env uses the actions of the acting slots only
(`block.acting[parity]`): in an AEC env the slot whose player is selected, in a parallel env every slot
with a live player whose legal-action mask is not empty. A live player that does not act but that the
env still asks for (a parallel env's non-mover) gets its body's null action; a done player's row holds
its null observation until the env's episode ends (when every player is done, or after `max_t` steps)
and the env resets. Dict observations {"observation", "action_mask"} are split into the observation
buffer and the block's double-buffered `action_mask`.

Credit assignment in turn-based games: a slot's transition starts where it acts and completes where it
acts next or its episode ends; the reward of every step in between (the opponent's winning move
included) is summed into it. Until it completes, the slot's decision obs is carried forward in the obs
buffers and its action is restored in `block.action`, so the lab's zero-copy Transition views hold the
whole transition in that row at the completing step, marked in `block.completed` (Transition.acting).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.envs.episodes import HOLD_ENDS, HOLD_STEPS, EpisodeEnds
from slm_lab_like.envs.spaces import SpaceError, check_action_space, observation_converter
from slm_lab_like.array_spaces import space_shape

MASKED_KEYS = frozenset(("observation", "action_mask"))


class SlotError(ValueError):
    """A one-line problem with a body's options, naming where it is (`path`) so the lab can re-wrap it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class SlotPlan:
    """One body slot: the player(s) it takes, its null observation fill and null action, its super action."""

    players: tuple[str, ...]
    null_obs: float | tuple[float, ...] = 0.0
    null_action: Any = None
    super_action: str = "multi"
    where: str = ""


def plan_slots(players: Sequence[str], options: Sequence[Mapping[str, Any]], wheres: Sequence[str],
               env_name: str) -> list[SlotPlan]:
    """Give each slot its player(s): named players first, then roles, then the free players in order.

    Every player must be taken by exactly one body; SlotError naming the body's path otherwise.
    """
    free = list(players)
    taken: list[tuple[str, ...] | None] = [None] * len(options)

    def take(i: int, name: str, key: str) -> str:
        if name not in players:
            raise SlotError(f"{wheres[i]}.{key}", f'env "{env_name}" has no player "{name}"; players: {", ".join(players)}')
        if name not in free:
            raise SlotError(f"{wheres[i]}.{key}", f'player "{name}" is already taken by another body')
        free.remove(name)
        return name

    for i, opt in enumerate(options):
        player = opt.get("player")
        if isinstance(player, str):
            taken[i] = (take(i, player, "player"),)
        elif isinstance(player, (list, tuple)):
            if not player:
                raise SlotError(f"{wheres[i]}.player", "expected a player name or a non-empty list of them")
            taken[i] = tuple(take(i, p, "player") for p in player)
    for i, opt in enumerate(options):
        role = opt.get("role")
        if taken[i] is None and role is not None:
            match = [p for p in free if p == role or (p.startswith(role + "_") and p[len(role) + 1:].isdigit())]
            if not match:
                raise SlotError(f"{wheres[i]}.role", f'no free player of role "{role}" in env "{env_name}"; '
                                                     f'free players: {", ".join(free) or "none"}')
            taken[i] = (take(i, match[0], "role"),)
    for i in range(len(options)):
        if taken[i] is None:
            if not free:
                raise SlotError(wheres[i], f'env "{env_name}" has {len(players)} player(s) ({", ".join(players)}) '
                                           f"and every one is taken; this body has none")
            taken[i] = (free.pop(0),)
    if free:
        raise SlotError(wheres[0].rpartition(".bodies")[0] or wheres[0],
                        f'env "{env_name}" has players no body takes: {", ".join(free)}; place one body per player '
                        f"(or let a body take several with \"player\": [...])")
    assigned = [t for t in taken if t is not None]  # every body has its player(s) now
    plans = []
    for i, opt in enumerate(options):
        null_obs = opt.get("null_obs")
        plans.append(SlotPlan(
            players=assigned[i],
            null_obs=0.0 if null_obs is None else (tuple(null_obs) if isinstance(null_obs, list) else float(null_obs)),
            null_action=opt.get("null_action"),
            super_action=opt.get("super_action") or "multi",
            where=wheres[i]))
    return plans


def _split_space(space: gym.Space) -> tuple[gym.Space, int | None]:
    """The observation part of a player's space and its mask width (None without a mask)."""
    if isinstance(space, gym.spaces.Dict) and set(space.spaces) == MASKED_KEYS:
        return space["observation"], int(np.prod(space_shape(space["action_mask"])))
    return space, None


def _flat_box(space: gym.Space, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Flat float32 low/high bounds of a Box or Discrete observation part."""
    if isinstance(space, gym.spaces.Box):
        return space.low.astype(np.float32).ravel(), space.high.astype(np.float32).ravel()
    if isinstance(space, gym.spaces.Discrete):
        return np.zeros(1, np.float32), np.full(1, space.n - 1, np.float32)
    raise SlotError(where, f"a super body needs Box or Discrete player observations, got {space}")


class _Slot:
    """Per-slot spaces, conversions and episode bookkeeping."""

    def __init__(self, index: int, plan: SlotPlan, obs_spaces: Sequence[gym.Space],
                 act_spaces: Sequence[gym.Space], mask_widths: Sequence[int | None]) -> None:
        self.index = index
        self.plan = plan
        self.convert: Callable[[Any], Any] | None = None
        self.players = plan.players
        self.is_super = len(plan.players) > 1
        where = plan.where
        if self.is_super:
            if any(w is not None for w in mask_widths):
                raise SlotError(f"{where}.player", "a super body cannot cover players with legal-action masks")
            bounds = [_flat_box(s, f"{where}.player") for s in obs_spaces]
            self.sizes = [len(lo) for lo, _ in bounds]
            k = len(self.players)
            low = np.concatenate([lo for lo, _ in bounds] + [np.zeros(k, np.float32)])
            high = np.concatenate([hi for _, hi in bounds] + [np.ones(k, np.float32)])
            self.observation_space: gym.Space = gym.spaces.Box(low, high, dtype=np.float32)
            self.action_space = self._super_action_space(act_spaces, plan.super_action, f"{where}.super_action")
            self.mask_width = None
            fill = plan.null_obs
            if not isinstance(fill, float):
                raise SlotError(f"{where}.null_obs", "a super body's null_obs is one number")
            self.null_parts = [np.full(n, fill, np.float32) for n in self.sizes]
        else:
            try:
                self.observation_space, self.convert = observation_converter(obs_spaces[0], f"{where}.player")
                check_action_space(act_spaces[0], f"{where}.player")
            except SpaceError as err:
                raise SlotError(f"{where}.player", str(err).partition(": ")[2]) from None
            self.action_space = act_spaces[0]
            self.mask_width = mask_widths[0]
            self.null_parts = []
        self.null_obs = self._null_obs(where)
        self.null_actions = self._null_actions(act_spaces, where)
        self.sub_spaces = list(act_spaces)

    def _super_action_space(self, spaces: Sequence[gym.Space], kind: str, where: str) -> gym.Space:
        """MultiDiscrete / concatenated Box over the covered players' actions, or one joint Discrete."""
        discrete = [s for s in spaces if isinstance(s, gym.spaces.Discrete)]
        boxes = [s for s in spaces if isinstance(s, gym.spaces.Box)]
        if len(discrete) == len(spaces):
            nvec = [int(s.n) for s in discrete]
            if any(int(s.start) != 0 for s in discrete):
                raise SlotError(where, "a super body needs Discrete player actions that start at 0")
            self.nvec = nvec
            return gym.spaces.Discrete(math.prod(nvec)) if kind == "joint" else gym.spaces.MultiDiscrete(nvec)
        if len(boxes) == len(spaces) and kind == "multi":
            self.box_sizes = [int(np.prod(s.shape)) for s in boxes]
            low = np.concatenate([s.low.astype(np.float32).ravel() for s in boxes])
            high = np.concatenate([s.high.astype(np.float32).ravel() for s in boxes])
            return gym.spaces.Box(low, high, dtype=np.float32)
        raise SlotError(where, f'a super body needs all-Discrete (or, with "multi", all-Box) player actions, got {list(spaces)}')

    def _null_obs(self, where: str) -> np.ndarray:
        space = self.observation_space
        if self.is_super:
            return np.concatenate(self.null_parts + [np.ones(len(self.players), np.float32)])
        fill = self.plan.null_obs
        shape = space_shape(space)
        size = int(np.prod(shape))
        if isinstance(fill, tuple):
            if len(fill) != size:
                raise SlotError(f"{where}.null_obs", f"expected {size} numbers (the observation's size), got {len(fill)}")
            return np.asarray(fill, dtype=space.dtype).reshape(shape)
        return np.full(shape, fill, dtype=space.dtype)

    def _null_actions(self, spaces: Sequence[gym.Space], where: str) -> list[Any]:
        """The null action sent for each covered player that the env asks for when the body does not act."""
        raw = self.plan.null_action
        out = []
        for space in spaces:
            if raw is None:
                value = np.zeros(space.shape, space.dtype) if space.shape else np.asarray(getattr(space, "start", 0), space.dtype)
            else:
                try:
                    value = np.asarray(raw, dtype=space.dtype).reshape(space.shape)
                except ValueError:
                    raise SlotError(f"{where}.null_action", f"does not fit the action space {space}") from None
            if not space.contains(value):
                raise SlotError(f"{where}.null_action", f"{raw!r} is not in the action space {space}")
            out.append(value.item() if not space.shape else value)
        return out

    def split_action(self, action: np.ndarray) -> list[Any]:
        """The body's action as one env action per covered player."""
        if not self.is_super:
            return [action.copy() if np.ndim(action) else action]
        if isinstance(self.action_space, gym.spaces.Discrete):
            return [int(v) for v in np.unravel_index(int(action), self.nvec)]
        if isinstance(self.action_space, gym.spaces.MultiDiscrete):
            return [int(v) for v in action]
        parts = np.split(np.asarray(action, np.float32), np.cumsum(self.box_sizes)[:-1])
        return [p.reshape(s.shape).astype(s.dtype) for p, s in zip(parts, self.sub_spaces)]


def _signature(slot: _Slot) -> tuple:
    return (slot.observation_space, slot.action_space, slot.mask_width)


class PettingZooEnv(LabEnv):
    """A PettingZoo parallel or AEC env; slot i takes the players of `plans[i]` (see the module doc)."""

    def __init__(self, name: str, make: Callable[[], Any], api: str, plans: Sequence[SlotPlan] | None, clock: Clock,
                 max_t: int | None = None) -> None:
        if api not in ("parallel", "aec"):
            raise ValueError(f"api must be parallel or aec, got {api!r}")
        self.env = make()
        self.aec = api == "aec"
        players = list(self.env.possible_agents)
        if plans is None:
            plans = [SlotPlan((p,), where=f"slot {i}") for i, p in enumerate(players)]
        covered = [p for plan in plans for p in plan.players]
        if sorted(covered) != sorted(players) or len(set(covered)) != len(covered):
            raise SlotError("", f'env "{name}": bodies must take every player exactly once; players: {players}, '
                                f"taken: {covered}")
        self.slots: list[_Slot] = []
        for i, plan in enumerate(plans):
            parts = [_split_space(self.env.observation_space(p)) for p in plan.players]
            self.slots.append(_Slot(i, plan, [o for o, _ in parts], [self.env.action_space(p) for p in plan.players],
                                    [w for _, w in parts]))
        blocks: list[SlotBlock] = []
        start = 0
        for i in range(1, len(self.slots) + 1):
            if i == len(self.slots) or _signature(self.slots[i]) != _signature(self.slots[start]):
                first = self.slots[start]
                block = SlotBlock(start, i, first.observation_space, first.action_space, where=f'env "{name}"')
                if first.mask_width is not None:
                    block.add_action_masks(first.mask_width)
                block.add_turns()
                blocks.append(block)
                start = i
        super().__init__(name, clock, blocks)
        self.loc = [(b, i - b.start) for b in blocks for i in range(b.start, b.stop)]
        self.owner = {p: (s.index, k) for s in self.slots for k, p in enumerate(s.players)}
        self.max_t = max_t or math.inf
        n = len(self.slots)
        self.pending = [False] * n
        self.pending_action: list[Any] = [None] * n
        self.acc = [0.0] * n
        self.ret = [0.0] * n
        self.length = [0] * n
        self.frames = [0] * n
        self.slot_done = [False] * n
        self.player_done = {p: False for p in players}
        self.term_of = {p: False for p in players}
        self.acting_slots: list[int] = []
        self.t = 0
        self.last_obs: Mapping[str, Any] = {}
        self._finished_now: set[str] = set()
        self._final_aec: dict[str, Any] = {}
        self._closed = False
        self.fast = (not self.aec and len(blocks) == 1 and blocks[0].action_mask is None
                     and not any(s.is_super or s.convert is not None for s in self.slots))
        self.names = [s.players[0] for s in self.slots]
        self.died: list[int] = []
        self.flagged: list[int] = []
        self.completed_for: list[int] | None = None
        self.acting_of: list[list[int] | None] = [None, None]
        # Discrete actions go out as numpy scalars (copies, as gymnasium's samplers give them): a player that checks
        # them with Discrete.contains does so faster than for Python ints, which it first bounds with np.iinfo
        self.int_actions = isinstance(blocks[0].action_space, gym.spaces.Discrete)
        if self.fast:  # its ends wait, with their env frames, until `release_at` or HOLD_ENDS of them (as copies' do)
            self.held = EpisodeEnds()
            self.release_at = 0

    @property
    def slot_frames(self) -> list[int]:
        """Each slot's own frames so far (the steps where its action was used)."""
        if self.fast:
            return [f + (0 if done else self.t) for f, done in zip(self.frames, self.slot_done)]
        return list(self.frames)

    def restore_slot_frames(self, frames: list[int]) -> None:
        self.frames = list(frames)

    def reset(self, seed: int | None = None) -> None:
        self.flush_ends()
        n = len(self.slots)
        self.pending = [False] * n
        self.acc = [0.0] * n
        self.died = []
        self.flagged = []
        self.completed_for = None
        self._reset_env(seed)
        self._write_all(self.parity)
        self.acting_of = [None, None]
        self.acting_of[self.parity] = self.acting_slots

    def _reset_env(self, seed: int | None) -> None:
        """Reset the env and every slot's episode state (pending decisions complete in the ending step)."""
        if self.aec:
            self.env.reset(seed=seed)
        else:
            self.last_obs, _ = self.env.reset(seed=seed)
        for p in self.player_done:
            self.player_done[p] = False
            self.term_of[p] = False
        n = len(self.slots)
        self.slot_done = [False] * n
        self.ret = [0.0] * n
        self.length = [0] * n
        self.t = 0

    def _observe(self, player: str, final: bool = False) -> Any:
        """A player's latest observation (its terminal one, kept before its dead step, when `final`)."""
        if not self.aec:
            return self.last_obs[player]
        if final and player in self._final_aec:
            return self._final_aec[player]
        return self.env.observe(player)

    def _write_slot(self, slot: _Slot, q: int, final: bool = False) -> None:
        """Write the slot's current observation (and mask) into buffer `q`, or into final_obs."""
        blk, row = self.loc[slot.index]
        obs_buf = blk.final_obs if final else blk.obs[q]
        if not slot.is_super:
            p = slot.players[0]
            if self.player_done[p] and not final:
                obs_buf[row] = slot.null_obs
                if blk.action_mask is not None:
                    blk.action_mask[q][row] = False
                return
            o = self._observe(p, final)
            part = o if blk.action_mask is None else o["observation"]
            obs_buf[row] = part if slot.convert is None else slot.convert(part)
            if blk.action_mask is not None:
                mask_buf = blk.final_action_mask if final else blk.action_mask[q]
                assert mask_buf is not None  # allocated with action_mask (SlotBlock.add_action_masks)
                mask_buf[row] = o["action_mask"]
            return
        parts = []
        for k, p in enumerate(slot.players):
            live = not self.player_done[p] or (final and p in self._finished_now)
            parts.append(np.asarray(self._observe(p, final), np.float32).ravel() if live else slot.null_parts[k])
        flags = np.array([self.player_done[p] for p in slot.players], np.float32)
        obs_buf[row] = np.concatenate(parts + [flags])

    def _next_acting(self) -> list[int]:
        """Slots whose action the env uses at the coming step."""
        if self.aec:
            if not self.env.agents:
                return []
            return [self.owner[self.env.agent_selection][0]]
        live = set(self.env.agents)
        out = []
        for s in self.slots:
            for p in s.players:
                if p in live and not self.player_done[p]:
                    if s.mask_width is None or np.any(self.last_obs[p]["action_mask"]):
                        out.append(s.index)
                        break
        return out

    def _write_all(self, q: int) -> None:
        """Fresh obs for every slot in buffer `q` and the acting flags, after a reset."""
        for s in self.slots:
            self._write_slot(s, q)
        self._set_acting(q)

    def _set_acting(self, q: int) -> None:
        self.acting_slots = self._next_acting()
        for blk in self.blocks:
            blk.turn_flags()[0][q][:] = False
        for i in self.acting_slots:
            blk, row = self.loc[i]
            blk.turn_flags()[0][q][row] = True

    def step(self) -> None:
        if self.fast:
            self._step_fast()
            return
        p, q = self.parity, 1 - self.parity
        slots, loc = self.slots, self.loc
        acted = self.acting_slots
        for i in acted:
            blk, row = loc[i]
            a = blk.action[row]
            self.pending_action[i] = a.copy() if np.ndim(a) else a
            self.pending[i] = True
            self.length[i] += 1
            self.frames[i] += 1
        rewards = self._step_aec(acted) if self.aec else self._step_parallel(acted)
        self.t += 1
        over = not self.env.agents
        if not over and self.t >= self.max_t:
            for name in self.env.agents:
                if not self.player_done[name]:
                    self._finished_now.add(name)
                    self.player_done[name] = True
                    self.term_of[name] = False
            over = True
        done_now: list[int] = []
        for s in slots:
            i = s.index
            if self.slot_done[i]:
                continue
            r = 0.0
            for name in s.players:
                r += rewards.get(name, 0.0)
            self.acc[i] += r
            self.ret[i] += r
            if all(self.player_done[name] for name in s.players):
                self.slot_done[i] = True
                done_now.append(i)
                self._write_slot(s, q, final=True)
        for blk in self.blocks:
            blk.turn_flags()[1][:] = False
            blk.terminated[:] = False
            blk.truncated[:] = False
            blk.reward[:] = 0.0
        for i in done_now:
            blk, row = loc[i]
            term = all(self.term_of[name] for name in slots[i].players)
            blk.terminated[row] = term
            blk.truncated[row] = not term
            self.ended.append(i, self.ret[i], self.length[i], not term, self.frames[i])
            self.ret[i], self.length[i] = 0.0, 0
        if over:
            self._reset_env(None)
            next_acting: set[int] = set()
        else:
            next_acting = set(self._next_acting())
        finished = set(done_now)
        for i, s in enumerate(slots):
            blk, row = loc[i]
            if self.pending[i] and (over or i in next_acting or i in finished):
                blk.turn_flags()[1][row] = True
                blk.reward[row] = self.acc[i]
                blk.action[row] = self.pending_action[i]
                self.acc[i] = 0.0
                self.pending[i] = False
            elif self.pending[i]:
                blk.obs[q][row] = blk.obs[p][row]
                if blk.action_mask is not None:
                    blk.action_mask[q][row] = blk.action_mask[p][row]
                continue
            self._write_slot(s, q)
        if over:
            self._set_acting(q)
        else:
            self.acting_slots = sorted(next_acting)
            for blk in self.blocks:
                blk.turn_flags()[0][q][:] = False
            for i in self.acting_slots:
                blk, row = loc[i]
                blk.turn_flags()[0][q][row] = True
        self.parity = q
        self.clock.frame += len(acted)

    def _step_fast(self) -> None:
        """The step of a parallel env whose bodies are one player each, without masks: every live body acts
        and completes its transition every step, so no decision is carried over. Flag arrays are rewritten
        only when the set of live bodies changes."""
        p, q = self.parity, 1 - self.parity
        blk = self.blocks[0]
        live = self.acting_slots
        names = self.names
        acts = list(blk.action) if self.int_actions else list(blk.action.copy())
        obs, rew, term, trunc, _ = self.env.step({names[i]: acts[i] for i in live})
        self.last_obs = obs
        self.t += 1
        cut = self.t >= self.max_t
        out, final, reward = blk.obs[q], blk.final_obs, blk.reward
        terminated, truncated = blk.terminated, blk.truncated
        if self.flagged:
            terminated[self.flagged] = False
            truncated[self.flagged] = False
            self.flagged = []
        if self.completed_for is not live:
            flags, completed = blk.turn_flags()
            completed[:] = flags[p]
            self.completed_for = live
        ret, held = self.ret, self.held
        assert held is not None  # a fast env holds its ends
        frame = self.clock.frame + len(live)
        for i in self.died:
            out[i] = self.slots[i].null_obs  # both buffers hold it once the death step's transition is used
        self.died = []
        still = live
        for i in live:
            name = names[i]
            r = rew[name]
            reward[i] = r
            ret[i] += r
            if term[name] or trunc[name] or cut:
                te = bool(term[name])
                terminated[i] = te
                truncated[i] = not te
                self.flagged.append(i)
                final[i] = obs[name]
                self.player_done[name] = True
                self.slot_done[i] = True
                self.frames[i] += self.t  # every live body acts every step since the reset
                held.append(i, ret[i], self.t, not te, self.frames[i], frame)
                ret[i] = 0.0
                out[i] = self.slots[i].null_obs
                self.died.append(i)
            else:
                out[i] = obs[name]
        if self.died:
            still = [i for i in live if i not in self.died]
        self.parity = q
        self.clock.frame = frame
        if frame >= self.release_at or held.n >= HOLD_ENDS:
            self.release_at = frame + HOLD_STEPS * len(self.slots)
            held.move_to(self.ended)
        if still and not cut and self.env.agents:
            if self.acting_of[q] != still:
                acting = blk.turn_flags()[0][q]
                acting[:] = False
                acting[still] = True
                self.acting_of[q] = still
            self.acting_slots = still
            return
        self.died = []
        self._reset_env(None)
        self._write_all(q)
        self.acting_of[q] = self.acting_slots

    def _step_parallel(self, acted: list[int]) -> dict[str, float]:
        """One parallel step: acting slots' actions, null actions for the other live players the env asks for."""
        acting = set(acted)
        actions: dict[str, Any] = {}
        for name in self.env.agents:
            i, k = self.owner[name]
            s = self.slots[i]
            if i in acting and not self.player_done[name]:
                blk, row = self.loc[i]
                actions[name] = s.split_action(blk.action[row])[k]
            else:
                actions[name] = s.null_actions[k]
        obs, rew, term, trunc, _ = self.env.step(actions)
        self.last_obs = obs
        self._finished_now = set()
        for name in rew:
            if not self.player_done[name] and (term.get(name, False) or trunc.get(name, False)):
                self.player_done[name] = True
                self.term_of[name] = bool(term.get(name, False))
                self._finished_now.add(name)
        return rew

    def _step_aec(self, acted: list[int]) -> dict[str, float]:
        """One AEC move by the selected player, then the dead steps of every player that finished."""
        env = self.env
        name = env.agent_selection
        i, k = self.owner[name]
        blk, row = self.loc[i]
        env.step(self.slots[i].split_action(blk.action[row])[k])
        rew = {a: float(env.rewards.get(a, 0.0)) for a in env.agents}
        self._finished_now = set()
        final: dict[str, Any] = {}
        for a in list(env.agents):
            if not self.player_done[a] and (env.terminations.get(a, False) or env.truncations.get(a, False)):
                self.player_done[a] = True
                self.term_of[a] = bool(env.terminations.get(a, False))
                self._finished_now.add(a)
                final[a] = env.observe(a)
        self._final_aec = final
        while env.agents and (env.terminations.get(env.agent_selection, False)
                              or env.truncations.get(env.agent_selection, False)):
            env.step(None)
        return rew

    def render(self) -> object:
        return self.env.render()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()
