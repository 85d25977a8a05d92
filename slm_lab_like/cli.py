"""The command line of run_lab.py: run, search, resume, watch or evaluate runs of a spec; check it; serve its envs."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_lab_like.experiment.interrupt import Interrupted
from slm_lab_like.experiment.outdir import OutputDirError
from slm_lab_like.experiment.session import SessionFailed
from slm_lab_like.logs import configure_logging
from slm_lab_like.spec.errors import SpecError

if TYPE_CHECKING:
    from slm_lab_like.experiment.trial import TrialResult
    from slm_lab_like.spec.schema import TournamentSpec

DEMO = "demo"  # spec/demo.json here, the shipped copy anywhere else
MODES = ("train", "dev", "test", "search")
DIR_MODES = ("train", "enjoy", "eval")  # MODE@DIR: work on the results of an earlier run in DIR

USAGE = """\
%(prog)s [SPEC_FILE [NAME]] [--mode train|dev|test] [--out DIR]
%(prog)s SPEC_FILE [NAME] --mode search [--backend local|ray] [--ray-address ADDRESS] [--out DIR]
%(prog)s --mode train@DIR|enjoy@DIR|eval@DIR [--episodes N]
%(prog)s check SPEC_FILE [NAME]
%(prog)s serve SPEC_FILE [NAME] [--host HOST] [--port PORT] [judge options: --secret-env NAME,
                       --curve-secret-key FILE, --allow-claim, --client-timeout S, ... (listed below)]"""

DESCRIPTION = """\
Run a reinforcement-learning experiment described by a JSON spec: build the agents, envs and the
AEB body space, run meta.max_session sessions (in parallel processes) and write metrics CSVs,
plots and a summary to data/<spec_name>_<timestamp>/.

With no argument it runs the spec "demo" of spec/demo.json (PPO learning CartPole-v1 in two
parallel sessions; "random" there is the same env with the Random agent). SPEC_FILE is a path, or the
name of a spec shipped with the lab (demo, search_cartpole, benchmark/ppo_cartpole, ...), found from
any directory. A spec file holds one spec or a map of named specs; NAME
picks one. Modes: train runs the spec as written; dev caps every env at a small budget and one
session; test runs a few frames (used by the spec-driven tests). These run the spec as written: a
`search` block is ignored.

`--mode search` runs the spec's search: every combination of its grid_search variables, times
meta.max_trial draws of its random variables, each a trial of meta.max_session sessions, on a local
process pool (default) or on Ray Tune (`--backend ray`, or meta.search_backend; `--ray-address` joins
a running Ray cluster). It prints the trials ranked by fitness and writes experiment.json, a table and
one plot per search variable beside the trials' directories. A spec without a `search` block gets a warning and
meta.max_trial trials of the spec as written.

`--mode train@DIR` resumes a killed run from its last checkpoints (meta.checkpoint_frequency); DIR is
a trial directory data/<name>_<stamp>/ (every unfinished session) or one session_<i>/ of it.
`--mode enjoy@DIR` plays a few episodes (--episodes, default 3) with the trained agents, rendered in a
window when $DISPLAY is set, else into a video file in DIR (an env that cannot render is played without
pictures, its returns printed all the same). `--mode eval@DIR` plays --episodes
(default 100) deterministic episodes per agent-env pair without learning and writes DIR/eval.json.

`check` validates a spec (every spec in the file when no NAME is given, one line each) without running it; a
bad spec is reported as one line naming the file, the JSON path, what was found and what was expected, and check
exits with 2 when any spec is bad. A Ray search is checked too: its trials' resources against the private Ray's,
and whether its cluster address answers.

A run whose env or agent raises ends with one line naming the session and the env (or agent), exit status 1;
the traceback is in that session's error.log. Modules in the current directory are importable (`module:Class`
env names), as with `python -m`. An option given to a command it does nothing in is refused.

