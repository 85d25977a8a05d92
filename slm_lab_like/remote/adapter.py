"""The remote kind of env entry (`remote: "tcp://HOST:PORT"`, `"spawn"` or `"ray"`, or an object with the address and the
client's options: secret, CURVE key, timeouts), added to the env layer's kinds by the spec layer
(`slm_lab_like/spec/envs.py`), so that the env layer itself never loads ZeroMQ.

Its spaces come from the judge's handshake, asked with a short, bounded probe, so a spec whose judge does not
answer is refused by `check` in a second or two instead of failing after the session started; `"spawn"` and
`"ray"` probe the named env locally, as the judges the lab starts will host it.
"""
from __future__ import annotations

import os
from typing import Any, Protocol

from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvAdapter, EnvEntry, Hosting
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.kinds.gym_copies import probe_gym
from slm_lab_like.envs.make import check_name, multiagent_api
from slm_lab_like.envs.spaces import SpaceError, check_action_space, mask_layout, observation_converter
from slm_lab_like.remote.lab import LAB_JUDGES, RemoteVectorEnv
from slm_lab_like.remote.placement import start_judges
from slm_lab_like.remote.options import OptionError, curve_public_key

PROBE_TIMEOUT = 2.0  # seconds a judge has to answer the handshake of `check`


class Endpoint(Protocol):
    """What the remote kind reads of an entry's `remote` (slm_lab_like.spec.schema.RemoteSpec has these fields)."""

    @property
    def address(self) -> str: ...
    @property
    def secret_env(self) -> str | None: ...
    @property
    def curve_server_key(self) -> str | None: ...
    @property
    def timeout(self) -> float: ...
    @property
    def heartbeat(self) -> float: ...
    @property
    def token_env(self) -> str | None: ...
    @property
    def judges(self) -> int: ...
    @property
    def resources(self) -> Any: ...
    @property
    def curve(self) -> bool | None: ...


def client_options(remote: Endpoint) -> dict[str, Any]:
    """The RemoteEnv / RemoteVecEnv keywords of an entry's `remote`: its secret read from the named variable, its
    CURVE key from z85 text or a certificate file; EntryError at the key that cannot be used."""
    options: dict[str, Any] = {"heartbeat": remote.heartbeat}
    if remote.secret_env is not None:
        secret = os.environ.get(remote.secret_env)
        if not secret:
            raise EntryError("remote.secret_env", f"environment variable {remote.secret_env} is not set")
        options["secret"] = secret
    if remote.curve_server_key is not None:
        try:
            options["curve_server_key"] = curve_public_key(remote.curve_server_key)
        except OptionError as err:
            raise EntryError("remote.curve_server_key", str(err)) from None
    return options


def seat_token(remote: Endpoint) -> str | None:
    """The token of the multi-agent judge's seat an entry plays, read from the variable `remote.token_env` names
    (None without one); EntryError when it is not set."""
    if remote.token_env is None:
        return None
    token = os.environ.get(remote.token_env, "").strip()
    if not token:
        raise EntryError("remote.token_env", f"environment variable {remote.token_env} is not set")
    return token


