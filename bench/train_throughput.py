"""Training throughput at 1,024 bodies: PPO on CartPole-v1, end-to-end frames per second (acting, stepping, learning).

Three sides with the same hyperparameters (HP below), one torch thread each, alternating in one run (lab, cleanrl,
sb3, then the same backwards), median of --repeats runs of --frames frames each:
- lab: a lab session of one PPO agent with 1,024 bodies in CartPole-v1 (`vector: "auto"`: gymnasium's numpy
  CartPoleVectorEnv), building the session included;
- cleanrl: a CleanRL-style single-file PPO (`cleanrl_ppo` below: CleanRL's ppo.py loop, its Agent and storage) on the
  same gymnasium vector env;
- sb3: Stable-Baselines3's PPO with its own vector env (DummyVecEnv of 1,024 CartPole-v1), model built included.
Ratios printed: lab / cleanrl (target >= 1.5) and lab / sb3 (target >= 10), and the arithmetic ceiling of any side:
the FLOPs of HP's matrix products a frame against this core's rate on the widest of them. Then one more lab run with
timers on its loop's parts (they cost a little, so it is not one of the measured runs): where its time goes, as act
(the agent choosing actions), env (the vector env's step and the lab's episode bookkeeping of it), store (handing the
step to the agent), learn (PPO's epochs over each rollout), and the rest (the session loop, telemetry).
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from typing import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate

BODIES = 1024
HP = {"n_steps": 16, "n_epochs": 4, "minibatch_size": 4096, "gamma": 0.98, "lam": 0.8, "clip_eps": 0.2,
      "lr": 3e-3, "val_loss_coef": 0.5, "clip_grad_norm": 0.5, "hidden": 64}


def lab_spec(frames: int, seed: int) -> dict:
    """The lab's PPO spec with HP."""
    return {"agent": [{"name": "ppo",
                       "algorithm": {"name": "PPO", "gamma": HP["gamma"], "lam": HP["lam"], "n_epochs": HP["n_epochs"],
                                     "minibatch_size": HP["minibatch_size"], "clip_eps": HP["clip_eps"],
                                     "entropy_coef": 0.0, "val_loss_coef": HP["val_loss_coef"],
                                     "normalize_advantage": True},
                       "memory": {"name": "OnPolicyBatch", "n_steps": HP["n_steps"]},
                       "net": {"name": "MLP", "hid_layers": [HP["hidden"]] * 2, "activation": "tanh",
                               "init": "orthogonal", "shared": False, "clip_grad_norm": HP["clip_grad_norm"],
                               "optim": {"name": "Adam", "lr": HP["lr"], "eps": 1e-5}}}],
            "env": [{"name": "CartPole-v1", "max_frame": frames}], "body": {"num": BODIES},
            "meta": {"random_seed": seed, "log_frequency": 10 * frames}}


def lab_fps(frames: int, seed: int) -> float:
    start = time.perf_counter()
    result = Session(validate(lab_spec(frames, seed), "throughput"), seed=seed).run()
    return result.env_frames[0] / (time.perf_counter() - start)


class Agent(nn.Module):
    """CleanRL's PPO agent: separate actor and critic MLPs, orthogonal init."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()

        def layer(i: int, o: int, std: float = np.sqrt(2)) -> nn.Linear:
            lin = nn.Linear(i, o)
            nn.init.orthogonal_(lin.weight, std)
            nn.init.constant_(lin.bias, 0.0)
            return lin

        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                    layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                   layer(hidden, n_actions, 0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def cleanrl_ppo(frames: int, seed: int) -> float:
    """CleanRL's ppo.py loop (storage tensors, GAE, minibatch epochs) with HP; frames per second."""
    start = time.perf_counter()
    torch.manual_seed(seed)
    envs = gym.make_vec("CartPole-v1", BODIES, vectorization_mode="vector_entry_point")
    n, steps = BODIES, HP["n_steps"]
    agent = Agent(4, 2, HP["hidden"])
    optimizer = torch.optim.Adam(agent.parameters(), lr=HP["lr"], eps=1e-5)
    obs = torch.zeros((steps, n, 4))
    actions = torch.zeros((steps, n))
    logprobs, rewards, dones, values = (torch.zeros((steps, n)) for _ in range(4))
    next_obs = torch.Tensor(envs.reset(seed=seed)[0])
    next_done = torch.zeros(n)
    batch = steps * n
    for _ in range(max(1, frames // batch)):
        for step in range(steps):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            o, reward, term, trunc, _ = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(o), torch.Tensor(np.logical_or(term, trunc))
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(steps)):
                nextnonterminal = 1.0 - (next_done if t == steps - 1 else dones[t + 1])
                nextvalues = next_value if t == steps - 1 else values[t + 1]
                delta = rewards[t] + HP["gamma"] * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + HP["gamma"] * HP["lam"] * nextnonterminal * lastgaelam
            returns = advantages + values
        b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        b_inds = np.arange(batch)
        for _ in range(HP["n_epochs"]):
            np.random.shuffle(b_inds)
            for lo in range(0, batch, HP["minibatch_size"]):
                mb = b_inds[lo:lo + HP["minibatch_size"]]
                _, newlogprob, _, newvalue = agent.get_action_and_value(b_obs[mb], b_actions.long()[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * torch.clamp(ratio, 1 - HP["clip_eps"], 1 + HP["clip_eps"])).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                loss = pg_loss + v_loss * HP["val_loss_coef"]
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), HP["clip_grad_norm"])
                optimizer.step()
    envs.close()
    return max(1, frames // batch) * batch / (time.perf_counter() - start)


def sb3_fps(frames: int, seed: int) -> float:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    start = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=BODIES, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=HP["n_steps"], batch_size=HP["minibatch_size"], n_epochs=HP["n_epochs"],
                gamma=HP["gamma"], gae_lambda=HP["lam"], clip_range=HP["clip_eps"], learning_rate=HP["lr"],
                ent_coef=0.0, vf_coef=HP["val_loss_coef"], max_grad_norm=HP["clip_grad_norm"], seed=seed,
                policy_kwargs={"net_arch": [HP["hidden"]] * 2, "activation_fn": nn.Tanh}, device="cpu")
    model.learn(total_timesteps=frames)
    env.close()
    return model.num_timesteps / (time.perf_counter() - start)


