"""Single-agent judge: hosts gymnasium envs behind a ZeroMQ ROUTER socket, one env per client session.

Run in-process with :func:`slm_lab_like.remote.hosting.serve` (a background thread) or as a subprocess with
:func:`slm_lab_like.remote.spawn.spawn_judge`. Each client says ``hello`` and receives a token from
``secrets.token_hex``; the token names its own env instance, and every later request must carry it.
Request handling lives in :class:`~slm_lab_like.remote.base.BaseJudge`; this module only says what a reset
and a step of one session do. No client input can stop the loop: every failure becomes a typed error reply.

Admission cannot be starved: a session that has not reset ``handshake_timeout`` seconds after its hello expires,
at most ``max_pending`` such sessions exist at once, and a refused hello (``busy`` or ``full``) says when to
retry. A client whose session expired hears ``session_expired`` and may say hello again.

A hello with ``"n": N`` opens a vector session: N copies of the env stepped in one round trip, each reset in the
same step its episode ends (SAME_STEP autoreset, the final observation sent apart).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections import OrderedDict
from typing import Any, NoReturn

import numpy as np

from slm_lab_like.envs.make import peel_time_limit
from slm_lab_like.remote import options as O
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.base import (
    ActionDecoder, BaseJudge, Client, Codec, EnvFactory, EpisodeCallback, Request, check_bind_address,
    resolve_env_factory,
)

logger = logging.getLogger(__name__)

__all__ = ["JudgeServer", "EnvFactory", "EpisodeCallback", "check_bind_address", "resolve_env_factory"]


class _Session(Client):
    """One client's env instance and episode bookkeeping (``pending`` until its first reset)."""

    __slots__ = ("env", "started", "done", "ep_return", "ep_length", "ep_seed", "ep_start", "episodes", "pending",
                 "admitted")
    size = 1

    def __init__(self, token: str, codec: Codec, env: Any, now: float) -> None:
        super().__init__(token, codec, now)
        self.env = env
        self.started = False
        self.done = False
        self.ep_return = 0.0
        self.ep_length = 0
        self.ep_seed: int | None = None
        self.ep_start = now
        self.episodes = 0
        self.pending = True
        self.admitted = now

    def close_envs(self) -> None:
        self.env.close()


class _VecSession(Client):
    """One client's N env copies, stepped together; each copy's episode bookkeeping as arrays."""

    __slots__ = ("envs", "size", "vcodec", "max_t", "started", "pending", "admitted", "t", "ret", "ep_start",
                 "episodes", "obs")

    def __init__(self, token: str, codec: Codec, vcodec: P.VectorCodec, envs: list, max_t: int | None,
                 now: float) -> None:
        super().__init__(token, codec, now)
        self.envs, self.size, self.vcodec, self.max_t = envs, len(envs), vcodec, max_t
        self.started, self.pending, self.admitted = False, True, now
        self.t, self.ret = [0] * self.size, [0.0] * self.size
        self.ep_start, self.episodes = [now] * self.size, [0] * self.size
        self.obs = np.zeros((self.size, *vcodec.obs_shape), vcodec.obs_out)

    def close_envs(self) -> None:
        for env in self.envs:
            env.close()


