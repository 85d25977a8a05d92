"""Which ConvNet layout learns connect four's one-ply tactics fastest: a supervised proxy for issue 28's recipe.

The raw policy of an expert-iteration agent misses most of its blocks on diagonal threats (2026-12-03: 17-22% of
diagonal blocks missed against 3-6% of the rest). This trains each --layout (ConvNet keys as JSON) from scratch, by
cross-entropy over the legal moves, on positions of uniformly random games whose right answers are known exactly
(`connect_four_strength.tactical_positions`: take a win in one, block the opponent's one win, avoid handing one
over), for --steps minibatches of 512, and prints each layout's CPU seconds and its held-out share answered right,
by kind and by the direction of the blocked threat. One torch thread, the same data and seed for every layout.

    python bench/connect_four_net_layouts.py --layout '{"channels": [64, 64], "kernels": [3, 3], "strides": [1, 1]}'
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch

from connect_four_strength import tactical_positions
from slm_lab_like.agents.net.conv import ConvNet, ConvNetConfig
from slm_lab_like.envs.games.connect_four import BITS_PER_COL, COLS, ROWS, WIN_SHIFTS, ConnectFour

LINES = dict(zip(("vertical", "horizontal", "diagonal", "antidiagonal"), WIN_SHIFTS))  # board rows downward
SHIPPED = '{"channels": [64, 64], "kernels": [3, 3], "strides": [1, 1], "hid_layers": [256]}'


def threat_line(game: ConnectFour, col: int) -> str:
    """The direction of the opponent's four that a piece in `col` would complete (the first, if several): the
    game's own bitboard test, one shift at a time."""
    bb = game.bitboards[1 - game.current_player()] | (1 << (col * BITS_PER_COL + game.heights[col]))
    for name, shift in LINES.items():
        pairs = bb & (bb >> shift)
        if pairs & (pairs >> (2 * shift)):
            return name
    raise ValueError(f"column {col} completes no four")


def dataset(n: int, seed: int) -> tuple[list[tuple[str, ConnectFour, set[int]]], torch.Tensor, torch.Tensor,
                                         torch.Tensor]:
    """`n` positions of each kind: (items, observations, legal masks, targets uniform over the right moves)."""
    items = [(kind, game, good) for kind, found in tactical_positions(n, seed).items() for game, good in found]
    obs = torch.tensor(np.stack([g.planes(g.current_player()) for _, g, _ in items]).astype(np.float32))
    masks = torch.tensor(np.stack([g.legal_mask() for _, g, _ in items]).astype(bool))
    targets = torch.zeros(len(items), COLS)
    for i, (_, _, good) in enumerate(items):
        targets[i, list(good)] = 1.0 / len(good)
    return items, obs, masks, targets


def train_and_score(layout: dict[str, Any], train: tuple, test: tuple, steps: int, seed: int) -> dict[str, Any]:
    """Train one layout from scratch on `train`; its CPU seconds and held-out shares answered right."""
    torch.manual_seed(seed)
    net = ConvNet(ConvNetConfig(**layout), [(ROWS, COLS, 2)], [[COLS]])
    optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    _, obs, masks, targets = train
    start = time.process_time()
    for _ in range(steps):
        i = torch.randint(len(obs), (512,))
        logits = net(obs[i])[0].masked_fill(~masks[i], -1e9)
        loss = -(targets[i] * torch.log_softmax(logits, -1)).sum(-1).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
    cpu = time.process_time() - start
    items, obs, masks, _ = test
    with torch.no_grad():
        moves = net(obs)[0].masked_fill(~masks, -1e9).argmax(-1).tolist()
    right: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for move, (kind, game, good) in zip(moves, items):
        keys = [kind] + ([f"block {threat_line(game, next(iter(good)))}"] if kind == "block" else [])
        for key in keys:
            right[key][0] += move in good
            right[key][1] += 1
    return {"cpu_s": round(cpu, 1), **{k: round(a / n, 3) for k, (a, n) in sorted(right.items())}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layout", action="append", help=f"ConvNet keys as JSON (repeatable; default {SHIPPED})")
    p.add_argument("--positions", type=int, default=20000, help="training positions of each kind")
    p.add_argument("--steps", type=int, default=3000, help="minibatches of 512")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    train, test = dataset(a.positions, a.seed + 11), dataset(2000, a.seed + 99)
    for text in a.layout or [SHIPPED]:
        print(text, json.dumps(train_and_score(json.loads(text), train, test, a.steps, a.seed)), flush=True)


if __name__ == "__main__":
    main()
