# samebits.torch.calibrate and samebits.testing.assert_close: the C++ Calibrator's rule (spread,
# relative floor, NaN), the tolerance file the C++ reader reads (tests/data/
# tolerances_from_python.json, which tests/test_tolerance_python.cpp loads and recomputes with
# the C++ Calibrator), and the C++ helper's failure message, word for word.
import json
import math
import os
from pathlib import Path

import pytest
import torch

from samebits.testing import assert_close, check_close, load_tolerances
from samebits.torch.calibration import calibrate, to_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "tolerances_from_python.json"


def fixture_runs():
    """Four runs' tensors; tests/test_tolerance_python.cpp builds the same values."""
    runs = iter(range(4))

    def fn():
        k = next(runs)
        w = torch.tensor([[1.0, -2.0], [4.0, 0.0]], dtype=torch.float64)
        w = w + k * torch.tensor([[1e-6, 0.0], [-3e-6, 2e-9]], dtype=torch.float64)
        b = torch.tensor([0.5, math.nan, math.nan if k == 2 else 3.0])
        return {"w": w, "b": b, "steps": torch.tensor([7, 8])}

    return fn


def test_calibration_writes_the_checked_in_file_the_cpp_reader_reads(tmp_path):
    path = tmp_path / "tol.json"
    t = calibrate(fixture_runs(), runs=4, path=str(path), seed=None,
                  source="python/tests/test_testing.py fixture")
    written = json.loads(path.read_text())
    assert written["environment"]["writer"] == "samebits.torch.calibrate"
    written.pop("environment")
    assert written == json.loads(FIXTURE.read_text())
    w = t["tensors"]["w"]
    assert w["max_abs_diff"] == pytest.approx(9e-6) and w["max_rel_diff"] == pytest.approx(3e-6)
    assert w["abs"] == 4 * w["max_abs_diff"] and w["shape"] == [2, 2]
    # NaN in one run only: an infinite tolerance ("inf" in the file); NaN in every run: none.
    assert t["tensors"]["b"]["abs"] == math.inf and written["tensors"]["b"]["abs"] == "inf"
    assert t["tensors"]["steps"] == {"shape": [2], "max_abs_diff": 0.0, "max_rel_diff": 0.0,
                                     "abs": 0.0, "rel": 0.0}


