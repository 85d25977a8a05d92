"""Five judges, each broken in one way the protocol forbids, for the compliance kit to find by name."""
from __future__ import annotations

from typing import Any

from slm_lab_like.remote import JudgeServer
from slm_lab_like.remote import protocol as P


class AnyVersionJudge(JudgeServer):
    """Welcomes a hello of any protocol version (fails `bad_version`)."""

    def _on_hello(self, envelope: list[bytes], header: dict, now: float) -> None:
        super()._on_hello(envelope, {**header, "v": P.PROTOCOL_VERSION}, now)


class LenientActionJudge(JudgeServer):
    """Plays a random legal action in place of one outside the action space (fails `invalid_action`)."""

    def _step(self, sess: Any, req: Any, decode: Any, wire: Any, now: float) -> None:
        def lenient(client: Any, value: Any) -> Any:
            try:
                return decode(client, value)
            except P.ProtocolError:
                return client.env.action_space.sample()

        super()._step(sess, req, lenient, wire, now)


class RestepOnRetryJudge(JudgeServer):
    """Steps its env again for a retransmitted step instead of resending the reply (fails `retransmit`)."""

    def _fresh_seq(self, client: Any, seq: int, retry: bool, envelope: list[bytes], kind: str) -> bool:
        if retry and seq == client.last_seq:
            client.last_seq = seq - 1
            return True
        return super()._fresh_seq(client, seq, retry, envelope, kind)


class ImmortalSessionJudge(JudgeServer):
    """Answers a close but keeps the session and its token (fails `close`)."""

    def _close(self, sess: Any, now: float) -> None:
        """Nothing is dropped."""


class SeedlessJudge(JudgeServer):
    """Resets its env without the client's seed (fails `seeded_reset`)."""

    def _reset(self, sess: Any, req: Any, seed: int | None, options: dict | None, now: float) -> None:
        super()._reset(sess, req, None, options, now)


BROKEN = {"bad_version": AnyVersionJudge, "invalid_action": LenientActionJudge, "retransmit": RestepOnRetryJudge,
          "close": ImmortalSessionJudge, "seeded_reset": SeedlessJudge}
