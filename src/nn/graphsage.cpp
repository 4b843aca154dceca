// The GraphSAGE model: parameters in one flat buffer (so that Adam, hashing and copying are one
// call each), activations allocated once, forward and backward as a fixed list of samebits ops
// and model kernels. See graphsage.hpp for the model and the randomness.
#include "samebits/app/graphsage.hpp"

#include "nn/kernel_math.hpp"
#include "nn/kernels.hpp"
#include "samebits/errors.hpp"
#include "samebits/ops/gemm.hpp"
#include "samebits/ops/reduce.hpp"
#include "samebits/ops/segment.hpp"
#include "samebits/rng.hpp"
#include "samebits/trace.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace samebits::nn {

namespace {

using kernels::DeviceCsr;

template <class T> Tensor upload(const std::vector<T>& v, Device d) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, d);
}

DeviceCsr to_device(const Csr& m, DType dtype, Device d) {
  DeviceCsr out;
  out.rows = m.rows;
  out.offsets = upload(m.offsets, d);
  out.cols = upload(m.cols, d);
  out.unit = m.values.empty();
  if (!out.unit) {
    if (dtype == DType::f32) {
      out.values = upload(m.values, d);
    } else {
      out.values = upload(std::vector<double>(m.values.begin(), m.values.end()), d);
    }
  }
  return out;
}

Tensor zeros_like_dtype(const Shape& s, DType t, Device d) {
  return Tensor::zeros(s, t, d);
}

} // namespace

struct GraphSage::Impl {
  SageConfig cfg;
  std::int64_t n = 0, f = 0, h = 0, c = 0, n_train = 0;
  DType dt;
  Device dev;
  Stream stream{};
  Options op_opts;

  DeviceCsr x, xt;    // features [N x F] and their transpose [F x N]
  bool dense = false; // dense features: x_dense [N, F] replaces x and xt
  Tensor x_dense;
  Tensor adj_off, adj_idx;   // in-neighbours: CSR over targets
  Tensor adjt_off, adjt_idx; // the transpose: for each source, the targets it feeds
  Tensor deg;                // [N] in-degree, dtype dt
  Tensor target;             // int32 [N]: label on training nodes, -1 elsewhere
  std::vector<std::int32_t> labels;
  std::vector<Split> split;

  ParamLayout layout;
  Tensor params, grads, adam_m, adam_v; // flat [P]
  // Activations and their gradients.
  Tensor z1r, z1n, a1, pre1, h1;     // [N, H]
  Tensor z2r, z2n, a2, logits, logp; // [N, C]
  Tensor dlogits, g2s, dz2n;         // [N, C]
  Tensor nll;                        // [N]
  Tensor dh1, d1, d1s, dz1n;         // [N, H]

  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  std::uint64_t cached_init_seed = std::numeric_limits<std::uint64_t>::max();
  Tensor cached_init; // host copy of the initial parameters of cached_init_seed

  TensorView param(ParamLayout::Index i, const Tensor& flat) const {
    auto* base =
        static_cast<char*>(flat.raw()) + layout.offset[i] * static_cast<std::int64_t>(size_of(dt));
    return TensorView::contiguous(base, dt, dev, layout.shape[i]);
  }
  // The loader checked every node id, so aggregate need not re-read the indices per call (on
  // CUDA: no check kernel, no host synchronization).
  CsrGraph adj() const { return {adj_off.view(), adj_idx.view(), n}; }
  CsrGraph adjt() const { return {adjt_off.view(), adjt_idx.view(), n}; }

  void forward(bool training);
  void backward();
  void fill_init(std::uint64_t s);
};

void GraphSage::Impl::fill_init(std::uint64_t s) {
  if (cached_init_seed != s) {
    Tensor host = Tensor::zeros({layout.total()}, dt, Device::cpu());
    // Glorot (Xavier) uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)); biases zero.
    // Value = (2u - 1) * a with u from Philox stream = parameter index: 2u - 1 is exact.
    for (int i : {ParamLayout::w1_root, ParamLayout::w1_neigh, ParamLayout::w2_root,
                  ParamLayout::w2_neigh}) {
      const auto& sh = layout.shape[i];
      const double a = std::sqrt(6.0 / static_cast<double>(sh[0] + sh[1]));
      const std::int64_t count = sh[0] * sh[1];
      const std::int64_t off = layout.offset[i];
      auto write = [&]<class T>(T* p) {
        const T at = static_cast<T>(a);
        for (std::int64_t e = 0; e < count; e += 4) {
          const rng::Block b =
              rng::block(s, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(e) >> 2);
          for (std::int64_t j = e; j < std::min(e + 4, count); ++j) {
            const T u = static_cast<T>(rng::to_unit_float(b[static_cast<std::size_t>(j & 3)]));
            p[off + j] = (T(2) * u - T(1)) * at;
          }
        }
      };
      if (dt == DType::f32)
        write(host.data<float>());
      else
        write(host.data<double>());
    }
    cached_init = host;
    cached_init_seed = s;
  }
  copy(cached_init, params);
}

