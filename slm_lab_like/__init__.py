"""slm_lab_like: many agents, many envs and many bodies in one session (see README.md and docs/)."""
