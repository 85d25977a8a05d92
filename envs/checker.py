"""`check_lab_env`: the LabEnv contract stated as code, in the spirit of gymnasium's `check_env` and PettingZoo's
`api_test`. Run it on your own lab-native env (or any adapter's env) before a long run:

    from slm_lab_like.envs.checker import check_lab_env
    check_lab_env(lambda: MyBatchEnv("mine", 8, Clock(max_frame=10**9)))

It steps two envs from `make()` side by side with the same seed and seeded random (legal) actions, and raises
LabEnvCheckError naming the first broken promise:
- layout: blocks tile the slots; every buffer has its space's shape and dtype; masks and turn flags come in pairs;
- buffers: written in place, never replaced (agents hold views of them); observations lie in the observation
  space, written where they belong: reset writes `obs[parity]`, a step writes `obs[1 - parity]` (and masks
  `action_mask[1 - parity]`), leaving the agents' views of `obs[parity]` valid, and flips the parity; every acting
  row gets a real reward; the clock counts one frame per acting slot (the checker fills what an env must write
  with values outside its space before each call, so a buffer left unwritten shows);
- episode ends: a slot is flagged terminated or truncated exactly when an episode end for it is added to `ended`, with its
  truncated flag, a final observation in the space, and the return and length of the rewards it was given;
- masks: an acting slot (every slot, where the env has no turn flags) has at least one legal action;
- seeding: the same seed and actions give identical buffers and episode ends; `close()` may be called twice.

It returns None when every promise holds.
"""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np

from slm_lab_like.envs.base import LabEnv, SlotBlock
from slm_lab_like.envs.episodes import EpisodeEnd
from slm_lab_like.array_spaces import space_shape


class LabEnvCheckError(AssertionError):
    """A LabEnv broke a promise of its contract (the message names which, where and when)."""


def check_lab_env(make: Callable[[], LabEnv], steps: int = 300, seed: int = 0) -> None:
    """Check the LabEnv contract (see the module doc) on two envs built by `make`, `steps` steps from
    `reset(seed)`; LabEnvCheckError naming the first broken promise, else None."""
    env, twin = make(), make()
    try:
        _check_layout(env)
        buffers = [_buffers(blk) for blk in env.blocks]
        rng = np.random.default_rng(seed)
        for e in (env, twin):
            for blk in e.blocks:
                _unwritten(blk, 0, obs=True)
                _unwritten(blk, 1, obs=True)
        env.reset(seed=seed)
        twin.reset(seed=seed)
        _same_buffers(env, buffers, "reset")
        _same(env, twin, "after reset(seed)")
        _check_obs(env, env.parity, "after reset")
        tally = _Tally(env.n_slots)
        for t in range(steps):
            when = f"at step {t + 1}"
            actions = random_actions(env, rng)
            for e in (env, twin):
                for blk, act in zip(e.blocks, actions):
                    blk.action[...] = act
                    _unwritten(blk, 1 - e.parity, obs=True, step=True)
            _step(env, tally, when)
            _same_buffers(env, buffers, f"the step {when}")
            twin.step()
            twin.flush_ends().clear()
            _same(env, twin, when)
    finally:
        env.close()
        twin.close()
    try:
        env.close()
    except Exception as err:  # the env's own code: a second close must be harmless
        raise LabEnvCheckError(f"{env.name}: a second close() raised {type(err).__name__}: {err}") from None


def _buffers(blk: SlotBlock) -> dict[str, np.ndarray]:
    """Every array of a block the lab and agents hold views of, by name."""
    out = {"obs[0]": blk.obs[0], "obs[1]": blk.obs[1], "final_obs": blk.final_obs, "action": blk.action,
           "reward": blk.reward, "terminated": blk.terminated, "truncated": blk.truncated}
    if blk.action_mask is not None and blk.final_action_mask is not None:
        out.update({"action_mask[0]": blk.action_mask[0], "action_mask[1]": blk.action_mask[1],
                    "final_action_mask": blk.final_action_mask})
    if blk.acting is not None and blk.completed is not None:
        out.update({"acting[0]": blk.acting[0], "acting[1]": blk.acting[1], "completed": blk.completed})
    return out


def _same_buffers(env: LabEnv, buffers: list[dict[str, np.ndarray]], call: str) -> None:
    """Fail where a block's buffer is no longer the array it was: agents' views would read a stale one."""
    for i, (blk, before) in enumerate(zip(env.blocks, buffers)):
        for name, array in _buffers(blk).items():
            if array is not before.get(name):
                _fail(f"{env.name}: block {i}: {call} replaced its {name} array; write into it in place "
                      f"({name.split('[')[0]}[...] = ...): the lab and its agents hold views of it")


