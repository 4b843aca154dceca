// samebits::parallel_for, the public door to the CPU thread pool (src/cpu/thread_pool.cpp).
#include "cpu/thread_pool.hpp"
#include "samebits/threads.hpp"

namespace samebits {

void parallel_for(std::int64_t ntasks, const std::function<void(std::int64_t task)>& f) {
  detail::parallel_for(ntasks, f);
}

} // namespace samebits
