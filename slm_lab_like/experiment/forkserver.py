"""What the session pool's fork server imports before it serves (multiprocessing's forkserver preload): the modules
every session worker imports, and, first, its one setting: the server ignores SIGTERM, as it ignores SIGINT already.
A scheduler stops a run by sending SIGTERM to its whole process group; a pool whose server dies takes its running
workers for dead (they report through it) and breaks, where the workers would have checkpointed and stopped. The
server ends once the lab's process has and its workers have (they end with the lab: experiment/trial.py)."""
import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)

import torch._dynamo  # noqa: E402, F401  (torch's optimizers import it when the first one is made: 3 s of CPU)

from slm_lab_like.experiment import session  # noqa: E402, F401  (the session's modules: torch, gymnasium, agents)
