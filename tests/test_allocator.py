"""The session keeps the C heap's freed memory: a CPU training step stops faulting its pages back in."""
from __future__ import annotations

import subprocess
import sys

import pytest

from slm_lab_like.experiment import session as session_module
from slm_lab_like.experiment.allocator import keep_freed_memory
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec

FAULTS = """
import resource, sys, torch
from slm_lab_like.agents.net import MLP, MLPConfig
from slm_lab_like.experiment.allocator import keep_freed_memory
torch.set_num_threads(1)
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
nets = [MLP(MLPConfig(hid_layers=[64, 64], activation="tanh"), [(4,)], [[n]]) for n in (2, 1)]
x = torch.randn(4096, 4)
def step():
    sum(net(x)[0].mean() for net in nets).backward()
for _ in range(10):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    step()
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 30)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_with_freed_memory_kept_a_training_step_faults_in_almost_no_pages() -> None:
    """Counted, not timed: minor page faults of a forward and backward pass of two 64-unit MLPs over 4,096 rows, in a
    fresh process (glibc's heap state is the process's), with the thresholds set; about 450 a step without them on
    the machines this was measured on, which the test does not assert (another glibc may trim otherwise)."""
    out = subprocess.run([sys.executable, "-c", FAULTS, "keep"], capture_output=True, text=True, check=True)
    kept, faults = out.stdout.split()
    assert kept == "True"
    assert float(faults) < 45


def test_a_session_keeps_freed_memory_as_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(session_module, "keep_freed_memory", lambda: calls.append(True) or True)
    Session(validate(random_spec(max_frame=20), "keep"), seed=0).run()
    assert calls == [True]
    assert keep_freed_memory() is sys.platform.startswith("linux")


FROZEN = """
import gc, torch
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec
loaded = len(gc.get_objects())
Session(validate(random_spec(max_frame=20), "freeze"), seed=0).run()
print(loaded, gc.get_freeze_count(), len(gc.get_objects()))
"""


def test_a_session_leaves_the_objects_loaded_before_it_out_of_full_collections() -> None:
    """Counted in a fresh process: what torch and the lab loaded is in the collector's permanent generation after
    the first session, so a full collection walks only what was made since (a 100 ms walk at 16,384 bodies before)."""
    out = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, check=True)
    loaded, frozen, walked = map(int, out.stdout.split())
    assert frozen > 0.9 * loaded
    assert walked < loaded / 10