def _outside(space: gym.Space, dtype: np.dtype) -> object | None:
    """A value of `dtype` that no observation of `space` holds (NaN, or an integer below the space), or None."""
    if np.issubdtype(dtype, np.floating):
        return np.nan
    low = getattr(space, "low", None)
    if isinstance(space, gym.spaces.Discrete):
        low = space.start
    elif isinstance(space, gym.spaces.MultiDiscrete):
        low = space.start
    elif isinstance(space, gym.spaces.MultiBinary):
        low = 0
    if low is None or not np.issubdtype(dtype, np.integer):
        return None
    below = int(np.min(low)) - 1
    return below if below >= np.iinfo(dtype).min else None


def _unwritten(blk: SlotBlock, parity: int, obs: bool = False, step: bool = False) -> None:
    """Fill what the next reset (`obs[parity]`) or step (`obs[parity]`, `final_obs`, `reward`) must write with values
    no env writes (outside the space, NaN), so a row left unwritten fails the checks that follow."""
    value = _outside(blk.observation_space, blk.obs[parity].dtype)
    if value is not None and obs:
        blk.obs[parity][...] = value
        if step:
            blk.final_obs[...] = value
    if step:
        blk.reward[...] = np.nan


def _fail(message: str) -> None:
    raise LabEnvCheckError(message)


def _check_layout(env: LabEnv) -> None:
    start = 0
    for i, blk in enumerate(env.blocks):
        where = f"{env.name}: block {i}"
        if blk.start != start or blk.stop <= blk.start:
            _fail(f"{where}: slots [{blk.start}, {blk.stop}) do not continue the blocks before it at {start}")
        start = blk.stop
        n, obs_space, act_space = blk.size, blk.observation_space, blk.action_space
        expect = {"obs[0]": (blk.obs[0], obs_space), "obs[1]": (blk.obs[1], obs_space),
                  "final_obs": (blk.final_obs, obs_space), "action": (blk.action, act_space)}
        for name, (buf, space) in expect.items():
            shape = (n,) + space_shape(space)
            if buf.shape != shape or buf.dtype != space.dtype:
                _fail(f"{where}: {name} is {buf.dtype}{buf.shape}, its space says {space.dtype}{shape}")
        for name, buf, dtype in (("reward", blk.reward, np.float32), ("terminated", blk.terminated, np.bool_),
                                 ("truncated", blk.truncated, np.bool_)):
            if buf.shape != (n,) or buf.dtype != dtype:
                _fail(f"{where}: {name} is {buf.dtype}{buf.shape}, expected {np.dtype(dtype)}({n},)")
        if (blk.action_mask is None) != (blk.final_action_mask is None):
            _fail(f"{where}: action_mask and final_action_mask come together")
        if (blk.acting is None) != (blk.completed is None):
            _fail(f"{where}: acting and completed come together")
    if start != env.n_slots:
        _fail(f"{env.name}: blocks cover {start} slots, the env has {env.n_slots}")


def _rows(blk: SlotBlock, parity: int) -> np.ndarray:
    """Rows of a block whose observation is live (acting or not gated)."""
    return np.arange(blk.size) if blk.acting is None else np.flatnonzero(blk.acting[parity])


def _check_obs(env: LabEnv, parity: int, when: str) -> None:
    for i, blk in enumerate(env.blocks):
        for row in _rows(blk, parity):
            if not blk.observation_space.contains(blk.obs[parity][row]):
                _fail(f"{env.name}: slot {blk.start + row} {when}: observation {blk.obs[parity][row]!r} is not in "
                      f"{blk.observation_space}")
            if blk.action_mask is not None and not blk.action_mask[parity][row].any():
                _fail(f"{env.name}: slot {blk.start + row} {when}: acting with no legal action")


def random_actions(env: LabEnv, rng: np.random.Generator) -> list[np.ndarray]:
    """Seeded random actions for every row of every block; legal ones where a mask is given."""
    out = []
    for blk in env.blocks:
        space = blk.action_space
        acts = np.zeros_like(blk.action)
        for row in range(blk.size):
            mask = None if blk.action_mask is None else blk.action_mask[env.parity][row]
            if mask is not None and mask.any():
                acts[row] = rng.choice(np.flatnonzero(mask))
            else:
                acts[row] = _sample(space, rng)
        out.append(acts)
    return out


