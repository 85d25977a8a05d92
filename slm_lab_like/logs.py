"""Logging set-up shared by the command line and the session worker processes."""
from __future__ import annotations

import logging
import sys

HANDLER = "slm_lab_like.stderr"


def configure_logging(level: int = logging.INFO) -> None:
    """Plain timestamped lines on the current stderr for the lab's logger, unless its user gave it handlers of their
    own (a second call, as a test's or a notebook's second `main`, writes to the stderr of that call: the handler of
    the first is replaced, its stream untouched)."""
    logger = logging.getLogger("slm_lab_like")
    logger.setLevel(level)
    for old in [h for h in logger.handlers if h.get_name() == HANDLER]:
        logger.removeHandler(old)
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
