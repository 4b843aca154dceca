// CPU index plan: a stable counting sort of an index vector into `order` and CSR `offsets`.
//
// The sources are split into P chunks (P depends on the thread count). Each chunk counts its
// targets, a pass over the targets turns the counts into each chunk's starting slot inside each
// target's segment, and each chunk then places its sources in ascending order. A stable sort has
// exactly one result, so the plan is the same integers for any P and any thread schedule.
#include "cpu/index_plan.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "ops/scatter.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

namespace samebits::detail {

namespace {

constexpr std::int64_t kMinChunk = 1 << 16; // sources per chunk, at least

template <class I>
void counting_sort(const I* idx, std::int64_t stride, std::int64_t n, std::int64_t m,
                   std::int64_t* order, std::int64_t* offsets, const char* op) {
  const std::int64_t chunks =
      std::clamp<std::int64_t>(n / kMinChunk, 1, std::max(1, num_threads()));
  // counts[c * m + t]: sources of chunk c with target t; later chunk c's next slot in segment t.
  std::unique_ptr<std::int64_t[]> counts(new std::int64_t[static_cast<std::size_t>(chunks * m)]);
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(chunks), -1);
  parallel_for(chunks, [&](std::int64_t c) {
    std::int64_t* cnt = counts.get() + c * m;
    std::fill(cnt, cnt + m, std::int64_t{0});
    const auto [b, e] = split_range(n, chunks, c);
    for (std::int64_t i = b; i < e; ++i) {
      const auto t = static_cast<std::int64_t>(idx[i * stride]);
      if (t < 0 || t >= m) {
        first_bad[static_cast<std::size_t>(c)] = i;
        return;
      }
      ++cnt[t];
    }
  });
  for (std::int64_t c = 0; c < chunks; ++c)
    if (const std::int64_t i = first_bad[static_cast<std::size_t>(c)]; i >= 0)
      throw IndexOutOfRange(
          index_error_message(op, i, static_cast<std::int64_t>(idx[i * stride]), m));

  // Per target: exclusive prefix over chunks (each chunk's slot within the segment) and the
  // segment length into offsets[t + 1]; then an exclusive scan over targets in ranges.
  const std::int64_t ranges = std::clamp<std::int64_t>(m / 4096, 1, 4 * std::max(1, num_threads()));
  std::vector<std::int64_t> range_total(static_cast<std::size_t>(ranges), 0);
  offsets[0] = 0;
  parallel_for(ranges, [&](std::int64_t r) {
    const auto [b, e] = split_range(m, ranges, r);
    std::int64_t total = 0;
    for (std::int64_t t = b; t < e; ++t) {
      std::int64_t run = 0;
      for (std::int64_t c = 0; c < chunks; ++c) {
        std::int64_t& x = counts[static_cast<std::size_t>(c * m + t)];
        const std::int64_t k = x;
        x = run;
        run += k;
      }
      offsets[t + 1] = run;
      total += run;
    }
    range_total[static_cast<std::size_t>(r)] = total;
  });
  std::vector<std::int64_t> range_base(static_cast<std::size_t>(ranges), 0);
  for (std::int64_t r = 1; r < ranges; ++r)
    range_base[static_cast<std::size_t>(r)] =
        range_base[static_cast<std::size_t>(r - 1)] + range_total[static_cast<std::size_t>(r - 1)];
  parallel_for(ranges, [&](std::int64_t r) {
    const auto [b, e] = split_range(m, ranges, r);
    std::int64_t acc = range_base[static_cast<std::size_t>(r)];
    for (std::int64_t t = b; t < e; ++t) {
      acc += offsets[t + 1];
      offsets[t + 1] = acc;
    }
  });

  parallel_for(chunks, [&](std::int64_t c) {
    std::int64_t* slot = counts.get() + c * m;
    const auto [b, e] = split_range(n, chunks, c);
    for (std::int64_t i = b; i < e; ++i) {
      const auto t = static_cast<std::int64_t>(idx[i * stride]);
      order[offsets[t] + slot[t]++] = i;
    }
  });
}

void plan_variant(const PlanArgs& a, const Workspace&) {
  *a.result = make_index_plan_cpu(a.index, a.num_targets, "make_index_plan");
}

} // namespace

void build_index_plan_cpu(const TensorView& index, std::int64_t num_targets, std::int64_t* order,
                          std::int64_t* offsets, const char* op) {
  const std::int64_t n = index.numel();
  if (n == 0) {
    std::fill(offsets, offsets + num_targets + 1, std::int64_t{0});
    return;
  }
  if (index.dtype == DType::i32)
    counting_sort(static_cast<const std::int32_t*>(index.data), index.strides[0], n, num_targets,
                  order, offsets, op);
  else if (index.dtype == DType::i64)
    counting_sort(static_cast<const std::int64_t*>(index.data), index.strides[0], n, num_targets,
                  order, offsets, op);
  else
    throw InvalidArgument(std::string(op) + ": index must be int32 or int64");
}

IndexPlan make_index_plan_cpu(const TensorView& index, std::int64_t num_targets, const char* op) {
  IndexPlan p;
  p.num_sources = index.numel();
  p.num_targets = num_targets;
  p.device = Device::cpu();
  p.order = Tensor::empty({p.num_sources}, DType::i64);
  p.offsets = Tensor::empty({num_targets + 1}, DType::i64);
  build_index_plan_cpu(index, num_targets, p.order.data<std::int64_t>(),
                       p.offsets.data<std::int64_t>(), op);
  return p;
}

void register_cpu_index_plan(Registry& r) {
  r.add(Variant<PlanArgs>{{"make_index_plan", "cpu.counting_sort", DeviceType::cpu,
                           Determinism::portable,
                           "parallel stable counting sort: integers only, one possible result"},
                          nullptr,
                          nullptr,
                          plan_variant});
}

} // namespace samebits::detail
