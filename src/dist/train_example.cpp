// samebits_dist_train: data-parallel training of a small softmax classifier under MPI, printing
// one weight hash per reduction level. `mpirun -np N samebits_dist_train` for N = 1, 2, 3 gives
// the same `portable` hash for every N (the CTest dist.mpi_same_bits_for_1_2_3_ranks checks it);
// `plain` (each rank's float sum, then MPI's float sum) and `run_to_run` (the same local sums,
// then the rank-ordered block sum) depend on N because a rank's local float sum depends on which
// micro-batches it holds.
//
// Each step has a global batch of kMicro micro-batches (rank r takes those with j % N == r). At
// portable every micro-batch gradient is converted to int64 at once, at a scale every rank knows
// before the step (the accumulator rule of include/samebits/distributed.hpp: the previous step's
// global max-abs with 2^16 headroom; on the first step the gradients are kept and the scale comes
// from a MAX all-reduce of their max-abs), so the integer sum is the same however they are split.
#include "samebits/distributed.hpp"
#include "samebits/errors.hpp"

#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <mpi.h>
#include <vector>

using namespace samebits;

namespace {

constexpr int kFeatures = 16, kClasses = 3, kMicro = 12, kPerMicro = 4, kSteps = 6;
constexpr int kParams = kClasses * kFeatures + kClasses;
constexpr float kLr = 0.5f;

std::uint64_t mix(std::uint64_t z) { // splitmix64
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
float uniform(std::uint64_t key) { // exact in float: 24 random bits in [-1, 1)
  return static_cast<float>(mix(key) >> 40) * 0x1p-23f - 1.0f;
}

// The mean gradient of the softmax cross-entropy over one micro-batch (float, a fixed order).
std::vector<float> micro_gradient(const std::vector<float>& w, int step, int micro) {
  std::vector<float> g(kParams, 0.0f);
  for (int k = 0; k < kPerMicro; ++k) {
    const std::uint64_t sample =
        (static_cast<std::uint64_t>(step) * kMicro + micro) * kPerMicro + k;
    float x[kFeatures];
    for (int f = 0; f < kFeatures; ++f)
      x[f] = uniform(sample * 64 + f);
    const int label = static_cast<int>(mix(sample ^ 0x5eedull) % kClasses);
    float logit[kClasses], mx = -INFINITY, z = 0;
    for (int c = 0; c < kClasses; ++c) {
      float a = w[kClasses * kFeatures + c];
      for (int f = 0; f < kFeatures; ++f)
        a += w[c * kFeatures + f] * x[f];
      logit[c] = a;
      mx = std::fmax(mx, a);
    }
    for (int c = 0; c < kClasses; ++c)
      z += (logit[c] = std::exp(logit[c] - mx));
    for (int c = 0; c < kClasses; ++c) {
      const float d = (logit[c] / z - (c == label ? 1.0f : 0.0f)) / kPerMicro;
      for (int f = 0; f < kFeatures; ++f)
        g[c * kFeatures + f] += d * x[f];
      g[kClasses * kFeatures + c] += d;
    }
  }
  return g;
}

std::vector<float> initial_weights() {
  std::vector<float> w(kParams);
  for (int i = 0; i < kParams; ++i)
    w[i] = 0.1f * uniform(1000003ull + i);
  return w;
}

double local_max_abs(const std::vector<float>& g) {
  std::vector<double> m(1);
  max_abs_finite(TensorView::of(g.data(), {kParams}), TensorView::of(m.data(), {1}));
  return m[0];
}

// plain / run_to_run: each rank sums its micro-batch gradients in float, then the ranks' sums
// are combined at `level`; the mean divides by the number of micro-batches.
std::vector<float> train_float(Communicator& comm, Determinism level) {
  std::vector<float> w = initial_weights();
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> sum(kParams, 0.0f);
    for (int j = comm.rank(); j < kMicro; j += comm.size()) {
      const std::vector<float> g = micro_gradient(w, step, j);
      for (int i = 0; i < kParams; ++i)
        sum[i] += g[i];
    }
    allreduce(TensorView::of(sum.data(), {kParams}), level, comm, "gradient");
    for (int i = 0; i < kParams; ++i)
      w[i] -= kLr * (sum[i] / kMicro);
  }
  return w;
}

// portable: the fixed-point accumulator (one int64 per parameter, then the overflow counter and
// the micro-batch count, all summed in one collective).
std::vector<float> train_portable(Communicator& comm) {
  std::vector<float> w = initial_weights();
  double reference = -1; // the previous step's global max-abs (none before the first step)
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::int64_t> buf(kParams + 2, 0);
    const TensorView q = TensorView::of(buf.data(), {kParams});
    const TensorView overflow = TensorView::of(buf.data() + kParams, {1});
    std::vector<std::vector<float>> kept; // first step only
    double mine = 0;
    int s = reference >= 0 ? fixed_scale(reference) : 0;
    for (int j = comm.rank(); j < kMicro; j += comm.size()) {
      std::vector<float> g = micro_gradient(w, step, j);
      mine = std::fmax(mine, local_max_abs(g));
      buf[kParams + 1] += 1;
      if (reference < 0)
        kept.push_back(std::move(g));
      else
        to_fixed(TensorView::of(g.data(), {kParams}), s, q, overflow, true);
    }
    double global = mine;
    comm.max_f64(&global, 1, {});
    if (reference < 0) { // first step: the exact global max-abs, no headroom needed
      s = fixed_scale(global, 0);
      for (auto& g : kept)
        to_fixed(TensorView::of(g.data(), {kParams}), s, q, overflow, true);
    }
    comm.sum_i64(buf.data(), kParams + 2, {});
    if (buf[kParams] != 0)
      throw OverflowError(fmt::format("gradient: {} value(s) beyond 2^{} times the previous "
                                      "step's max-abs; raise the headroom",
                                      buf[kParams], kHeadroomLog2));
    std::vector<float> mean(kParams);
    from_fixed(q, s, buf[kParams + 1], TensorView::of(mean.data(), {kParams}));
    for (int i = 0; i < kParams; ++i)
      w[i] -= kLr * mean[i];
    reference = global;
  }
  return w;
}

} // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    auto comm = make_mpi_communicator();
    const auto plain = train_float(*comm, Determinism::not_guaranteed);
    const auto r2r = train_float(*comm, Determinism::run_to_run);
    const auto portable = train_portable(*comm);
    auto hash = [](const std::vector<float>& w) {
      return hash_hex(content_hash(TensorView::of(w.data(), {kParams})));
    };
    if (comm->rank() == 0) {
      std::printf("world %d plain %s\n", comm->size(), hash(plain).c_str());
      std::printf("world %d run_to_run %s\n", comm->size(), hash(r2r).c_str());
      std::printf("world %d portable %s\n", comm->size(), hash(portable).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "samebits_dist_train: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
