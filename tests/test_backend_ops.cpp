// The backend-ops harness on the CPU (tests/harness/runner.hpp says what it checks): every
// generated case, every CPU variant and level, with 1, 2 and 4 threads as the launch axis.
#include "harness/runner.hpp"

namespace samebits {
namespace {

std::vector<harness::Config> thread_counts() {
  std::vector<harness::Config> c;
  for (int n : {1, 2, 4})
    c.push_back({std::to_string(n) + " threads", [n]() -> std::shared_ptr<void> {
                   return std::make_shared<testing::ThreadCount>(n);
                 }});
  return c;
}

TEST(BackendOps, EveryCaseOnTheCpu) {
  harness::Runner runner(Device::cpu(), thread_counts());
  const harness::Totals t = runner.run_all();
  if (!harness::narrowed()) {
    EXPECT_GT(t.cases, 5000);
  }
  EXPECT_EQ(t.failures, 0);
}

} // namespace
} // namespace samebits
