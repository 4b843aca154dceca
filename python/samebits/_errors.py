"""The samebits exception classes; the C++ library's exceptions arrive as these, messages unchanged.

Each class is also the built-in exception a Python caller expects for that kind of error:
InvalidArgument is a ValueError, IndexOutOfRange an IndexError (and an InvalidArgument, as in C++),
NondeterministicError a RuntimeError.
"""
import builtins


class Error(Exception):
    """Base of every exception samebits raises."""


class InvalidArgument(Error, ValueError):
    """An argument is malformed: shape, dtype, device, dim or option mismatch."""


class IndexOutOfRange(InvalidArgument, IndexError):
    """An index lies outside the tensor it addresses. Nothing was written."""


class NondeterministicError(Error, RuntimeError):
    """No variant of an op meets the requested determinism level on this backend."""


class BackendUnavailable(Error, RuntimeError):
    """The backend (CUDA) is not compiled in, or no device is present."""


class CudaError(Error, RuntimeError):
    """A CUDA runtime or library call failed."""


class OverflowError(Error, builtins.OverflowError):
    """Exact accumulation ran out of range."""


class DataError(Error, ValueError):
    """A data file could not be read or is malformed."""
