"""How strong a connect four agent is, judged by players it did not train against: issue 28's yardsticks.

For a run's agent (greedy, raw policy, no search at play time), every game from two random opening plies:
- head to head, seat by seat: WinBlockPlayer (--winblock-games a seat), MCTS with 1,000 random-rollout simulations
  (--mcts-games a seat), and each --versus run (earlier checkpoints, the plain self-play spec's agent, the league
  spec's agent: `NAME=DIR` or `NAME=DIR@SNAPSHOT` for a snapshot of a run's opponent pool);
- a round robin (--tournament-games a pair) of random play, WinBlockPlayer, MCTS-100, MCTS-1000, the --versus runs
  and the agent: openskill ratings, Nash-averaged scores, the win-rate matrix (the tournament's own files).
Writes strength.json and strength.md under --out and prints the markdown.

    python bench/connect_four_strength.py --agent data/connect_four_strong_.../ \
        --versus selfplay=data/selfplay_connect_four_.../ --versus league=data/league_connect_four_.../
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from slm_lab_like.analysis.atomic import write_json, write_text
from slm_lab_like.analysis.leaderboard import markdown, matrix_markdown
from slm_lab_like.analysis.ratings import head_to_head, record_score, seat_records
from slm_lab_like.experiment.tournament import run_tournament
from slm_lab_like.spec.load import tournament_spec

WIN_BLOCK = {"scripted": "slm_lab_like.envs.games.connect_four:WinBlockPlayer"}
MCTS = "slm_lab_like.envs.mcts:MCTSPlayer"


def mcts(simulations: int) -> dict[str, Any]:
    return {"scripted": MCTS, "kwargs": {"simulations": simulations}}


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", required=True, help="the run of the agent to judge (trial or session directory)")
    p.add_argument("--versus", action="append", default=[], metavar="NAME=DIR[@SNAPSHOT]",
                   help="other agents: earlier checkpoints, the self-play and league specs' agents (repeatable)")
    p.add_argument("--winblock-games", type=int, default=500, help="games a seat against WinBlockPlayer")
    p.add_argument("--mcts-games", type=int, default=100, help="games a seat against MCTS-1000")
    p.add_argument("--versus-games", type=int, default=100, help="games a seat against each --versus agent")
    p.add_argument("--tournament-games", type=int, default=40, help="games a pair in the round robin (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="data/strength")
    args = p.parse_args()
    out = Path(args.out)
    agent = {"checkpoint": args.agent}
    versus = dict(checkpoint(v) for v in args.versus)
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
    main()
