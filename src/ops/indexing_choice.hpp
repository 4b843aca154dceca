// The kernel choice of the CUDA index_select and gather (cuda/indexing.cu: cuda.copy), as a pure
// function of the shape, callable on the host without a GPU. Copies have nothing to round, so no
// choice changes a bit.
#pragma once
#include <cstdint>
#include <string>

namespace samebits::detail {

struct IndexingShape {
  bool gather = false;        // gather (else index_select)
  bool contiguous = true;     // x and out contiguous
  bool aligned = true;        // x and out data 16-byte aligned
  int elem_bytes = 4;         // 4 or 8
  std::int64_t rows = 0;      // index_select: (outer, index) rows copied
  std::int64_t row_bytes = 0; // index_select: bytes per row (the dims after dim)
  std::int64_t elements = 0;  // elements of out
  std::int64_t indices = 0;   // elements of the index
  bool check = false;         // the index values are still to be checked (not `checked`)
};

// Small checked calls: one block checks every index, then copies, in one launch (no memset, and in
// deferred mode no report kernel).
constexpr int kOneBlockCopyThreads = 1024;
constexpr std::int64_t kOneBlockCopyMaxIndices = 16384;
constexpr std::int64_t kOneBlockCopyMaxElements = 16384;

enum class IndexingKernel {
  none,      // nothing to copy
  copy_rows, // a block of (bx, by) threads per by rows, `word_bytes`-byte words
  copy_any,  // a thread per output element, any strides
  one_block, // check and copy_any's loop in one block (kOneBlockCopy*)
};

struct IndexingChoice {
  IndexingKernel kernel = IndexingKernel::none;
  int word_bytes = 4;   // copy_rows: 16 (aligned rows of a multiple of 16 bytes), 8 or 4
  int bx = 1, by = 256; // copy_rows: threads along a row, rows per block
  unsigned grid = 1;
  std::string name() const;
};

IndexingChoice choose_indexing_kernel(const IndexingShape& s);

} // namespace samebits::detail
