// GraphSAGE on CUDA: the model kernels bitwise equal to the CPU's on fresh random inputs and two
// block sizes; portable training on CUDA gives the CPU's weight hash; run_to_run repeats are
// identical; not_guaranteed is shown to vary.
#include "core/backends.hpp"
#include "core/tuning.hpp"
#include "nn/kernels.hpp"
#include "samebits/app/cora.hpp"
#include "samebits/app/graphsage.hpp"
#include "testing.hpp"

#include <cstdlib>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <random>
#include <set>

namespace samebits::nn {
namespace {

using samebits::testing::fresh_seed;
using samebits::testing::random_normal;

const Dataset& cora() {
  static const Dataset d = load_dataset("data/cora", {.expect = cora_expected()});
  return d;
}

// Sets the block size of src/cuda/nn.cu's launches for its lifetime.
class BlockSize {
public:
  explicit BlockSize(int b) : guard_({.block = b}) {}

private:
  samebits::detail::TuningGuard<samebits::nn::kernels::NnTuning> guard_;
};

void expect_same_bits(const Tensor& cpu, const Tensor& gpu, const char* what) {
  EXPECT_TRUE(bitwise_equal(cpu, gpu.to(Device::cpu()))) << what;
}

TEST(GraphSageGpuKernels, BitwiseEqualToCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const Device gpu = Device::cuda();
  std::mt19937_64 gen(seed);
  for (int block : {256, 64}) {
    BlockSize bs(block);
    SCOPED_TRACE(block);
    // Sparse products with values (rows without entries included).
    const std::int64_t rows = 300, k = 120, h = 13;
    Csr m;
    m.rows = rows;
    m.cols_count = k;
    m.offsets.push_back(0);
    std::normal_distribution<float> nd;
    for (std::int64_t r = 0; r < rows; ++r) {
      const int len = static_cast<int>(gen() % 40) * (r % 9 != 0);
      for (int e = 0; e < len; ++e) {
        m.cols.push_back(static_cast<std::int32_t>(gen() % k));
        m.values.push_back(nd(gen));
      }
      m.offsets.push_back(m.nnz());
    }
    for (bool unit : {true, false}) {
      kernels::DeviceCsr dc, dg;
      dc.rows = dg.rows = rows;
      dc.unit = dg.unit = unit;
      dc.offsets = Tensor::from_vector(m.offsets, {rows + 1});
      dc.cols = Tensor::from_vector(m.cols, {m.nnz()});
      dc.values = Tensor::from_vector(m.values, {m.nnz()});
      dg.offsets = dc.offsets.to(gpu);
      dg.cols = dc.cols.to(gpu);
      dg.values = dc.values.to(gpu);
      const Tensor a = random_normal({k, h}, DType::f32, seed + 1),
                   b = random_normal({k, h}, DType::f32, seed + 2);
      Tensor oa = Tensor::empty({rows, h}, DType::f32), ob = Tensor::empty({rows, h}, DType::f32);
      Tensor ga = Tensor::empty({rows, h}, DType::f32, gpu),
             gb = Tensor::empty({rows, h}, DType::f32, gpu);
      kernels::spmm_pair(dc, a, b, oa, ob, {});
      kernels::spmm_pair(dg, a.to(gpu), b.to(gpu), ga, gb, {});
      expect_same_bits(oa, ga, unit ? "spmm_pair unit" : "spmm_pair values");
      expect_same_bits(ob, gb, "spmm_pair second output");
    }
    // Log-softmax + NLL on the CPU and on the GPU, compared bit for bit.
    auto check_log_softmax = [&](const Tensor& logits, const std::vector<std::int32_t>& targets,
                                 double count, const std::string& what) {
      const std::int64_t rows_n = logits.size(0), classes = logits.size(1);
      const Tensor tg = Tensor::from_vector(targets, {rows_n});
      Tensor l1 = Tensor::empty({rows_n, classes}, DType::f32),
             g1 = Tensor::empty({rows_n, classes}, DType::f32),
             n1 = Tensor::empty({rows_n}, DType::f32);
      Tensor l2 = Tensor::empty({rows_n, classes}, DType::f32, gpu),
             g2 = Tensor::empty({rows_n, classes}, DType::f32, gpu),
             n2 = Tensor::empty({rows_n}, DType::f32, gpu);
      kernels::log_softmax_nll(logits, tg, count, l1, g1, n1, {});
      kernels::log_softmax_nll(logits.to(gpu), tg.to(gpu), count, l2, g2, n2, {});
      expect_same_bits(l1, l2, what.c_str());
      expect_same_bits(g1, g2, (what + ", gradient").c_str());
      expect_same_bits(n1, n2, (what + ", nll").c_str());
    };
    // 1 and 16 classes (rows staged through shared memory, as with 7 below) and 17 (a thread reads
    // its row from global memory), over 1000 rows: a last block of 104.
    for (const std::int64_t classes : {1, 16, 17}) {
      std::vector<std::int32_t> tt(1000);
      for (auto& t : tt)
        t = static_cast<std::int32_t>(gen() % (classes + 1)) - 1;
      check_log_softmax(random_normal({1000, classes}, DType::f32,
                                      seed + 10 + static_cast<std::uint64_t>(classes)),
                        tt, 500.0, "log_softmax_nll, " + std::to_string(classes) + " classes");
    }
    // 7 classes over logits of a wide range, some rows without a target.
    const std::int64_t n = 5000, c = 7;
    Tensor z = random_normal({n, c}, DType::f32, seed + 3);
    for (std::int64_t i = 0; i < n * c; ++i)
      z.data<float>()[i] *= static_cast<float>(1 + i % 40);
    std::vector<std::int32_t> tv(static_cast<std::size_t>(n));
    for (auto& t : tv)
      t = static_cast<std::int32_t>(gen() % (c + 2)) - 2;
    check_log_softmax(z, tv, 140.0, "log_softmax_nll, 7 classes");
    Tensor lp = Tensor::empty({n, c}, DType::f32), glp = Tensor::empty({n, c}, DType::f32, gpu);
    // Elementwise steps.
    const Tensor pre = random_normal({n, c}, DType::f32, seed + 4);
    Tensor h1 = Tensor::empty({n, c}, DType::f32), gh1 = Tensor::empty({n, c}, DType::f32, gpu);
    kernels::relu_dropout(pre, h1, true, seed, 77, 0.5f, 2.0, {});
    kernels::relu_dropout(pre.to(gpu), gh1, true, seed, 77, 0.5f, 2.0, {});
    expect_same_bits(h1, gh1, "relu_dropout");
    kernels::relu_dropout_backward(h1, z, 2.0, lp, {});
    kernels::relu_dropout_backward(gh1, z.to(gpu), 2.0, glp, {});
    expect_same_bits(lp, glp, "relu_dropout_backward");
    Tensor deg = random_normal({n}, DType::f32, seed + 5);
    deg.data<float>()[3] = 0.0f;
    kernels::divide_rows(z, deg, lp, {});
    kernels::divide_rows(z.to(gpu), deg.to(gpu), glp, {});
    expect_same_bits(lp, glp, "divide_rows");
    kernels::add_bias(z, pre, deg.view().slice(0, 0, c), lp, {});
    const Tensor gdeg = deg.to(gpu);
    kernels::add_bias(z.to(gpu), pre.to(gpu), gdeg.view().slice(0, 0, c), glp, {});
    expect_same_bits(lp, glp, "add_bias");
    // 3003 elements (not a multiple of 4), from an aligned start and from a view that starts 12
    // bytes in: the elementwise kernels' element-by-element path.
    for (const std::int64_t first : {0, 1}) {
      const Tensor big = random_normal({1002, 3}, DType::f32, seed + 11), gbig = big.to(gpu);
      const TensorView hv = big.view().slice(0, first, first + 1001),
                       dv = gbig.view().slice(0, first, first + 1001);
      Tensor o1 = Tensor::empty({1001, 3}, DType::f32),
             o2 = Tensor::empty({1001, 3}, DType::f32, gpu);
      kernels::relu_dropout(hv, o1, true, seed, 5, 0.3f, 1.0 / 0.7, {});
      kernels::relu_dropout(dv, o2, true, seed, 5, 0.3f, 1.0 / 0.7, {});
      expect_same_bits(o1, o2,
                       first == 0 ? "relu_dropout, 3003 elements" : "relu_dropout, unaligned view");
      kernels::add_bias(hv, hv, deg.view().slice(0, 0, 3), o1, {});
      kernels::add_bias(dv, dv, gdeg.view().slice(0, 0, 3), o2, {});
      expect_same_bits(o1, o2, first == 0 ? "add_bias, 3003 elements" : "add_bias, unaligned view");
    }
    Tensor p = random_normal({n}, DType::f32, seed + 6),
           g = random_normal({n}, DType::f32, seed + 7);
    Tensor mm = random_normal({n}, DType::f32, seed + 8),
           vv = random_normal({n}, DType::f32, seed + 9);
    for (std::int64_t i = 0; i < n; ++i)
      vv.data<float>()[i] = std::fabs(vv.data<float>()[i]);
    Tensor gp = p.to(gpu), gg = g.to(gpu), gm = mm.to(gpu), gv = vv.to(gpu);
    kernels::AdamStep st{
        0.01, 0.9, 0.999, 1e-8, 5e-4, 0.01 / (1 - 0.9 * 0.9), std::sqrt(1 - 0.999 * 0.999)};
    kernels::adam(p, g, mm, vv, st, {});
    kernels::adam(gp, gg, gm, gv, st, {});
    expect_same_bits(p, gp, "adam parameters");
    expect_same_bits(mm, gm, "adam m");
    expect_same_bits(vv, gv, "adam v");
  }
}

std::uint64_t train(Device d, Determinism level, std::uint64_t seed, int epochs,
                    double* acc = nullptr) {
  SageConfig cfg;
  cfg.device = d;
  cfg.level = level;
  GraphSage model(cora(), cfg);
  model.init(seed);
  for (int e = 0; e < epochs; ++e)
    model.train_epoch();
  if (acc)
    *acc = model.accuracy(Split::test);
  return model.parameter_hash();
}

TEST(GraphSageGpu, PortableHashEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  double acc_cpu = 0, acc_gpu = 0, acc_gpu64 = 0;
  const std::uint64_t cpu = train(Device::cpu(), Determinism::portable, seed, 10, &acc_cpu);
  const std::uint64_t gpu = train(Device::cuda(), Determinism::portable, seed, 10, &acc_gpu);
  std::uint64_t gpu64 = 0;
  {
    BlockSize bs(64);
    gpu64 = train(Device::cuda(), Determinism::portable, seed, 10, &acc_gpu64);
  }
  EXPECT_EQ(hash_hex(cpu), hash_hex(gpu));
  EXPECT_EQ(hash_hex(gpu), hash_hex(gpu64));
  EXPECT_EQ(acc_cpu, acc_gpu);
}

// A model on the second GPU while the first is current: its kernels and ops run where its tensors
// are, with the CPU's bits, and the caller's device is current again afterwards.
TEST(GraphSageGpu, ModelOnTheSecondGpuEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  if (detail::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two CUDA devices";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  const std::uint64_t cpu = train(Device::cpu(), Determinism::portable, seed, 3);
  const std::uint64_t gpu1 = train(Device::cuda(1), Determinism::portable, seed, 3);
  EXPECT_EQ(hash_hex(cpu), hash_hex(gpu1));
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
}

TEST(GraphSageGpu, PortableHashEqualsCpuWithValuedFeatures) {
  SAMEBITS_REQUIRE_CUDA();
  // Cora's features as index:value pairs with non-unit values, to exercise the valued path.
  Dataset d = cora();
  d.binary_features = false;
  d.features.values.resize(static_cast<std::size_t>(d.features.nnz()));
  for (std::size_t i = 0; i < d.features.values.size(); ++i)
    d.features.values[i] = 0.25f + static_cast<float>(i % 7) * 0.125f;
  std::uint64_t h[2];
  int i = 0;
  for (Device dev : {Device::cpu(), Device::cuda()}) {
    SageConfig cfg;
    cfg.device = dev;
    GraphSage model(d, cfg);
    model.init(5);
    for (int e = 0; e < 5; ++e)
      model.train_epoch();
    h[i++] = model.parameter_hash();
  }
  EXPECT_EQ(hash_hex(h[0]), hash_hex(h[1]));
}

TEST(GraphSageGpu, RunToRunRepeatsAreIdentical) {
  SAMEBITS_REQUIRE_CUDA();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  SageConfig cfg;
  cfg.device = Device::cuda();
  cfg.level = Determinism::run_to_run;
  GraphSage model(cora(), cfg);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 100; ++r) {
    model.init(seed);
    for (int e = 0; e < 10; ++e)
      model.train_epoch();
    hashes.insert(model.parameter_hash());
  }
  EXPECT_EQ(hashes.size(), 1u);
}

TEST(GraphSageGpu, NotGuaranteedVaries) {
  SAMEBITS_REQUIRE_CUDA();
  SageConfig cfg;
  cfg.device = Device::cuda();
  cfg.level = Determinism::not_guaranteed;
  GraphSage model(cora(), cfg);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 200 && hashes.size() < 2; ++r) {
    model.init(0);
    for (int e = 0; e < 10; ++e)
      model.train_epoch();
    hashes.insert(model.parameter_hash());
  }
  EXPECT_GE(hashes.size(), 2u) << "200 trainings with atomics gave identical weights";
}

} // namespace
} // namespace samebits::nn
