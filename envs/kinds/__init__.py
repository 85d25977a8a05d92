"""The built-in env kinds, one adapter a file; importing this package registers them (see envs.adapter)."""
from envs.kinds import gym_copies, lab_native, pettingzoo  # noqa: F401
