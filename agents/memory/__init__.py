"""Memories: uniform and prioritized replay, and the on-policy rollout batch."""
from agents.memory.onpolicy import OnPolicyBatch, OnPolicyBatchConfig
from agents.memory.replay import PrioritizedReplay, PrioritizedReplayConfig, Replay, ReplayBatch, ReplayConfig, SumTree

__all__ = ["OnPolicyBatch", "OnPolicyBatchConfig", "PrioritizedReplay", "PrioritizedReplayConfig", "Replay",
           "ReplayBatch", "ReplayConfig", "SumTree"]
