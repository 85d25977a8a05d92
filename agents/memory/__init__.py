"""Memories: uniform and prioritized replay, and the on-policy rollout batch."""
from slm_lab_like.agents.memory.onpolicy import OnPolicyBatch, OnPolicyBatchConfig
from slm_lab_like.agents.memory.replay import PrioritizedReplay, PrioritizedReplayConfig, Replay, ReplayBatch, ReplayConfig, SumTree

__all__ = ["OnPolicyBatch", "OnPolicyBatchConfig", "PrioritizedReplay", "PrioritizedReplayConfig", "Replay",
           "ReplayBatch", "ReplayConfig", "SumTree"]
