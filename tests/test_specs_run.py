"""Every spec in spec/ loads, validates, and runs a few frames in test mode."""
from __future__ import annotations

from pathlib import Path

import pytest

from slm_lab_like.experiment.session import Session
from slm_lab_like.experiment.tournament import run_tournament
from slm_lab_like.spec.load import TEST_FRAMES, load_any, read_file, with_mode
from slm_lab_like.spec.schema import TournamentSpec
from slm_lab_like.spec.tournament import tournament_with_mode

ROOT = Path(__file__).resolve().parent.parent
SPECS = [(path, name) for path in sorted((ROOT / "spec").rglob("*.json")) for name in read_file(path)]


def test_there_are_specs() -> None:
    assert any(path.name == "demo.json" for path, _ in SPECS)


@pytest.mark.parametrize("path,name", SPECS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n in SPECS])
def test_spec_runs_in_test_mode(path: Path, name: str, tmp_path: Path) -> None:
    loaded = load_any(path, name)
    if isinstance(loaded, TournamentSpec):  # a tournament: a few games per table, then its leaderboard
        played = run_tournament(tournament_with_mode(loaded, "test"), tmp_path, "test")
        assert played.games and len(played.leaderboard) == len(loaded.tournament.players)
        assert (played.out_dir / "leaderboard.md").exists() and (played.out_dir / "winrate_matrix.png").exists()
        return
    spec = with_mode(loaded, "test")
    result = Session(spec, seed=1, out_dir=tmp_path).run()
    for e, frames in enumerate(result.env_frames):
        assert TEST_FRAMES <= frames < TEST_FRAMES + 64, f"env[{e}] ran {frames} frames"
    assert (tmp_path / "summary.json").exists()