void GraphSage::Impl::forward(bool training) {
  using P = ParamLayout;
  const double p = cfg.dropout;
  const double scale = 1.0 / (1.0 - p);
  // Layer 1: z = X W (sparse, fixed order), h = z_root + mean_j z_neigh[j] + b.
  if (dense) {
    gemm(Transpose::no, Transpose::no, 1.0, x_dense, param(P::w1_root, params), 0.0, z1r, op_opts);
    gemm(Transpose::no, Transpose::no, 1.0, x_dense, param(P::w1_neigh, params), 0.0, z1n, op_opts);
  } else {
    kernels::spmm_pair(x, param(P::w1_root, params), param(P::w1_neigh, params), z1r, z1n, stream);
  }
  aggregate(adj(), z1n, a1, Reduce::mean, op_opts);
  SAMEBITS_TRACE(epoch, "conv1", "sparse_matmul", z1n);
  SAMEBITS_TRACE(epoch, "conv1", "aggregate", a1);
  kernels::add_bias(z1r, a1, param(P::b1, params), pre1, stream);
  kernels::relu_dropout(pre1, h1, training && p > 0, seed,
                        kernels::dropout_stream(static_cast<std::uint64_t>(epoch), 1),
                        static_cast<float>(p), scale, stream);
  SAMEBITS_TRACE(epoch, "conv1", "relu_dropout", h1);
  // Layer 2.
  gemm(Transpose::no, Transpose::no, 1.0, h1, param(P::w2_root, params), 0.0, z2r, op_opts);
  gemm(Transpose::no, Transpose::no, 1.0, h1, param(P::w2_neigh, params), 0.0, z2n, op_opts);
  aggregate(adj(), z2n, a2, Reduce::mean, op_opts);
  SAMEBITS_TRACE(epoch, "conv2", "aggregate", a2);
  kernels::add_bias(z2r, a2, param(P::b2, params), logits, stream);
  SAMEBITS_TRACE(epoch, "conv2", "logits", logits);
  kernels::log_softmax_nll(logits, target, static_cast<double>(n_train), logp, dlogits, nll,
                           stream);
}

void GraphSage::Impl::backward() {
  using P = ParamLayout;
  const double scale = 1.0 / (1.0 - cfg.dropout);
  // Layer 2: d logits -> d W2, d b2, d h1. The mean's adjoint: divide by the target's degree,
  // then sum over the transposed adjacency.
  sum_dim(dlogits, 0, param(P::b2, grads), op_opts);
  gemm(Transpose::yes, Transpose::no, 1.0, h1, dlogits, 0.0, param(P::w2_root, grads), op_opts);
  kernels::divide_rows(dlogits, deg, g2s, stream);
  aggregate(adjt(), g2s, dz2n, Reduce::sum, op_opts);
  gemm(Transpose::yes, Transpose::no, 1.0, h1, dz2n, 0.0, param(P::w2_neigh, grads), op_opts);
  gemm(Transpose::no, Transpose::yes, 1.0, dlogits, param(P::w2_root, params), 0.0, dh1, op_opts);
  gemm(Transpose::no, Transpose::yes, 1.0, dz2n, param(P::w2_neigh, params), 1.0, dh1, op_opts);
  // Dropout and ReLU.
  SAMEBITS_TRACE(epoch, "conv2.backward", "aggregate", dz2n);
  SAMEBITS_TRACE(epoch, "conv2.backward", "gemm", dh1);
  kernels::relu_dropout_backward(h1, dh1, cfg.dropout > 0 ? scale : 1.0, d1, stream);
  // Layer 1: d W1 = X^T d z (sparse, fixed order).
  sum_dim(d1, 0, param(P::b1, grads), op_opts);
  kernels::divide_rows(d1, deg, d1s, stream);
  aggregate(adjt(), d1s, dz1n, Reduce::sum, op_opts);
  if (dense) {
    gemm(Transpose::yes, Transpose::no, 1.0, x_dense, d1, 0.0, param(P::w1_root, grads), op_opts);
    gemm(Transpose::yes, Transpose::no, 1.0, x_dense, dz1n, 0.0, param(P::w1_neigh, grads),
         op_opts);
  } else {
    kernels::spmm_pair(xt, d1, dz1n, param(P::w1_root, grads), param(P::w1_neigh, grads), stream);
  }
  SAMEBITS_TRACE(epoch, "conv1.backward", "aggregate", dz1n);
  SAMEBITS_TRACE(epoch, "model", "gradients", grads);
}