`serve` hosts each env of a spec behind a ZeroMQ judge and prints one JSON line per env with its
address (and the body tokens of a multi-agent env); agents elsewhere connect with RemoteEnv or a
spec env entry {"remote": "tcp://HOST:PORT"}. It binds to 127.0.0.1 unless --host says otherwise,
and serves until interrupted."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(usage=USAGE, description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("args", nargs="*", metavar="[check] SPEC_FILE [NAME]",
                   help=f"a spec file, or the name of a shipped spec (default {DEMO}; e.g. benchmark/ppo_cartpole), and "
                        "optionally the name of one of its specs (default: the one named after the file)")
    p.add_argument("--mode", default="train", help="train (default), dev, test or search; or train@DIR, enjoy@DIR, eval@DIR")
    p.add_argument("--backend", choices=("local", "ray"), help="search: where trials run (default meta.search_backend)")
    p.add_argument("--ray-address", help="search: address of a Ray cluster to join (implies --backend ray)")
    p.add_argument("--episodes", type=int, default=None, help="enjoy@/eval@: episodes (default 3 / 100)")
    p.add_argument("--out", default="data", help="directory under which results are written (default: data)")
    p.add_argument("--host", default="127.0.0.1", help="serve: interface to bind (default loopback only)")
    p.add_argument("--port", type=int, default=0, help="serve: first port (env j gets PORT + j; default: free ports)")
    from slm_lab_like.remote.options import add_judge_options

    add_judge_options(p, prefix="serve: ")
    p.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    return p


# Options that act in some commands only (the rest, the judge options, in serve only); elsewhere they are refused.
OPTION_COMMANDS = {"episodes": ("enjoy@DIR", "eval@DIR"), "backend": ("search",), "ray_address": ("search",),
                   "out": MODES, "host": ("serve",), "port": ("serve",)}
ANY_COMMAND = ("args", "quiet")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (2 for a bad spec or bad arguments, 1 for a run that failed)."""
    import_cwd()
    p = parser()
    opts = p.parse_args(argv)
    configure_logging(logging.WARNING if opts.quiet else logging.INFO)
    args = list(opts.args)
    problem = option_problem(p, opts)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        if args and args[0] == "check":
            return check(args[1:])
        if args and args[0] == "serve":
            return serve(args[1:], opts.host, opts.port, cli=opts)
        if "@" in opts.mode:
            return run_dir(opts.mode, args, opts.episodes)
        if opts.mode not in MODES:
            print(f"error: --mode {opts.mode!r}: expected one of {', '.join(MODES)} or "
                  f"{', '.join(m + '@DIR' for m in DIR_MODES)}", file=sys.stderr)
            return 2
        if len(args) > 2:
            print(f"error: expected SPEC_FILE [NAME], got {len(args)} arguments", file=sys.stderr)
            return 2
        path, name = (args + [None])[:2] if args else (DEMO, None)
        if opts.mode == "search":
            return search(path, name, opts.out, opts.backend, opts.ray_address)
        return run(path, name, opts.mode, opts.out)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OutputDirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SessionFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(f"interrupted: {e}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted at once (a second signal): nothing more was written; the last checkpoints stand",
              file=sys.stderr)
        return 130


def import_cwd() -> None:
    """Make the current directory importable, as `python -m` does (after the lab and its dependencies, so it shadows
    none of them), so a spec's `module:Class` env finds a module there; spawned session workers inherit sys.path."""
    try:
        cwd = os.getcwd()
    except OSError:  # a directory deleted under the shell: nothing to import from
        return
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def command_of(opts: argparse.Namespace) -> str:
    """What the command line asks for: check, serve, a mode (train, dev, test, search) or MODE@DIR."""
    if opts.args and opts.args[0] in ("check", "serve"):
        return str(opts.args[0])
    kind, at, _ = str(opts.mode).partition("@")
    return f"{kind}@DIR" if at else kind


