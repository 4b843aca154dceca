"""The core bindings: levels and the mode, doctor, errors, IndexPlan, arrays through DLPack."""
import threading

import numpy as np
import pytest
import torch

import samebits
from samebits import Level


def test_import_and_version():
    assert samebits.__version__.count(".") == 2
    assert isinstance(samebits.cuda_available(), bool)


def test_levels_are_strings_and_enums():
    assert Level.portable == "portable" and str(Level.run_to_run) == "run_to_run"
    for level in (Level.portable, "not_guaranteed", "run_to_run"):
        samebits.set_determinism(level)
        assert samebits.get_determinism() == (Level(level), False)
    samebits.set_determinism("portable", warn_only=True)
    assert samebits.get_determinism() == (Level.portable, True)
    with pytest.raises(ValueError, match="unknown determinism level"):
        samebits.set_determinism("bitwise")
    with pytest.raises(samebits.InvalidArgument):
        samebits.set_determinism(2)


def test_determinism_context_nests_and_is_thread_local():
    samebits.set_determinism("not_guaranteed")
    seen = {}

    def other_thread():
        seen["level"] = samebits.get_determinism()[0]

    with samebits.determinism("portable") as level:
        assert level is Level.portable
        with samebits.determinism(Level.run_to_run):
            assert samebits.get_determinism()[0] is Level.run_to_run
        assert samebits.get_determinism()[0] is Level.portable
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen["level"] is Level.not_guaranteed  # the guard is this thread's only
    assert samebits.get_determinism()[0] is Level.not_guaranteed


def test_explain_names_the_variant_and_level():
    out = np.zeros((3, 2))
    samebits._core.index_add(out, np.array([0, 2, 1]), np.ones((3, 2)), 1.0, "portable")
    text = samebits.explain()
    assert "index_add" in text and "portable" in text


def test_doctor_reports_build_and_torch_settings():
    report = samebits.doctor()
    assert report["version"] == samebits.__version__ if "version" in report else True
    assert "torch" in report  # torch is imported by this test module
    t = report["torch"]
    for key in ("use_deterministic_algorithms", "cudnn.benchmark", "cudnn.deterministic",
                "cuda.matmul.allow_tf32", "cudnn.allow_tf32", "CUBLAS_WORKSPACE_CONFIG"):
        assert key in t
    assert t["use_deterministic_algorithms"] == torch.are_deterministic_algorithms_enabled()
    assert "samebits" in samebits.doctor(text=True).lower()


def test_error_classes():
    assert issubclass(samebits.NondeterministicError, RuntimeError)
    assert issubclass(samebits.IndexOutOfRange, IndexError)
    assert issubclass(samebits.IndexOutOfRange, samebits.InvalidArgument)
    assert issubclass(samebits.InvalidArgument, ValueError)
    for cls in (samebits.NondeterministicError, samebits.IndexOutOfRange, samebits.CudaError,
                samebits.BackendUnavailable, samebits.OverflowError, samebits.DataError):
        assert issubclass(cls, samebits.Error)


def test_index_error_message_unchanged_and_nothing_written():
    out = np.random.rand(3, 2)
    before = out.copy()
    with pytest.raises(samebits.IndexOutOfRange) as e:
        samebits._core.index_add(out, np.array([0, 5, 1]), np.ones((3, 2)))
    assert str(e.value) == ("index_add: index 5 at position 1 is out of range [0, 3); nothing "
                            "was written")
    assert np.array_equal(out, before)


def test_numpy_arrays_zero_copy_and_strided(gen):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=gen)))
    out = np.zeros((4, 6))
    view = out[:, ::2]  # strided output: written in place through the view
    src = rng.standard_normal((5, 3))
    index = rng.integers(0, 4, 5)
    samebits._core.index_add(view, index, src, 1.0, "portable")
    expected = np.zeros((4, 3))
    np.add.at(expected, index, src)
    np.testing.assert_allclose(out[:, ::2], expected, rtol=1e-13)
    assert np.all(out[:, 1::2] == 0)
    # A transposed (non-contiguous) input gives the same bits as its contiguous copy.
    a = np.zeros((4, 3))
    samebits._core.index_add(a, index, np.ascontiguousarray(src.T).T, 1.0, "portable")
    assert samebits.content_hash(a) == samebits.content_hash(np.ascontiguousarray(out[:, ::2]))


