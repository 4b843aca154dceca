# samebits.torch.calibrate(fn, runs=N, path=...) (this module is samebits.torch.calibration, so that
# the module never shadows the function): runs fn N times, measures the run-to-run spread
# of each tensor it returns and writes tolerances in samebits' tolerance JSON format (the one
# `samebits calibrate` writes and samebits::load_tolerances reads; see
# include/samebits/tolerance.hpp). The rule is the C++ Calibrator's, element for element:
#   max_abs_diff = max over elements of (max - min over the runs)
#   max_rel_diff = max over elements of spread / max(|first run's value|, rel_floor * largest |value|)
# a NaN in some runs but not all makes the element's spread infinite, NaN in every run is no
# spread, and the tolerance is safety_factor times each. samebits.testing.assert_close checks
# against the file. Imports only torch and the standard library.
from __future__ import annotations

import json
import math
import os
import platform
from typing import Any, Callable

import torch

from .. import _files
from ._runs import check_runs, seed_generators

__all__ = ["calibrate", "Calibrator"]

RULE = "|actual - expected| <= abs + rel * |expected|, or both NaN, or equal"


def _named(result: Any) -> dict[str, torch.Tensor]:
    """fn's result as named tensors: a dict (nested names joined by '.'), a tensor ("output"), a
    list or tuple ("output.0", ...), or an nn.Module (its state_dict: parameters and buffers)."""
    if isinstance(result, torch.nn.Module):
        result = result.state_dict()
    if isinstance(result, torch.Tensor):
        return {"output": result}
    if isinstance(result, (list, tuple)):
        result = {f"output.{i}": t for i, t in enumerate(result)}
    if not isinstance(result, dict):
        raise TypeError(
            f"calibrate: fn returned {type(result).__name__}; return a tensor, a list or tuple "
            "of tensors, a dict of name -> tensor, or an nn.Module"
        )
    out: dict[str, torch.Tensor] = {}
    for name, v in result.items():
        if isinstance(v, dict):
            out.update({f"{name}.{k}": t for k, t in _named(v).items()})
        elif isinstance(v, torch.Tensor):
            out[str(name)] = v
        else:
            raise TypeError(f"calibrate: '{name}' is a {type(v).__name__}, not a tensor")
    return out


class _Spread:
    def __init__(self, first: torch.Tensor) -> None:
        self.shape = list(first.shape)
        self.first = first
        self.lo = first.clone()
        self.hi = first.clone()
        self.mixed_nan = torch.zeros_like(first, dtype=torch.bool)
        self.runs = 1


