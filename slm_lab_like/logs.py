"""Logging set-up shared by the command line and the session worker processes."""
from __future__ import annotations

import logging


def configure_logging(level: int = logging.INFO) -> None:
    """Plain timestamped lines on stderr for the lab's logger."""
    logger = logging.getLogger("slm_lab_like")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(level)
