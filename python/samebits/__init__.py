"""samebits: bitwise-reproducible numerical ops on CPUs and CUDA GPUs.

The core API (levels, the mode, the environment report, the index plan and errors) lives here;
samebits.torch holds the PyTorch custom ops. Importing samebits needs no GPU and no torch (an
installed torch is loaded first, see below).

    import samebits
    samebits.set_determinism("portable")
    with samebits.determinism(samebits.Level.run_to_run):
        ...
"""
import contextlib as _contextlib
import enum as _enum
import importlib.util as _importlib_util
import json as _json
import os as _os
import sys as _sys

# Where torch is installed, it is loaded before the extension. Both link the CUDA libraries
# (runtime, cuBLAS, cuBLASLt) by the same names, and whichever process-wide copy loads first
# serves both: the extension loaded first would put torch on the CUDA toolkit's copies rather
# than the ones its wheel ships (on the H200 machine, processes that imported samebits before
# torch aborted with "free(): invalid pointer"; torch first, they ran).
if _importlib_util.find_spec("torch") is not None:
    import torch as _torch  # noqa: F401

from . import _core
from ._errors import (BackendUnavailable, CudaError, DataError, Error, IndexOutOfRange,
                      InvalidArgument, NondeterministicError, OverflowError)

__version__ = _core.version()

__all__ = [
    "Level", "set_determinism", "determinism", "get_determinism", "explain", "doctor",
    "IndexPlan", "cuda_available", "content_hash", "set_cuda_index_checks", "cuda_index_checks",
    "index_checks", "check_index_errors", "Error", "InvalidArgument", "IndexOutOfRange",
    "NondeterministicError", "BackendUnavailable", "CudaError", "OverflowError", "DataError",
]


class Level(str, _enum.Enum):
    """Determinism levels, weakest first; a level is met by any variant at or above it.

    Members compare equal to their names, so "portable" works wherever Level.portable does.
    """
    not_guaranteed = "not_guaranteed"
    run_to_run = "run_to_run"
    portable = "portable"

    def __str__(self):
        return self.value


def _level_name(level):
    """A level's name for the C++ side (None stays None: the thread's mode decides)."""
    if level is None:
        return None
    if isinstance(level, Level):
        return level.value
    if isinstance(level, str):
        try:
            return Level(level).value
        except ValueError:
            pass
    raise InvalidArgument(f"unknown determinism level {level!r} (not_guaranteed, run_to_run or "
                          "portable)")


def set_determinism(level, warn_only=False):
    """Sets the process-wide level. warn_only: when no variant meets it, warn once per op and run
    the best there is instead of raising NondeterministicError."""
    _core.set_determinism(_level_name(level), bool(warn_only))


def get_determinism():
    """(level, warn_only) that a call on this thread gets: the innermost `determinism` context,
    else the process-wide mode."""
    name, warn_only = _core.effective_mode(None)
    return Level(name), warn_only


@_contextlib.contextmanager
def determinism(level, warn_only=None):
    """Overrides the level on this thread inside the block (contexts nest), like the C++
    DeterminismGuard. warn_only None keeps the current setting."""
    guard = _core._Guard(_level_name(level), warn_only)
    with guard:
        yield Level(_level_name(level))


def set_cuda_index_checks(how):
    """How CUDA ops that check index values report a bad one (IndexOutOfRange), process-wide.
    Either way a bad index writes nothing.

    "wait" (the default): the op waits for its check and raises before it returns (one host round
    trip per call). "deferred": the op returns at once, as torch's own CUDA ops do; the first bad
    index the device finds is raised by the next samebits CUDA op that checks indices, or by
    check_index_errors(). The CPU always raises before it returns.
    """
    _core.set_cuda_index_checks(str(how))


def cuda_index_checks():
    """"wait" or "deferred" (see set_cuda_index_checks)."""
    return _core.cuda_index_checks()


@_contextlib.contextmanager
def index_checks(how):
    """set_cuda_index_checks(how) inside the block; the previous setting after it."""
    was = cuda_index_checks()
    set_cuda_index_checks(how)
    try:
        yield how
    finally:
        set_cuda_index_checks(was)


def check_index_errors(device=None):
    """Waits for a CUDA device (an int, "cuda:N" or torch.device; None or "cuda": the current
    device) and raises its deferred index error, if a check found one. Nothing for the CPU."""
    if not cuda_available():
        return
    if isinstance(device, int):
        index = device
    else:
        text = "cuda" if device is None else str(device)
        if text == "cpu":
            return
        index = int(text.split(":")[1]) if ":" in text else _core.current_cuda_device()
    _core.check_index_errors(index)


def explain():
    """What the last samebits op called on this thread ran, and why."""
    return _core.last_explain()


def cuda_available():
    """True when the CUDA backend is compiled in and a device is present."""
    return _core.cuda_available()


def content_hash(array):
    """64-bit hash of an array's dtype, shape and values (row-major; independent of strides and
    device), as 16 hex digits: the same hash the C++ library and the samebits CLI print."""
    return _core.hash_hex(_core.content_hash(array))


IndexPlan = _core.IndexPlan
IndexPlan.__doc__ = """IndexPlan(index, num_targets, stream=0): built once from an index vector
(int32/int64, values in [0, num_targets)), reused across calls. `order` is the stable sort
permutation (int64[n]) and `offsets` the CSR offsets (int64[num_targets + 1]), as DLPack arrays
(torch.from_dlpack / numpy.from_dlpack take them without a copy). plan.index_add(out, src) adds
src's rows into out through the plan, with no sort."""


def _torch_settings(torch):
    """The torch settings that change results."""
    settings = {
        "version": torch.__version__,
        "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "CUBLAS_WORKSPACE_CONFIG": _os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        "cuda_available": torch.cuda.is_available(),
    }
    warnings = []
    if settings["cudnn.benchmark"]:
        warnings.append("torch.backends.cudnn.benchmark is on: cuDNN picks algorithms by timing")
    if settings["cuda.matmul.allow_tf32"] or settings["float32_matmul_precision"] != "highest":
        warnings.append("TF32 matmul is allowed: float32 products are computed at lower precision")
    if not settings["use_deterministic_algorithms"]:
        warnings.append("torch.use_deterministic_algorithms is off: torch's own ops may vary")
    return settings, warnings


def doctor(text=False):
    """The environment report (what decides whether results reproduce here) as a dict: the
    library's build, the CPU's floating-point flags, the GPUs, result-affecting variables, the
    mode and the promise. When torch has been imported, "torch" holds its settings. text=True
    returns the human-readable report instead (as `samebits doctor` prints it)."""
    if text:
        return _core.environment_text()
    report = _json.loads(_core.environment_json())
    torch = _sys.modules.get("torch")
    if torch is not None:
        report["torch"], torch_warnings = _torch_settings(torch)
        report.setdefault("warnings", []).extend(torch_warnings)
    return report