def breakdown(frames: int, seed: int) -> dict[str, float]:
    """Seconds of one lab run in each part of its loop (timers wrapped around the loop's calls)."""
    from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm
    from slm_lab_like.aeb.space import GroupLink
    from slm_lab_like.envs.native_vector import GymNativeVectorEnv

    spent: dict[str, float] = defaultdict(float)
    originals = {(GroupLink, "act"): "act", (GymNativeVectorEnv, "step"): "env", (GroupLink, "update"): "store",
                 (OnPolicyAlgorithm, "_train"): "learn"}
    saved = {key: getattr(*key) for key in originals}

    def timed(fn: Callable, part: str) -> Callable:
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - t
        return wrapper

    for (cls, name), part in originals.items():
        setattr(cls, name, timed(saved[(cls, name)], part))
    try:
        start = time.perf_counter()
        Session(validate(lab_spec(frames, seed), "throughput"), seed=seed).run()
        total = time.perf_counter() - start
    finally:
        for (cls, name), fn in saved.items():
            setattr(cls, name, fn)
    spent["store"] -= spent["learn"]  # learning happens inside update
    spent["rest"] = total - sum(spent.values())
    return dict(spent)


def flops_per_frame(obs_dim: int = 4, n_actions: int = 2) -> int:
    """Floating-point operations of HP's PPO per frame in its matrix products alone (a lower bound on its work): both
    MLPs' forward pass once at acting (the action and the value of every frame), then n_epochs of forward and backward
    (a layer's weight gradient, and its input gradient but for the first layer's)."""
    total = 0
    for out in (n_actions, 1):
        macs = [a * b for a, b in zip([obs_dim, HP["hidden"], HP["hidden"]], [HP["hidden"], HP["hidden"], out])]
        total += 2 * sum(macs) + HP["n_epochs"] * 2 * (3 * sum(macs) - macs[0])
    return total


def product_rate(rows: int = 4096, reps: int = 2000) -> float:
    """FLOP/s of this core's torch on the run's widest product (rows x 64 by 64 x 64, float32): the best any side can
    do per operation, the narrow products of the run being slower."""
    a, w, out = torch.randn(rows, HP["hidden"]), torch.randn(HP["hidden"], HP["hidden"]), torch.empty(rows, HP["hidden"])
    for _ in range(50):
        torch.mm(a, w, out=out)
    start = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, w, out=out)
    return 2 * rows * HP["hidden"] ** 2 * reps / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=BODIES * HP["n_steps"] * 12, help="frames per run")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    sides: dict[str, Callable[[int, int], float]] = {"lab": lab_fps, "cleanrl": cleanrl_ppo, "sb3": sb3_fps}
    for side in sides.values():  # the first run of a process pays torch's lazy imports: untimed
        side(BODIES * HP["n_steps"], 0)
    runs: dict[str, list[float]] = {k: [] for k in sides}
    for i in range(a.repeats):
        for name in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            runs[name].append(sides[name](a.frames, i))
            print(f"round {i} {name:>7}: {runs[name][-1]:,.0f} fps", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{BODIES} bodies, {a.frames:,} frames a run: median fps " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items()))
    print(f"ratio lab/cleanrl {med['lab'] / med['cleanrl']:.3f} (target >= 1.5), "
          f"ratio lab/sb3 {med['lab'] / med['sb3']:.3f} (target >= 10)")
    flops, rate = flops_per_frame(), product_rate()
    ceiling = rate / flops
    print(f"arithmetic ceiling: {flops:,} FLOPs a frame in the products alone, this core's torch at "
          f"{rate / 1e9:.1f} GFLOP/s on the widest of them: at most {ceiling:,.0f} fps for any side, "
          f"so lab/sb3 at most {ceiling / med['sb3']:.2f} with these hyperparameters")
    parts = breakdown(a.frames, 0)
    total = sum(parts.values())
    print("lab's time: " + ", ".join(f"{k} {v:.2f} s ({v / total:.0%})" for k, v in parts.items()))


if __name__ == "__main__":
    main()
