// The Cora data set (and any graph in the same TSV format) in memory: node features as a sparse
// CSR matrix, labels, the train/val/test split, and the directed edge list; plus the CSR helpers
// the GraphSAGE model builds from them. Format: data/cora/README.md. Beyond that format, the reader
// refuses (DataError naming the file and line) labels above 65535, feature indices of 2^24 or more
// and feature values that are NaN or infinite.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace samebits::nn {

enum class Split : std::uint8_t { none, train, val, test };

// A sparse matrix in CSR form: row r holds columns cols[offsets[r] .. offsets[r+1]) with the
// matching values (empty `values` means every stored value is 1).
struct Csr {
  std::int64_t rows = 0;
  std::int64_t cols_count = 0;
  std::vector<std::int64_t> offsets; // [rows + 1]
  std::vector<std::int32_t> cols;    // [nnz]
  std::vector<float> values;         // [nnz] or empty
  std::int64_t nnz() const { return static_cast<std::int64_t>(cols.size()); }
};

// The transpose, rows of the result in ascending order of the source rows (a stable counting
// sort, so the result is a pure function of the input).
Csr transpose(const Csr& m);

struct Dataset {
  std::string name; // the directory's name
  std::int64_t num_nodes = 0;
  std::int64_t num_features = 0;
  std::int64_t num_classes = 0; // max label + 1
  Csr features;                 // [num_nodes x num_features]
  bool binary_features = true;  // every stored value is 1 (values then empty)
  // Dense features [num_nodes x num_features], row-major, for synthetic benchmark graphs; when
  // non-empty they replace `features`.
  std::vector<float> dense_features;
  std::vector<std::int32_t> labels;
  std::vector<Split> split;
  std::vector<std::int64_t> edge_src, edge_dst; // directed edges src -> dst

  std::int64_t num_edges() const { return static_cast<std::int64_t>(edge_src.size()); }
  std::vector<std::int64_t> nodes_in(Split s) const; // ascending
  std::vector<std::int64_t> class_counts() const;
  // In-neighbours as CSR: row i lists the sources j of the edges j -> i, ascending by j (then by
  // position in the edge file). Messages flow along edges, as in PyTorch Geometric.
  Csr in_neighbours() const;
};

// What a loader can check after reading (data/cora/README.md lists Cora's numbers).
struct Expected {
  std::int64_t nodes = 0;
  std::int64_t edges = 0;
  std::int64_t nonzero_features = 0;
  std::vector<std::int64_t> class_counts;
};
Expected cora_expected();

struct LoadOptions {
  std::int64_t num_features = 0;  // 0: max feature index + 1
  std::optional<Expected> expect; // checked after loading when set
};

// Reads `dir`/nodes.tsv and `dir`/edges.tsv. Throws DataError naming the file and line on a
// missing file, a malformed line, an unknown split, an index out of range, nodes out of order,
// or counts that differ from `opts.expect`.
Dataset load_dataset(const std::filesystem::path& dir, const LoadOptions& opts = {});

} // namespace samebits::nn