class RemoteJudge(EnvAdapter):
    """Bodies that are clients of a judge, one client session (one env) per body."""

    kind = "remote"
    priority = 100

    @classmethod
    def claims(cls, entry: EnvEntry) -> bool:
        return entry.remote is not None

    def body_options_problem(self) -> str | None:
        return "per-body options are for multi-agent envs; each body of a remote entry is one client of its judge"

    def _probe(self, n_slots: int, plan: Any) -> list[BlockSig]:
        entry, remote = self.entry, self.entry.remote
        if remote.address in LAB_JUDGES:
            unknown = check_name(entry.name)
            if unknown is not None:
                raise EntryError("name", unknown)
            if multiagent_api(entry.name) is not None:
                raise EntryError("remote", f'"{entry.name}" is a multi-agent env, and a judge the lab starts hosts a '
                                           "single-agent one: drop `remote` to play it in the lab, or host it with "
                                           "`run_lab.py serve` and give each player one body and its seat's token "
                                           "(remote: {address, token_env})")
            if remote.judges > n_slots:
                raise EntryError("remote.judges", f"{remote.judges} judges for {n_slots} bodies: each judge hosts at "
                                                  "least one body")
            obs, act = probe_gym(entry.name, entry.kwargs, entry.max_t)
            return [BlockSig(0, n_slots, obs, act)]
        from slm_lab_like.remote.client import RemoteEnv
        from slm_lab_like.remote.protocol import JudgeTimeout, RemoteError

        if entry.kwargs:
            raise EntryError("kwargs", f"the judge at {remote.address} makes its env itself; kwargs apply to an env the "
                                       'lab makes (in the lab, or behind `remote: "spawn"`), so give them to the judge')
        options, token = client_options(remote), seat_token(remote)
        try:
            client = RemoteEnv(remote.address, token=token, timeout=PROBE_TIMEOUT, retries=0, **options)
        except JudgeTimeout:
            hint = (" (is a judge running there?)" if "curve_server_key" in options else
                    " (is a judge running there? a judge with CURVE keys also needs remote.curve_server_key)")
            raise EntryError("remote", f"no judge answered at {remote.address} within {PROBE_TIMEOUT:g} s{hint}"
                             ) from None
        except RemoteError as err:
            key = "remote.token_env" if token is not None and err.code == "unknown_token" else "remote"
            hint = ("; a multi-agent judge admits each seat by its token: name the variable holding it in "
                    "remote.token_env") if err.code == "token_required" else ""
            raise EntryError(key, f"the judge at {remote.address} refused the handshake: {err}{hint}") from None
        except (OSError, ValueError) as err:
            raise EntryError("remote", f"the judge at {remote.address} refused the handshake: {err}") from None
        try:
            if client.body is not None and n_slots != 1:  # a seat of a multi-agent game
                raise EntryError("remote", f"the judge at {remote.address} hosts a multi-agent game whose seats are one "
                                           f"body each, and this entry has {n_slots}: give it one body (body.num) "
                                           "and its seat's token (remote.token_env); a lab plays one seat of a "
                                           "judge's game")
            if client.env_id and client.env_id != entry.name:  # the entry's name labels the results
                raise EntryError("name", f'the judge at {remote.address} hosts "{client.env_id}", not "{entry.name}": '
                                         "name the env it hosts")
            if client.body is None and token is not None:
                raise EntryError("remote.token_env", f"the judge at {remote.address} hosts a single-agent env, "
                                                     "which takes no seat token")
            where = f"the judge at {remote.address}"
            obs, _ = observation_converter(client.observation_space, where)
            check_action_space(client.action_space, where)
            masks = mask_layout(client.observation_space, client.action_space) if client.body is not None else None
            if masks is not None:  # a game's seat: agents see its observation and act within its legal moves
                return [BlockSig(0, n_slots, masks[0], client.action_space, masked=True)]
            return [BlockSig(0, n_slots, obs, client.action_space)]
        except SpaceError as err:
            raise EntryError("remote", str(err)) from None
        finally:
            client.close()

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        entry, remote = self.entry, self.entry.remote
        if remote.address in LAB_JUDGES:
            res = remote.resources
            judges = start_judges(entry.name, entry.kwargs, remote.address, remote.judges, n_slots,
                                  (res.cpu, res.gpu) if res is not None else (1.0, 0.0), remote.curve)
            return RemoteVectorEnv(entry.name, remote.address, n_slots, clock, entry.max_t, remote.timeout, judges,
                                   heartbeat=remote.heartbeat)
        options, token = client_options(remote), seat_token(remote)
        if token is not None:  # a seat of a multi-agent judge
            options["token"] = token
        return RemoteVectorEnv(entry.name, remote.address, n_slots, clock, entry.max_t, remote.timeout, **options)

    def host(self) -> Hosting:
        raise EntryError("remote", "this env is hosted by its judge already; serve the env by its name instead")
