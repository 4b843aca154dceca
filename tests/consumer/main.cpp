// The consumer project's program: a portable sum on the CPU whose value is known, so that a
// package that links but computes wrongly fails too.
#include <cstdio>
#include <samebits/samebits.hpp>
#include <vector>

int main() {
  using namespace samebits;
  // 1e8 + 1 rounds to 1e8 in float32: in the canonical order (lanes 0-3 hold one value each, then
  // the tree adds lane 2 to lane 0 and lane 3 to lane 1) the sum is (1e8 + -1e8) + (1 + 1) = 2.
  Tensor x = Tensor::from_vector(std::vector<float>{1e8f, 1.f, -1e8f, 1.f}, {4});
  Tensor total = Tensor::empty({1}, DType::f32);
  sum(x, total, {.level = Determinism::portable});
  const float got = total.view().ptr<float>()[0];
  std::printf("samebits %s: portable sum %g\n", std::string(version()).c_str(), got);
  return got == 2.f ? 0 : 1;
}