def _sample(space: gym.Space, rng: np.random.Generator) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(space.start + rng.integers(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return (space.start + rng.integers(space.nvec)).astype(space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        return rng.integers(2, size=space.shape).astype(space.dtype)
    assert isinstance(space, gym.spaces.Box)  # a SlotBlock holds array spaces only
    low = np.where(np.isfinite(space.low), space.low, -1.0)
    high = np.where(np.isfinite(space.high), space.high, 1.0)
    return rng.uniform(low, high).astype(space.dtype)


class _Tally:
    """The returns and lengths the checker saw per slot since its episode began."""

    def __init__(self, n: int) -> None:
        self.ret = np.zeros(n)
        self.length = np.zeros(n, dtype=np.int64)


def _step(env: LabEnv, tally: _Tally, when: str) -> None:
    p = env.parity
    before = [blk.obs[p].copy() for blk in env.blocks]
    masks = [None if blk.action_mask is None else blk.action_mask[p].copy() for blk in env.blocks]
    acting = sum(blk.size if blk.acting is None else int(blk.acting[p].sum()) for blk in env.blocks)
    frame = env.clock.frame
    env.step()
    if env.parity != 1 - p:
        _fail(f"{env.name} {when}: step did not flip the parity")
    if env.clock.frame - frame != acting:
        _fail(f"{env.name} {when}: the clock counted {env.clock.frame - frame} frames, {acting} slot(s) acted")
    for blk, old, mask in zip(env.blocks, before, masks):
        if not np.array_equal(blk.obs[p], old, equal_nan=True):
            _fail(f"{env.name} {when}: step wrote into obs[parity], which agents still read; write obs[1 - parity]")
        if mask is not None and blk.action_mask is not None and not np.array_equal(blk.action_mask[p], mask):
            _fail(f"{env.name} {when}: step wrote into action_mask[parity], the mask of the observation agents still "
                  "read; write action_mask[1 - parity]")
    ended = env.flush_ends()
    ends = {end.slot: end for end in ended}
    if len(ends) != len(ended):
        _fail(f"{env.name} {when}: one slot ended two episodes in one step")
    for blk in env.blocks:
        for row in range(blk.size):
            _check_row(env, blk, row, ends.get(blk.start + row), tally, when)
    _check_obs(env, env.parity, when)
    env.clock.epi += len(ended)
    ended.clear()


def _check_row(env: LabEnv, blk: SlotBlock, row: int, end: EpisodeEnd | None, tally: _Tally, when: str) -> None:
    slot = blk.start + row
    where = f"{env.name}: slot {slot} {when}"
    stepped = 1 - env.parity  # the obs parity the step was taken from
    completed = blk.completed_of(stepped)
    counted = completed is None or bool(completed[row])
    if counted and not np.isfinite(blk.reward[row]):
        _fail(f"{where}: reward {blk.reward[row]} (a row that holds a transition gets a real reward every step)")
    if counted:
        tally.ret[slot] += float(blk.reward[row])
        tally.length[slot] += 1
    done = bool(blk.terminated[row] or blk.truncated[row])
    if done != (end is not None):
        _fail(f"{where}: terminated/truncated flags ({done}) disagree with the episode ends appended "
              f"({end is not None})")
    if end is None:
        return
    if not counted:
        _fail(f"{where}: an episode ended in a row not marked completed")
    if end.truncated != bool(blk.truncated[row] and not blk.terminated[row]):
        _fail(f"{where}: EpisodeEnd.truncated disagrees with the flags")
    final = blk.final_of(stepped)[row]
    if not blk.observation_space.contains(final):
        _fail(f"{where}: final_obs {final!r} is not in {blk.observation_space}")
    if not np.isclose(end.ret, tally.ret[slot], rtol=1e-4, atol=1e-4):
        _fail(f"{where}: EpisodeEnd.ret {end.ret} but the rewards given sum to {tally.ret[slot]}")
    if blk.acting is None and end.length != tally.length[slot]:
        _fail(f"{where}: EpisodeEnd.length {end.length} but the slot stepped {tally.length[slot]} times")
    tally.ret[slot], tally.length[slot] = 0.0, 0


def _same(env: LabEnv, twin: LabEnv, when: str) -> None:
    """The two envs' buffers agree (the same seed and actions must give the same data)."""
    for i, (a, b) in enumerate(zip(env.blocks, twin.blocks)):
        pairs = [("obs", a.obs[env.parity], b.obs[twin.parity]), ("reward", a.reward, b.reward),
                 ("terminated", a.terminated, b.terminated), ("truncated", a.truncated, b.truncated)]
        if a.action_mask is not None and b.action_mask is not None:
            pairs.append(("action_mask", a.action_mask[env.parity], b.action_mask[twin.parity]))
        if a.acting is not None and b.acting is not None:
            pairs.append(("acting", a.acting[env.parity], b.acting[twin.parity]))
        for name, x, y in pairs:
            if not np.array_equal(x, y, equal_nan=True):
                _fail(f"{env.name}: block {i} {when}: {name} differs between two envs given the same seed and "
                      "actions (not deterministic under its seed)")
