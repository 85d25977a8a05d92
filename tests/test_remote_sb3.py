"""An off-the-shelf library trains through RemoteEnv: Stable-Baselines3 PPO on a remote CartPole-v1."""

from __future__ import annotations

import json
import time

import pytest

from slm_lab_like.remote import RemoteEnv, spawn_judge, stop_judge

sb3 = pytest.importorskip("stable_baselines3")


def test_sb3_trains_and_evaluates_through_remote_envs():
    """SB3's own vector env of RemoteEnvs and its evaluation loop take them as any gymnasium env (a short run)."""
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    proc, address = spawn_judge("CartPole-v1")
    try:
        venv = DummyVecEnv([lambda: RemoteEnv(address, timeout=30)] * 2)
        model = sb3.PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu", verbose=0)
        model.set_logger(Logger(None, []))
        model.learn(total_timesteps=256)
        assert model.num_timesteps == 256
        eval_env = RemoteEnv(address, timeout=30)
        returns, lengths = evaluate_policy(model, eval_env, n_eval_episodes=2, return_episode_rewards=True)
        assert len(returns) == 2 and all(r == n for r, n in zip(returns, lengths))  # CartPole: +1 a step
        eval_env.close()
        venv.close()
    finally:
        stop_judge(proc)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)
def test_sb3_ppo_reaches_475_on_remote_cartpole():
    """rl-zoo PPO hyperparameters, 8 RemoteEnvs served by one judge subprocess (one env per session)."""
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.utils import LinearSchedule
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    proc, address = spawn_judge("CartPole-v1")
    try:
        venv = DummyVecEnv([lambda: RemoteEnv(address, timeout=30)] * 8)
        model = sb3.PPO("MlpPolicy", venv, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                        ent_coef=0.0, learning_rate=LinearSchedule(1e-3, 0.0, 1.0),
                        clip_range=LinearSchedule(0.2, 0.0, 1.0), seed=0, device="cpu", verbose=0)
        model.set_logger(Logger(None, []))  # SB3's default logger makes a folder in the temp dir per run
        start = time.perf_counter()
        model.learn(total_timesteps=100_000)
        wall = time.perf_counter() - start
        eval_env = Monitor(RemoteEnv(address, timeout=30))
        mean, std = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True)
        print(json.dumps({"frames": model.num_timesteps, "train_wall_s": round(wall, 1),
                          "fps": round(model.num_timesteps / wall), "mean_return": mean, "std_return": std}))
        eval_env.close()
        venv.close()
        assert mean >= 475.0
    finally:
        stop_judge(proc)
