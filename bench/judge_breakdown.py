"""Where a judge's time goes: the multi-agent judge's rounds against single judges' body-steps, phase by phase.

Issue 12 asks why 4 clients of one multi-agent judge run at ~0.6 of 4 single judges with one client each. This
runs each judge in this process (its loop timed phase by phase) and its clients in their own processes, on
ZeroMQ (``lane=False``) and by the same-host lane, and prints per round (one env step of the multi judge, 4
body-steps; for a single judge, 4 of its body-steps) the judge's wall-clock and CPU split into:
  receive   reading requests off the socket or lane (system calls, framing)
  handle    checking and booking each request (token, sequence number, action, the barrier's bookkeeping)
  game      the env's step
  reply     telling each body what it saw: booking it, packing and sending its reply
  spin      polling without sleeping for the next request (the lane's default spin)
  idle      asleep in poll(2), waiting for requests
The single judges' figure is one judge's, times 4: the work 4 single judges share out over the cores, which the
multi judge does alone while its clients wait (the barrier's serial part).

Also printed: the ceiling of a barrier on each transport with no judge work at all, a bare server answering 4
bare clients once all 4 asked / 4 bare servers with one client each, on ZeroMQ and on Unix sockets spinning as
the lane does (``remote_overhead.py`` prints the ZeroMQ one beside its headline).
Then the multi judge's round by the lane laid out on the host's monotonic clock (judge and clients stamped, in
microseconds after the step completing the barrier arrives): its replies all sent, the first and last client
having its reply, the first and last request of the next round sent, the next round's start. It shows the
round's serial part (while the judge steps the env and answers, only it and the client answered first can work)
apart from the clients' turnaround and the judge's reading of the next requests on the two cores they share.
And the same comparison (untimed) with clients that think as an agent does, a small MLP's forward each step:
the barrier's serial part then weighs less against the clients' own work.

Usage: python bench/judge_breakdown.py [--steps 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import multiprocessing as mp
import os
import select
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remote_overhead import SEED, WalkerEnv, WalkersParallel, _actions, run_bare_barrier  # noqa: E402

from slm_lab_like.remote import JudgeServer, MultiJudgeServer, RemoteEnv  # noqa: E402
from slm_lab_like.remote.base import BaseJudge  # noqa: E402
from slm_lab_like.remote.lane import LaneClient, LaneServer  # noqa: E402

CTX = mp.get_context("fork")
BODIES = 4
PHASES = ("receive", "handle", "game", "reply", "spin", "idle")
# (owner, method): the judge's loop calls nest as receive > handle > (game, reply); spin stands alone
TIMED = ((LaneServer, "read"), (BaseJudge, "_drain"), (BaseJudge, "_serve"), (BaseJudge, "_spin"),
         (MultiJudgeServer, "_env_step"), (MultiJudgeServer, "_flush"), (BaseJudge, "_reply"))


class PhaseClock:
    """Inclusive nanoseconds spent in each timed judge method, by wrapping it (the wrapper's own ~0.2 us a call is
    counted with the phase)."""

    def __init__(self, wrap: bool = True) -> None:
        self.ns: dict[str, int] = {}
        self._saved: list[tuple[type, str, Callable]] = []
        self.wrap = wrap

    def __enter__(self) -> PhaseClock:
        for owner, name in TIMED:
            if self.wrap and name in vars(owner):
                self._wrap(owner, name)
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, original in self._saved:
            setattr(owner, name, original)

    def _wrap(self, owner: type, name: str) -> None:
        original, ns, clock = vars(owner)[name], self.ns, time.perf_counter_ns
        ns[name] = 0

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                ns[name] += clock() - start
        self._saved.append((owner, name, original))
        setattr(owner, name, timed)

    def timed_env(self) -> WalkerEnv:
        """A single judge's env whose steps count as the game phase (a single judge steps inside ``_step``)."""
        ns, clock, step = self.ns, time.perf_counter_ns, WalkerEnv.step
        ns["env"] = 0

        class TimedWalker(WalkerEnv):
            def step(self, action: Any) -> tuple:
                start = clock()
                try:
                    return step(self, action)
                finally:
                    ns["env"] += clock() - start
        return TimedWalker()

    def phases(self, wall_ns: int) -> dict[str, float]:
        """Exclusive nanoseconds of each phase (the nesting subtracted out): the multi judge steps its game in
        ``_env_step`` and answers in ``_flush``; a single judge steps its env and replies in ``_step``."""
        ns = self.ns
        multi = ns["_env_step"] > 0
        game = ns["_env_step"] if multi else ns["env"]
        replies = ns["_flush"] if multi else ns["_reply"]
        serve = ns["_serve"]
        phases = {"receive": ns["read"] + ns["_drain"] - serve, "handle": serve - game - replies, "game": game,
                  "reply": replies, "spin": ns["_spin"]}
        phases["idle"] = wall_ns - sum(phases.values())
        return {k: float(v) for k, v in phases.items()}


