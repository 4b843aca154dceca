// The CUDA histogram family's launch choice (see histogram_choice.hpp).
#include "ops/histogram_choice.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace samebits::detail {

HistogramLaunch histogram_launch(std::int64_t n, int sms, const HistogramTuning& t) {
  HistogramLaunch l;
  l.block = t.alternative ? 64 : 256;
  const std::int64_t want = std::max<std::int64_t>(1, (n + l.block * 8 - 1) / (l.block * 8));
  std::int64_t g = std::min<std::int64_t>(want, t.alternative ? 13 : std::int64_t{sms} * 8);
  g = std::max<std::int64_t>(g, (n >> 31) + 1);
  l.grid = static_cast<unsigned>(g);
  return l;
}

BincountChoice choose_bincount_kernel(std::int64_t n, std::int64_t bins, int weight_bytes,
                                      bool canonical, int sms, const HistogramTuning& t) {
  BincountChoice c;
  const bool weighted = weight_bytes > 0;
  c.accumulate = histogram_launch(n, sms, t);
  c.finalize = histogram_launch(bins, sms, t);
  c.fixed_point = weighted && canonical;
  const std::size_t elem = !weighted || canonical ? 8 : static_cast<std::size_t>(weight_bytes);
  c.shared_bins = static_cast<std::size_t>(bins) * elem <= kHistogramSmemBytes;
  c.smem_bytes = c.shared_bins ? static_cast<std::size_t>(bins) * elem : 0;
  return c;
}

HistcChoice choose_histc_kernel(std::int64_t n, std::int64_t bins, int sms,
                                const HistogramTuning& t) {
  HistcChoice c;
  c.count = histogram_launch(n, sms, t);
  // Each block flushes its bins: keep at least ~8 values per bin per block, and 2 blocks per SM.
  const std::int64_t cap =
      std::max<std::int64_t>({std::int64_t{2} * sms, bins > 0 ? n / (8 * bins) : 0, (n >> 31) + 1});
  c.count.grid = static_cast<unsigned>(std::min<std::int64_t>(c.count.grid, cap));
  const std::int64_t fit = bins > 0 ? static_cast<std::int64_t>(kHistogramSmemBytes) / 4 / bins
                                    : 0; // replicas that fit in shared memory
  c.shared_bins = fit >= 1;
  c.replicas = static_cast<int>(
      std::max<std::int64_t>(1, std::min<std::int64_t>({fit, 8, c.count.block / 32})));
  c.smem_bytes = c.shared_bins ? static_cast<std::size_t>(bins * c.replicas) * 4 : 0;
  c.finalize = histogram_launch(bins, sms, t);
  return c;
}

std::string BincountChoice::name() const {
  return fmt::format("{} ({}), block {}, grid {}; finalize_kernel, grid {}",
                     fixed_point ? "int_hist_kernel (exact int64 fixed point)"
                                 : "int_hist_kernel / float_hist_kernel",
                     shared_bins ? "per-block shared-memory bins" : "global atomics",
                     accumulate.block, accumulate.grid, finalize.grid);
}

std::string HistcChoice::name() const {
  return fmt::format("histc_kernel ({}), block {}, grid {}; histc_finalize, grid {}",
                     shared_bins ? fmt::format("{} shared-memory replicas", replicas)
                                 : std::string("global counters"),
                     count.block, count.grid, finalize.grid);
}

} // namespace samebits::detail
