"""slm_lab_like: many agents, many envs and many bodies in one session (see README.md and docs/)."""
from slm_lab_like.remote import adapter as _remote_adapter  # noqa: F401  (registers the remote env kind)
