// Tensors: a non-owning strided view (what every op takes) and a small owning Tensor for tools,
// tests and the experiments. Strides are in elements. At most kMaxDims dimensions.
#pragma once
#include "samebits/dtype.hpp"
#include "samebits/errors.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace samebits {

// The most dimensions a tensor has; more is an InvalidArgument naming this limit. Four covers
// the graph, sequence and image workloads samebits targets; 5-D tensors (video, 3-D convolution)
// reach samebits' index and scatter ops after merging contiguous dimensions (reshape). Raising it
// widens every op's fixed 4-entry index geometry (CPU and CUDA) and each TensorView.
constexpr int kMaxDims = 4;
using Shape = std::vector<std::int64_t>;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  int ndim = 0;
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> strides{};

  // A contiguous (row-major) view of `data` with the given shape.
  static TensorView contiguous(void* data, DType dtype, Device device, const Shape& shape);
  template <class T>
  static TensorView of(T* data, const Shape& shape, Device device = Device::cpu()) {
    return contiguous(const_cast<std::remove_const_t<T>*>(data), dtype_of<std::remove_const_t<T>>(),
                      device, shape);
  }

  std::int64_t numel() const;
  std::int64_t size(int d) const { return shape[static_cast<std::size_t>(d < 0 ? d + ndim : d)]; }
  std::int64_t stride(int d) const {
    return strides[static_cast<std::size_t>(d < 0 ? d + ndim : d)];
  }
  Shape sizes() const { return Shape(shape.begin(), shape.begin() + ndim); }
  bool is_contiguous() const;
  bool empty() const { return numel() == 0; }
  bool defined() const { return data != nullptr || numel() == 0; }

  // Typed pointer; throws InvalidArgument if T does not match dtype.
  template <class T> T* ptr() const {
    if (dtype_of<T>() != dtype)
      throw_dtype_mismatch(dtype_of<T>());
    return static_cast<T*>(data);
  }
  // Offset (in elements) of a multi-index.
  std::int64_t offset(std::span<const std::int64_t> idx) const;

  // Views that share data.
  TensorView transpose(int d0, int d1) const;
  TensorView select(int dim, std::int64_t i) const; // drops `dim`
  TensorView slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;
  TensorView reshape(const Shape& shape) const; // contiguous views only

  std::string describe() const; // "f32[3, 4] cpu (strides 4, 1)"

private:
  [[noreturn]] void throw_dtype_mismatch(DType wanted) const;
};

// An owning tensor: contiguous, on the CPU or a CUDA device. Copying shares the storage.
class Tensor {
public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  // The same, for a CUDA tensor that work on `stream` uses. Device memory is cached per stream:
  // dropped, this tensor's memory is reused only by later allocations for `stream`, so only behind
  // the work already queued there. A tensor allocated without a stream belongs to the default
  // stream; drop it only once work on other streams that uses it has finished (for instance after
  // cudaStreamSynchronize), as with any stream-ordered allocator. With a stream created
  // non-blocking (which does not wait for the default stream), give every tensor it uses its
  // stream here.
  static Tensor empty(const Shape& shape, DType dtype, Device device, Stream stream);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype, Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, const Shape& shape,
                            Device device = Device::cpu()) {
    Tensor t = empty(shape, dtype_of<T>(), Device::cpu());
    if (static_cast<std::size_t>(t.numel()) != v.size())
      throw InvalidArgument("Tensor::from_vector: " + std::to_string(v.size()) +
                            " values do not fill the shape");
    std::copy(v.begin(), v.end(), t.data<T>());
    return device.is_cpu() ? t : t.to(device);
  }
  // A contiguous copy of any view, on `device`.
  static Tensor copy_of(const TensorView& v, Device device);
  static Tensor copy_of(const TensorView& v) { return copy_of(v, v.device); }
  // The same, allocated for `stream` (see empty); the copy itself is complete on return.
  static Tensor copy_of(const TensorView& v, Device device, Stream stream);

  const TensorView& view() const { return view_; }
  operator TensorView() const { return view_; } // NOLINT: tensors pass wherever views do
  // A default-constructed Tensor holds nothing: zero elements (its view would say one, as a 0-d
  // view).
  std::int64_t numel() const { return storage_ ? view_.numel() : 0; }
  DType dtype() const { return view_.dtype; }
  Device device() const { return view_.device; }
  int ndim() const { return view_.ndim; }
  Shape sizes() const { return view_.sizes(); }
  std::int64_t size(int d) const { return view_.size(d); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype()); }
  template <class T> T* data() const { return view_.ptr<T>(); }
  void* raw() const { return view_.data; }
  bool defined() const { return storage_ != nullptr || view_.numel() == 0; }

  Tensor to(Device device) const; // copy to another device (a cheap share if already there)
  Tensor clone() const { return copy_of(view_, device()); }
  template <class T> std::vector<T> to_vector() const {
    Tensor h = to(Device::cpu());
    return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
  }

private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

// Copies `src` into `dst` elementwise (same shape and dtype; any strides; any devices). The two
// may overlap: dst receives src's values as they were before the copy. Where dst reaches an
// element twice, the last in row-major order wins.
void copy(const TensorView& src, const TensorView& dst);
// Converts `src` into `dst` elementwise (same shape; floating dtypes: float32, float64, bfloat16,
// float16; any strides and devices): to float32/float64 exactly, to bfloat16/float16 rounded once
// to nearest even (subnormals kept, overflow to infinity), the same bits on the CPU and CUDA (see
// samebits/half.hpp).
void convert(const TensorView& src, const TensorView& dst);
// Fills `dst` with a value converted to its dtype: rounded once to a float dtype, or truncated
// toward zero for an integer dtype, which must hold it (else InvalidArgument; NaN fits no integer
// dtype).
void fill(const TensorView& dst, double value);
// 64-bit hash (XXH3) of a tensor's logical contents: dtype, shape and values in row-major order,
// independent of strides and device.
std::uint64_t content_hash(const TensorView& t);
// Formats a hash as 16 hex digits.
std::string hash_hex(std::uint64_t h);
// True if two tensors have the same dtype, shape and bit pattern.
bool bitwise_equal(const TensorView& a, const TensorView& b);

} // namespace samebits
