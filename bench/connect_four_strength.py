"""How strong a connect four agent is, judged by players it did not train against: issue 28's yardsticks.

For a run's agent (greedy, raw policy, no search at play time), every game from two random opening plies:
- head to head, seat by seat: WinBlockPlayer (--winblock-games a seat), MCTS with 1,000 random-rollout simulations
  (--mcts-games a seat), and each --versus run (the plain self-play spec's agent, the league spec's agent: `NAME=DIR`
  or `NAME=DIR@SNAPSHOT` for a snapshot of a run's opponent pool), and with --earlier every earlier checkpoint the
  agent's run kept (meta.checkpoint_keep);
- a round robin (--tournament-games a pair) of random play, WinBlockPlayer, MCTS-100, MCTS-1000, the --versus runs
  and the agent: openskill ratings, Nash-averaged scores, the win-rate matrix (the tournament's own files).
- tactics (--tactics-positions of each kind, from uniformly random games of 4-30 plies): how often the raw policy
  takes a win in one, blocks the opponent's one win in one, and, where neither is at stake, avoids a move that
  hands the opponent a win on top of it (a mistake-rate check on positions whose right answer is known exactly);
- losses (--loss-games a seat against WinBlockPlayer, played here move by move): each lost game by the first of the
  agent's moves that was wrong at one ply (a missed win or block, a win handed over while a safe move existed, no
  safe move left: zugzwang, two threats to face) or none of these (lost deeper than one ply).
Writes strength.json and strength.md under --out and prints the markdown.

    python bench/connect_four_strength.py --agent data/connect_four_strong_.../ \
        --versus selfplay=data/selfplay_connect_four_.../ --versus league=data/league_connect_four_.../
"""
from __future__ import annotations

import argparse
import contextlib
import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from slm_lab_like.analysis.atomic import write_json, write_text
from slm_lab_like.analysis.leaderboard import markdown, matrix_markdown
from slm_lab_like.analysis.ratings import head_to_head, record_score, seat_records
from slm_lab_like.envs.games.connect_four import ConnectFour, WinBlockPlayer
from slm_lab_like.experiment.evaluate import load_space
from slm_lab_like.experiment.tournament import run_tournament
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import spec_of_run, tournament_spec
from slm_lab_like.spec.schema import PlayerSpec
from slm_lab_like.spec.tournament import check_run, kept_frames

WIN_BLOCK = {"scripted": "slm_lab_like.envs.games.connect_four:WinBlockPlayer"}
MCTS = "slm_lab_like.envs.mcts:MCTSPlayer"


def mcts(simulations: int) -> dict[str, Any]:
    return {"scripted": MCTS, "kwargs": {"simulations": simulations}}


def earlier_checkpoints(run: str) -> dict[str, dict[str, Any]]:
    """Every checkpoint the run kept before its last, as checkpoint players named by their frames."""
    session, _ = check_run(Path(run), PlayerSpec(name="agent", checkpoint=run), "--agent")
    frames = list(kept_frames(session))
    if not frames:
        raise SpecError("--earlier", f"{run} kept no checkpoints (its spec did not set meta.checkpoint_keep)")
    return {f"f{frame}": {"checkpoint": run, "frame": frame} for frame in frames[:-1]}


def checkpoint(text: str) -> tuple[str, dict[str, Any]]:
    """`NAME=DIR[@SNAPSHOT]` as (name, a checkpoint player's keys)."""
    name, _, where = text.partition("=")
    directory, _, snapshot = where.partition("@")
    player: dict[str, Any] = {"checkpoint": directory}
    if snapshot:
        player["snapshot"] = int(snapshot)
    return name, player


def play(players: dict[str, dict[str, Any]], games: int, seed: int, out: Path, name: str) -> Any:
    """A round robin of `players` ({name: keys}), `games` a pair (seats alternate), two random opening plies."""
    raw = {"tournament": {"game": {"name": "connect_four"}, "games": games, "opening_moves": 2,
                          "players": [{"name": n, **keys} for n, keys in players.items()]},
           "meta": {"random_seed": seed}}
    return run_tournament(tournament_spec(raw, name), out)


