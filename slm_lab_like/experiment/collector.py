"""Keep Python's cyclic garbage collector off the objects a process holds when its first session starts.

A full (generation 2) collection walks every container object the process has: with torch imported, some 180,000,
about 90-100 ms on these machines. A session of thousands of bodies makes enough objects as it builds (its
coordinates, bodies and metrics) to trigger one; at 16,384 random CartPole bodies the collector's 96 ms fell in one
run of three, a fifth of that run. The modules and classes loaded before a session live as long as the process, so
`freeze_loaded_objects` collects once and then moves every survivor to the collector's permanent generation
(`gc.freeze`, which CPython offers for such long-lived objects): later full collections walk only what was made
after. Once a process, as the first session starts.
"""
from __future__ import annotations

import gc

_frozen = False


def freeze_loaded_objects() -> None:
    """Collect, then freeze the survivors, the first time a process calls it (a flag, not `gc.get_freeze_count`,
    says whether it has: that call walks the frozen list, 18 ms at 180,000 objects)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()