def test_a_deterministic_function_calibrates_to_zero_and_then_demands_equality(tmp_path):
    def train():
        model = torch.nn.Linear(6, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(10, 6)
        for _ in range(3):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        return model

    path = str(tmp_path / "tol.json")
    t = calibrate(train, runs=3, path=path)
    assert set(t["tensors"]) == {"weight", "bias"}
    assert all(v["abs"] == 0 and v["rel"] == 0 for v in t["tensors"].values())
    torch.manual_seed(0)
    reference = train().weight.detach()
    assert_close(reference.clone(), reference, path, "weight")
    nudged = reference.clone()
    nudged[1, 2] = torch.nextafter(nudged[1, 2], torch.tensor(10.0))
    with pytest.raises(AssertionError, match=r"1 of 18 elements .* worst at \[1, 2\]"):
        assert_close(nudged, reference, path, "weight")


def test_spread_grows_the_tolerance_with_the_safety_factor():
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    base = torch.randn(50, generator=g, dtype=torch.float64) + 3.0
    noise = [torch.randn(50, generator=g, dtype=torch.float64) * 1e-7 for _ in range(5)]
    it = iter(noise)
    t = calibrate(lambda: base + next(it), runs=5, safety_factor=2.0, seed=None)
    stacked = torch.stack([base + n for n in noise])
    spread = stacked.max(0).values - stacked.min(0).values
    tol = t["tensors"]["output"]
    assert tol["max_abs_diff"] == pytest.approx(float(spread.max()), rel=1e-12)
    floor = 1e-3 * float((base + noise[0]).abs().max())
    rel = float((spread / (base + noise[0]).abs().clamp(min=floor)).max())
    assert tol["max_rel_diff"] == pytest.approx(rel, rel=1e-12)
    assert tol["abs"] == 2.0 * tol["max_abs_diff"]
    # Every run is within the tolerance of every other.
    for run in stacked:
        assert_close(run, stacked[0], tol)


E = torch.tensor([1.0, 100.0, math.nan, 0.0, 5.0, 6.0]).view(2, 3)
BAD = torch.tensor([1.005, 102.0, 1.0, 0.0009, 5.0, 6.5]).view(2, 3)
TOL = {"abs": 1e-3, "rel": 1e-2}

# The messages of samebits::check_close for the same tensors (tests/test_tolerance_python.cpp).
CPP_MESSAGES = [
    (BAD, E, TOL, "3 of 6 elements differ by more than abs 0.001 + rel 0.01 * |expected|; worst "
     "at [0, 2]: actual 1, expected nan, difference nan, allowed nan (infx); first at [0, 1]"),
    (E, BAD, TOL, "3 of 6 elements differ by more than abs 0.001 + rel 0.01 * |expected|; worst "
     "at [0, 2]: actual nan, expected 1, difference nan, allowed 0.011 (infx); first at [0, 1]"),
    (torch.tensor([3, 2**60]), torch.tensor([3, 2**60 + 5]), {"abs": 1, "rel": 0},
     "1 of 2 elements differ by more than abs 1 + rel 0 * |expected|; worst at [1]: actual "
     "1.1529215e+18, expected 1.1529215e+18, difference 0, allowed 1 (5x); first at [1]"),
]


@pytest.mark.parametrize("actual,expected,tol,message", CPP_MESSAGES)
def test_the_message_is_the_cpp_helpers(actual, expected, tol, message):
    r = check_close(actual, expected, tol)
    assert not r.ok and r.message == message
    with pytest.raises(AssertionError) as e:
        assert_close(actual, expected, tol)
    assert str(e.value) == f"actual is not close to expected within tolerance: {message}"


def test_passes_within_and_names_the_tensor_and_the_shape():
    ok = torch.tensor([1.005, 100.9, math.nan, 0.0009, 5.0, 6.0]).view(2, 3)
    assert check_close(ok, E, TOL).ok
    assert_close(ok, E, TOL)
    assert_close(E.t(), E.t().contiguous(), {"abs": 0, "rel": 0})  # strided: logical contents
    t = load_tolerances(FIXTURE)
    with pytest.raises(AssertionError, match=r"within tolerances\['w'\]: .*\(tensor 'w'\)$"):
        assert_close(torch.zeros(2, 2), torch.ones(2, 2), t, "w")
    with pytest.raises(AssertionError, match=r"calibrated for shape \[2, 2\], the tensors are \[4\]"):
        assert_close(torch.zeros(4), torch.zeros(4), t, "w")
    with pytest.raises(AssertionError, match=r"shapes differ: actual float32\[4\] cpu, expected "
                                             r"float32\[2, 2\] cpu"):
        assert_close(torch.zeros(4), torch.zeros(2, 2), TOL)
    with pytest.raises(KeyError, match="no tolerance for tensor 'x'; the calibration has: b, "
                                       "steps, w"):
        assert_close(E, E, t, "x")
    with pytest.raises(KeyError, match="holds 3 tensors: name one .*it has: b, steps, w"):
        assert_close(E, E, t)
    for bad in (E.numpy(), E.tolist(), 1.0):
        with pytest.raises(TypeError, match="actual must be a torch.Tensor"):
            assert_close(bad, E, TOL)
        with pytest.raises(TypeError, match="expected must be a torch.Tensor"):
            assert_close(E, bad, TOL)
    # NaN-calibrated (infinite) tolerance lets everything through but NaN on one side.
    assert check_close(torch.tensor([1e30, 7.0, -4.0]), torch.tensor([0.5, 0.0, 3.0]),
                       t["tensors"]["b"]).ok
    assert not check_close(torch.tensor([math.nan]), torch.tensor([0.0]),
                           {"abs": "inf", "rel": 0}).ok
