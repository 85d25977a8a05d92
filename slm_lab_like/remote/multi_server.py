"""Multi-agent judge: one PettingZoo env (parallel or turn-based), one client per body.

Every client sees a single-agent gymnasium env (:class:`~slm_lab_like.remote.client.RemoteEnv`). How the
env is played is a :mod:`~slm_lab_like.remote.play` object: in a parallel env the judge gathers the action
of every live body (a barrier), steps once and answers each client with its own observation, reward,
terminated, truncated and info; in a turn-based (AEC) env, which is not converted, a client's step returns
when it is its turn again or its game ended, with the reward it got meanwhile, and its reset returns at its
first turn (a reset carries no reward: any reward before the first turn comes with the first step's reply).
The env is reset once per episode (seeded by the first reset request, or by the judge's ``episode_seeds``).

Every wait has one deadline rule: while any request waits on the env (a step at the barrier, a reset joining
the running episode, a finished body's reset waiting for the next episode), a client silent for
``client_timeout`` is timed out: its body gets its fallback action (its null action; in a turn-based game the
lowest legal one when the mask forbids the null action), and with ``on_timeout="done"`` is also marked done;
the others go on. When no client is left in the episode and a reset waits for the next one, the episode ends.
Finished bodies are not waited for. A body that missed the end of its episode (silent, stopped, or not yet
asked) hears it at its next step: the env's own end, or a truncated step with ``info["reason"]`` when the judge
ended the episode or marked it done; then it resets as in any gymnasium loop. A body that joins a running
episode gets its current observation. A client's newer reset replaces its own pending request (a restarted
client). Tokens are issued per body at start-up (``tokens``) and required; ``allow_claim=True`` lets a client
without a token claim a free body in the handshake.
"""

from __future__ import annotations

import logging
import math
import secrets
from typing import Any

from slm_lab_like.remote import options as O
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.base import ActionDecoder, BaseJudge, Client, Codec, Request, resolve_env_factory
from slm_lab_like.remote.play import Event, make_play

logger = logging.getLogger(__name__)

MAX_STEPS_PER_WAKE = 100_000  # env steps one request may cause with nobody to wait for (a guard, never reached)


class _Pending:
    """A body's request the judge answers later: a reset (parked for the next episode, or joining the
    running one) or a step (its action not yet played, or played and waiting for the body's turn)."""

    __slots__ = ("req", "kind", "action", "acted", "joining", "seed", "options", "since")

    def __init__(self, req: Request, kind: str, now: float, action: Any = None, seed: int | None = None,
                 options: dict | None = None) -> None:
        self.req, self.kind, self.since = req, kind, now
        self.action, self.acted, self.joining = action, False, False
        self.seed, self.options = seed, options


class _Body(Client):
    """Judge-side state of one body: its client, its pending request, its view and its episode status."""

    __slots__ = ("name", "agent", "welcome", "null", "claimed", "by_claim", "absent", "timed_out", "pending",
                 "joined", "done", "ep_return", "reward", "view", "turn", "final", "playing", "obs_space")

    def __init__(self, agent: Any, env: Any, null: Any) -> None:
        obs_space, act_space = env.observation_space(agent), env.action_space(agent)
        super().__init__(secrets.token_hex(16), Codec(obs_space, act_space))
        self.name, self.agent = str(agent), agent
        self.null = null if null is not None else P.null_action(act_space)
        self.claimed, self.absent, self.timed_out = False, True, False
        self.by_claim = False  # taken by a client without a token (allow_claim), which has not reset yet
        self.pending: _Pending | None = None
        self.joined = self.done = self.turn = self.playing = False
        self.obs_space = obs_space
        self.ep_return = self.reward = 0.0
        self.view: tuple[Any, dict] | None = None
        self.final: tuple[Any, dict, float, bool, bool] | None = None