class Calibrator:
    """Observations of named tensors over runs, turned into tolerances (as samebits::Calibrator)."""

    def __init__(self, safety_factor: float = 4.0, rel_floor: float = 1e-3) -> None:
        for what, v in (("safety_factor", safety_factor), ("rel_floor", rel_floor)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"Calibrator: {what} is a number, not {type(v).__name__}")
        if not 0.0 <= rel_floor < math.inf:
            raise ValueError(f"Calibrator: rel_floor {rel_floor} is not a finite number >= 0")
        if not safety_factor >= 1.0:
            raise ValueError(f"Calibrator: safety factor {safety_factor} < 1")
        self.safety_factor = float(safety_factor)
        self.rel_floor = float(rel_floor)
        self._spreads: dict[str, _Spread] = {}

    def add(self, name: str, value: torch.Tensor) -> None:
        v = value.detach().to("cpu", torch.float64).reshape(-1)
        s = self._spreads.get(name)
        if s is None:
            sp = _Spread(v)
            sp.shape = list(value.shape)
            self._spreads[name] = sp
            return
        if list(value.shape) != s.shape:
            raise ValueError(
                f"Calibrator: tensor '{name}' had shape {_shape_text(s.shape)}, now "
                f"{_shape_text(list(value.shape))}"
            )
        s.mixed_nan |= torch.isnan(v) != torch.isnan(s.first)
        s.lo = torch.minimum(s.lo, v)  # NaN in every run stays NaN: no spread
        s.hi = torch.maximum(s.hi, v)
        s.runs += 1

    def tolerances(self, source: str = "") -> dict[str, Any]:
        tensors: dict[str, Any] = {}
        runs = 0
        for name, s in sorted(self._spreads.items()):
            runs = max(runs, s.runs)
            lo = torch.where(s.mixed_nan, -math.inf, s.lo)
            hi = torch.where(s.mixed_nan, math.inf, s.hi)
            finite = s.first[torch.isfinite(s.first)]
            largest = float(finite.abs().max()) if finite.numel() else 0.0
            floor = max(self.rel_floor * largest, 1e-300)
            counted = ~(torch.isnan(s.first) & torch.isnan(lo))  # NaN in every run: skipped
            spread = torch.where(hi == lo, 0.0, hi - lo)[counted]
            first = s.first[counted].abs()
            # As the C++ std::max(|first|, floor): a NaN first value stays NaN, and the NaN
            # ratio it gives is then ignored.
            denom = torch.where(first < floor, floor, first)
            ratio = spread / denom
            ratio = ratio[~torch.isnan(ratio)]
            max_abs = float(spread.max()) if spread.numel() else 0.0
            max_rel = float(ratio.max()) if ratio.numel() else 0.0
            max_abs, max_rel = max(max_abs, 0.0), max(max_rel, 0.0)
            tensors[name] = {
                "shape": s.shape,
                "max_abs_diff": max_abs,
                "max_rel_diff": max_rel,
                "abs": self.safety_factor * max_abs,
                "rel": self.safety_factor * max_rel,
            }
        return {
            "samebits_tolerances": 1,
            "safety_factor": self.safety_factor,
            "runs": runs,
            "source": source,
            "rule": RULE,
            "tensors": tensors,
            "environment": _environment(),
        }


def _shape_text(shape: list[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _environment() -> dict[str, Any]:
    return {
        "writer": "samebits.torch.calibrate",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available()
        else [],
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "inf"  # as the C++ writer: JSON has no infinity, and NaN never arises here
    if isinstance(v, dict):
        return {k: _json_number(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_number(x) for x in v]
    return v


def to_json(tolerances: dict[str, Any]) -> str:
    return json.dumps(_json_number(tolerances), indent=2, sort_keys=True)


def save(tolerances: dict[str, Any], path: str | os.PathLike) -> None:
    """Writes the file whole or not at all (through `path`.partial), by the rule of
    samebits._files (a link stays a link; no folder is created)."""
    target = _files.output_target(path, "samebits.torch.calibrate")
    with open(target + ".partial", "w", encoding="utf-8") as f:
        f.write(to_json(tolerances) + "\n")
    _files.commit(target)


def calibrate(
    fn: Callable[..., Any],
    runs: int = 20,
    path: str | os.PathLike | None = None,
    *,
    args: tuple = (),
    kwargs: dict | None = None,
    safety_factor: float = 4.0,
    rel_floor: float = 1e-3,
    seed: int | None = 0,
    source: str | None = None,
) -> dict[str, Any]:
    """Runs fn(*args, **kwargs) `runs` times (each after seeding Python's, torch's and NumPy's
    generators with `seed`, unless seed=None) and returns the tolerances of the tensors it
    returns, as the JSON object samebits' tolerance files hold; writes it to `path` when given.

        tol = samebits.torch.calibrate(train_and_return_model, runs=20, path="tol.json")
        samebits.testing.assert_close(model.lin.weight, reference, "tol.json", "lin.weight")

    A deterministic fn calibrates to zero: the check then demands the same values."""
    check_runs("calibrate", fn, runs, "a spread")
    if path is not None:  # refused before fn runs, not after
        path = _files.output_target(path, "samebits.torch.calibrate")
    cal = Calibrator(safety_factor, rel_floor)
    for _ in range(runs):
        if seed is not None:
            seed_generators(seed)
        for name, t in _named(fn(*args, **(kwargs or {}))).items():
            cal.add(name, t)
    name = getattr(fn, "__qualname__", type(fn).__name__)
    t = cal.tolerances(source if source is not None else f"samebits.torch.calibrate({name})")
    if path is not None:
        save(t, path)
    return t
