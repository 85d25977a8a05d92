"""Multi-agent judge: one PettingZoo env, one client per body, a barrier on every step.

The judge gathers the action of every live body, steps the env once and answers each client with its
own observation, reward, terminated, truncated and info, so every agent sees a single-agent gymnasium
env (:class:`~slm_lab_like.remote.client.RemoteEnv`). The env is reset once per episode (seeded by the
first reset request, or by the judge's ``episode_seeds``) and each client receives its own first
observation. Bodies that finished are not waited for; a body whose client is silent past
``client_timeout`` gets its null action (``on_timeout="null"``) or is marked done (``"done"``), and the
others go on. Tokens are issued per body at start-up (``tokens``); ``allow_claim`` lets a client without a
token claim a free body in the handshake.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import Any, Iterable

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.server import BaseJudge, EpisodeCallback, logger, resolve_env_factory


def as_parallel_env(env: Any) -> Any:
    """Return a PettingZoo ParallelEnv, converting an AEC env with ``aec_to_parallel``."""
    if hasattr(env, "agent_iter") and hasattr(env, "last"):
        from pettingzoo.utils.conversions import aec_to_parallel
        return aec_to_parallel(env)
    return env


class _Body:
    """Judge-side state of one body: its client, its pending request and its episode status."""

    __slots__ = ("name", "token", "claimed", "absent", "timed_out", "last_active", "last_seq", "last_reply",
                 "pending_step", "pending_reset", "joined", "done", "ep_return", "welcome", "obs_enc",
                 "act_check", "null", "obs_pack", "obs_frame", "act_from", "step_size")

    def __init__(self, name: str, token: str, env: Any, null: Any) -> None:
        obs_space, act_space = env.observation_space(name), env.action_space(name)
        self.name, self.token = name, token
        self.claimed, self.absent, self.timed_out = False, True, False
        self.last_active = 0.0
        self.last_seq = -1
        self.last_reply: list[Any] | None = None
        # pending requests remember whether they came as binary frames (their replies go the same way)
        self.pending_step: tuple[list[bytes], int, Any, bool] | None = None
        self.pending_reset: tuple[list[bytes], int, int | None, dict | None, float, bool] | None = None
        self.joined = False
        self.done = False
        self.ep_return = 0.0
        self.welcome = {"obs_space": P.describe_space(obs_space), "act_space": P.describe_space(act_space)}
        self.obs_enc = P.make_value_encoder(obs_space)
        self.act_check = P.make_action_checker(act_space)
        self.null = null if null is not None else P.null_action(act_space)
        obs_codec, act_codec = P.make_fixed_codec(obs_space), P.make_fixed_codec(act_space)
        self.obs_pack = self.act_from = None
        self.obs_frame, self.step_size = 0, 0
        if obs_codec is not None and act_codec is not None:
            self.welcome["bin"] = 1
            self.obs_pack, self.act_from = obs_codec.pack, act_codec.check
            self.obs_frame = P.FLAG_OBS_FRAME if obs_codec.nbytes > P.BIN_INLINE_OBS_BYTES else 0
            self.step_size = P.BIN_REQ.size + act_codec.nbytes


class MultiJudgeServer(BaseJudge):
    """Judge hosting one multi-agent PettingZoo env (Parallel, or AEC converted) for one client per body.

    ``env`` is a factory, ``"module:Class"`` or spec env dict producing the PettingZoo env.
    ``client_timeout`` is how long the barrier waits for a silent body, ``join_timeout`` how long the
    first reset waits for every body to be claimed, ``on_timeout`` is ``"null"`` or ``"done"``,
    ``null_actions`` overrides the per-body null action, ``episode_seeds`` lets the judge pick seeds.
    """

    kind = "multi"

    def __init__(
        self,
        env: Any,
        address: str = "tcp://127.0.0.1:0",
        *,
        env_kwargs: dict | None = None,
        client_timeout: float = 10.0,
        join_timeout: float | None = None,
        on_timeout: str = "null",
        allow_claim: bool = True,
        null_actions: dict[str, Any] | None = None,
        episode_seeds: Iterable[int] | None = None,
        episode_callback: EpisodeCallback | None = None,
        env_id: str | None = None,
        **base_kwargs: Any,
    ) -> None:
        if on_timeout not in ("null", "done"):
            raise ValueError("on_timeout must be 'null' or 'done'")
        self.env = as_parallel_env(resolve_env_factory(env, **(env_kwargs or {}))())
        self.env_id = env_id or (env if isinstance(env, str) else
                                 (getattr(self.env, "metadata", {}) or {}).get("name") or type(self.env).__name__)
        self.client_timeout = float(client_timeout)
        self.join_timeout = self.client_timeout if join_timeout is None else float(join_timeout)
        self.on_timeout = on_timeout
        self.allow_claim = allow_claim
        self.render_mode = getattr(self.env, "render_mode", None)
        null_actions = null_actions or {}
        self.bodies: dict[str, _Body] = {}
        for name in self.env.possible_agents:
            self.bodies[str(name)] = _Body(str(name), secrets.token_hex(16), self.env, null_actions.get(name))
        self._by_token = {b.token: b for b in self.bodies.values()}
        self._by_raw_token = {bytes.fromhex(b.token): b for b in self.bodies.values()}
        self._seeds = iter(list(episode_seeds)) if episode_seeds is not None else None
        self.episode_callback = episode_callback
        self.episode_running = False
        self.episodes = 0
        self._ep_seed: int | None = None
        self._ep_length = 0
        self._ep_start = 0.0
        self._first: dict[str, tuple[Any, dict]] = {}
        self._barrier_since: float | None = None
        self._parked_since: float | None = None
        super().__init__(address, **base_kwargs)

    @property
    def tokens(self) -> dict[str, str]:
        """Map of body name to the token that acts for it (hand each to one player)."""
        return {name: b.token for name, b in self.bodies.items()}

    # -- request handling ------------------------------------------------------------------
    def _handle(self, envelope: list[bytes], header: dict, now: float) -> None:
        kind = header["t"]
        if kind == "hello":
            self._on_hello(envelope, header, now)
            return
        body = self._body(header, now)
        if kind == "step":
            self._on_step(body, envelope, header, now)
        elif kind == "reset":
            self._on_reset(body, envelope, header, now)
        elif kind == "ping":
            self._send(envelope, {"t": "pong", "s": header.get("s"), "time": time.time()})
        elif kind == "close":
            self._on_close(body, envelope, header, now)
        elif kind == "render":
            self._on_render(envelope, header)
        else:
            raise P.ProtocolError("unknown_type", f"unknown request type {kind[:40]!r}")

    def _body(self, header: dict, now: float) -> _Body:
        token = header.get("k")
        body = self._by_token.get(token) if isinstance(token, str) else None
        if body is None:
            raise P.ProtocolError("unknown_token", "unknown or missing token")
        body.absent = False
        body.last_active = now
        return body

    def _on_hello(self, envelope: list[bytes], header: dict, now: float) -> None:
        self._check_hello(header)
        token, name = header.get("k"), header.get("body")
        if token is not None:
            body = self._body(header, now)
        elif not self.allow_claim:
            raise P.ProtocolError("token_required", "this judge only admits clients with an issued token")
        elif name is not None:
            body = self.bodies.get(name) if isinstance(name, str) else None
            if body is None or body.claimed:
                raise P.ProtocolError("body_taken", "no such free body")
        else:
            free = [b for b in self.bodies.values() if not b.claimed]
            if not free:
                raise P.ProtocolError("full", "every body is taken")
            body = free[0]
        body.claimed, body.absent, body.last_active = True, False, now
        self._send(envelope, {"t": "welcome", "v": P.PROTOCOL_VERSION, "server": self.kind, "env": str(self.env_id),
                              "k": body.token, "body": body.name, "s": header.get("s"), "last_seq": body.last_seq,
                              "render_mode": self.render_mode, "max_episode_steps": None, **body.welcome})
        self._maybe_start(now)

    def _check_seq(self, body: _Body, header: dict, envelope: list[bytes], kind: str) -> int | None:
        return self._check_seq_num(body, self._seq(header), header.get("retry") is True, envelope, kind)

    def _check_seq_num(self, body: _Body, seq: int, retry: bool, envelope: list[bytes], kind: str) -> int | None:
        for pending in (body.pending_step, body.pending_reset):
            if pending is not None and retry and pending[1] == seq:
                pending[0][:] = envelope
                return None
        if seq <= body.last_seq:
            if retry and seq == body.last_seq and body.last_reply is not None:
                self._send_frames(envelope, body.last_reply)
                return None
            raise P.ProtocolError(f"duplicate_{kind}", f"sequence number {seq} was already used")
        return seq

    def _reply(self, body: _Body, envelope: list[bytes], seq: int, header: dict) -> None:
        body.last_seq = max(body.last_seq, seq)
        body.last_reply = self._send(envelope, header)

    def _reply_obs(self, body: _Body, envelope: list[bytes], seq: int, binary: bool, kind: str, obs: Any,
                   info: dict, reward: float = 0.0, terminated: bool = False, truncated: bool = False) -> None:
        """Send a reset or step reply: binary frames to a binary request (when the observation is in its
        exact wire form and the info is empty), a msgpack header otherwise."""
        frames = None
        if binary and not info:
            data = body.obs_pack(obs)
            if data is not None:
                tag = P.BIN_STEP_REPLY if kind == "step" else P.BIN_RESET_REPLY
                flags = terminated | (truncated << 1) | body.obs_frame
                head = P.BIN_REP.pack(tag, flags, seq, reward)
                frames = [head, data] if body.obs_frame else [head + data]
        if frames is None:
            header = {"t": kind, "s": seq, "o": body.obs_enc(obs), "i": info}
            if kind == "step":
                header.update(r=reward, te=terminated, tr=truncated)
            frames = P.encode(header)
        body.last_seq = max(body.last_seq, seq)
        body.last_reply = frames
        self._send_frames(envelope, frames)

    def _handle_binary(self, envelope: list[bytes], frame: bytes, tag: bytes, flags: int, seq: int,
                       token: bytes, now: float) -> None:
        """Serve a binary step or reset with the same checks as the msgpack ones."""
        body = self._by_raw_token.get(token)
        if body is None:
            raise P.ProtocolError("unknown_token", "unknown or missing token")
        body.absent = False
        body.last_active = now
        if body.obs_pack is None:
            raise P.ProtocolError("malformed", "this body takes no binary requests")
        is_step = tag == P.BIN_STEP
        if not is_step and tag != P.BIN_RESET:
            raise P.ProtocolError("unknown_type", "unknown binary request type")
        checked = self._check_seq_num(body, seq, bool(flags & P.FLAG_RETRY), envelope,
                                      "step" if is_step else "reset")
        if checked is None:
            return
        if is_step:
            def action_of() -> Any:
                if len(frame) != body.step_size:
                    raise P.ProtocolError("malformed", "binary step of the wrong size for the action space")
                return body.act_from(frame, P.BIN_REQ.size)
            self._step_request(body, envelope, seq, action_of, now, True)
            return
        if flags & P.FLAG_SEED:
            if len(frame) != P.BIN_REQ.size + P.BIN_SEED.size:
                raise P.ProtocolError("malformed", "binary reset of the wrong size")
            seed = self._seed(P.BIN_SEED.unpack_from(frame, P.BIN_REQ.size)[0])
        elif len(frame) != P.BIN_REQ.size:
            raise P.ProtocolError("malformed", "binary reset of the wrong size")
        else:
            seed = None
        self._reset_request(body, envelope, seq, seed, None, now, True)

    def _on_reset(self, body: _Body, envelope: list[bytes], header: dict, now: float) -> None:
        seq = self._check_seq(body, header, envelope, "reset")
        if seq is None:
            return
        seed = self._seed(header.get("seed"))
        options = header.get("opt")
        if options is not None and not isinstance(options, dict):
            raise P.ProtocolError("malformed", "reset options must be a map")
        self._reset_request(body, envelope, seq, seed, options, now, False)

    def _reset_request(self, body: _Body, envelope: list[bytes], seq: int, seed: int | None,
                       options: dict | None, now: float, binary: bool) -> None:
        if body.pending_reset is not None or body.pending_step is not None:
            raise P.ProtocolError("duplicate_reset", "a request of this body is still pending")
        if self.episode_running and not body.joined and not body.done:
            obs, info = self._first.pop(body.name)
            body.joined = True
            self._reply_obs(body, envelope, seq, binary, "reset", obs, info)
            return
        if self.episode_running and not body.done:
            body.done = True
        body.pending_reset = (list(envelope), seq, seed, options, now, binary)
        if self._parked_since is None:
            self._parked_since = now
        self._maybe_step(now)
        self._maybe_end(now)
        self._maybe_start(now)

    def _on_step(self, body: _Body, envelope: list[bytes], header: dict, now: float) -> None:
        seq = self._check_seq(body, header, envelope, "step")
        if seq is None:
            return
        self._step_request(body, envelope, seq, lambda: body.act_check(header.get("a")), now, False)

    def _step_request(self, body: _Body, envelope: list[bytes], seq: int, action_of: Any, now: float,
                      binary: bool) -> None:
        if body.pending_step is not None:
            raise P.ProtocolError("duplicate_step", "this body's previous step is still waiting at the barrier")
        if not self.episode_running or not body.joined or body.pending_reset is not None:
            raise P.ProtocolError("step_before_reset", "call reset before step")
        if body.done:
            if body.timed_out and self.on_timeout == "done":
                raise P.ProtocolError("timed_out", "this body was marked done after a timeout; call reset")
            raise P.ProtocolError("needs_reset", "this body's episode is over; call reset")
        action = action_of()
        body.pending_step = (list(envelope), seq, action, binary)
        if self._barrier_since is None:
            self._barrier_since = now
        self._maybe_step(now)

    def _on_close(self, body: _Body, envelope: list[bytes], header: dict, now: float) -> None:
        body.pending_step = None
        body.pending_reset = None
        if self.episode_running:
            body.done = True
        body.absent = True
        self._send(envelope, {"t": "closed", "s": header.get("s")})
        self._maybe_step(now)
        self._maybe_end(now)

    def _on_render(self, envelope: list[bytes], header: dict) -> None:
        if self.render_mode != "rgb_array" or not self.episode_running:
            raise P.ProtocolError("render_unavailable", "the judge's env renders no rgb_array (or no episode)")
        try:
            frame = self.env.render()
        except Exception as exc:
            raise P.ProtocolError("env_error", f"env.render failed: {type(exc).__name__}") from None
        if frame is None:
            raise P.ProtocolError("render_unavailable", "the env returned no frame")
        self._send(envelope, {"t": "render", "s": header.get("s"), "f": frame})

    # -- episode and barrier ---------------------------------------------------------------
    def _maybe_start(self, now: float) -> None:
        if self.episode_running:
            return
        parked = [b for b in self.bodies.values() if b.pending_reset is not None]
        if not parked:
            return
        everyone_here = all(b.claimed for b in self.bodies.values())
        if not everyone_here and now - (self._parked_since or now) < self.join_timeout:
            return
        parked.sort(key=lambda b: b.pending_reset[4])
        _, _, seed, options, _, _ = parked[0].pending_reset
        if self._seeds is not None:
            seed = next(self._seeds, None)
            if seed is None:
                self._parked_since = None
                for b in parked:
                    env_, seq, *_ = b.pending_reset
                    b.pending_reset = None
                    self._send_error(env_, "episode_limit", "this judge allows no more episodes", seq)
                return
        self._parked_since = None
        try:
            obs, infos = self.env.reset(seed=seed, options=options)
        except Exception as exc:
            for b in parked:
                env_, seq, *_ = b.pending_reset
                b.pending_reset = None
                self._send_error(env_, "env_error", f"env.reset failed: {type(exc).__name__}", seq)
            return
        live = set(self.env.agents)
        self.episode_running = True
        self._ep_seed, self._ep_length, self._ep_start = seed, 0, now
        self._barrier_since = None
        self._first = {}
        for name, b in self.bodies.items():
            b.joined, b.done, b.pending_step, b.ep_return = False, name not in live, None, 0.0
            if name in live:
                self._first[name] = (obs[name], P.sanitize_info(infos.get(name) or {}))
        for b in parked:
            env_, seq, *_, binary = b.pending_reset
            b.pending_reset = None
            if b.name in self._first:
                o, info = self._first.pop(b.name)
                b.joined = True
                self._reply_obs(b, env_, seq, binary, "reset", o, info)
            else:
                self._send_error(env_, "not_in_episode", "this body takes no part in the episode", seq)

    def _waiting(self) -> list[_Body]:
        return [b for b in self.bodies.values() if not b.done and not b.absent and b.pending_step is None]

    def _maybe_step(self, now: float) -> None:
        if not self.episode_running or self._barrier_since is None or self._waiting():
            return
        actions = {}
        for name in self.env.agents:
            b = self.bodies[str(name)]
            actions[name] = b.pending_step[2] if b.pending_step is not None else b.null
        self._barrier_since = None
        try:
            obs, rewards, terms, truncs, infos = self.env.step(actions)
        except Exception as exc:
            logger.exception("judge: env.step failed")
            for b in self.bodies.values():
                if b.pending_step is not None:
                    env_, seq, *_ = b.pending_step
                    b.pending_step = None
                    self._send_error(env_, "env_error", f"env.step failed: {type(exc).__name__}", seq)
                b.done = True
            self._end_episode(now, completed=False)
            return
        self._ep_length += 1
        replies = []
        for name in actions:
            b = self.bodies[str(name)]
            reward = float(rewards.get(name, 0.0))
            terminated, truncated = bool(terms.get(name, False)), bool(truncs.get(name, False))
            b.ep_return += reward
            if terminated or truncated:
                b.done = True
            if b.pending_step is not None:
                env_, seq, _, binary = b.pending_step
                b.pending_step = None
                b.last_active = now
                o = obs.get(name)
                info = infos.get(name)
                replies.append((b, env_, seq, binary, o if o is not None else P.null_action(
                    self.env.observation_space(name)), P.sanitize_info(info) if info else {}, reward,
                    terminated, truncated))
        live = set(self.env.agents)
        for b in self.bodies.values():
            if b.name not in live:
                b.done = True
        # bookkeeping first (an episode ending here is counted and reported before its last replies go out);
        # a body with a step reply due has no reset pending, so no reply of _maybe_end can overtake it
        self._maybe_end(now)
        for b, env_, seq, binary, o, info, reward, terminated, truncated in replies:
            self._reply_obs(b, env_, seq, binary, "step", o, info, reward, terminated, truncated)

    def _maybe_end(self, now: float) -> None:
        if not self.episode_running:
            return
        if any(b.pending_step is not None for b in self.bodies.values()):
            if self._barrier_since is None:
                self._barrier_since = now
            self._maybe_step(now)
            return
        if all(b.done or b.absent for b in self.bodies.values()):
            self._end_episode(now, completed=all(b.done for b in self.bodies.values()))

    def _end_episode(self, now: float, completed: bool) -> None:
        self.episode_running = False
        self._barrier_since = None
        self._first = {}
        self.episodes += 1
        if self.episode_callback is not None:
            record = {"episode": self.episodes - 1, "seed": self._ep_seed, "length": self._ep_length,
                      "returns": {n: (b.ep_return if math.isfinite(b.ep_return) else None)
                                  for n, b in self.bodies.items()},
                      "completed": completed, "wall_s": now - self._ep_start}
            try:
                self.episode_callback(record)
            except Exception:
                logger.exception("judge: episode callback failed")
        self._maybe_start(now)

    def _timeout(self, body: _Body, now: float) -> None:
        body.absent = True
        body.timed_out = True
        if self.on_timeout == "done":
            body.done = True

    def _next_wakeup(self) -> float:
        if self._barrier_since is not None or self._parked_since is not None:
            return 0.02
        return 0.1

    def _tick(self, now: float) -> None:
        # only time can change anything here (requests run _maybe_step/_maybe_end/_maybe_start themselves),
        # and nobody can have timed out before the barrier or the parked resets are that old
        if (self.episode_running and self._barrier_since is not None
                and now - self._barrier_since > self.client_timeout):
            for b in self._waiting():
                if now - max(b.last_active, self._barrier_since) > self.client_timeout:
                    self._timeout(b, now)
            self._maybe_step(now)
            self._maybe_end(now)
        if self._parked_since is not None and now - self._parked_since >= self.join_timeout:
            self._maybe_start(now)

    def _close_envs(self) -> None:
        try:
            self.env.close()
        except Exception:
            logger.exception("judge: env.close failed")
