"""Where the quality package keeps its files under a state directory: a leaf, so a
daemon names its calibration file without loading the calibration code."""

from __future__ import annotations

from pathlib import Path

__all__ = ["calibration_path", "shadow_path"]


def calibration_path(state_dir: Path) -> Path:
    """Where ``hostd calibrate`` writes the calibrated policy's maps, and reads them."""
    return state_dir / "calibration.json"


def shadow_path(state_dir: Path) -> Path:
    """The shadow store's file under ``state_dir``."""
    return state_dir / "shadow.db"