GraphSage::GraphSage(const Dataset& data, const SageConfig& cfg) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = cfg;
  m.dt = cfg.dtype;
  m.dev = cfg.device;
  if (m.dt != DType::f32 && m.dt != DType::f64)
    throw InvalidArgument("GraphSage: dtype must be float32 or float64");
  if (m.dev.is_cuda() && m.dt != DType::f32)
    throw InvalidArgument("GraphSage: the CUDA model runs in float32");
  if (!(cfg.dropout >= 0 && cfg.dropout < 1))
    throw InvalidArgument(fmt::format("GraphSage: dropout {} is outside [0, 1)", cfg.dropout));
  if (cfg.hidden < 1)
    throw InvalidArgument("GraphSage: hidden width must be at least 1");
  m.op_opts.level = cfg.level;
  m.stream = cfg.stream;
  m.op_opts.stream = m.stream;
  m.n = data.num_nodes;
  m.f = data.num_features;
  m.h = cfg.hidden;
  m.c = data.num_classes;
  m.labels = data.labels;
  m.split = data.split;

  if (!data.dense_features.empty()) {
    if (static_cast<std::int64_t>(data.dense_features.size()) != data.num_nodes * data.num_features)
      throw InvalidArgument(
          "GraphSage: dense features do not have num_nodes x num_features values");
    const Shape xs{data.num_nodes, data.num_features};
    m.dense = true;
    m.x_dense = m.dt == DType::f32
                    ? Tensor::from_vector(data.dense_features, xs, m.dev)
                    : Tensor::from_vector(std::vector<double>(data.dense_features.begin(),
                                                              data.dense_features.end()),
                                          xs, m.dev);
  } else {
    m.x = to_device(data.features, m.dt, m.dev);
    m.xt = to_device(transpose(data.features), m.dt, m.dev);
  }
  const Csr nb = data.in_neighbours();
  const Csr nbt = transpose(nb);
  m.adj_off = upload(nb.offsets, m.dev);
  m.adj_idx = upload(nb.cols, m.dev);
  m.adjt_off = upload(nbt.offsets, m.dev);
  m.adjt_idx = upload(nbt.cols, m.dev);
  {
    Tensor d = Tensor::empty({m.n}, m.dt, Device::cpu());
    for (std::int64_t i = 0; i < m.n; ++i) {
      const auto k =
          nb.offsets[static_cast<std::size_t>(i) + 1] - nb.offsets[static_cast<std::size_t>(i)];
      if (m.dt == DType::f32)
        d.data<float>()[i] = static_cast<float>(k);
      else
        d.data<double>()[i] = static_cast<double>(k);
    }
    m.deg = d.to(m.dev);
  }
  std::vector<std::int32_t> tgt(static_cast<std::size_t>(m.n), -1);
  for (std::int64_t i = 0; i < m.n; ++i)
    if (data.split[static_cast<std::size_t>(i)] == Split::train) {
      tgt[static_cast<std::size_t>(i)] = data.labels[static_cast<std::size_t>(i)];
      ++m.n_train;
    }
  if (m.n_train == 0)
    throw DataError("GraphSage: the data set has no training nodes");
  m.target = upload(tgt, m.dev);

  using P = ParamLayout;
  auto& L = m.layout;
  L.shape[P::w1_root] = {m.f, m.h};
  L.shape[P::w1_neigh] = {m.f, m.h};
  L.shape[P::b1] = {m.h};
  L.shape[P::w2_root] = {m.h, m.c};
  L.shape[P::w2_neigh] = {m.h, m.c};
  L.shape[P::b2] = {m.c};
  for (int i = 0; i < P::count; ++i) {
    std::int64_t k = 1;
    for (auto s : L.shape[i])
      k *= s;
    L.offset[i + 1] = L.offset[i] + k;
  }
  const Shape flat{L.total()}, nh{m.n, m.h}, nc{m.n, m.c};
  for (Tensor* t : {&m.params, &m.grads, &m.adam_m, &m.adam_v})
    *t = zeros_like_dtype(flat, m.dt, m.dev);
  for (Tensor* t : {&m.z1r, &m.z1n, &m.a1, &m.pre1, &m.h1, &m.dh1, &m.d1, &m.d1s, &m.dz1n})
    *t = zeros_like_dtype(nh, m.dt, m.dev);
  for (Tensor* t : {&m.z2r, &m.z2n, &m.a2, &m.logits, &m.logp, &m.dlogits, &m.g2s, &m.dz2n})
    *t = zeros_like_dtype(nc, m.dt, m.dev);
  m.nll = zeros_like_dtype({m.n}, m.dt, m.dev);
  init(0);
}

