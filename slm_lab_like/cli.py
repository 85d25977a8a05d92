"""The command line of run_lab.py and `slm-lab`: run or search a spec, resume, watch or evaluate a run, check a spec,
serve its envs. `run` is the default command, so `python run_lab.py spec.json` runs a spec as it always did."""
from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from slm_lab_like.experiment.interrupt import Interrupted
from slm_lab_like.experiment.outdir import OutputDirError
from slm_lab_like.experiment.failures import SessionFailed
from slm_lab_like.logs import configure_logging
from slm_lab_like.spec.errors import SpecError

if TYPE_CHECKING:
    from slm_lab_like.experiment.trial import TrialResult
    from slm_lab_like.spec.schema import TournamentSpec

DEMO = "demo"  # spec/demo.json here, the shipped copy anywhere else
RUN_MODES = ("train", "dev", "test")

DESCRIPTION = """\
A lab for reinforcement-learning experiments with many agents, many envs and many bodies in one session.
A JSON spec describes the agents, the envs and the bodies; the lab runs meta.max_session sessions of it (in
parallel processes) and writes metrics CSVs, plots, checkpoints and a summary to data/<spec_name>_<timestamp>/.

SPEC is a path, or the name of a spec shipped with the lab (demo, search_cartpole, benchmark/ppo_cartpole, ...),
found from any directory; a file holding several specs takes the NAME of one. With no command and no SPEC it runs
the spec "demo" of spec/demo.json (PPO learning CartPole-v1 in two parallel sessions). Modules in the current
directory are importable, so a spec can name your own env, algorithm, memory or net as module:Class.

A bad spec is one line naming the file, the key path, what was found and what was expected (exit 2); a run whose env
or agent raises is one line naming the session and the env or agent (exit 1), the traceback in its error.log; an
option given to a command it does nothing in is refused. `run_lab.py COMMAND --help` tells each command's options."""

COMMANDS: dict[str, str] = {
    "run": "run a spec (the default command): train as written, or --mode dev (a short budget, one session) or "
           "test (a few hundred frames)",
    "search": "run the spec's search block: a trial per grid point times meta.max_trial draws, ranked by fitness, on "
              "a local process pool or Ray Tune",
    "resume": "go on with a stopped or killed run from its last checkpoints (a trial directory, or one session_<i>)",
    "enjoy": "watch a run's trained agents play a few episodes (a window where $DISPLAY is set, else a video in DIR)",
    "eval": "play a run's trained agents for N deterministic episodes without learning; write DIR/eval.json",
    "check": "validate a spec (every spec of the file when no NAME is given) without running it; exit 2 if any is bad",
    "serve": "host each env of a spec behind its own ZeroMQ judge, print one JSON line per env (address, tokens), "
             "serve until interrupted",
    "exploit": "train a fresh copy of a run's agent against the frozen agent alone, then play the two over both seats: "
               "the exploiter's score is the agent's exploitability; its run, with exploit.json, goes under --out",
    "import": "translate an SLM Lab spec file (v4 JSON or 5.x YAML; every spec, or NAME) into this lab's spec JSON, "
              "with a line per SLM Lab key saying how it was taken",
}
REPLACED_MODES = {"search": "search SPEC [NAME]", "train@": "resume DIR", "enjoy@": "enjoy DIR", "eval@": "eval DIR"}