def _client(address: str, n: int, q: Any, barrier: Any, token: str | None, lane: bool, think: bool) -> None:
    """Step ``n`` times: the benchmark's fixed actions, or (``think``) the argmax of a small MLP on the observation,
    as an agent would (4-64-64-2, torch on one thread, ~30 us a step)."""
    env = RemoteEnv(address, token=token, timeout=60, lane=lane)
    actions = iter(_actions(n, 2))
    policy: Callable[[Any], int] = lambda obs: next(actions)  # noqa: E731
    if think:
        import torch

        torch.set_num_threads(1)
        net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                  torch.nn.Linear(64, 2))
        policy = lambda obs: int(net(torch.as_tensor(obs)).argmax())  # noqa: E731
    barrier.wait()
    obs, _ = env.reset(seed=SEED)
    with contextlib.ExitStack() as stack:
        if think:
            stack.enter_context(torch.inference_mode())
        for _ in range(n):
            obs, _, te, tr, _ = env.step(policy(obs))
            if te or tr:
                obs, _ = env.reset()
    q.put(n)
    env.close()


def _timed_judge(multi: bool, lane: bool, n: int, barrier: Any, out: Any, think: bool = False) -> None:
    """Run one judge with its own client processes (4 for the multi judge, 1 for a single) until they are done,
    timed phase by phase unless its clients think; put its totals in ``out``: nanoseconds of wall, CPU (every
    thread) and each phase."""
    with PhaseClock(wrap=not think) as clock:
        judge: BaseJudge = (MultiJudgeServer(lambda: WalkersParallel(BODIES), client_timeout=30.0) if multi
                            else JudgeServer(clock.timed_env if not think else WalkerEnv))
        tokens = list(judge.tokens.values()) if isinstance(judge, MultiJudgeServer) else [None]
        done = CTX.Queue()
        clients = [CTX.Process(target=_client, args=(judge.address, n, done, barrier, t, lane, think), daemon=True)
                   for t in tokens]
        for c in clients:
            c.start()
        threading.Thread(target=lambda: ([done.get(timeout=600) for _ in clients], judge._stop.set()),
                         daemon=True).start()
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
        judge.run()
        wall, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
    for c in clients:
        c.join(5)
    out.put({"wall": wall, "cpu": cpu, **(clock.phases(wall) if not think else {})})


def measure(multi: bool, lane: bool, n: int, think: bool = False) -> dict[str, float]:
    """One multi-agent judge with 4 clients, or 4 single judges with one client each, every judge in its own
    process and every client stepping ``n`` times: body-steps/s, and per round of 4 body-steps the judges'
    wall-clock, CPU and phases in microseconds (summed over the 4 single judges: their share of the work)."""
    out, barrier = CTX.Queue(), CTX.Barrier(BODIES)
    judges = [CTX.Process(target=_timed_judge, args=(multi, lane, n, barrier, out, think))
              for _ in range(1 if multi else BODIES)]  # not daemons: each starts its clients
    for j in judges:
        j.start()
    totals = [out.get(timeout=600) for _ in judges]
    for j in judges:
        j.join(5)
    wall = max(t["wall"] for t in totals)
    summed = {k: sum(t[k] for t in totals) / n / 1e3 for k in ("cpu", *PHASES) if k in totals[0]}
    return {"body_sps": BODIES * n / (wall / 1e9), "wall": wall / n / 1e3, **summed}


