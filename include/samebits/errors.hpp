// The samebits exception hierarchy. Every error says what was wrong and, where it can, what to do.
#pragma once
#include <stdexcept>
#include <string>

namespace samebits {

// Base of every exception samebits throws.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// An argument is malformed: shape, dtype, device, dim or option mismatch.
class InvalidArgument : public Error {
public:
  using Error::Error;
};

// An index value lies outside the range of the tensor it addresses. Nothing was written.
class IndexOutOfRange : public InvalidArgument {
public:
  using InvalidArgument::InvalidArgument;
};

// No variant of an op meets the requested determinism level on this backend.
class NondeterministicError : public Error {
public:
  using Error::Error;
};

// The backend (for example CUDA) is not compiled in or no device is present.
class BackendUnavailable : public Error {
public:
  using Error::Error;
};

// A CUDA runtime or library call failed; the message names the call and the CUDA error.
class CudaError : public Error {
public:
  using Error::Error;
};

// Exact accumulation ran out of range (for example a fixed-point accumulator overflowed).
class OverflowError : public Error {
public:
  using Error::Error;
};

// A data file could not be read or is malformed; the message names the file and the line.
class DataError : public Error {
public:
  using Error::Error;
};

} // namespace samebits