def tactical_positions(n: int, seed: int) -> dict[str, list[tuple[ConnectFour, set[int]]]]:
    """`n` positions of each kind, from uniformly random games, with the moves that answer them right: "win" (the
    mover wins at once: those moves), "block" (the opponent has one win in one and the mover none: that column),
    "safe" (no win in one either way, some moves hand the opponent one on top: the other moves)."""
    rng = random.Random(seed)
    found: dict[str, list[tuple[ConnectFour, set[int]]]] = {"win": [], "block": [], "safe": []}
    while min(map(len, found.values())) < n:
        game = ConnectFour()
        for _ in range(rng.randint(4, 30)):
            if game.is_terminal():
                break
            game.apply(rng.choice(game.legal_actions()))
        if game.is_terminal():
            continue
        me = game.current_player()
        wins, threats = game.winning_moves(me), game.winning_moves(1 - me)
        kind, good = (("win", set(wins)) if wins else ("block", set(threats)) if len(threats) == 1
                      else ("safe", {c for c in game.legal_moves() if not hands_over(game, c)}) if not threats
                      else ("", set()))
        if kind and len(found[kind]) < n and 0 < len(good) <= len(game.legal_moves()) - (kind == "safe"):
            found[kind].append((game, good))
    return found


def hands_over(game: ConnectFour, col: int) -> bool:
    """Whether the mover's piece in `col` lets the opponent win by playing on top of it."""
    after = game.copy()
    after.apply(col)
    return not after.is_terminal() and col in after.winning_moves(after.current_player())