# ---- the multi judge's round, on the clock every process shares ----------------------------------------------
class Stamps:
    """Monotonic nanoseconds at which wrapped methods were entered (``first``) or returned (``last``): a timeline
    that processes on one host can lay side by side (CLOCK_MONOTONIC is the host's)."""

    def __init__(self, **points: tuple[type, str, bool]) -> None:
        self.at: dict[str, list[int]] = {name: [] for name in points}
        self._saved = []
        for name, (owner, method, on_return) in points.items():
            original, times = vars(owner)[method], self.at[name]
            self._saved.append((owner, method, original))
            setattr(owner, method, self._stamped(original, times, on_return))

    @staticmethod
    def _stamped(original: Callable, times: list[int], on_return: bool) -> Callable:
        clock = time.monotonic_ns

        def stamped(*args: Any, **kwargs: Any) -> Any:
            if not on_return:
                times.append(clock())
                return original(*args, **kwargs)
            result = original(*args, **kwargs)
            times.append(clock())
            return result
        return stamped

    def close(self) -> dict[str, list[int]]:
        """Unwrap the methods; the times."""
        for owner, method, original in self._saved:
            setattr(owner, method, original)
        return self.at


def _stamped_client(address: str, n: int, q: Any, barrier: Any, token: str) -> None:
    """A lane client of the benchmark whose requests sent and replies had are stamped."""
    stamps = Stamps(sent=(LaneClient, "send", False), heard=(LaneClient, "recv", True))
    _client(address, n, CTX.Queue(), barrier, token, True, False)
    q.put(stamps.close())