def parser() -> argparse.ArgumentParser:
    """The command line: one subparser per command, each with only the options it acts on."""
    p = argparse.ArgumentParser(
        prog="run_lab.py", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [COMMAND] [SPEC [NAME] | DIR] [options]   (COMMAND defaults to run; see below)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    overrides = argparse.ArgumentParser(add_help=False)
    overrides.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                           help="set a spec key before validation, e.g. --set agent[0].algorithm.gamma=0.98 or "
                                "--set env[0].max_frame=50000 (VALUE is JSON, else text); repeatable")
    seed = argparse.ArgumentParser(add_help=False)
    seed.add_argument("--seed", type=int, default=None, help="the base seed, meta.random_seed (session i gets seed+i)")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", default="data", help="directory under which results are written (default: data)")

    def command(name: str, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[quiet, *parents], help=COMMANDS[name], description=COMMANDS[name],
                              prog=f"run_lab.py {name}")

    for name in ("run", "search", "check", "serve"):
        cmd = command(name, {"run": [overrides, seed, out], "search": [overrides, seed, out], "check": [overrides],
                             "serve": [overrides]}[name])
        cmd.add_argument("spec", nargs="?" if name == "run" else None, default=DEMO, metavar="SPEC",
                         help=f"a spec file or the name of a shipped spec{' (default demo)' if name == 'run' else ''}")
        cmd.add_argument("name", nargs="?", default=None, metavar="NAME", help="one spec of a file that holds several")
    importer = command("import", [])
    importer.add_argument("spec", metavar="FILE", help="an SLM Lab spec file")
    importer.add_argument("name", nargs="?", default=None, metavar="NAME", help="one spec of the file (default: all)")
    importer.add_argument("--to", default=None, metavar="PATH",
                          help="where to write this lab's spec (default NAME.json, or the file's name .json)")
    run_parser = sub.choices["run"]
    run_parser.add_argument("--mode", default="train", help="train (default), dev or test")
    run_parser.add_argument("--ray-address", default=None,
                            help='run the sessions as Ray tasks on this cluster ("auto", HOST:PORT, ray://HOST:PORT, '
                                 'or "local" for a private Ray here); sets meta.ray.address')
    search = sub.choices["search"]
    search.add_argument("--backend", choices=("local", "ray"), help="where trials run (default meta.search_backend)")
    search.add_argument("--ray-address", help="address of a Ray cluster to join (implies --backend ray)")
    for name, episodes in (("resume", None), ("enjoy", 3), ("eval", 100)):
        cmd = command(name, [])
        cmd.add_argument("dir", metavar="DIR", help="a run's trial directory data/<name>_<stamp>/ or one session_<i>")
        if episodes is not None:
            cmd.add_argument("--episodes", type=int, default=episodes, help=f"episodes to play (default {episodes})")
    exploit = command("exploit", [seed, out])
    exploit.add_argument("dir", metavar="DIR", help="the run of the agent to exploit: a trial directory or session_<i>")
    exploit.add_argument("--frames", type=int, default=1_000_000, help="the exploiter's training frames (default 1M)")
    exploit.add_argument("--games", type=int, default=100, help="games a seat against the frozen agent (default 100)")
    exploit.add_argument("--opening-moves", type=int, default=2,
                         help="random opening plies of every game, so that greedy players meet in varied positions")
    serve_parser = sub.choices["serve"]
    serve_parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    serve_parser.add_argument("--port", type=int, default=0, help="first port (env j gets PORT + j; default: free)")
    from slm_lab_like.remote.options import add_judge_options

    add_judge_options(serve_parser)
    serve_parser.epilog = ("CURVE: make a key pair with  python -c \"import zmq.auth; zmq.auth.create_certificates('.', "
                           "'judge')\"  and serve with --curve-secret-key judge.key_secret; clients name the public key "
                           "(judge.key, or the curve_public_key printed) as remote.curve_server_key.")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (2 for a bad spec or bad arguments, 1 for a run that failed)."""
    import_cwd()
    p = parser()
    args = with_command(p, list(sys.argv[1:] if argv is None else argv))
    problem = misplaced_option(p, args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    opts = p.parse_args(args)
    configure_logging(logging.WARNING if opts.quiet else logging.INFO)
    problem = option_problem(opts)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        return dispatch(opts)
    except (SpecError, OutputDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SessionFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(f"interrupted: {e}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`| head`): nothing more to say, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("interrupted at once (a signal while the run started or stopped, or a second one): nothing more was "
              "written; the last checkpoints stand", file=sys.stderr)
        return 130


def dispatch(opts: argparse.Namespace) -> int:
    """Run the command the options name."""
    from slm_lab_like.spec.overrides import with_seed

    sets = with_seed(getattr(opts, "overrides", []), getattr(opts, "seed", None))
    if opts.command == "check":
        return check(opts.spec, opts.name, sets)
    if opts.command == "serve":
        return serve([opts.spec] + ([opts.name] if opts.name else []), opts.host, opts.port, cli=opts, overrides=sets)
    if opts.command in ("resume", "enjoy", "eval"):
        return run_dir(opts.command, opts.dir, getattr(opts, "episodes", None))
    if opts.command == "import":
        return import_specs(opts.spec, opts.name, opts.to)
    if opts.command == "exploit":
        return exploit(opts.dir, opts.frames, opts.games, opts.opening_moves, opts.out, opts.seed)
    if opts.command == "search":
        return search(opts.spec, opts.name, opts.out, opts.backend, opts.ray_address, sets)
    typo = command_typo(opts.spec)
    if typo:
        print(f"error: {typo}", file=sys.stderr)
        return 2
    if opts.ray_address is not None:
        sets = [*sets, f"meta.ray.address={json.dumps(opts.ray_address)}"]
    return run(opts.spec, opts.name, opts.mode, opts.out, sets,
               "--ray-address" if opts.ray_address is not None else "meta.ray.address")


def command_typo(word: str) -> str | None:
    """One line for a spec argument that is close to a command and to no spec file or shipped spec (`run_lab.py chek
    spec.json` would otherwise look for a spec "chek"); None otherwise (`serve` beside a server.json is the spec's)."""
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.75)
    if not close:
        return None
    from slm_lab_like.spec.load import find_spec, near_spec

    if find_spec(word) is not None or near_spec(Path(word)) is not None:
        return None
    return f'{word}: no such command, spec file or shipped spec; did you mean the command "{close[0]}"?'


def import_cwd() -> None:
    """Make the current directory importable, as `python -m` does (after the lab and its dependencies, so it shadows
    none of them), so a spec's `module:Class` finds a module there; spawned session workers inherit sys.path."""
    try:
        cwd = os.getcwd()
    except OSError:  # a directory deleted under the shell: nothing to import from
        return
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each command."""
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def with_command(p: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """`args` with their command first: the first word that is no option (nor an option's value) when it names one,
    else `run` (`run_lab.py spec.json`, `run_lab.py --mode test` and a bare `run_lab.py` run a spec)."""
    if any(a in ("-h", "--help") for a in args[:1]):
        return args
    takes_value = {s for c in _subparsers(p).values() for a in c._actions if a.nargs != 0 for s in a.option_strings}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            return [word, *args[:i], *args[i + 1:]] if word in COMMANDS else ["run", *args]
        i += 2 if word in takes_value and "=" not in word else 1
    return ["run", *args]


def misplaced_option(p: argparse.ArgumentParser, args: list[str]) -> str | None:
    """One line for an option another command takes and this one does not (it would do nothing here), or one close
    to an option of this command (`--mdoe`); None otherwise (argparse answers for the rest)."""
    commands = _subparsers(p)
    command = args[0] if args and args[0] in commands else None
    if command is None:
        return None
    own = {s for a in commands[command]._actions for s in a.option_strings}
    for word in args[1:]:
        flag = word.split("=", 1)[0]
        if word == "--":
            break
        if flag.startswith("--") and flag not in own:
            users = [c for c, sp in commands.items() if any(flag in a.option_strings for a in sp._actions)]
            if users:
                return f"{flag}: used only with {_either(users)}; not with {command}"
            close = difflib.get_close_matches(flag, sorted(o for o in own if o.startswith("--")), n=1, cutoff=0.75)
            if close:
                return f"{flag}: no such option of {command}; did you mean {close[0]}?"
    return None


def option_problem(opts: argparse.Namespace) -> str | None:
    """Values of options that cannot act: a mode that is a command now, a mode no run has, an empty --out (the
    commands check the rest: --episodes, --port)."""
    mode = getattr(opts, "mode", "train")
    for old, new in REPLACED_MODES.items():
        if mode == old or (old.endswith("@") and mode.startswith(old)):
            return f"--mode {mode}: a command now: run_lab.py {new}"
    if mode not in RUN_MODES:
        return f"--mode {mode!r}: expected one of {', '.join(RUN_MODES)}"
    if hasattr(opts, "out") and not str(opts.out).strip():
        return "--out: an empty path; give the directory the results go under (default: data)"
    return None


def _either(names: Sequence[str]) -> str:
    """("a", "b", "c") -> "a, b or c"."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def check(path: str, name: str | None, overrides: Sequence[str] = ()) -> int:
    """Validate a spec file (every spec in it), or one named spec of it: one line per spec, ok or its error; 2 when
    any failed."""
    from slm_lab_like.spec.load import read_file

    names = [name] if name is not None else list(read_file(path))
    failed = 0
    for one in names:
        try:
            check_one(path, one, overrides)
        except SpecError as e:
            failed += 1
            named = SpecError(e.path, e.message, f"{path}: {one}") if len(names) > 1 else e  # which spec
            print(f"error: {named}", file=sys.stderr, flush=True)
        else:
            print(f"{path}: {one}: ok", flush=True)
    return 2 if failed else 0


def check_one(path: str, name: str, overrides: Sequence[str] = ()) -> None:
    """Validate one spec of a file as a run would take it: SpecError otherwise (Ray included: whether its sessions
    fit the private Ray's resources, whether its cluster answers)."""
    from slm_lab_like.experiment.ray_address import check_ray, judge_asks
    from slm_lab_like.spec.load import load_any
    from slm_lab_like.spec.schema import Spec

    spec = load_any(path, name, overrides)
    if isinstance(spec, Spec) and (spec.meta.search_backend == "ray" or spec.meta.ray.address is not None):
        try:
            check_ray(spec.meta.ray, judges=judge_asks(spec))
        except SpecError as e:
            raise e.in_file(path) from None


def run(path: str, name: str | None, mode: str, out: str, overrides: Sequence[str] = (),
        address_key: str = "meta.ray.address") -> int:
    """Load, validate, and run one spec as a trial (or a tournament spec as a tournament); print where it went.
    `address_key` names where a Ray address came from, for its one-line errors."""
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import load_any, with_mode
    from slm_lab_like.spec.schema import TournamentSpec

    spec = load_any(path, name, overrides)
    if isinstance(spec, TournamentSpec):
        return tournament(spec, mode, out)
    print_trial(run_trial(with_mode(spec, mode), Path(out), mode, address_key))
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


def exploit(path: str, frames: int, games: int, opening_moves: int, out: str, seed: int | None) -> int:
    """Train an exploiter of the run in `path`, play it against the frozen agent and print its score."""
    from slm_lab_like.experiment.exploit import exploit as run_exploit

    for key, value in (("--frames", frames), ("--games", games)):
        if value < 1:
            print(f"error: {key} must be at least 1, got {value}", file=sys.stderr)
            return 2
    report = run_exploit(path, frames, games, opening_moves, out, seed)
    print(f"exploit {report['target']}: the exploiter ({frames} frames) scores {report['score']:.3f} against it "
          f"(first seat {report['score_first']:.3f}, second {report['score_second']:.3f}; {games} games a seat)")
    print(f"results: {report['exploiter']}")
    return 0


def print_trial(result: "TrialResult") -> None:
    """One line per agent-env pair with its final mean return over the trial's sessions, then where it went."""
    for pair in result.summary()["pairs"]:
        where = f"{result.spec.name}: agent {pair['agent']} in {pair['env']}"
        if math.isnan(pair["mean_return_100"]):  # no session ended an episode of this pair within its frames
            print(f"{where}: no episode ended in {len(result.sessions)} session(s); raise the env's max_frame")
            continue
        print(f"{where}: mean return (last 100 episodes) {pair['mean_return_100']:.2f} ± {pair['std']:.2f} over "
              f"{len(result.sessions)} session(s)")
    print(f"results: {result.out_dir}")


def run_dir(command: str, path: str, episodes: int | None) -> int:
    """resume, enjoy or eval the run in DIR; one-line errors."""
    from slm_lab_like.experiment.record import RecordError

    try:
        if command == "resume":
            from slm_lab_like.experiment.resume import resume_trial

            print_trial(resume_trial(path))
        elif command == "enjoy":
            from slm_lab_like.experiment.enjoy import enjoy

            assert episodes is not None  # the command's own default
            for video in enjoy(path, episodes):
                print(f"video: {video}")
        else:
            assert episodes is not None
            print_eval(path, episodes)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def print_eval(path: str, episodes: int) -> None:
    """Evaluate the run in `path` and print one line per session and agent-env pair, then the report's path."""
    from slm_lab_like.experiment.evaluate import evaluate

    out, report = evaluate(path, episodes)
    for session in report["sessions"]:
        for p in session["pairs"]:
            r, n = p["return"], p["length"]
            print(f"{report['spec']} s{session['session']}: agent {p['agent']} in {p['env']}: return "
                  f"{r['mean']:.2f} ± {r['std']:.2f} (min {r['min']:g}, max {r['max']:g}), length "
                  f"{n['mean']:.1f} over {p['episodes']} episodes ({session['checkpoint']})")
    print(f"report: {out}")


def search(path: str, name: str | None, out: str, backend: str | None, address: str | None,
           overrides: Sequence[str] = ()) -> int:
    """Run a spec's search over trials; print the trials ranked by fitness and where the results went."""
    from slm_lab_like.experiment.search import run_experiment
    from slm_lab_like.spec.load import load, pick

    spec = load(path, name, overrides)
    try:
        result = run_experiment(pick(path, spec.name, overrides)[0], spec.name, Path(out), backend, address)
    except SpecError as e:  # a key of the spec (not of the command line) names its file
        raise (e if e.source or e.path.startswith("--") else e.in_file(path)) from None
    print(result.table, end="")
    print(f"results: {result.out_dir}")
    return 0


def import_specs(path: str, name: str | None, to: str | None) -> int:
    """Translate SLM Lab specs of a file into this lab's (one file: a spec, or a map of named specs); print how each
    key was taken; 2 when a spec has a key without a counterpart here (the others are still written)."""
    import json

    from slm_lab_like.analysis.atomic import write_text
    from slm_lab_like.spec.load import picked, read_file

    names = [name] if name is not None else list(read_file(path))
    specs: dict[str, Any] = {}
    lines: list[str] = []
    failed = 0
    for one in names:
        try:
            raw, _, translation = picked(path, one)
            if translation is None:
                raise SpecError("", "not an SLM Lab spec (this lab's own: run or check it as it is)", f"{path}: {one}")
            check_one(path, one)
        except SpecError as e:
            failed += 1
            print(f"error: {e}", file=sys.stderr, flush=True)
            continue
        specs[one] = raw
        lines += [str(line) for line in translation.lines]
    if not specs:
        return 2
    target = Path(to or f"{name or Path(path).stem}.json")
    write_text(target, json.dumps(next(iter(specs.values())) if name else specs, indent=2) + "\n")
    print("\n".join(lines))
    print(f"wrote {len(specs)} spec(s) to {target}")
    return 2 if failed else 0


def serve(args: list[str], host: str, port: int, stop: threading.Event | None = None,
          cli: argparse.Namespace | None = None, overrides: Sequence[str] = (), **options: Any) -> int:
    """Host every env of a spec behind its own judge until interrupted (or until `stop` is set); `options` are judge
    options by name (slm_lab_like.remote.options), the command line's (`cli`) added to them."""
    import signal

    from slm_lab_like.envs.adapter import EntryError
    from slm_lab_like.remote.hosting import HostingError, serve_spec
    from slm_lab_like.remote.options import OptionError, judge_options
    from slm_lab_like.spec.load import load

    if not args or len(args) > 2:
        print("error: expected serve SPEC [NAME]", file=sys.stderr)
        return 2
    try:
        options = {**options, **(judge_options(cli) if cli is not None else {})}
    except OptionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    spec = load(args[0], args[1] if len(args) > 1 else None, overrides)
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
