"""SLM Lab's REINFORCE on CartPole (`reinforce_cartpole_arc` of its reinforce_arc.yaml), written out as one file from
SLM Lab's own code (master 96be3938: algorithm/reinforce.py, lib/math_util.py, net/net_util.py, env/__init__.py),
to tell what SLM Lab's algorithm scores on this machine apart from what this lab's translation of the spec scores.

As SLM Lab runs it: gymnasium's SyncVectorEnv of 4 CartPole-v1 (NEXT_STEP autoreset), a 128x128 tanh MLP with
torch's orthogonal init at tanh's gain on every layer (heads included) and zero biases, Adam at lr 0.002, a batch of
512 vector steps, returns cut only at terminations and at the batch's end, centred and standardised, loss
-mean(log pi * adv) - 0.001 entropy (SLM Lab takes the spec's end_val 0 as unset), gradient norm clipped at 0.5;
SLM Lab trains on every vector step, the autoreset steps included (from an episode's last obs to the reset obs,
reward 0). Scored as SLM Lab's total_reward_ma: every 500 frames the mean of the last 100 episodes, then the mean
of the last 100 of those points.

Variants switch the two things this lab does otherwise: `--init lab` (gain sqrt 2 in the hidden layers, 0.01 in
the head) and `--skip-reset-steps` (the autoreset steps are not trained on, as this lab's bodies do not act there).

    python bench/slm_lab_reinforce_twin.py --seeds 1 2 3 4 [--init lab] [--skip-reset-steps]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics

import gymnasium as gym
import numpy as np
import torch
from torch import nn

FRAMES, ENVS, BATCH_STEPS, GAMMA, LOG_EVERY, WINDOW = 200_000, 4, 512, 0.99, 500, 100


def make_net(init: str) -> nn.Sequential:
    """SLM Lab's TorchArcNet of the spec: Linear-Tanh-Linear-Tanh, then its linear head."""
    layers = [nn.Linear(4, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 2)]
    linears = [layers[0], layers[2], layers[4]]
    gains = [5 / 3] * 3 if init == "slm" else [math.sqrt(2), math.sqrt(2), 0.01]
    for layer, gain in zip(linears, gains):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def returns(rewards: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
    """math_util.calc_returns: discounted returns to the batch's end, cut only where an episode terminated."""
    rets, future = torch.zeros_like(rewards), torch.zeros(rewards.shape[1])
    for t in reversed(range(len(rewards))):
        rets[t] = future = rewards[t] + GAMMA * future * (1 - terminated[t])
    return rets


def train(net: nn.Module, opt: torch.optim.Optimizer, batch: dict[str, list], skip_reset_steps: bool) -> None:
    """One REINFORCE step on a batch of vector steps, as Reinforce.train does."""
    obs = torch.as_tensor(np.array(batch["obs"]), dtype=torch.float32).reshape(-1, 4)
    actions = torch.as_tensor(np.array(batch["action"])).reshape(-1)
    rets = returns(torch.as_tensor(np.array(batch["reward"]), dtype=torch.float32),
                   torch.as_tensor(np.array(batch["terminated"]), dtype=torch.float32)).reshape(-1)
    if skip_reset_steps:
        keep = torch.as_tensor(np.array(batch["acted"])).reshape(-1)
        obs, actions, rets = obs[keep], actions[keep], rets[keep]
    advs = rets - rets.mean()  # center_return, then standardize
    advs = (advs - advs.mean()) / (advs.std() + 1e-8)
    pd = torch.distributions.Categorical(logits=net(obs))
    loss = -(pd.log_prob(actions) * advs).mean() - 0.001 * pd.entropy().mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 0.5)
    opt.step()


def session(seed: int, init: str, skip_reset_steps: bool) -> float:
    """One session's total_reward_ma."""
    torch.manual_seed(seed)
    envs = gym.make_vec("CartPole-v1", ENVS, vectorization_mode="sync")
    obs, _ = envs.reset(seed=seed)
    net = make_net(init)
    opt = torch.optim.Adam(net.parameters(), lr=0.002)
    batch: dict[str, list] = {k: [] for k in ("obs", "action", "reward", "terminated", "acted")}
    resetting, running, episodes, points = np.zeros(ENVS, bool), np.zeros(ENVS), [], []
    for step in range(FRAMES // ENVS):
        with torch.no_grad():
            action = torch.distributions.Categorical(logits=net(torch.as_tensor(obs))).sample().numpy()
        next_obs, reward, terminated, truncated, _ = envs.step(action)
        for key, value in zip(batch, (obs, action, reward, terminated.astype(np.float32), ~resetting)):
            batch[key].append(value)
        running += reward * ~resetting
        resetting = terminated | truncated
        episodes += running[resetting].tolist()
        running[resetting] = 0.0
        obs = next_obs
        if (step + 1) * ENVS % LOG_EVERY == 0 and episodes:
            points.append(statistics.fmean(episodes[-WINDOW:]))
        if len(batch["obs"]) == BATCH_STEPS:
            train(net, opt, batch, skip_reset_steps)
            batch = {k: [] for k in batch}
    envs.close()
    return statistics.fmean(points[-WINDOW:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--init", choices=["slm", "lab"], default="slm")
    p.add_argument("--skip-reset-steps", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    scores = []
    for seed in a.seeds:
        scores.append(session(seed, a.init, a.skip_reset_steps))
        print(json.dumps({"seed": seed, "init": a.init, "skip_reset_steps": a.skip_reset_steps,
                          "total_reward_ma": round(scores[-1], 2)}), flush=True)
    spread = f" ± {statistics.stdev(scores):.2f}" if len(scores) > 1 else ""
    print(f"mean {statistics.fmean(scores):.2f}{spread}, sessions {min(scores):.2f} to {max(scores):.2f}")


if __name__ == "__main__":
    main()
