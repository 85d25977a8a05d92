"""`run_lab.py resume DIR`: continue a killed trial (or one session of it) from its sessions' last checkpoints."""
from __future__ import annotations

import logging
from pathlib import Path

from slm_lab_like.experiment.checkpoint import read_checkpoint
from slm_lab_like.experiment.record import RecordError, load_result, read_trial
from slm_lab_like.experiment.interrupt import Interrupted
from slm_lab_like.experiment.trial import TrialResult, resume_hint, run_sessions, write_trial

log = logging.getLogger("slm_lab_like")


def resume_trial(path: str | Path) -> TrialResult:
    """Run every unfinished session of the trial at `path` (a trial or a session directory) to the end of its
    budget, from its last checkpoint (from the start when it has none yet, in a trial that has some); write the
    trial's summary and plot once every session is done. Returns the sessions resumed, or all when complete."""
    record = read_trial(path)
    todo = [i for i in record.sessions if not record.finished(i)]
    if not todo:
        raise RecordError(f"{path}: already finished (every session wrote summary.json); nothing to resume")
    has_ckpt = {i: read_checkpoint(record.session_dir(i)) is not None for i in todo}
    if not any(has_ckpt.values()):
        raise RecordError(f"{path}: no checkpoint to resume from (killed before the first one? "
                          "set meta.checkpoint_frequency, or run the spec again)")
    log.info("%s: resuming session(s) %s in %s", record.spec.name, todo, record.dir)
    try:
        resumed = run_sessions(record.spec, [(i, record.seeds[i], record.session_dir(i), has_ckpt[i]) for i in todo])
    except Interrupted as stopped:
        raise Interrupted(resume_hint(str(stopped), record.dir)) from None
    every = range(len(record.seeds))
    if not all(record.finished(i) for i in every):
        return TrialResult(record.spec, resumed, record.dir)
    result = TrialResult(record.spec, [load_result(record, i) for i in every], record.dir)
    write_trial(result)
    return result
