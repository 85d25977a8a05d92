"""Every wait has a deadline: tokens are required, a silent body cannot hold another's reset, a late joiner sees the
current observation, a stopped client's loop goes on, a restarted client is not refused, and a judge that is gone
is noticed within the heartbeat bound. Real judge and player processes, real sockets on 127.0.0.1."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from slm_lab_like.remote import JudgeTimeout, RemoteEnv, RemoteError, judge_for, serve, shutdown, spawn_judge
from slm_lab_like.remote.client import HEARTBEAT
from slm_lab_like.remote.spawn import child_environment, stop_judge
from slm_lab_like.remote.vector_client import RemoteVecEnv
from tests.test_remote_multi import ALTERNATE, NULL, ONES, MatchingPennies, local_run

pytestmark = pytest.mark.timeout(60)

ENV = "tests.test_remote_multi:MatchingPennies"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def judge(procs: list, kwargs: dict | None = None, **options) -> tuple[str, dict]:
    proc, address = spawn_judge(ENV, env_kwargs=kwargs, cwd=REPO, **options)
    procs.append(proc)
    return address, proc.judge_info["tokens"]


def both(*calls) -> list:
    """Run the calls at once (each body's step waits for the other at the barrier); their results in order."""
    results: list = [None] * len(calls)

    def run(i: int) -> None:
        results[i] = calls[i]()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return results


def test_a_hello_without_a_token_is_refused_unless_claiming_is_allowed(procs):
    address, tokens = judge(procs)
    with pytest.raises(RemoteError) as err:
        RemoteEnv(address, timeout=5)
    assert err.value.code == "token_required"
    assert RemoteEnv(address, token=tokens["player_1"], timeout=5).body == "player_1"
    open_address, _ = judge(procs, allow_claim=True)
    assert RemoteEnv(open_address, timeout=5).body == "player_0"


def test_a_silent_live_body_cannot_hold_a_finished_bodys_reset(procs):
    """player_1's episode ends at step 2 and it resets while player_0 goes silent: the reset is answered after one
    client timeout (not never); player_0, back, hears its episode end (truncated, reason) and joins the next."""
    address, tokens = judge(procs, {"quit_at": 2}, client_timeout=0.5)
    p0, p1 = (RemoteEnv(address, token=tokens[n], timeout=10) for n in ("player_0", "player_1"))
    both(lambda: p0.reset(seed=1), lambda: p1.reset(seed=1))
    for _ in range(2):
        _, (_, _, ended, _, _) = both(lambda: p0.step(1), lambda: p1.step(1))
    assert ended
    start = time.monotonic()
    p1.reset()
    assert time.monotonic() - start < 2.0
    _, _, terminated, truncated, info = p0.step(1)
    assert (terminated, truncated, info["reason"]) == (False, True, "timed_out")
    obs, _ = p0.reset()
    assert obs[0] == 0.0 and p1.step(1)[1] in (-1.0, 1.0)


def test_a_restarted_client_replaces_its_own_pending_reset():
    """A client whose reset still waits for the episode to end, restarted with the same token, resets again and is
    answered when the episode ends; its old request is told it was superseded. (The next game waits join_timeout for
    the closed player before it starts without it: 0.5 s here, not the client timeout.)"""
    address = serve(MatchingPennies, multi=True, client_timeout=5.0, join_timeout=0.5, env_kwargs={"quit_at": 1})
    tokens = judge_for(address).tokens
    try:
        p0, p1 = (RemoteEnv(address, token=tokens[n], timeout=10) for n in ("player_0", "player_1"))
        both(lambda: p0.reset(seed=1), lambda: p1.reset(seed=1))
        both(lambda: p0.step(1), lambda: p1.step(1))
        gone = RemoteEnv(address, token=tokens["player_1"], timeout=0.3, retries=0)
        with pytest.raises(JudgeTimeout):
            gone.reset()
        again = RemoteEnv(address, token=tokens["player_1"], timeout=10)
        waiting = threading.Thread(target=again.reset)
        waiting.start()
        time.sleep(0.2)
        assert waiting.is_alive()
        p0.close()
        waiting.join(5)
        assert not waiting.is_alive() and judge_for(address).episodes == 1
    finally:
        shutdown(address)


def test_a_late_joiner_gets_the_current_observation(procs):
    """player_1 joins after player_0 played 4 steps alone (player_1's null action 0 played for it): its first
    observation, and the steps after, equal the local env's."""
    address, tokens = judge(procs, join_timeout=0.3, client_timeout=5)
    p0 = RemoteEnv(address, token=tokens["player_0"], timeout=10)
    p0.reset(seed=11)
    for t in range(4):
        p0.step(ALTERNATE(t))
    p1 = RemoteEnv(address, token=tokens["player_1"], timeout=10)
    obs, _ = p1.reset()
    expected = local_run(11, {"player_0": ALTERNATE, "player_1": lambda t: 0 if t < 4 else 1})
    assert np.array_equal(obs, expected["player_1"]["obs"][4])
    (o0, r0, *_), (o1, r1, *_) = both(lambda: p0.step(ALTERNATE(4)), lambda: p1.step(1))
    assert np.array_equal(o1, expected["player_1"]["obs"][5]) and r1 == expected["player_1"]["rewards"][4]
    assert np.array_equal(o0, expected["player_0"]["obs"][5]) and r0 == expected["player_0"]["rewards"][4]
    assert NULL(0) == 0 and ONES(0) == 1


LOOP = r"""
import json, os, signal, sys, time
from slm_lab_like.remote import RemoteEnv
address, token, seconds, stop_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
env = RemoteEnv(address, token=token, timeout=20)
obs, info = env.reset(seed=1)
end, steps, t = time.monotonic() + seconds, 0, 0
print(json.dumps({"event": "started"}), flush=True)
while time.monotonic() < end:
    if steps == stop_at:  # stopped mid-episode, between a reply and its next step, until the test resumes it
        print(json.dumps({"event": "stopping", "t": t}), flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    obs, reward, terminated, truncated, info = env.step(t % 2)
    steps, t = steps + 1, t + 1
    if terminated or truncated:
        print(json.dumps({"event": "episode", "length": t, "reason": info.get("reason")}), flush=True)
        obs, info = env.reset()
        t = 0
print(json.dumps({"event": "done", "steps": steps}), flush=True)
env.close()
"""


@pytest.mark.parametrize("on_timeout", ["null", pytest.param("done", marks=(pytest.mark.slow, pytest.mark.long))])
def test_a_stopped_and_resumed_clients_gymnasium_loop_keeps_running(procs, on_timeout):
    """player_1 stops itself (SIGSTOP) in the middle of its second episode, stays stopped for 2 s, past the 0.5 s
    client timeout, and is resumed: player_0 played on, player_1 hears its episode's end with the reason, resets,
    and both loops run to their end without an error. (Stopped between an episode's end and its reset instead, a
    client just joins the episode running when it comes back, as a late joiner: no end to hear.)"""
    address, tokens = judge(procs, client_timeout=0.5, on_timeout=on_timeout)

    def player(name: str, stop_at: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", LOOP, address, tokens[name], "5", stop_at],
                                stdout=subprocess.PIPE, text=True, env=child_environment(REPO))
        procs.append(proc)
        return proc

    # player_1 first: its first game starts with it (a late joiner's first episode would be short, moving the stop)
    players = [None, player("player_1", "15")]
    assert json.loads(players[1].stdout.readline())["event"] == "started"
    players[0] = player("player_0", "-1")
    assert json.loads(players[0].stdout.readline())["event"] == "started"
    seen = [json.loads(players[1].stdout.readline()) for _ in range(2)]  # its first episode, then the stop
    assert [e["event"] for e in seen] == ["episode", "stopping"] and seen[1]["t"] == 5
    time.sleep(2.0)
    os.kill(players[1].pid, signal.SIGCONT)
    out = [p.communicate(timeout=20)[0] for p in players]
    assert [p.returncode for p in players] == [0, 0]
    events = [[json.loads(line) for line in text.splitlines()] for text in out]
    assert all(e[-1]["event"] == "done" for e in events)
    reasons = [e.get("reason") for e in events[1] if e["event"] == "episode"]
    assert "timed_out" in reasons and len(reasons) >= 3
    assert sum(e["event"] == "episode" for e in events[0]) >= 10


@pytest.mark.slow
def test_a_killed_judge_is_noticed_within_the_heartbeat_bound(procs):
    """A client (plain or vector) of a judge that is SIGKILLed raises JudgeTimeout within its heartbeat bound (the
    default bound too: seconds, not the minute a reply timeout with a retry would take); a stopped judge, whose
    connection stops answering heartbeats, within twice the bound."""
    proc, address = spawn_judge("CartPole-v1")
    procs.append(proc)
    quick, default, vector = RemoteEnv(address, heartbeat=1.0), RemoteEnv(address), RemoteVecEnv(address, 2,
                                                                                              heartbeat=1.0)
    for env in (quick, default, vector):
        env.reset(seed=0)
    proc.kill()
    for env, bound in ((quick, 1.0), (vector, 1.0), (default, HEARTBEAT)):
        start = time.monotonic()
        with pytest.raises(JudgeTimeout, match="is gone"):
            env.step(np.zeros(2, np.int64) if env is vector else 0)
        assert time.monotonic() - start < bound + 1.0
    proc, address = spawn_judge("CartPole-v1")
    procs.append(proc)
    env = RemoteEnv(address, heartbeat=1.0)
    env.reset(seed=0)
    os.kill(proc.pid, signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(JudgeTimeout):
        env.step(0)
    assert time.monotonic() - start < 2 * 1.0 + 1.5
    os.kill(proc.pid, signal.SIGCONT)
    stop_judge(proc)


def test_a_claimed_seat_is_free_again_once_its_client_closes(procs):
    """On a judge that lets clients claim seats, a client that closes before it ever reset (a lab's `check` that
    only looked) frees its seat for the next claimer, and its token acts no more; one that played keeps its seat."""
    address, tokens = judge(procs, allow_claim=True)
    looker = RemoteEnv(address, timeout=5)
    seat, old = looker.body, looker.token
    looker.close()
    again = RemoteEnv(address, timeout=5)
    other = RemoteEnv(address, timeout=5)
    assert again.body == seat and again.token != old and other.body != seat
    with pytest.raises(RemoteError) as err:
        RemoteEnv(address, token=old, timeout=5)
    assert err.value.code == "unknown_token"
    a, b = both(lambda: again.reset(seed=0), lambda: other.reset(seed=0))
    assert a[0].shape == b[0].shape
    again.close()  # it played: its seat stays claimed (the game goes on without it, as before)
    with pytest.raises(RemoteError) as err:
        RemoteEnv(address, timeout=5)
    assert err.value.code == "full"
    other.close()


def test_a_request_that_cannot_be_queued_times_out_instead_of_blocking() -> None:
    """A DEALER blocks a send while it has nowhere to queue it: no connection (as after a failed handshake, when a
    client without a CURVE judge's key says hello: it hung past every deadline in about one hello in five sent
    0.2-0.4 s after the connect) or a full queue. Here the queue to a judge that never answers is filled first, so
    the hello cannot be queued: it must end in JudgeTimeout within the link's timeout, not block."""
    import zmq

    from slm_lab_like.remote.client import Link

    link = Link("tcp://127.0.0.1:1", timeout=0.2, retries=0)  # nothing listens there: the queue only fills
    queued = 0
    while True:
        try:
            link.sock.send(b"x", zmq.NOBLOCK)
            queued += 1
        except zmq.Again:
            break
    assert queued >= 1  # the queue was full before the hello
    with pytest.raises(JudgeTimeout):
        link.open({"t": "hello"})