class MultiJudgeServer(BaseJudge[_Body]):
    """Judge hosting one PettingZoo env, parallel or turn-based (AEC), for one client per body.

    ``env`` is a factory, an env name or spec env dict producing the PettingZoo env; ``api`` is ``"aec"`` or
    ``"parallel"`` (default: ``"aec"`` for a ``pettingzoo.AECEnv``, else ``"parallel"``). ``client_timeout`` is
    how long any waiting request waits for a silent client, ``join_timeout`` how long a game's first reset waits
    for every body to be claimed and its client there (not closed, not silent), ``on_timeout`` is ``"null"`` or ``"done"``, ``allow_claim`` admits clients without
    a token to free bodies, ``null_actions`` overrides the per-body null action; ``episode_seeds`` and
    ``episode_callback`` are :class:`BaseJudge`'s.
    """

    kind = "multi"

    def __init__(
        self,
        env: Any,
        address: str = "tcp://127.0.0.1:0",
        *,
        api: str | None = None,
        env_kwargs: dict | None = None,
        client_timeout: float = O.CLIENT_TIMEOUT,
        join_timeout: float | None = None,
        on_timeout: str = O.ON_TIMEOUT,
        allow_claim: bool = False,
        null_actions: dict[str, Any] | None = None,
        env_id: str | None = None,
        **base_kwargs: Any,
    ) -> None:
        if on_timeout not in ("null", "done"):
            raise ValueError("on_timeout must be 'null' or 'done'")
        self.env = resolve_env_factory(env, **(env_kwargs or {}))()
        self.play = make_play(self.env, api)
        self.api = self.play.api
        self.env_id = env_id or (env if isinstance(env, str) else
                                 (getattr(self.env, "metadata", {}) or {}).get("name") or type(self.env).__name__)
        self.client_timeout = float(client_timeout)
        self.join_timeout = self.client_timeout if join_timeout is None else float(join_timeout)
        self.on_timeout = on_timeout
        self.allow_claim = allow_claim
        self.render_mode = getattr(self.env, "render_mode", None)
        null_actions = null_actions or {}
        self.bodies: dict[str, _Body] = {}
        for agent in self.env.possible_agents:
            self.bodies[str(agent)] = _Body(agent, self.env, null_actions.get(agent))
        self._by_agent = {b.agent: b for b in self.bodies.values()}
        self._body_list = list(self.bodies.values())
        self.episode_running = False
        self.episodes = 0
        self._ep_seed: int | None = None
        self._ep_length = 0
        self._ep_start = 0.0
        self._wait_since: float | None = None
        self._parked_since: float | None = None
        self._due: list[tuple] = []
        super().__init__(address, **base_kwargs)
        for body in self.bodies.values():
            self._add_client(body)

    @property
    def tokens(self) -> dict[str, str]:
        """Map of body name to the token that acts for it (hand each to one player)."""
        return {name: b.token for name, b in self.bodies.items()}

    # -- requests --------------------------------------------------------------------------
    def _touch(self, body: _Body, now: float) -> None:
        body.last_active = now
        body.absent = False

    def _admit(self, header: dict, now: float) -> _Body:
        name = header.get("body")
        if header.get("n") is not None:
            raise P.ProtocolError("unsupported", "a multi-agent judge serves one body per client, no vector sessions")
        if not self.allow_claim:
            raise P.ProtocolError("token_required", "this judge only admits clients holding an issued token (a judge "
                                                    "started with allow_claim lets clients claim free bodies)")
        if name is not None:
            body = self.bodies.get(name) if isinstance(name, str) else None
            if body is None or body.claimed:
                raise P.ProtocolError("body_taken", "no such free body")
        else:
            free = [b for b in self.bodies.values() if not b.claimed]
            if not free:
                raise P.ProtocolError("full", "every body is taken")
            body = free[0]
        body.by_claim = True
        return body

    def _welcome(self, body: _Body) -> dict:
        return {"env": str(self.env_id), "body": body.name, "render_mode": self.render_mode,
                "max_episode_steps": None}

    def _welcomed(self, body: _Body, now: float) -> None:
        body.claimed, body.absent, body.last_active = True, False, now
        self._maybe_start(now)
        self._flush()

    def _seen_seq(self, body: _Body) -> int:
        return max(body.last_seq, body.pending.req.seq) if body.pending is not None else body.last_seq

    def _reaim(self, body: _Body, seq: int, envelope: list[bytes]) -> bool:
        if body.pending is not None and body.pending.req.seq == seq:
            body.pending.req.envelope[:] = envelope
            return True
        return False

    def _reset(self, body: _Body, req: Request, seed: int | None, options: dict | None, now: float) -> None:
        body.by_claim = False  # it plays: the seat is its own until the judge stops, as a token holder's
        if body.pending is not None:
            self._supersede(body, req.seq)
        body.final, body.playing = None, False
        body.pending = pending = _Pending(req, "reset", now, seed=seed, options=options)
        if self.episode_running and not body.joined and not body.done:
            pending.joining = True
            if body.turn:
                self._answer_join(body)
        else:
            if self.episode_running:
                body.done = True
            if self._parked_since is None:
                self._parked_since = now
        self._advance(now)
        self._maybe_start(now)
        self._flush()

    def _supersede(self, body: _Body, seq: int) -> None:
        """A newer reset of a body whose request is still pending (its client restarted or gave up): the pending
        request is answered ``superseded`` and forgotten (an action the env has not taken is not played)."""
        old = body.pending
        assert old is not None  # called only while a request is pending
        if seq <= old.req.seq:
            raise P.ProtocolError("duplicate_reset", "a newer request of this body is still pending")
        body.pending = None
        self._send_error(old.req.envelope, "superseded", "a newer request of this client replaced this one",
                         old.req.seq)

    def _step(self, body: _Body, req: Request, decode: ActionDecoder, wire: Any, now: float) -> None:
        if body.pending is not None and body.pending.kind == "step":
            raise P.ProtocolError("duplicate_step", "this body's previous step is still waiting for the env")
        if body.pending is None and body.final is not None:
            decode(body, wire)
            self._answer_final(body, req)
            self._flush()
            return
        if not self.episode_running or not body.joined or body.pending is not None:
            raise P.ProtocolError("step_before_reset", "call reset before step")
        if body.done:
            raise P.ProtocolError("needs_reset", "this body's episode is over; call reset")
        body.pending = _Pending(req, "step", now, action=decode(body, wire))
        self._advance(now)
        self._flush()

    def _close(self, body: _Body, now: float) -> None:
        body.pending = None
        body.final = None
        body.playing = False
        if self.episode_running:
            body.done = True
        body.absent = True
        if body.by_claim:
            self._release(body)
        self._advance(now)
        self._flush()

    def _release(self, body: _Body) -> None:
        """A claimed body whose client closed before it ever reset (it only looked, as a lab's `check` does) is
        free to claim again, under a fresh token (the old one no longer acts for it)."""
        self._remove_client(body)
        body.token = secrets.token_hex(16)
        body.last_seq, body.last_reply = -1, None
        body.claimed = body.by_claim = False
        self._add_client(body)

    def _render_source(self, body: _Body) -> Any:
        return self.env if self.episode_running else None

    # -- answers ---------------------------------------------------------------------------
    def _answer_step(self, body: _Body, terminated: bool, truncated: bool) -> None:
        assert body.view is not None and body.pending is not None  # answered only once the env showed the body
        obs, info = body.view
        self._due.append((body, body.pending.req, "step", obs, info, body.reward, terminated, truncated))
        body.pending, body.reward = None, 0.0
        if terminated or truncated:
            body.playing = False

    def _answer_join(self, body: _Body) -> None:
        assert body.view is not None and body.pending is not None  # answered only once the env showed the body
        obs, info = body.view
        self._due.append((body, body.pending.req, "reset", obs, info, 0.0, False, False))
        body.pending, body.joined, body.playing, body.timed_out = None, True, True, False

    def _answer_final(self, body: _Body, req: Request) -> None:
        """Answer a step of a body whose game ended while it was not waiting: the end it has not heard yet."""
        assert body.final is not None  # called only when the body has an unheard end
        obs, info, reward, terminated, truncated = body.final
        body.final, body.playing = None, False
        self._due.append((body, req, "step", obs, info, reward, terminated, truncated))

    def _flush(self) -> None:
        """Send the answers that are due (after the bookkeeping, so an episode ending is counted first)."""
        if not self._due:
            return
        due, self._due = self._due, []
        for body, req, kind, obs, info, reward, terminated, truncated in due:
            self._reply(body, req, kind, obs, info, reward, terminated, truncated)

    def _tell(self, events: list[Event]) -> None:
        """Give each event to its body: answer its waiting step or joining reset, or keep it for later."""
        by_agent = self._by_agent
        for agent, obs, reward, terminated, truncated, info in events:
            body = by_agent[agent]
            body.reward += reward
            body.ep_return += reward
            body.view, body.turn = (obs, info), True
            ended = terminated or truncated
            if ended:
                body.done = True
            p = body.pending
            if p is not None and p.kind == "step" and (p.acted or ended):
                self._answer_step(body, terminated, truncated)
            elif p is not None and p.joining:
                self._answer_join(body)
                if ended:
                    self._keep_final(body, terminated, truncated)
            elif ended and p is None and body.final is None:
                self._keep_final(body, terminated, truncated)

    def _keep_final(self, body: _Body, terminated: bool, truncated: bool, reason: str | None = None) -> None:
        """Keep the end of a body's episode for its client's next step (with ``info["reason"]`` when the client
        missed part of the episode: timed out, or the judge ended it)."""
        obs, info = body.view if body.view is not None else (P.null_action(body.obs_space), {})
        reason = reason or ("timed_out" if body.timed_out else None)
        body.final = (obs, {**info, "reason": reason} if reason else info, body.reward, terminated, truncated)
        body.reward = 0.0

    def _cut_short(self, body: _Body, reason: str) -> None:
        """End a body's episode for its client without the env: a truncated step, heard at its next step."""
        if body.playing and body.final is None and body.pending is None:
            self._keep_final(body, False, True, reason)

    # -- the episode -----------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        """Step the env while every action it needs is here (absent or finished bodies get their fallback) and
        somebody waits on it; then end the episode when nobody is left in it."""
        for _ in range(MAX_STEPS_PER_WAKE):
            if not self.episode_running:
                return
            movers = self.play.movers()
            actions = self._actions(movers) if movers else None
            if actions is None and movers:  # one of them is thinking: nothing more to do until it speaks
                if self._wait_since is None and self._any_pending():
                    self._wait_since = now
                return
            if actions is None or not self._someone_waits():
                break
            self._wait_since = None
            self._play_step(actions, now)
        self._maybe_end(now)

    def _someone_waits(self) -> bool:
        for body in self._body_list:
            if body.pending is not None and (body.pending.kind == "step" or body.pending.joining):
                return True
        return False

    def _any_pending(self) -> bool:
        """Whether any body's request is pending: in a running episode each one waits on the env (a step at the
        barrier, a reset joining the episode, or a reset waiting for it to end), so its silent players time out."""
        for body in self._body_list:
            if body.pending is not None:
                return True
        return False

    def _actions(self, movers: list) -> dict | None:
        """The movers' actions (a pending one, or the fallback of an absent or finished body); None while one of
        them is still thinking."""
        actions = {}
        by_agent = self._by_agent
        for agent in movers:
            body = by_agent[agent]
            p = body.pending
            if p is not None and p.kind == "step" and not p.acted:
                actions[agent] = p.action
            elif body.done or body.absent:
                actions[agent] = self.play.fallback(agent, body.null)
            else:
                return None
        return actions

    def _play_step(self, actions: dict, now: float) -> None:
        self._mark_played(actions)
        events = self._env_step(actions, now)
        if events is not None:
            self._tell(events)
            self._mark_gone()

    def _env_step(self, actions: dict, now: float) -> list[Event] | None:
        """Step the env with the movers' ``actions``; None when the env failed: every waiting body is told so and the
        episode ends."""
        try:
            events = self.play.step(actions)
        except Exception as exc:
            logger.exception("judge: env.step failed")
            for body in self.bodies.values():
                if body.pending is not None and (body.pending.kind == "step" or body.pending.joining):
                    self._send_error(body.pending.req.envelope, "env_error",
                                     f"env.step failed: {type(exc).__name__}", body.pending.req.seq)
                    body.pending = None
                    body.playing = False
                body.done = True
            self._end_episode(now, completed=False, reason="env_error")
            return None
        self._ep_length += 1
        return events

    def _mark_played(self, actions: dict) -> None:
        """Mark the movers' turns taken and their waiting steps played (answered when the env shows them again)."""
        by_agent = self._by_agent
        for agent in actions:
            body = by_agent[agent]
            body.turn = False
            if body.pending is not None and body.pending.kind == "step":
                body.pending.acted = True

    def _mark_gone(self) -> None:
        """Mark done the bodies whose agents the env no longer lists."""
        live = self.play.agents()
        if len(live) < len(self._body_list):
            alive = set(live)
            for body in self._body_list:
                if body.agent not in alive:
                    body.done = True

    def _maybe_end(self, now: float) -> None:
        if not self.episode_running or self._someone_waits():
            return
        if all(b.done or b.absent for b in self.bodies.values()):
            self._end_episode(now, completed=all(b.done for b in self.bodies.values()))

    def _maybe_start(self, now: float) -> None:
        if self.episode_running:
            return
        parked = [b for b in self.bodies.values() if b.pending is not None and b.pending.kind == "reset"]
        if not parked:
            return
        # here: claimed, and its client not closed or silent (a player back for the next game resets, which touches
        # it); a body that already cost the others a timeout is not waited for again until its client is back
        missing = [b for b in self.bodies.values() if not (b.claimed and not b.absent) and not b.timed_out]
        if missing and now - (self._parked_since or now) < self.join_timeout:
            return
        for body in missing:  # waited for once: from now on its seat plays by the timeout rule, without a wait
            body.timed_out = True
        self._parked_since = None
        first = min((b.pending for b in parked if b.pending is not None), key=lambda pending: pending.since)
        try:
            seed = self._episode_seed(first.seed)
            agents, events = self.play.reset(seed=seed, options=first.options)
        except P.ProtocolError as exc:
            self._refuse(parked, exc.code, exc.message)
            return
        except Exception as exc:
            logger.exception("judge: env.reset failed")
            self._refuse(parked, "env_error", f"env.reset failed: {type(exc).__name__}")
            return
        self._begin_episode(seed, {str(a) for a in agents}, now)
        for body in parked:
            if body.done:
                self._refuse([body], "not_in_episode", "this body takes no part in the episode")
            else:
                assert body.pending is not None  # parked with its reset
                body.pending.joining = True
        self._tell(events)
        self._advance(now)

    def _refuse(self, bodies: list[_Body], code: str, message: str) -> None:
        for body in bodies:
            assert body.pending is not None  # only bodies with a pending request are refused
            req, body.pending = body.pending.req, None
            self._send_error(req.envelope, code, message, req.seq)

    def _begin_episode(self, seed: int | None, live: set[str], now: float) -> None:
        self.episode_running = True
        self._ep_seed, self._ep_length, self._ep_start = seed, 0, now
        self._wait_since = None
        for name, body in self.bodies.items():
            body.joined, body.turn, body.view = False, False, None
            body.done = name not in live
            body.ep_return = body.reward = 0.0

    def _end_episode(self, now: float, completed: bool, reason: str = "episode_ended") -> None:
        self.episode_running = False
        self._wait_since = None
        self.episodes += 1
        for body in self._body_list:
            self._cut_short(body, "timed_out" if body.timed_out else reason)
        if self.episode_callback is not None:
            self._report({"episode": self.episodes - 1, "seed": self._ep_seed, "length": self._ep_length,
                          "returns": {n: (b.ep_return if math.isfinite(b.ep_return) else None)
                                      for n, b in self.bodies.items()},
                          "completed": completed, "wall_s": now - self._ep_start})
        self._maybe_start(now)

    # -- time ------------------------------------------------------------------------------
    def _timeout(self, body: _Body) -> None:
        body.absent = True
        body.timed_out = True
        if self.on_timeout == "done":
            body.done = True
            self._cut_short(body, "timed_out")

    def _next_wakeup(self) -> float:
        if self._wait_since is not None or self._parked_since is not None:
            return 0.02
        return 0.1

    def _tick(self, now: float) -> None:
        # only time can change anything here (requests advance the env themselves), and nobody can have timed
        # out before the judge waited for it that long
        since = self._wait_since
        if self.episode_running and since is not None and now - since > self.client_timeout:
            for agent in self.play.movers():
                body = self._by_agent[agent]
                thinking = not (body.done or body.absent or body.pending is not None)
                if thinking and now - max(body.last_active, since) > self.client_timeout:
                    self._timeout(body)
            self._advance(now)
        if self._parked_since is not None and now - self._parked_since >= self.join_timeout:
            self._maybe_start(now)
        self._flush()

    def _close_envs(self) -> None:
        try:
            self.env.close()
        except Exception:
            logger.exception("judge: env.close failed")
