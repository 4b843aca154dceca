// CPU variants of index_select and gather: element copies, no arithmetic.
//
//   cpu.copy   portable   copies x's elements to out as raw words; with nothing to round, the
//                         result is the same bits at every level, so this one variant serves
//                         not_guaranteed, run_to_run and portable
#include "ops/indexing.hpp"

#include "core/registry.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <cstring>

namespace samebits::detail {

namespace {

// W: a word of the element size (the dtype does not matter for a copy); I: the index type.
template <class W, class I> void copy_kernel(const IndexArgs& a, bool gather) {
  const Padded4 p = pad4(a, gather);
  const W* x = static_cast<const W*>(a.x.data);
  const I* idx = static_cast<const I*>(a.index.data);
  W* out = static_cast<W*>(a.out.data);
  const auto& n = p.size;
  const auto dim = static_cast<std::size_t>(p.dim);
  // One task per (i0, i1); i2, i3 sequential inside.
  parallel_for(n[0] * n[1], [&](std::int64_t t) {
    std::int64_t c[4] = {t / n[1], t % n[1], 0, 0};
    for (c[2] = 0; c[2] < n[2]; ++c[2])
      for (c[3] = 0; c[3] < n[3]; ++c[3]) {
        std::int64_t ix = 0, io = 0, ii = 0;
        for (std::size_t d = 0; d < 4; ++d) {
          io += c[d] * p.os[d];
          if (gather)
            ii += c[d] * p.is[d];
          if (d != dim)
            ix += c[d] * p.xs[d];
        }
        if (!gather)
          ii = c[dim] * p.is[dim];
        ix += static_cast<std::int64_t>(idx[ii]) * p.xs[dim];
        out[io] = x[ix];
      }
  });
}

template <class W> void run_words(const IndexArgs& a, bool gather) {
  if (a.index.dtype == DType::i32)
    copy_kernel<W, std::int32_t>(a, gather);
  else
    copy_kernel<W, std::int64_t>(a, gather);
}

// index_select on contiguous x and out, seen as [outer, D, inner] -> [outer, n, inner]: one
// memcpy of `inner` elements per selected row.
template <class I> void copy_rows(const IndexArgs& a) {
  const std::size_t es = size_of(a.x.dtype);
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < a.dim; ++d)
    outer *= a.x.size(d);
  for (int d = a.dim + 1; d < a.x.ndim; ++d)
    inner *= a.x.size(d);
  const std::int64_t n = a.index.numel(), dsize = a.x.size(a.dim), rows = outer * n;
  const std::int64_t istride = a.index.ndim == 0 ? 0 : a.index.strides[0];
  const I* idx = static_cast<const I*>(a.index.data);
  const char* x = static_cast<const char*>(a.x.data);
  char* out = static_cast<char*>(a.out.data);
  const auto row_bytes = static_cast<std::size_t>(inner) * es;
  const std::int64_t per_task =
      std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(1, inner));
  parallel_for((rows + per_task - 1) / per_task, [&](std::int64_t t) {
    const std::int64_t end = std::min(rows, (t + 1) * per_task);
    for (std::int64_t r = t * per_task; r < end; ++r) {
      const std::int64_t src = (r / n) * dsize + static_cast<std::int64_t>(idx[(r % n) * istride]);
      std::memcpy(out + static_cast<std::size_t>(r) * row_bytes,
                  x + static_cast<std::size_t>(src) * row_bytes, row_bytes);
    }
  });
}

void run(const IndexArgs& a, bool gather) {
  if (a.out.numel() == 0)
    return;
  if (!gather && a.x.is_contiguous() && a.out.is_contiguous()) {
    if (a.index.dtype == DType::i32)
      copy_rows<std::int32_t>(a);
    else
      copy_rows<std::int64_t>(a);
    return;
  }
  if (size_of(a.x.dtype) == 2) // bfloat16, float16
    run_words<std::uint16_t>(a, gather);
  else if (size_of(a.x.dtype) == 4)
    run_words<std::uint32_t>(a, gather);
  else
    run_words<std::uint64_t>(a, gather);
}

void run_index_select(const IndexArgs& a, const Workspace&) {
  run(a, false);
}
void run_gather(const IndexArgs& a, const Workspace&) {
  run(a, true);
}

} // namespace

void register_cpu_indexing(Registry& r) {
  const char* how = "copies elements, no arithmetic: the same bits at every level, so this one "
                    "variant serves not_guaranteed, run_to_run and portable";
  r.add(
      Variant<IndexArgs>{{"index_select", "cpu.copy", DeviceType::cpu, Determinism::portable, how},
                         nullptr,
                         nullptr,
                         run_index_select});
  r.add(Variant<IndexArgs>{{"gather", "cpu.copy", DeviceType::cpu, Determinism::portable, how},
                           nullptr,
                           nullptr,
                           run_gather});
}

} // namespace samebits::detail