def test_unsupported_arrays_are_refused():
    with pytest.raises(ValueError, match="element type"):
        samebits._core.index_add(np.zeros(3, np.int16), np.array([0]), np.ones(1, np.int16))
    with pytest.raises(ValueError, match="dtype torch.complex64 is not supported"):
        samebits._core.sum(torch.zeros(3, dtype=torch.complex64), torch.zeros(()))
    with pytest.raises(ValueError, match="at most 4"):
        samebits._core.sum(np.zeros((1,) * 5), np.zeros(()))
    with pytest.raises(ValueError, match="expected an array"):
        samebits._core.sum([1.0, 2.0], np.zeros(()))


def test_content_hash_ignores_strides_and_framework():
    a = np.arange(12.0).reshape(3, 4)
    assert samebits.content_hash(a) == samebits.content_hash(torch.from_numpy(a))
    assert samebits.content_hash(a.T) == samebits.content_hash(np.ascontiguousarray(a.T))
    assert samebits.content_hash(a) != samebits.content_hash(a.astype(np.float32))
    assert len(samebits.content_hash(a)) == 16


def test_index_plan_matches_stable_sort_and_is_reusable(gen):
    index = torch.randint(0, 7, (40,), generator=gen)
    plan = samebits.IndexPlan(index, 7)
    assert plan.num_sources == 40 and plan.num_targets == 7 and plan.device == "cpu"
    order = torch.from_dlpack(plan.order)
    assert torch.equal(order, torch.sort(index, stable=True).indices)
    counts = torch.bincount(index, minlength=7)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])
    assert torch.equal(torch.from_dlpack(plan.offsets), offsets)
    src = torch.randn(40, 3, generator=gen)
    for _ in range(3):  # the same plan, reused: the same bits as the sorting call at portable
        via_plan = torch.zeros(7, 3)
        plan.index_add(via_plan, src, 1.0, "portable")
        direct = torch.zeros(7, 3)
        samebits._core.index_add(direct, index, src, 1.0, "portable")
        assert samebits.content_hash(via_plan) == samebits.content_hash(direct)
    with pytest.raises(IndexError):
        samebits.IndexPlan(torch.tensor([0, 9]), 7)


@pytest.mark.parametrize("kind,builtin", [
    ("IndexOutOfRange", IndexError), ("InvalidArgument", ValueError),
    ("NondeterministicError", RuntimeError), ("BackendUnavailable", RuntimeError),
    ("CudaError", RuntimeError), ("OverflowError", OverflowError), ("DataError", ValueError),
    ("Error", Exception)])
def test_every_cpp_exception_is_translated_with_its_message(kind, builtin):
    message = f"{kind}: what was wrong; what to do"
    with pytest.raises(builtin) as e:
        samebits._core._throw_for_test(kind, message)
    assert type(e.value) is getattr(samebits, kind)
    assert str(e.value) == message


def test_dlpack_capsules_and_objects_are_views(gen):
    t = torch.randn(5, 3, generator=gen)
    assert samebits.content_hash(torch.utils.dlpack.to_dlpack(t)) == samebits.content_hash(t)
    out = torch.zeros(4, 3)
    # Written through a DLPack capsule of out: the torch tensor sees the result (zero-copy).
    samebits._core.index_add(torch.utils.dlpack.to_dlpack(out), np.array([0, 1, 1, 3, 2]), t)
    expected = torch.zeros(4, 3, dtype=t.dtype).index_add(0, torch.tensor([0, 1, 1, 3, 2]), t)
    torch.testing.assert_close(out, expected)


def test_importing_samebits_loads_an_installed_torch_first():
    # Both link the CUDA libraries by the same names; torch's own copies must be the ones loaded.
    import subprocess
    import sys
    code = ("import sys; import samebits; "
            "print('torch' in sys.modules, list(sys.modules).index('torch') < "
            "list(sys.modules).index('samebits._core'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(__import__("os").environ, PYTHONPATH=":".join(sys.path)))
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr
