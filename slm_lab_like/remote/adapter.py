"""The remote kind of env entry (`remote: "tcp://HOST:PORT"` or `"spawn"`), registered with the env layer.

Its spaces come from the judge's handshake, asked with a short, bounded probe, so a spec whose judge does not
answer is refused by `check` in a second or two instead of failing after the session started; `"spawn"`
probes the named env locally, as the judge it starts will host it.
"""
from __future__ import annotations

from typing import Any

from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvAdapter, EnvEntry, Hosting
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.kinds.gym_copies import probe_gym
from slm_lab_like.envs.make import check_name
from slm_lab_like.envs.registry import register_adapter
from slm_lab_like.envs.spaces import SpaceError, check_action_space, observation_converter
from slm_lab_like.remote.lab import SPAWN, RemoteVectorEnv

PROBE_TIMEOUT = 2.0  # seconds a judge has to answer the handshake of `check`


@register_adapter
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
        entry = self.entry
        if entry.remote == SPAWN:
            unknown = check_name(entry.name)
            if unknown is not None:
                raise EntryError("name", unknown)
            obs, act = probe_gym(entry.name, entry.kwargs, entry.max_t)
            return [BlockSig(0, n_slots, obs, act)]
        from slm_lab_like.remote.client import RemoteEnv
        from slm_lab_like.remote.protocol import JudgeTimeout, RemoteError

        try:
            client = RemoteEnv(str(entry.remote), timeout=PROBE_TIMEOUT, retries=0)
        except JudgeTimeout:
            raise EntryError("remote", f"no judge answered at {entry.remote} within {PROBE_TIMEOUT:g} s") from None
        except (RemoteError, OSError, ValueError) as err:
            raise EntryError("remote", f"the judge at {entry.remote} refused the handshake: {err}") from None
        try:
            where = f"the judge at {entry.remote}"
            obs, _ = observation_converter(client.observation_space, where)
            check_action_space(client.action_space, where)
            return [BlockSig(0, n_slots, obs, client.action_space)]
        except SpaceError as err:
            raise EntryError("remote", str(err)) from None
        finally:
            client.close()

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        entry = self.entry
        return RemoteVectorEnv(entry.name, str(entry.remote), n_slots, clock, entry.max_t, entry.kwargs)

    def host(self) -> Hosting:
        raise EntryError("remote", "this env is hosted by its judge already; serve the env by its name instead")
