"""Single-agent judge: hosts gymnasium envs behind a ZeroMQ ROUTER socket, one env per client session.

Run in-process with :func:`slm_lab_like.remote.hosting.serve` (a background thread) or as a subprocess with
:func:`slm_lab_like.remote.spawn.spawn_judge`. Each client says ``hello`` and receives a token from
``secrets.token_hex``; the token names its own env instance, and every later request must carry it.
Request handling lives in :class:`~slm_lab_like.remote.base.BaseJudge`; this module only says what a reset
and a step of one session do. No client input can stop the loop: every failure becomes a typed error reply.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from typing import Any

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.base import (
    ActionDecoder, BaseJudge, Client, Codec, EnvFactory, EpisodeCallback, Request, check_bind_address,
    resolve_env_factory,
)

logger = logging.getLogger(__name__)

__all__ = ["JudgeServer", "EnvFactory", "EpisodeCallback", "check_bind_address", "resolve_env_factory"]


class _Session(Client):
    """One client's env instance and episode bookkeeping."""

    __slots__ = ("env", "started", "done", "ep_return", "ep_length", "ep_seed", "ep_start", "episodes")

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


class JudgeServer(BaseJudge):
    """Single-agent judge: each client session gets its own instance of the hosted gymnasium env.

    ``env`` is an env id, ``"module:Class"``, a spec env dict or a zero-argument factory.
    ``max_sessions`` caps concurrent clients; sessions silent for ``session_timeout`` seconds are closed.
    ``episode_seeds`` and ``episode_callback`` are :class:`BaseJudge`'s (seeds are taken across all sessions).
    """

    kind = "single"

    def __init__(
        self,
        env: Any,
        address: str = "tcp://127.0.0.1:0",
        *,
        env_kwargs: dict | None = None,
        max_sessions: int = 64,
        session_timeout: float | None = 600.0,
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
        self.session_timeout = session_timeout
        self._last_reap = time.monotonic()
        super().__init__(address, **base_kwargs)

    @property
    def sessions(self) -> dict[str, Client]:
        """Live client sessions by token."""
        return self._clients

    # -- requests --------------------------------------------------------------------------
    def _admit(self, header: dict, now: float) -> _Session:
        if len(self._clients) >= self.max_sessions:
            self._reap(now)
        if len(self._clients) >= self.max_sessions:
            raise P.ProtocolError("full", f"judge already serves {self.max_sessions} sessions")
        env = self._spare_env if self._spare_env is not None else self.factory()
        self._spare_env = None
        sess = _Session(secrets.token_hex(16), self.codec, env, now)
        self._add_client(sess)
        return sess

    def _welcome(self, client: Client) -> dict:
        return self._welcome_static

    def _reset(self, sess: _Session, req: Request, seed: int | None, options: dict | None, now: float) -> None:
        seed = self._episode_seed(seed)
        if sess.started and not sess.done:
            self._record(sess, completed=False)
        try:
            obs, info = sess.env.reset(seed=seed, options=options)
        except Exception as exc:
            sess.started = False
            raise P.ProtocolError("env_error", f"env.reset failed: {type(exc).__name__}: {exc}") from None
        sess.started, sess.done = True, False
        sess.ep_return, sess.ep_length, sess.ep_seed, sess.ep_start = 0.0, 0, seed, now
        self._reply(sess, req, "reset", obs, info)

    def _step(self, sess: _Session, req: Request, decode: ActionDecoder, wire: Any, now: float) -> None:
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

    def _close(self, sess: _Session, now: float) -> None:
        self._drop(sess)

    def _render_source(self, sess: _Session) -> Any:
        return sess.env if sess.started else None

    # -- bookkeeping -----------------------------------------------------------------------
    def _record(self, sess: _Session, completed: bool, terminated: bool = False, truncated: bool = False) -> None:
        sess.episodes += 1
        if self.episode_callback is not None:
            self._report({"token": sess.token, "episode": sess.episodes - 1, "seed": sess.ep_seed,
                          "return": sess.ep_return if math.isfinite(sess.ep_return) else None,
                          "length": sess.ep_length, "terminated": terminated, "truncated": truncated,
                          "completed": completed, "wall_s": time.monotonic() - sess.ep_start})

    def episode_elapsed(self) -> float | None:
        """Seconds since the oldest running episode of any session started (None when none runs).

        Safe to call from another thread: it only reads.
        """
        try:
            starts = [s.ep_start for s in list(self._clients.values()) if s.started and not s.done]
        except RuntimeError:
            return None
        return time.monotonic() - min(starts) if starts else None

    def _drop(self, sess: _Session) -> None:
        if sess.started and not sess.done:
            self._record(sess, completed=False)
        self._remove_client(sess)
        try:
            sess.env.close()
        except Exception:
            logger.exception("judge: env.close failed")

    def _reap(self, now: float) -> None:
        if self.session_timeout is None:
            return
        for sess in [s for s in self._clients.values() if now - s.last_active > self.session_timeout]:
            self._drop(sess)

    def _tick(self, now: float) -> None:
        if now - self._last_reap > 1.0:
            self._last_reap = now
            self._reap(now)

    def _close_envs(self) -> None:
        for sess in list(self._clients.values()):
            self._drop(sess)
        if self._spare_env is not None:
            self._spare_env.close()
            self._spare_env = None