GraphSage::~GraphSage() = default;

void GraphSage::init(std::uint64_t seed) {
  Impl& m = *impl_;
  m.seed = seed;
  m.epoch = 0;
  m.fill_init(seed);
  fill(m.adam_m, 0.0);
  fill(m.adam_v, 0.0);
}

double GraphSage::loss_and_gradients(bool training) {
  Impl& m = *impl_;
  m.forward(training);
  m.backward();
  Tensor nll = m.nll.to(Device::cpu());
  double s = 0; // ascending node order, in double: a report, not part of the training
  for (std::int64_t i = 0; i < m.n; ++i)
    s += m.dt == DType::f32 ? static_cast<double>(nll.data<float>()[i]) : nll.data<double>()[i];
  return s / static_cast<double>(m.n_train);
}

double GraphSage::train_epoch(bool want_loss) {
  Impl& m = *impl_;
  double loss = std::numeric_limits<double>::quiet_NaN();
  if (want_loss) {
    loss = loss_and_gradients(true);
  } else {
    m.forward(true);
    m.backward();
  }
  // Bias corrections on the host in double, by repeated multiplication (no libm pow).
  const std::int64_t t = m.epoch + 1;
  double b1t = 1, b2t = 1;
  for (std::int64_t i = 0; i < t; ++i) {
    b1t *= m.cfg.beta1;
    b2t *= m.cfg.beta2;
  }
  kernels::AdamStep st;
  st.lr = m.cfg.lr;
  st.beta1 = m.cfg.beta1;
  st.beta2 = m.cfg.beta2;
  st.eps = m.cfg.eps;
  st.weight_decay = m.cfg.weight_decay;
  st.step_size = m.cfg.lr / (1.0 - b1t);
  st.bias2_sqrt = std::sqrt(1.0 - b2t);
  kernels::adam(m.params, m.grads, m.adam_m, m.adam_v, st, m.stream);
  SAMEBITS_TRACE(m.epoch, "model", "adam", m.params);
  ++m.epoch;
  return loss;
}

std::vector<double> GraphSage::accuracies(const std::vector<Split>& splits) {
  Impl& m = *impl_;
  m.forward(false);
  Tensor lp = m.logp.to(Device::cpu());
  std::vector<double> out;
  for (Split s : splits) {
    std::int64_t total = 0, right = 0;
    for (std::int64_t i = 0; i < m.n; ++i) {
      if (m.split[static_cast<std::size_t>(i)] != s)
        continue;
      std::int64_t best = 0;
      auto value = [&](std::int64_t c) {
        return m.dt == DType::f32 ? static_cast<double>(lp.data<float>()[i * m.c + c])
                                  : lp.data<double>()[i * m.c + c];
      };
      for (std::int64_t c = 1; c < m.c; ++c)
        if (value(c) > value(best))
          best = c;
      ++total;
      right += best == m.labels[static_cast<std::size_t>(i)];
    }
    // No node in the split: no accuracy (NaN), not a perfect or a failed one.
    out.push_back(total ? static_cast<double>(right) / static_cast<double>(total) : std::nan(""));
  }
  return out;
}

void GraphSage::infer() {
  impl_->forward(false);
}
Tensor GraphSage::log_probs() const {
  return impl_->logp;
}

double GraphSage::accuracy(Split split) {
  return accuracies({split})[0];
}

const ParamLayout& GraphSage::layout() const {
  return impl_->layout;
}
Tensor GraphSage::parameters() const {
  return impl_->params;
}
Tensor GraphSage::gradients() const {
  return impl_->grads;
}
void GraphSage::set_parameters(const TensorView& flat) {
  if (flat.numel() != impl_->layout.total() || flat.dtype != impl_->dt)
    throw InvalidArgument("GraphSage::set_parameters: " + flat.describe() + " does not match " +
                          impl_->params.view().describe());
  copy(flat.reshape({flat.numel()}), impl_->params);
}
std::uint64_t GraphSage::parameter_hash() const {
  return content_hash(impl_->params);
}
std::int64_t GraphSage::epoch() const {
  return impl_->epoch;
}
const SageConfig& GraphSage::config() const {
  return impl_->cfg;
}

} // namespace samebits::nn
