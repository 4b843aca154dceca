// CPU implementations of the GraphSAGE kernels (float and double), and the device switch that
// forwards CUDA tensors to kernels::cuda (src/cuda/nn.cu; without CUDA src/nn/nocuda/kernels.cpp,
// which throws BackendUnavailable). Work is split into row blocks on the thread pool;
// every element's value depends on the data alone, never on the thread that computed it.
#include "nn/kernels.hpp"

#include "samebits/errors.hpp"
#include "samebits/threads.hpp"

#include <fmt/format.h>
#include <functional>
#include <vector>

namespace samebits::nn::kernels {

namespace {

constexpr std::int64_t kRowsPerTask = 128;

void for_row_blocks(std::int64_t rows, std::int64_t rows_per_task,
                    const std::function<void(std::int64_t, std::int64_t)>& f) {
  const std::int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  if (tasks <= 1) {
    if (rows > 0)
      f(0, rows);
    return;
  }
  parallel_for(tasks, [&](std::int64_t t) {
    f(t * rows_per_task, std::min(rows, (t + 1) * rows_per_task));
  });
}

template <class F> void visit(DType t, const char* op, F&& f) {
  if (t == DType::f32)
    return f.template operator()<float>();
  if (t == DType::f64)
    return f.template operator()<double>();
  throw InvalidArgument(fmt::format("{}: float32 or float64 expected", op));
}

void require_f32(const TensorView& t, const char* op) {
  if (t.dtype != DType::f32)
    throw InvalidArgument(
        fmt::format("{}: the CUDA kernels of the GraphSAGE model take float32", op));
}

// One output row, columns [c0, c0 + W) of both products: acc[j] = sum over k ascending of
// v_k * src[col_k, c0 + j]. A compile-time W keeps the accumulators in registers and lets the
// compiler vectorize across columns; each element still sees its additions in ascending k.
template <class T, int W, bool Unit>
void spmm_row(std::int64_t k0, std::int64_t k1, const std::int32_t* cols, const T* vals, const T* a,
              const T* b, std::int64_t h, std::int64_t c0, T* oa, T* ob) {
  T acc_a[W], acc_b[W];
  for (int j = 0; j < W; ++j)
    acc_a[j] = acc_b[j] = T(0);
  for (std::int64_t k = k0; k < k1; ++k) {
    const std::int64_t base = std::int64_t{cols[k]} * h + c0;
    if constexpr (Unit) {
      for (int j = 0; j < W; ++j)
        acc_a[j] = acc_a[j] + a[base + j];
      for (int j = 0; j < W; ++j)
        acc_b[j] = acc_b[j] + b[base + j];
    } else {
      const T v = vals[k];
      for (int j = 0; j < W; ++j)
        acc_a[j] = acc_a[j] + v * a[base + j];
      for (int j = 0; j < W; ++j)
        acc_b[j] = acc_b[j] + v * b[base + j];
    }
  }
  for (int j = 0; j < W; ++j)
    oa[c0 + j] = acc_a[j];
  for (int j = 0; j < W; ++j)
    ob[c0 + j] = acc_b[j];
}

// The same for one column (the tail when the width is not a multiple of W).
template <class T>
void spmm_column(std::int64_t k0, std::int64_t k1, const std::int32_t* cols, const T* vals,
                 const T* a, const T* b, std::int64_t h, std::int64_t c, T* oa, T* ob) {
  T acc_a = T(0), acc_b = T(0);
  for (std::int64_t k = k0; k < k1; ++k) {
    const std::int64_t base = std::int64_t{cols[k]} * h + c;
    const T v = vals == nullptr ? T(1) : vals[k]; // 1 * x is exact: same bits as the unit path
    acc_a = acc_a + v * a[base];
    acc_b = acc_b + v * b[base];
  }
  oa[c] = acc_a;
  ob[c] = acc_b;
}

template <class T>
void spmm_cpu(const DeviceCsr& m, const TensorView& a, const TensorView& b, const TensorView& out_a,
              const TensorView& out_b) {
  constexpr int W = 8;
  const std::int64_t h = a.size(1);
  const auto* off = m.offsets.data<std::int64_t>();
  const auto* cols = m.cols.data<std::int32_t>();
  const T* vals = m.unit ? nullptr : m.values.data<T>();
  const T* pa = a.ptr<T>();
  const T* pb = b.ptr<T>();
  T* oa = out_a.ptr<T>();
  T* ob = out_b.ptr<T>();
  for_row_blocks(m.rows, 64, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t c0 = 0;
      for (; c0 + W <= h; c0 += W) {
        if (vals == nullptr)
          spmm_row<T, W, true>(off[r], off[r + 1], cols, vals, pa, pb, h, c0, oa + r * h,
                               ob + r * h);
        else
          spmm_row<T, W, false>(off[r], off[r + 1], cols, vals, pa, pb, h, c0, oa + r * h,
                                ob + r * h);
      }
      for (; c0 < h; ++c0)
        spmm_column<T>(off[r], off[r + 1], cols, vals, pa, pb, h, c0, oa + r * h, ob + r * h);
    }
  });
}

} // namespace

void spmm_pair(const DeviceCsr& m, const TensorView& a, const TensorView& b,
               const TensorView& out_a, const TensorView& out_b, Stream s) {
  if (a.device.is_cuda()) {
    require_f32(a, "spmm_pair");
    return cuda::spmm_pair(m, a, b, out_a, out_b, s);
  }
  visit(a.dtype, "spmm_pair", [&]<class T>() { spmm_cpu<T>(m, a, b, out_a, out_b); });
}

void add_bias(const TensorView& x, const TensorView& y, const TensorView& bias,
              const TensorView& out, Stream s) {
  if (x.device.is_cuda()) {
    require_f32(x, "add_bias");
    return cuda::add_bias(x, y, bias, out, s);
  }
  visit(x.dtype, "add_bias", [&]<class T>() {
    const std::int64_t h = x.size(1);
    const T* px = x.ptr<T>();
    const T* py = y.ptr<T>();
    const T* pb = bias.ptr<T>();
    T* po = out.ptr<T>();
    for_row_blocks(x.size(0), kRowsPerTask, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t i = r0 * h; i < r1 * h; ++i)
        po[i] = (px[i] + py[i]) + pb[i % h];
    });
  });
}

void relu_dropout(const TensorView& pre, const TensorView& out, bool training, std::uint64_t seed,
                  std::uint64_t stream, float p, double scale, Stream s) {
  if (pre.device.is_cuda()) {
    require_f32(pre, "relu_dropout");
    return cuda::relu_dropout(pre, out, training, seed, stream, p, static_cast<float>(scale), s);
  }
  visit(pre.dtype, "relu_dropout", [&]<class T>() {
    const T* pp = pre.ptr<T>();
    T* po = out.ptr<T>();
    const T sc = static_cast<T>(scale);
    const std::int64_t n = pre.numel();
    // Blocks of 4096 elements (a multiple of 4: each Philox block serves four elements).
    for_row_blocks(n, 4096, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; i += 4) {
        const rng::Block bits =
            training ? rng::block(seed, stream, static_cast<std::uint64_t>(i) >> 2) : rng::Block{};
        for (std::int64_t j = i; j < std::min(i + 4, i1); ++j) {
          const T r = pp[j] > T(0) ? pp[j] : T(0);
          // Same decision as relu_dropout_elem, with the Philox block shared by four elements.
          po[j] = !training                                                       ? r
                  : rng::to_unit_float(bits[static_cast<std::size_t>(j & 3)]) < p ? T(0)
                                                                                  : r * sc;
        }
      }
    });
  });
}

void relu_dropout_backward(const TensorView& out, const TensorView& grad_out, double scale,
                           const TensorView& grad_pre, Stream s) {
  if (out.device.is_cuda()) {
    require_f32(out, "relu_dropout_backward");
    return cuda::relu_dropout_backward(out, grad_out, static_cast<float>(scale), grad_pre, s);
  }
  visit(out.dtype, "relu_dropout_backward", [&]<class T>() {
    const T* po = out.ptr<T>();
    const T* pg = grad_out.ptr<T>();
    T* pr = grad_pre.ptr<T>();
    const T sc = static_cast<T>(scale);
    for_row_blocks(out.numel(), 4096, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i)
        pr[i] = relu_dropout_grad_elem<T>(po[i], pg[i], sc);
    });
  });
}

void log_softmax_nll(const TensorView& logits, const TensorView& target, double count,
                     const TensorView& logp, const TensorView& grad, const TensorView& nll,
                     Stream s) {
  if (logits.device.is_cuda()) {
    require_f32(logits, "log_softmax_nll");
    return cuda::log_softmax_nll(logits, target, static_cast<float>(count), logp, grad, nll, s);
  }
  visit(logits.dtype, "log_softmax_nll", [&]<class T>() {
    const std::int64_t c = logits.size(1);
    const T* pz = logits.ptr<T>();
    const auto* pt = target.ptr<std::int32_t>();
    T* pl = logp.ptr<T>();
    T* pg = grad.ptr<T>();
    T* pn = nll.ptr<T>();
    const T cnt = static_cast<T>(count);
    for_row_blocks(logits.size(0), 256, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        log_softmax_row<T>(pz + r * c, c, pt[r], cnt, pl + r * c, pg + r * c, pn + r);
    });
  });
}

void divide_rows(const TensorView& x, const TensorView& deg, const TensorView& out, Stream s) {
  if (x.device.is_cuda()) {
    require_f32(x, "divide_rows");
    return cuda::divide_rows(x, deg, out, s);
  }
  visit(x.dtype, "divide_rows", [&]<class T>() {
    const std::int64_t h = x.size(1);
    const T* px = x.ptr<T>();
    const T* pd = deg.ptr<T>();
    T* po = out.ptr<T>();
    for_row_blocks(x.size(0), kRowsPerTask, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = 0; c < h; ++c)
          po[r * h + c] = divide_elem<T>(px[r * h + c], pd[r]);
    });
  });
}

template <class T> AdamScalars<T> adam_scalars(const AdamStep& st) {
  return {static_cast<T>(st.weight_decay), static_cast<T>(st.beta1),
          static_cast<T>(1.0 - st.beta1),  static_cast<T>(st.beta2),
          static_cast<T>(1.0 - st.beta2),  static_cast<T>(st.step_size),
          static_cast<T>(st.bias2_sqrt),   static_cast<T>(st.eps)};
}

void adam(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
          const AdamStep& step, Stream s) {
  if (param.device.is_cuda()) {
    require_f32(param, "adam");
    return cuda::adam(param, grad, m, v, adam_scalars<float>(step), s);
  }
  visit(param.dtype, "adam", [&]<class T>() {
    const AdamScalars<T> k = adam_scalars<T>(step);
    T* pp = param.ptr<T>();
    const T* pg = grad.ptr<T>();
    T* pm = m.ptr<T>();
    T* pv = v.ptr<T>();
    for_row_blocks(param.numel(), 8192, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i)
        adam_elem<T>(pp[i], pg[i], pm[i], pv[i], k);
    });
  });
}

} // namespace samebits::nn::kernels
