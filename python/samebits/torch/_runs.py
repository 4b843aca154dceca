"""What calibrate and find_nondeterminism share: checking the function and the number of runs
they are given, and seeding the generators before each run."""
from __future__ import annotations

import random
import sys
from typing import Any

import torch


def check_runs(who: str, fn: Any, runs: Any, why: str) -> None:
    """Raises TypeError unless fn is callable and runs an int (not a bool), ValueError when runs
    is below 2 (`why` says what the runs are compared for)."""
    if not callable(fn):
        raise TypeError(f"{who}: fn must be callable, not {type(fn).__name__}")
    if not isinstance(runs, int) or isinstance(runs, bool):
        raise TypeError(f"{who}: runs must be an int, not {type(runs).__name__}")
    if runs < 2:
        raise ValueError(f"{who}: runs={runs}; {why} needs at least 2 runs")


def seed_generators(seed: int) -> None:
    """Seeds Python's and torch's generators, and NumPy's when it is loaded."""
    random.seed(seed)
    torch.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed)