@contextlib.contextmanager
def raw_policy(run: str) -> Iterator[Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """The run's agent as its greedy raw policy: (observations, legal masks) -> columns."""
    session, _ = check_run(Path(run), PlayerSpec(name="run", checkpoint=run), "run")
    record = json.loads((session.parent / "spec.json").read_text())
    space, _ = load_space(spec_of_run(record["spec"], play=True), session, int(record["seeds"][0]))
    try:
        agent = space.agent_space.agents[0]
        yield lambda obs, masks: np.asarray(agent.act(0, obs.astype(np.float32), mask=masks))
    finally:
        space.close()


def tactics(run: str, positions: dict[str, list[tuple[ConnectFour, set[int]]]]) -> dict[str, float]:
    """The share of each kind of position that the run's agent (its raw policy, greedy) answers right."""
    with raw_policy(run) as policy:
        rates = {}
        for kind, items in positions.items():
            moves = policy(np.stack([g.planes(g.current_player()) for g, _ in items]),
                           np.stack([g.legal_mask() for g, _ in items]))
            rates[kind] = float(np.mean([m in good for m, (_, good) in zip(moves.tolist(), items)]))
        return rates


MISTAKES = ("missed win", "missed block", "handed over", "zugzwang", "faced a double threat", "none of these")


def first_mistake(game: ConnectFour, col: int) -> str | None:
    """What the mover's `col` gets wrong at one ply: a win in one not taken, the opponent's one win not blocked, a
    win handed over on top while a safe move existed ("zugzwang" when none did), or a position already lost to two
    threats; None when it is none of these."""
    me = game.current_player()
    wins, threats = game.winning_moves(me), game.winning_moves(1 - me)
    if wins:
        return None if col in wins else "missed win"
    if len(threats) >= 2:
        return "faced a double threat"
    if threats:
        return None if col in threats else "missed block"
    if hands_over(game, col):
        return "handed over" if any(not hands_over(game, c) for c in game.legal_moves()) else "zugzwang"
    return None


def losses(run: str, games: int, seed: int) -> dict[str, dict[str, int]]:
    """Games a seat against WinBlockPlayer from two random plies, and each loss by its first one-ply mistake."""
    found = {seat: dict.fromkeys(("games", "lost", *MISTAKES), 0) for seat in ("first", "second")}
    with raw_policy(run) as policy:
        for seat, name in enumerate(found):
            for i in range(games):
                rng, opponent = random.Random(seed * 100_003 + 2 * i + seat), WinBlockPlayer(seed=seed + 2 * i + seat)
                game, mistakes = ConnectFour(), []
                for _ in range(2):
                    game.apply(rng.choice(game.legal_actions()))
                while not game.is_terminal():
                    if game.current_player() == seat:
                        col = int(policy(game.planes(seat)[None], game.legal_mask()[None])[0])
                        mistakes.append(first_mistake(game, col))
                    else:
                        col = opponent({"observation": game.planes(1 - seat), "action_mask": game.legal_mask()})
                    game.apply(col)
                found[name]["games"] += 1
                if game.returns()[seat] < 0:
                    found[name]["lost"] += 1
                    found[name][next((m for m in mistakes if m), "none of these")] += 1
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", required=True, help="the run of the agent to judge (trial or session directory)")
    p.add_argument("--versus", action="append", default=[], metavar="NAME=DIR[@SNAPSHOT]",
                   help="other agents: earlier checkpoints, the self-play and league specs' agents (repeatable)")
    p.add_argument("--winblock-games", type=int, default=500, help="games a seat against WinBlockPlayer")
    p.add_argument("--mcts-games", type=int, default=100, help="games a seat against MCTS-1000")
    p.add_argument("--versus-games", type=int, default=100, help="games a seat against each --versus agent")
    p.add_argument("--earlier", action="store_true",
                   help="also play every earlier checkpoint the agent's run kept (meta.checkpoint_keep), as f<frame>")
    p.add_argument("--tournament-games", type=int, default=40, help="games a pair in the round robin (0: none)")
    p.add_argument("--tactics-positions", type=int, default=1000, help="positions of each tactical kind (0: none)")
    p.add_argument("--loss-games", type=int, default=0,
                   help="games a seat against WinBlockPlayer whose losses are sorted by their first mistake (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="data/strength")
    args = p.parse_args()
    out = Path(args.out)
    agent = {"checkpoint": args.agent}
    versus = dict(checkpoint(v) for v in args.versus)
    if args.earlier:
        versus.update(earlier_checkpoints(args.agent))
    rows: list[dict[str, Any]] = []
    for name, keys, games in ([("WinBlockPlayer", WIN_BLOCK, args.winblock_games), ("MCTS-1000", mcts(1000),
                                                                                   args.mcts_games)]
                              + [(n, k, args.versus_games) for n, k in versus.items()]):
        if games <= 0:
            continue
        start = time.perf_counter()
        result = play({"agent": agent, name: keys}, 2 * games, args.seed, out, f"agent_vs_{name}")
        first, second = seat_records(result.games, "agent")
        rows.append({"opponent": name, "first": first, "second": second, "score_first": round(record_score(first), 4),
                     "score_second": round(record_score(second), 4),
                     "score": round(record_score([a + b for a, b in zip(first, second)]), 4),
                     "wall_s": round(time.perf_counter() - start, 1)})
    lines = ["| opponent | as first (W / D / L) | as second | score first | score second | score | wall s |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['opponent']} | {' / '.join(map(str, r['first']))} | {' / '.join(map(str, r['second']))} "
                     f"| {r['score_first']:.3f} | {r['score_second']:.3f} | {r['score']:.3f} | {r['wall_s']} |")
    report: dict[str, Any] = {"agent": args.agent, "versus": args.versus, "head_to_head": rows}
    text = "\n".join(lines) + "\n"
    if args.tactics_positions > 0:
        positions = tactical_positions(args.tactics_positions, args.seed)
        runs = {"agent": args.agent,
                **{n: k["checkpoint"] for n, k in versus.items() if "snapshot" not in k and "frame" not in k}}
        report["tactics"] = {name: tactics(run, positions) for name, run in runs.items()}
        text += (f"\nTactics, {args.tactics_positions} random-game positions of each kind (share answered right):\n\n"
                 "| agent | takes a win in one | blocks a loss in one | avoids handing over a win |\n|---|---:|---:|---:|\n"
                 + "".join(f"| {n} | {r['win']:.3f} | {r['block']:.3f} | {r['safe']:.3f} |\n"
                           for n, r in report["tactics"].items()))
    if args.loss_games > 0:
        report["losses"] = losses(args.agent, args.loss_games, args.seed)
        text += (f"\nLosses against WinBlockPlayer ({args.loss_games} games a seat) by their first one-ply mistake:\n\n"
                 f"| seat | lost | {' | '.join(MISTAKES)} |\n|---|---:|{'---:|' * len(MISTAKES)}\n"
                 + "".join(f"| {seat} | {r['lost']} | {' | '.join(str(r[m]) for m in MISTAKES)} |\n"
                           for seat, r in report["losses"].items()))
    if args.tournament_games > 0:
        field = {"random": {"scripted": "random"}, "WinBlockPlayer": WIN_BLOCK, "MCTS-100": mcts(100),
                 "MCTS-1000": mcts(1000), **versus, "agent": agent}
        result = play(field, args.tournament_games, args.seed, out, "strength_round_robin")
        names = [r["player"] for r in result.leaderboard]
        matrix, _ = head_to_head(result.games, names)
        report["tournament"] = {"dir": str(result.out_dir), "leaderboard": result.leaderboard}
        text += ("\nRound robin, " + f"{args.tournament_games} games a pair:\n\n" + markdown(result.leaderboard)
                 + "\n" + matrix_markdown(matrix, names))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "strength.json", report)
    write_text(out / "strength.md", text)
    print(text)


if __name__ == "__main__":
    try:
        main()
    except SpecError as err:  # a --agent or --versus that is not a run: one line, not a traceback
        raise SystemExit(f"connect_four_strength: {err}") from None
