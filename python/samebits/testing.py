# samebits.testing: assert_close(actual, expected, tolerances) for pytest, against tolerances
# calibrated from measured run-to-run spread (samebits.torch.calibrate, `samebits calibrate`).
# The check and its failure message are the C++ helper's (samebits::check_close and
# include/samebits/tolerance_gtest.hpp): element i passes when both are NaN, or they are equal,
# or |actual - expected| <= abs + rel * |expected|; integers compare exactly as integers.
#
#   tol = samebits.testing.load_tolerances("tests/data/sage_tolerances.json")
#   samebits.testing.assert_close(weights, reference, tol, "conv1.weight")
#
# Imports only torch and the standard library.
from __future__ import annotations

import json
import math
import os
from typing import Any

import torch

__all__ = ["assert_close", "check_close", "load_tolerances", "CloseResult"]


def load_tolerances(path: str | os.PathLike) -> dict[str, Any]:
    """Reads a tolerance file; ValueError naming the file when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            t = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot open tolerance file '{path}': {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: tolerance file: not JSON ({e})") from None
    if not isinstance(t, dict) or "samebits_tolerances" not in t:
        raise ValueError(f"{path}: not a samebits tolerance file (no samebits_tolerances key)")
    return t


def _num(v: Any) -> float:
    return math.inf if v == "inf" else float(v)


def _tolerance(tolerances: Any, name: str | None) -> tuple[dict[str, Any], str]:
    """The tolerance of tensor `name` and how to name it in a message."""
    if isinstance(tolerances, (str, os.PathLike)):
        tolerances = load_tolerances(tolerances)
    if isinstance(tolerances, dict) and "tensors" in tolerances:
        tensors = tolerances["tensors"]
        if name is None and len(tensors) == 1:
            name = next(iter(tensors))
        if name is None:
            known = ", ".join(sorted(tensors))
            raise KeyError(f"the calibration holds {len(tensors)} tensors: name one "
                           f"(assert_close(actual, expected, tolerances, name)); it has: {known}")
        if name not in tensors:
            known = ", ".join(sorted(tensors)) or "(none)"
            raise KeyError(f"no tolerance for tensor '{name}'; the calibration has: {known}")
        return tensors[name], f"tolerances['{name}']"
    if isinstance(tolerances, dict) and "abs" in tolerances and "rel" in tolerances:
        return tolerances, "tolerance"
    raise TypeError(
        "assert_close: tolerances must be a tolerance file's path, its contents "
        "(load_tolerances), or one tensor's entry ({'abs': ..., 'rel': ...})"
    )


class CloseResult:
    """As samebits::CloseResult: ok, elements, failures, first_failure, worst, message."""

    def __init__(self) -> None:
        self.ok = True
        self.elements = 0
        self.failures = 0
        self.first_failure = -1
        self.worst = -1
        self.worst_actual = self.worst_expected = self.worst_allowed = 0.0
        self.message = ""


def _describe(t: torch.Tensor) -> str:
    # As samebits' TensorView::describe(): dtype[dims] device, and the strides when not dense.
    dims = ", ".join(str(s) for s in t.shape)
    dev = "cpu" if t.device.type == "cpu" else f"{t.device.type}:{t.device.index or 0}"
    strides = "" if t.is_contiguous() else " (strides " + ", ".join(map(str, t.stride())) + ")"
    return f"{str(t.dtype).removeprefix('torch.')}[{dims}] {dev}{strides}"


def _shape_text(shape: Any) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _index_text(flat: int, shape: list[int]) -> str:
    if not shape:
        return "[]"
    idx = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        idx[d] = flat % shape[d] if shape[d] else 0
        flat = flat // shape[d] if shape[d] else 0
    return "[" + ", ".join(map(str, idx)) + "]"


def check_close(actual: torch.Tensor, expected: torch.Tensor, tol: dict[str, Any]) -> CloseResult:
    """samebits::check_close: any devices and strides; same shape; float or integer dtypes."""
    r = CloseResult()
    if list(actual.shape) != list(expected.shape):
        r.ok = False
        r.message = f"shapes differ: actual {_describe(actual)}, expected {_describe(expected)}"
        return r
    shape = tol.get("shape") or []
    if shape and list(shape) != list(actual.shape):
        r.ok = False
        r.message = (
            f"the tolerance was calibrated for shape {_shape_text(shape)}, the tensors are "
            f"{_shape_text(actual.shape)}"
        )
        return r
    t_abs, t_rel = _num(tol["abs"]), _num(tol["rel"])
    integers = not (actual.is_floating_point() or expected.is_floating_point())
    a = actual.detach().to("cpu", torch.float64).reshape(-1)
    e = expected.detach().to("cpu", torch.float64).reshape(-1)
    r.elements = a.numel()
    if integers:
        ai = actual.detach().to("cpu", torch.int64).reshape(-1)
        ei = expected.detach().to("cpu", torch.int64).reshape(-1)
        differ = ai != ei
        # |a - e| without overflow, rounded once to a double (Python integers are exact).
        diff = torch.tensor(
            [float(abs(x - y)) for x, y in zip(ai[differ].tolist(), ei[differ].tolist())],
            dtype=torch.float64,
        )
    else:
        differ = ~((torch.isnan(a) & torch.isnan(e)) | (a == e))
        diff = (a[differ] - e[differ]).abs()
    where = torch.nonzero(differ).reshape(-1)
    if math.isinf(t_abs) or math.isinf(t_rel):
        allowed = torch.full_like(diff, math.inf)
    else:
        allowed = t_abs + t_rel * e[differ].abs()
    fail = ~(diff <= allowed)  # NaN on one side, or inf against a finite value, fails
    r.failures = int(fail.sum())
    r.ok = r.failures == 0
    if r.ok:
        return r
    idx = where[fail]
    d, al = diff[fail], allowed[fail]
    ratio = torch.where(al > 0, d / al, math.inf)
    # The C++ loop's choice: the last NaN ratio if there is one, else the first largest.
    nan = torch.nonzero(torch.isnan(ratio)).reshape(-1)
    k = int(nan[-1]) if nan.numel() else int(torch.argmax(torch.where(ratio == ratio.max(), 1, 0)))
    worst_ratio = math.inf if nan.numel() else float(ratio[k])
    r.first_failure = int(idx[0])
    r.worst = int(idx[k])
    r.worst_actual, r.worst_expected = float(a[r.worst]), float(e[r.worst])
    r.worst_allowed = float(al[k])
    s = list(actual.shape)
    r.message = (
        f"{r.failures} of {r.elements} elements differ by more than abs {t_abs:.3g} + rel "
        f"{t_rel:.3g} * |expected|; worst at {_index_text(r.worst, s)}: actual "
        f"{r.worst_actual:.9g}, expected {r.worst_expected:.9g}, difference "
        f"{abs(r.worst_actual - r.worst_expected):.3g}, allowed {r.worst_allowed:.3g} "
        f"({worst_ratio:.3g}x); first at {_index_text(r.first_failure, s)}"
    )
    return r


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerances: Any,
    name: str | None = None,
) -> None:
    """Fails (AssertionError) unless `actual` is within the calibrated tolerance of `expected`.

    tolerances: a tolerance file's path, its contents (load_tolerances) with `name` choosing the
    tensor (optional when the file holds one), or one tensor's entry {'abs': .., 'rel': ..}.
    The message is the C++ helper's: which elements fail, the worst (index, both values, the
    difference and what was allowed) and the first."""
    for what, t in (("actual", actual), ("expected", expected)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"assert_close: {what} must be a torch.Tensor, not "
                            f"{type(t).__name__} (torch.as_tensor converts arrays and lists)")
    tol, tol_name = _tolerance(tolerances, name)
    r = check_close(actual, expected, tol)
    if not r.ok:
        where = f" (tensor '{name}')" if name is not None else ""
        raise AssertionError(
            f"actual is not close to expected within {tol_name}: {r.message}{where}"
        )
