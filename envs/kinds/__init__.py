"""The built-in env kinds, one adapter a file (listed by envs.registry)."""
