"""Shared fixtures: small raw specs and a helper to validate them."""
from __future__ import annotations

import copy
import os
import sys

import pytest

from tests.processes import stop

# The suite starts many Python processes (judges, labs, players, fork servers); where PYTHONDONTWRITEBYTECODE is set,
# each compiled the lab's sources again (0.7 s of CPU a lab process), and each run rewrote every test module's
# asserts again. Their bytecode is cached from here on (in __pycache__, which git ignores): the subprocess-heavy
# tests took 10% less CPU.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Every Ray the tests start stays on 127.0.0.1 (see slm_lab_like/experiment/ray_backend.py): set before any test
# imports ray, which reads it once.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def random_spec(n_agents: int = 1, n_envs: int = 1, num: int | list[int] = 1, max_frame: int = 200,
                env: str = "CartPole-v1") -> dict:
    """A raw spec of Random agents in CartPole-v1 copies."""
    return {
        "agent": [{"name": f"r{a}", "algorithm": {"name": "Random"}} for a in range(n_agents)],
        "env": [{"name": env, "max_frame": max_frame} for _ in range(n_envs)],
        "body": {"product": "outer", "num": num},
        "meta": {"random_seed": 7, "log_frequency": 10**9},
    }


@pytest.fixture
def raw_spec() -> dict:
    return copy.deepcopy(random_spec())


@pytest.fixture
def cluster():
    """A head node without CPUs and two worker nodes of one CPU each, every process on 127.0.0.1."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    c.workers = workers
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


@pytest.fixture
def procs():
    """Processes a test starts (Popen, or a wrapper with `.proc`); each is stopped afterwards."""
    started: list = []
    yield started
    for p in started:
        stop(getattr(p, "proc", p))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker a core. Each worker pays its own collection, imports and fork server (15-20 s of CPU), so a
    spare worker that fills the suite's waits cost more CPU than it saved: on 2 cores, 2 workers took 4:22 and 404 s
    of user CPU where 3 took 4:29 and 457 s (run back to back)."""
    return os.cpu_count() or 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked slow first (the learning checks, the longest, before the end-to-end runs), the rest in their
    order: in parallel, the long ones then start at once and the many short ones fill in around them, instead of one long test running alone at
    the end."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, "test_learning.py" not in item.nodeid))
