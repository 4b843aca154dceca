// The CUDA index_select / gather kernel choice (see indexing_choice.hpp).
#include "ops/indexing_choice.hpp"

#include "ops/launch_shape.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace samebits::detail {

namespace {
constexpr int kBlock = 256;
constexpr int kMaxGrid = 1 << 30;
} // namespace

IndexingChoice choose_indexing_kernel(const IndexingShape& s) {
  IndexingChoice c;
  if (s.elements == 0)
    return c;
  if (s.check && s.indices <= kOneBlockCopyMaxIndices && s.elements <= kOneBlockCopyMaxElements) {
    c.kernel = IndexingKernel::one_block;
    c.word_bytes = s.elem_bytes;
    c.bx = kOneBlockCopyThreads;
    c.by = 1;
    c.grid = 1;
    return c;
  }
  if (s.gather || !s.contiguous) {
    c.kernel = IndexingKernel::copy_any;
    c.word_bytes = s.elem_bytes;
    c.bx = kBlock;
    c.by = 1;
    c.grid = grid_for(s.elements, kBlock, kMaxGrid);
    return c;
  }
  c.kernel = IndexingKernel::copy_rows;
  c.word_bytes = s.row_bytes % 16 == 0 && s.aligned ? 16 : s.elem_bytes;
  const std::int64_t words = s.row_bytes / c.word_bytes;
  c.bx = 1;
  while (c.bx < 32 && c.bx < words)
    c.bx *= 2;
  if (words > 64)
    c.bx = static_cast<int>(std::min<std::int64_t>(kBlock, words >= 256 ? 256 : 64));
  c.by = kBlock / c.bx;
  if (s.rows == 0)
    c.kernel = IndexingKernel::none;
  else
    c.grid = grid_for(s.rows, c.by, kMaxGrid);
  return c;
}

std::string IndexingChoice::name() const {
  switch (kernel) {
  case IndexingKernel::none:
    return "no launch (nothing to copy)";
  case IndexingKernel::copy_rows:
    return fmt::format("copy_rows ({}-byte words, block ({}, {})), grid {}", word_bytes, bx, by,
                       grid);
  case IndexingKernel::copy_any:
    return fmt::format("copy_any (a thread per element, {}-byte words), block {}, grid {}",
                       word_bytes, bx, grid);
  case IndexingKernel::one_block:
    return fmt::format("one_block (check, then a thread per element, {}-byte words), block {}",
                       word_bytes, bx);
  }
  return "?";
}

} // namespace samebits::detail