def round_timeline(n: int) -> dict[str, float]:
    """Median microseconds, from the start of a round of the multi judge by the lane (the step completing its
    barrier arrives), to: the round's replies all sent; the first and the last client having its reply; the first
    and the last request of the next round sent; the next round's start (the period)."""
    # a round starts when the step completing the barrier plays it; its replies go out at the next flush
    stamps = Stamps(start=(MultiJudgeServer, "_play_step", False), answered=(MultiJudgeServer, "_flush", True))
    judge, barrier, q = MultiJudgeServer(lambda: WalkersParallel(BODIES), client_timeout=30.0), CTX.Barrier(BODIES), CTX.Queue()
    clients = [CTX.Process(target=_stamped_client, args=(judge.address, n, q, barrier, t), daemon=True)
               for t in judge.tokens.values()]
    for c in clients:
        c.start()
    got: list[dict[str, list[int]]] = []
    threading.Thread(target=lambda: (got.extend(q.get(timeout=600) for _ in clients), judge._stop.set()),
                     daemon=True).start()
    judge.run()
    at = stamps.close()
    for c in clients:
        c.join(5)
    heard = sorted(t for g in got for t in g["heard"])
    sent = sorted(t for g in got for t in g["sent"])
    rows: dict[str, list[float]] = {k: [] for k in ("answered", "first heard", "last heard", "first sent",
                                                    "last sent", "next round")}
    starts, answered = at["start"], at["answered"]
    for r in range(len(starts) // 4, 3 * len(starts) // 4):  # the steady middle half
        start, end = starts[r], starts[r + 1]
        h = heard[bisect.bisect_right(heard, start):bisect.bisect_left(heard, end)]
        w = sent[bisect.bisect_right(sent, start):bisect.bisect_left(sent, end)]
        if len(h) != BODIES or len(w) != BODIES:
            continue  # a round with a reset or an episode's end in it
        flushed = answered[bisect.bisect_right(answered, start)]
        for key, t in (("answered", flushed), ("first heard", h[0]), ("last heard", h[-1]), ("first sent", w[0]),
                       ("last sent", w[-1]), ("next round", end)):
            rows[key].append((t - start) / 1e3)
    return {k: statistics.median(v) for k, v in rows.items()}


# ---- bare Unix sockets: the lane's transport with no judge ---------------------------------------------------
def _spin_poll(poll: Callable[[int], list], spin: float) -> list:
    ready = poll(0)
    until = time.monotonic() + spin
    while not ready and time.monotonic() < until:
        os.sched_yield()
        ready = poll(0)
    return ready or poll(1000)


def _unix_server(path: str, q: Any, bodies: int, spin: float) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(bodies)
    q.put(path)
    conns = [listener.accept()[0] for _ in range(bodies)]
    poller = select.poll()
    for c in conns:
        poller.register(c, select.POLLIN)
    by_fd = {c.fileno(): c for c in conns}
    reply = bytes(26)  # 4 floats and the flags, as the bare ZeroMQ barrier answers
    while True:
        asked = 0
        while asked < bodies:
            for fd, _ in _spin_poll(poller.poll, spin):
                if not by_fd[fd].recv(64):
                    return
                asked += 1
        for c in conns:
            c.send(reply)


def _unix_client(path: str, n: int, q: Any, barrier: Any, spin: float) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    barrier.wait()
    t0 = time.perf_counter()
    for a in _actions(n, 2):
        sock.send(b"s" + bytes([a]))
        _spin_poll(poller.poll, spin)
        sock.recv(64)
    q.put((n, time.perf_counter() - t0))
    sock.close()


def run_unix_barrier(n: int, shared: bool, spin: float = 0.0005) -> float:
    """Aggregate steps/s of 4 bare Unix-socket clients of one bare barrier server (``shared``) or each of its own
    server, every side polling ``spin`` seconds before it sleeps (the lane client's default)."""
    q, barrier, folder = CTX.Queue(), CTX.Barrier(BODIES), tempfile.mkdtemp(prefix="bare-barrier-")
    servers = [CTX.Process(target=_unix_server, args=(f"{folder}/s{i}", q, BODIES if shared else 1, spin),
                           daemon=True) for i in range(1 if shared else BODIES)]
    for s in servers:
        s.start()
    paths = [q.get(timeout=60) for _ in servers]
    clients = [CTX.Process(target=_unix_client, args=(paths[0 if shared else i], n, q, barrier, spin), daemon=True)
               for i in range(BODIES)]
    for c in clients:
        c.start()
    try:
        results = [q.get(timeout=600) for _ in clients]
    finally:
        for p in clients + servers:
            p.kill()
            p.join(5)
        shutil.rmtree(folder, ignore_errors=True)
    return sum(r[0] for r in results) / max(r[1] for r in results)


def _row(name: str, r: dict[str, float]) -> str:
    phases = "  ".join(f"{k} {r[k]:5.1f}" for k in PHASES)
    return f"  {name:24s} {r['body_sps']:7.0f} body-steps/s  wall {r['wall']:6.1f}  cpu {r['cpu']:6.1f}   {phases}"


def main() -> None:
    """Measure both judges on both transports, then the bare barriers, and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20_000, help="steps of each client of the multi judge")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("judge time per round of 4 body-steps, us (medians; for 4 single judges, the sum of their times):")
    for lane in (False, True):
        for multi in (True, False):
            runs = [measure(multi, lane, args.steps) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            name = f"{'multi judge' if multi else '4 single judges'}, {'lane' if lane else 'ZeroMQ'}"
            print(_row(name, med), flush=True)
    n = args.steps // 2
    for name, run in (("ZeroMQ", lambda shared: run_bare_barrier(n, shared=shared)),
                      ("Unix sockets, spinning", lambda shared: run_unix_barrier(n, shared))):
        ratios = []
        for _ in range(args.repeats):
            ratios.append(run(True) / run(False))
        print(f"  bare barrier / bare pairs, {name}: {statistics.median(ratios):.3f}  "
              f"(runs {', '.join(f'{r:.3f}' for r in ratios)})", flush=True)
    lines = [round_timeline(n) for _ in range(args.repeats)]
    print("  the multi judge's round by the lane, us after it starts (medians): " + ", ".join(
        f"{k} {statistics.median(t[k] for t in lines):.1f}" for k in lines[0]), flush=True)
    for lane in (False, True):
        ratios = []
        for _ in range(args.repeats):
            multi, singles = measure(True, lane, n, think=True), measure(False, lane, n, think=True)
            ratios.append(multi["body_sps"] / singles["body_sps"])
        print(f"  clients that think (an MLP's forward a step), {'lane' if lane else 'ZeroMQ'}: multi judge / 4 single "
              f"judges {statistics.median(ratios):.3f}  (runs {', '.join(f'{r:.3f}' for r in ratios)})", flush=True)


if __name__ == "__main__":
    main()