class JudgeServer(BaseJudge[_Session | _VecSession]):
    """Single-agent judge: each client session gets its own instance of the hosted gymnasium env (a vector
    session gets N).

    ``env`` is an env name (any the env registry knows), ``"module:Class"``, a spec env dict or a zero-argument
    factory. ``max_sessions`` caps the env instances served at once, ``max_pending`` the sessions that have not
    reset yet, which expire ``handshake_timeout`` seconds after their hello; other sessions silent for
    ``session_timeout`` seconds are closed. ``episode_seeds`` and ``episode_callback`` are :class:`BaseJudge`'s
    (seeds are taken across all sessions; a judge with ``episode_seeds`` opens no vector sessions).
    """

    kind = "single"

    def __init__(
        self,
        env: Any,
        address: str = "tcp://127.0.0.1:0",
        *,
        env_kwargs: dict | None = None,
        max_sessions: int = O.MAX_SESSIONS,
        session_timeout: float | None = O.SESSION_TIMEOUT,
        idle_timeout: float | None = O.IDLE_TIMEOUT,
        handshake_timeout: float | None = O.HANDSHAKE_TIMEOUT,
        max_pending: int = O.MAX_PENDING,
        env_id: str | None = None,
        **base_kwargs: Any,
    ) -> None:
        self.factory = resolve_env_factory(env, **(env_kwargs or {}))
        proto = self.factory()
        self.env_id = env_id or (env if isinstance(env, str) else getattr(getattr(proto, "spec", None), "id", None)
                                 or type(getattr(proto, "unwrapped", proto)).__name__)
        self.observation_space = proto.observation_space
        self.action_space = proto.action_space
        self.render_mode = getattr(proto, "render_mode", None)
        self.max_episode_steps = getattr(getattr(proto, "spec", None), "max_episode_steps", None)
        self.codec = Codec(self.observation_space, self.action_space)
        self._welcome_static = {"env": str(self.env_id), "body": None, "render_mode": self.render_mode,
                                "render_fps": (getattr(proto, "metadata", {}) or {}).get("render_fps"),
                                "max_episode_steps": self.max_episode_steps}
        self._spare_env: Any = proto
        self.max_sessions = int(max_sessions)
        self.max_pending = int(max_pending)
        self.session_timeout = session_timeout
        self.idle_timeout = idle_timeout
        self.handshake_timeout = handshake_timeout
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._last_reap = time.monotonic()
        super().__init__(address, **base_kwargs)

    @property
    def sessions(self) -> dict[str, _Session | _VecSession]:
        """Live client sessions by token."""
        return self._clients

    # -- admission -------------------------------------------------------------------------
    def _admit(self, header: dict, now: float) -> _Session | _VecSession:
        n = self._vector_size(header)
        self._reap(now)
        pending = [s for s in self._clients.values() if s.pending]
        if len(pending) >= self.max_pending:
            retry = min(s.admitted for s in pending) + (self.handshake_timeout or 0.0) - now
            raise P.ProtocolError("busy", f"{len(pending)} sessions are waiting for their first reset",
                                  retry if self.handshake_timeout is not None else None)
        used, need = sum(s.size for s in self._clients.values()), n or 1
        if used + need > self.max_sessions:
            used -= self._reclaim_idle(used + need - self.max_sessions, now)
        if used + need > self.max_sessions:
            raise P.ProtocolError("full", f"judge already serves {used} of {self.max_sessions} env instances",
                                  self._next_expiry(now))
        if n is None:
            env = self._spare_env if self._spare_env is not None else self.factory()
            self._spare_env = None
            sess: _Session | _VecSession = _Session(secrets.token_hex(16), self.codec, env, now)
        else:
            sess = self._vector_session(n, header.get("max_t"), now)
        self._add_client(sess)
        return sess

    def _vector_size(self, header: dict) -> int | None:
        """The number of copies a hello asks for (None: a plain session); refused when it cannot be served."""
        n = header.get("n")
        if n is None:
            return None
        if type(n) is not int or not 1 <= n <= self.max_sessions:
            raise P.ProtocolError("malformed", f"n must be an integer from 1 to {self.max_sessions}")
        if self._seeds is not None:
            raise P.ProtocolError("unsupported", "this judge chooses every episode's seed: one session per client")
        if P.make_vector_codec(self.observation_space, self.action_space, 1) is None:
            raise P.ProtocolError("unsupported", "vector sessions need spaces with a fixed raw layout")
        return n

    def _vector_session(self, n: int, max_t: Any, now: float) -> _VecSession:
        if max_t is not None and (type(max_t) is not int or max_t < 1):
            raise P.ProtocolError("malformed", "max_t must be a positive integer")
        envs: list = []
        try:
            for _ in range(n):
                envs.append(self._spare_env if self._spare_env is not None else self.factory())
                self._spare_env = None
        except Exception as exc:
            for env in envs:
                env.close()
            raise P.ProtocolError("env_error", f"cannot make the env: {type(exc).__name__}: {exc}") from None
        vcodec = P.make_vector_codec(self.observation_space, self.action_space, n)
        assert vcodec is not None  # _vector_size admitted only spaces with a fixed raw layout
        peeled = [peel_time_limit(env) for env in envs]  # the session counts steps itself: two wrappers fewer a step
        limits = [limit for limit in (max_t, *(limit for _, limit in peeled)) if limit]
        return _VecSession(secrets.token_hex(16), self.codec, vcodec, [env for env, _ in peeled],
                           min(limits) if limits else None, now)

    def _reclaim_idle(self, short: int, now: float) -> int:
        """Free at least `short` env instances for a new client by expiring the sessions silent for longer than the
        idle timeout, the longest silent first; none is expired when they together hold too few. Returns how many
        instances were freed (0 or at least `short`)."""
        if self.idle_timeout is None:
            return 0
        idle = sorted((s for s in self._clients.values() if not s.pending and now - s.last_active > self.idle_timeout),
                      key=lambda s: s.last_active)
        if sum(s.size for s in idle) < short:
            return 0
        freed = 0
        for sess in idle:
            if freed >= short:
                break
            freed += sess.size
            self._drop(sess, f"silent for {now - sess.last_active:.3g} s while a new client waited for room")
        return freed

    def _next_expiry(self, now: float) -> float | None:
        """Seconds until the first session would expire, or give its room to a waiting client, if it stays silent
        (None when none ever does)."""
        times = [s.admitted + self.handshake_timeout for s in self._clients.values()
                 if s.pending and self.handshake_timeout is not None]
        silent = [t for t in (self.session_timeout, self.idle_timeout) if t is not None]
        if silent:
            times += [s.last_active + min(silent) for s in self._clients.values() if not s.pending]
        return max(0.0, min(times) - now) if times else None

    def _unknown(self, token: Any) -> NoReturn:
        reason = self._expired.get(token) if isinstance(token, str) else None
        if reason is not None:
            raise P.ProtocolError("session_expired", f"the session expired ({reason}); say hello again")
        super()._unknown(token)

    def _welcome(self, client: Client) -> dict:
        if isinstance(client, _VecSession):
            return {**self._welcome_static, "n": client.size, "max_t": client.max_t}
        return self._welcome_static

    # -- one env per session ---------------------------------------------------------------
    def _reset(self, sess: _Session | _VecSession, req: Request, seed: int | None, options: dict | None, now: float) -> None:
        if not isinstance(sess, _Session):
            raise P.ProtocolError("malformed", "a vector session resets with vreset")
        seed = self._episode_seed(seed)
        if sess.started and not sess.done:
            self._record(sess, completed=False)
        try:
            obs, info = sess.env.reset(seed=seed, options=options)
        except Exception as exc:
            sess.started = False
            raise P.ProtocolError("env_error", f"env.reset failed: {type(exc).__name__}: {exc}") from None
        sess.started, sess.done, sess.pending = True, False, False
        sess.ep_return, sess.ep_length, sess.ep_seed, sess.ep_start = 0.0, 0, seed, now
        self._reply(sess, req, "reset", obs, info)

    def _step(self, sess: _Session | _VecSession, req: Request, decode: ActionDecoder, wire: Any, now: float) -> None:
        if not isinstance(sess, _Session):
            raise P.ProtocolError("malformed", "a vector session steps with vstep")
        if not sess.started:
            raise P.ProtocolError("step_before_reset", "call reset before step")
        if sess.done:
            raise P.ProtocolError("needs_reset", "the episode is over; call reset")
        action = decode(sess, wire)
        try:
            obs, reward, terminated, truncated, info = sess.env.step(action)
        except Exception as exc:
            sess.done = True
            raise P.ProtocolError("env_error", f"env.step failed: {type(exc).__name__}: {exc}") from None
        reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
        sess.ep_return += reward
        sess.ep_length += 1
        if terminated or truncated:  # counted before the reply goes out, so the client's last reply finds it counted
            sess.done = True
            self._record(sess, completed=True, terminated=terminated, truncated=truncated)
        self._reply(sess, req, "step", obs, info, reward, terminated, truncated)

    def _close(self, sess: _Session | _VecSession, now: float) -> None:
        self._drop(sess)

    def _render_source(self, sess: _Session | _VecSession) -> Any:
        if isinstance(sess, _VecSession):
            return sess.envs[0] if sess.started else None
        return sess.env if sess.started else None

    # -- N copies per session --------------------------------------------------------------
    def _vector_reset(self, sess: Client, req: Request, seed: int | list | None, options: dict | None,
                      now: float) -> None:
        """Reset every copy: copy i with ``seed + i`` (an int), ``seed[i]`` (a list of N) or its own RNG (None)."""
        if not isinstance(sess, _VecSession):
            raise P.ProtocolError("malformed", "vreset is for vector sessions")
        if isinstance(seed, list) and len(seed) != sess.size:
            raise P.ProtocolError("malformed", f"vreset needs one seed per copy ({sess.size})")
        if isinstance(seed, int) and seed + sess.size - 1 > P.MAX_SEED:
            raise P.ProtocolError("malformed", f"vreset seed {seed} + copy index passes {P.MAX_SEED} for the last of "
                                               f"{sess.size} copies")
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(sess.size)]
        if sess.started:
            for i in range(sess.size):
                if sess.t[i]:
                    self._record_copy(sess, i, completed=False)
        n = sess.size
        infos: list[dict] = [{}] * n
        try:
            for i, env in enumerate(sess.envs):
                sess.obs[i], infos[i] = env.reset(seed=seeds[i], options=options)
        except Exception as exc:
            sess.started = False
            raise P.ProtocolError("env_error", f"env.reset failed: {type(exc).__name__}: {exc}") from None
        sess.started, sess.pending = True, False
        sess.t, sess.ret, sess.ep_start = [0] * n, [0.0] * n, [now] * n
        self._vector_reply(sess, req, "vreset", [0.0] * n, [False] * n, [False] * n, [], [], infos, [])

    def _vector_step(self, sess: Client, req: Request, wire: Any, now: float) -> None:
        if not isinstance(sess, _VecSession):
            raise P.ProtocolError("malformed", "vstep is for vector sessions")
        if not sess.started:
            raise P.ProtocolError("step_before_reset", "call vreset before vstep")
        actions = self._vector_actions(sess, wire)
        n, t, ret, max_t, buf = sess.size, sess.t, sess.ret, sess.max_t, sess.obs
        rewards, terminated, truncated = [0.0] * n, [False] * n, [False] * n
        infos: list[dict] = [{}] * n
        ended, finals, final_infos = [], [], []
        try:
            for i, env in enumerate(sess.envs):
                obs, r, te, tr, info = env.step(actions[i])
                steps = t[i] = t[i] + 1
                ret[i] += r
                rewards[i] = float(r)
                if te or tr or (max_t is not None and steps >= max_t):
                    te, tr = bool(te), bool(tr) or (max_t is not None and steps >= max_t)
                    terminated[i], truncated[i] = te, tr
                    ended.append(i)
                    finals.append(obs)
                    final_infos.append(info)
                    self._record_copy(sess, i, completed=True, terminated=te, truncated=tr)
                    obs, info = env.reset()
                    t[i], ret[i], sess.ep_start[i] = 0, 0.0, now
                buf[i] = obs
                if info:
                    infos[i] = info
        except Exception as exc:
            sess.started = False
            raise P.ProtocolError("env_error", f"env.step failed: {type(exc).__name__}: {exc}") from None
        self._vector_reply(sess, req, "vstep", rewards, terminated, truncated, ended, finals, infos, final_infos)

    @staticmethod
    def _vector_actions(sess: _VecSession, wire: Any) -> list:
        """The N checked actions (one per copy) of a binary frame or a msgpack value."""
        if type(wire) is bytes:
            return sess.vcodec.unpack_actions(wire, P.BIN_REQ.size)
        return sess.vcodec.check_actions(P.array_from_wire(sess.vcodec.act_batch, wire))

    def _vector_reply(self, sess: _VecSession, req: Request, kind: str, rewards: list[float], terminated: list[bool],
                      truncated: list[bool], ended: list[int], finals: list, infos: list[dict],
                      final_infos: list[dict]) -> None:
        """Answer a vector reset or step: one binary frame when asked in binary and every info is empty, else a
        msgpack header; kept for retransmits."""
        vc = sess.vcodec
        sess.last_seq = max(sess.last_seq, req.seq)
        stacked = np.stack([np.asarray(o, vc.obs_out) for o in finals]) if finals else None
        if req.binary and not any(infos) and not any(final_infos):
            tag = P.BIN_VSTEP_REPLY if kind == "vstep" else P.BIN_VRESET_REPLY
            frame = vc.pack_reply(P.BIN_REP.pack(tag, 0, req.seq, 0.0), rewards, terminated, truncated, sess.obs,
                                  stacked)
            sess.last_reply = [frame]
            self._send_frames(req.envelope, [frame])
            return
        header = {"t": kind, "s": req.seq, "o": sess.obs.copy(), "r": np.array(rewards, np.float64),
                  "te": np.array(terminated, bool), "tr": np.array(truncated, bool)}
        if any(infos):
            header["i"] = [P.sanitize_info(i) if i else {} for i in infos]
        if ended:
            header["fx"], header["fo"] = ended, stacked
            header["fi"] = [P.sanitize_info(i) if i else {} for i in final_infos]
        sess.last_reply = frames = P.encode(header)
        self._send_frames(req.envelope, frames)

    # -- bookkeeping -----------------------------------------------------------------------
    def _record(self, sess: _Session, completed: bool, terminated: bool = False, truncated: bool = False) -> None:
        sess.episodes += 1
        if self.episode_callback is not None:
            self._report({"token": sess.token, "episode": sess.episodes - 1, "seed": sess.ep_seed,
                          "return": sess.ep_return if math.isfinite(sess.ep_return) else None,
                          "length": sess.ep_length, "terminated": terminated, "truncated": truncated,
                          "completed": completed, "wall_s": time.monotonic() - sess.ep_start})

    def _record_copy(self, sess: _VecSession, i: int, completed: bool, terminated: bool = False,
                     truncated: bool = False) -> None:
        sess.episodes[i] += 1
        if self.episode_callback is not None:
            ret = float(sess.ret[i])
            self._report({"token": sess.token, "copy": i, "episode": sess.episodes[i] - 1, "seed": None,
                          "return": ret if math.isfinite(ret) else None, "length": sess.t[i],
                          "terminated": terminated, "truncated": truncated, "completed": completed,
                          "wall_s": time.monotonic() - sess.ep_start[i]})

    def episode_elapsed(self) -> float | None:
        """Seconds since the oldest running episode of any plain session started (None when none runs).

        Safe to call from another thread: it only reads.
        """
        try:
            starts = [s.ep_start for s in list(self._clients.values())
                      if isinstance(s, _Session) and s.started and not s.done]
        except RuntimeError:
            return None
        return time.monotonic() - min(starts) if starts else None

    def _drop(self, sess: _Session | _VecSession, reason: str | None = None) -> None:
        if isinstance(sess, _Session) and sess.started and not sess.done:
            self._record(sess, completed=False)
        elif isinstance(sess, _VecSession) and sess.started:
            for i in range(sess.size):
                if sess.t[i]:
                    self._record_copy(sess, i, completed=False)
        self._remove_client(sess)
        if reason is not None:
            self._expired[sess.token] = reason
            while len(self._expired) > 4096:
                self._expired.popitem(last=False)
        try:
            sess.close_envs()
        except Exception:
            logger.exception("judge: env.close failed")

    def _reap(self, now: float) -> None:
        """Expire sessions that never reset within the handshake timeout, and sessions silent too long."""
        hs, st = self.handshake_timeout, self.session_timeout
        for sess in list(self._clients.values()):
            if sess.pending and hs is not None and now - sess.admitted > hs:
                self._drop(sess, f"no reset within {hs:g} s of its hello")
            elif st is not None and now - sess.last_active > st:
                self._drop(sess, f"silent for {st:g} s")

    def _tick(self, now: float) -> None:
        if now - self._last_reap > 0.25:
            self._last_reap = now
            self._reap(now)

    def _close_envs(self) -> None:
        for sess in list(self._clients.values()):
            self._drop(sess)
        if self._spare_env is not None:
            self._spare_env.close()
            self._spare_env = None