def option_problem(p: argparse.ArgumentParser, opts: argparse.Namespace) -> str | None:
    """Why an option given cannot act in this command (it would be silently ignored), or an empty --out; None when
    every option given has its use. A bad --mode is left to the mode's own error."""
    command = command_of(opts)
    if command not in ("check", "serve", *MODES, *(m + "@DIR" for m in DIR_MODES)):
        return None
    defaults = vars(p.parse_args([]))
    flags = {a.dest: a.option_strings[-1] for a in p._actions if a.option_strings}
    for dest, value in vars(opts).items():
        if dest in ANY_COMMAND or value == defaults.get(dest):
            continue
        if dest == "mode":
            if command in ("check", "serve"):
                return f"--mode: {command} takes no mode (got --mode {opts.mode})"
            continue
        where = OPTION_COMMANDS.get(dest, ("serve",))
        if command not in where:
            used = where[0] if where[0] in ("check", "serve") else "--mode " + _either(where)
            return (f"{flags.get(dest, dest)}: used only with {used}; "
                    f"not with {command if command in ('check', 'serve') else '--mode ' + str(opts.mode)}")
    if command in MODES and not str(opts.out).strip():
        return "--out: an empty path; give the directory the results go under (default: data)"
    return None


def _either(names: tuple[str, ...]) -> str:
    """("a", "b", "c") -> "a, b or c"."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def check(args: list[str]) -> int:
    """Validate a spec file (every spec in it), or one named spec of it: one line per spec, ok or its error; 2 when
    any failed."""
    from slm_lab_like.spec.load import read_file

    if not args or len(args) > 2:
        print("error: expected check SPEC_FILE [NAME]", file=sys.stderr)
        return 2
    names = [args[1]] if len(args) == 2 else list(read_file(args[0]))
    failed = 0
    for name in names:
        try:
            check_one(args[0], name)
        except SpecError as e:
            failed += 1
            named = SpecError(e.path, e.message, f"{args[0]}: {name}") if len(names) > 1 else e  # which spec
            print(f"error: {named}", file=sys.stderr, flush=True)
        else:
            print(f"{args[0]}: {name}: ok", flush=True)
    return 2 if failed else 0


def check_one(path: str, name: str) -> None:
    """Validate one spec of a file as a run would take it: SpecError otherwise (a Ray search included: whether its
    trials fit the private Ray's resources, whether its cluster answers)."""
    from slm_lab_like.experiment.search import check_ray
    from slm_lab_like.spec.load import load_any
    from slm_lab_like.spec.schema import Spec

    spec = load_any(path, name)
    if isinstance(spec, Spec) and spec.meta.search_backend == "ray":
        try:
            check_ray(spec.meta.ray)
        except SpecError as e:
            raise e.in_file(path) from None


def run(path: str, name: str | None, mode: str, out: str) -> int:
    """Load, validate, and run one spec as a trial; print where the results went."""
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import load_any, with_mode
    from slm_lab_like.spec.schema import TournamentSpec

    spec = load_any(path, name)
    if isinstance(spec, TournamentSpec):
        return tournament(spec, mode, out)
    print_trial(run_trial(with_mode(spec, mode), Path(out), mode))
    return 0


def tournament(spec: "TournamentSpec", mode: str, out: str) -> int:
    """Run a tournament spec in a mode; print its leaderboard and where it went."""
    from slm_lab_like.analysis.leaderboard import markdown
    from slm_lab_like.experiment.tournament import run_tournament
    from slm_lab_like.spec.tournament import tournament_with_mode

    result = run_tournament(tournament_with_mode(spec, mode), Path(out), mode)
    forfeits = sum(1 for g in result.games if g["forfeit"])
    print(f"{spec.name}: {len(result.games)} games, {forfeits} forfeits")
    print(markdown(result.leaderboard), end="")
    print(f"results: {result.out_dir}")
    return 0


def print_trial(result: "TrialResult") -> None:
    """One line per agent-env pair with its final mean return over the trial's sessions, then where it went."""
    for pair in result.summary()["pairs"]:
        print(f"{result.spec.name}: agent {pair['agent']} in {pair['env']}: mean return (last 100 episodes) "
              f"{pair['mean_return_100']:.2f} ± {pair['std']:.2f} over {len(result.sessions)} session(s)")
    print(f"results: {result.out_dir}")


def run_dir(mode: str, args: list[str], episodes: int | None) -> int:
    """train@DIR, enjoy@DIR or eval@DIR: resume, watch or evaluate the run in DIR; one-line errors."""
    from slm_lab_like.experiment.record import RecordError

    kind, _, path = mode.partition("@")
    if kind not in DIR_MODES or not path:
        print(f"error: --mode {mode!r}: expected {', '.join(m + '@DIR' for m in DIR_MODES)}", file=sys.stderr)
        return 2
    if args:
        print(f"error: --mode {kind}@DIR takes its spec from DIR; got extra arguments {' '.join(args)}", file=sys.stderr)
        return 2
    try:
        if kind == "train":
            from slm_lab_like.experiment.resume import resume_trial

            print_trial(resume_trial(path))
        elif kind == "enjoy":
            from slm_lab_like.experiment.enjoy import enjoy

            for video in enjoy(path, 3 if episodes is None else episodes):
                print(f"video: {video}")
        else:
            from slm_lab_like.experiment.evaluate import evaluate

            out, report = evaluate(path, 100 if episodes is None else episodes)
            for session in report["sessions"]:
                for p in session["pairs"]:
                    r, n = p["return"], p["length"]
                    print(f"{report['spec']} s{session['session']}: agent {p['agent']} in {p['env']}: return "
                          f"{r['mean']:.2f} ± {r['std']:.2f} (min {r['min']:g}, max {r['max']:g}), length "
                          f"{n['mean']:.1f} over {p['episodes']} episodes ({session['checkpoint']})")
            print(f"report: {out}")
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def search(path: str, name: str | None, out: str, backend: str | None, address: str | None) -> int:
    """Run a spec's search over trials; print the trials ranked by fitness and where the results went."""
    from slm_lab_like.experiment.search import run_experiment
    from slm_lab_like.spec.load import load, read_file

    spec = load(path, name)
    try:
        result = run_experiment(read_file(path)[spec.name], spec.name, Path(out), backend, address)
    except SpecError as e:  # a key of the spec (not of the command line) names its file
        raise (e if e.source or e.path.startswith("--") else e.in_file(path)) from None
    print(result.table, end="")
    print(f"results: {result.out_dir}")
    return 0


def serve(args: list[str], host: str, port: int, stop: threading.Event | None = None,
          cli: argparse.Namespace | None = None, **options: Any) -> int:
    """Host every env of a spec behind its own judge until interrupted (or until `stop` is set); `options` are judge
    options by name (slm_lab_like.remote.options), the command line's (`cli`) added to them."""
    import signal

    from slm_lab_like.envs.adapter import EntryError
    from slm_lab_like.remote.hosting import HostingError, serve_spec
    from slm_lab_like.remote.options import OptionError, judge_options
    from slm_lab_like.spec.load import load

    if not args or len(args) > 2:
        print("error: expected serve SPEC_FILE [NAME]", file=sys.stderr)
        return 2
    try:
        options = {**options, **(judge_options(cli) if cli is not None else {})}
    except OptionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    spec = load(args[0], args[1] if len(args) > 1 else None)
    if not 0 <= port <= 65536 - len(spec.env):
        print(f"error: --port: expected 0 (free ports) or a port from 1 to {65536 - len(spec.env)} (env j listens at "
              f"PORT + j), got {port}", file=sys.stderr)
        return 2
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    try:
        serve_spec(spec, host, port, stop, **options)
    except EntryError as e:
        raise SpecError(e.key, e.message, args[0]) from None
    except HostingError as e:
        print(f"error: serve: {e}", file=sys.stderr)
        return 2
    return 0
