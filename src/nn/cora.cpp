// The TSV graph loader (nodes.tsv + edges.tsv) with its checks, and the CSR helpers.
#include "samebits/app/cora.hpp"

#include "samebits/errors.hpp"
#include "samebits/util/excerpt.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <string_view>
#include <type_traits>

namespace samebits::nn {

namespace {

// Reads a file line by line, remembering the line number for error messages.
class LineReader {
public:
  explicit LineReader(const std::filesystem::path& path) : path_(path), in_(path) {
    if (!in_)
      throw DataError(fmt::format("cannot open {}: the data set needs nodes.tsv and edges.tsv "
                                  "(see data/cora/README.md)",
                                  path.string()));
  }
  bool next(std::string_view& line) {
    if (!std::getline(in_, buf_))
      return false;
    ++line_no_;
    if (!buf_.empty() && buf_.back() == '\r')
      buf_.pop_back();
    line = buf_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{} line {}: {}", path_.string(), line_no_, what));
  }
  std::int64_t line_no() const { return line_no_; }

private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::string buf_;
  std::int64_t line_no_ = 0;
};

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p == std::string_view::npos ? s.npos : p - start));
    if (p == std::string_view::npos)
      break;
    start = p + 1;
  }
  return parts;
}

// Labels and feature indices beyond these are refused with the line that holds them, before the
// model would ask for the memory (a label of 2^31 - 1 means 2^31 classes).
constexpr std::int64_t kMaxLabel = 65535;
constexpr std::int64_t kMaxFeatureIndex = (std::int64_t{1} << 24) - 1;

template <class T> T field_number(const LineReader& r, std::string_view s, std::string_view what) {
  T v{};
  // from_chars is locale-free, and correctly rounded for floats: the same value everywhere.
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size())
    r.fail(fmt::format("{} '{}' is out of range for {}", what,
                       samebits::detail::printable_excerpt(s),
                       std::is_floating_point_v<T> ? "a float32" : "a 64-bit integer"));
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    r.fail(fmt::format("{} '{}' is not a number", what, samebits::detail::printable_excerpt(s)));
  return v;
}

Split parse_split(const LineReader& r, std::string_view s) {
  if (s == "train")
    return Split::train;
  if (s == "val")
    return Split::val;
  if (s == "test")
    return Split::test;
  if (s == "none")
    return Split::none;
  r.fail(fmt::format("unknown split '{}' (expected train, val, test or none)",
                     samebits::detail::printable_excerpt(s)));
}

void read_nodes(const std::filesystem::path& path, const LoadOptions& opts, Dataset& d) {
  LineReader r(path);
  std::string_view line;
  if (!r.next(line))
    r.fail("empty file (expected the header 'node\\tlabel\\tsplit\\tfeatures')");
  {
    const auto h = split_on(line, '\t');
    if (h.size() != 4 || h[0] != "node" || h[1] != "label" || h[2] != "split" || h[3] != "features")
      r.fail(fmt::format("bad header '{}' (expected 'node\\tlabel\\tsplit\\tfeatures')",
                         samebits::detail::printable_excerpt(line)));
  }
  Csr& f = d.features;
  f.offsets.assign(1, 0);
  std::vector<float> values;
  bool binary = true;
  std::int32_t max_col = -1;
  while (r.next(line)) {
    if (line.empty())
      continue;
    const auto fields = split_on(line, '\t');
    if (fields.size() != 4)
      r.fail(fmt::format("expected 4 tab-separated fields (node, label, split, features), got {}",
                         fields.size()));
    const auto node = field_number<std::int64_t>(r, fields[0], "node id");
    if (node != d.num_nodes)
      r.fail(
          fmt::format("node id {} out of order (expected {}: lines must list nodes 0, 1, 2, ...)",
                      node, d.num_nodes));
    const auto label = field_number<std::int64_t>(r, fields[1], "label");
    if (label < 0)
      r.fail(fmt::format("label {} is negative", label));
    if (label > kMaxLabel)
      r.fail(fmt::format("label {} is above {} (at most {} classes)", label, kMaxLabel,
                         kMaxLabel + 1));
    d.labels.push_back(static_cast<std::int32_t>(label));
    d.split.push_back(parse_split(r, fields[2]));
    if (!fields[3].empty()) {
      for (std::string_view tok : split_on(fields[3], ',')) {
        const std::size_t colon = tok.find(':');
        const std::string_view col_text = tok.substr(0, colon);
        const auto col = field_number<std::int64_t>(r, col_text, "feature index");
        const std::int64_t limit = opts.num_features > 0
                                       ? std::min(opts.num_features, kMaxFeatureIndex + 1)
                                       : kMaxFeatureIndex + 1;
        if (col < 0 || col >= limit)
          r.fail(fmt::format("feature index {} out of range [0, {})", col, limit));
        float v = 1.0f;
        if (colon != std::string_view::npos) {
          v = field_number<float>(r, tok.substr(colon + 1), "feature value");
          if (!std::isfinite(v))
            r.fail(fmt::format("feature value '{}' is not finite",
                               samebits::detail::printable_excerpt(tok.substr(colon + 1))));
          if (v != 1.0f)
            binary = false;
        }
        f.cols.push_back(static_cast<std::int32_t>(col));
        values.push_back(v);
        max_col = std::max(max_col, static_cast<std::int32_t>(col));
      }
    }
    f.offsets.push_back(static_cast<std::int64_t>(f.cols.size()));
    ++d.num_nodes;
  }
  if (d.num_nodes == 0)
    r.fail("no nodes");
  d.num_features = opts.num_features > 0 ? opts.num_features : std::int64_t{max_col} + 1;
  f.rows = d.num_nodes;
  f.cols_count = d.num_features;
  d.binary_features = binary;
  if (!binary)
    f.values = std::move(values);
  d.num_classes = std::int64_t{*std::max_element(d.labels.begin(), d.labels.end())} + 1;
}

void read_edges(const std::filesystem::path& path, Dataset& d) {
  LineReader r(path);
  std::string_view line;
  if (!r.next(line))
    r.fail("empty file (expected the header 'src\\tdst')");
  {
    const auto h = split_on(line, '\t');
    if (h.size() != 2 || h[0] != "src" || h[1] != "dst")
      r.fail(fmt::format("bad header '{}' (expected 'src\\tdst')",
                         samebits::detail::printable_excerpt(line)));
  }
  while (r.next(line)) {
    if (line.empty())
      continue;
    const auto fields = split_on(line, '\t');
    if (fields.size() != 2)
      r.fail(fmt::format("expected 2 tab-separated fields (src, dst), got {}", fields.size()));
    const auto s = field_number<std::int64_t>(r, fields[0], "source node");
    const auto t = field_number<std::int64_t>(r, fields[1], "target node");
    for (auto v : {s, t})
      if (v < 0 || v >= d.num_nodes)
        r.fail(fmt::format("node {} out of range [0, {}) (nodes.tsv has {} nodes)", v, d.num_nodes,
                           d.num_nodes));
    d.edge_src.push_back(s);
    d.edge_dst.push_back(t);
  }
}

void check_expected(const Dataset& d, const Expected& e, const std::filesystem::path& dir) {
  auto bad = [&](std::string_view what, auto got, auto want) {
    throw DataError(fmt::format("{}: {} is {}, expected {} (is this the right data set? pass "
                                "--check none to skip the checks)",
                                dir.string(), what, got, want));
  };
  if (d.num_nodes != e.nodes)
    bad("the number of nodes", d.num_nodes, e.nodes);
  if (d.num_edges() != e.edges)
    bad("the number of edges", d.num_edges(), e.edges);
  if (d.features.nnz() != e.nonzero_features)
    bad("the number of non-zero features", d.features.nnz(), e.nonzero_features);
  const auto counts = d.class_counts();
  if (counts != e.class_counts)
    bad("the class counts", fmt::format("{}", fmt::join(counts, " ")),
        fmt::format("{}", fmt::join(e.class_counts, " ")));
}

} // namespace

Csr transpose(const Csr& m) {
  Csr t;
  t.rows = m.cols_count;
  t.cols_count = m.rows;
  t.offsets.assign(static_cast<std::size_t>(t.rows) + 1, 0);
  for (std::int32_t c : m.cols)
    ++t.offsets[static_cast<std::size_t>(c) + 1];
  for (std::size_t i = 1; i < t.offsets.size(); ++i)
    t.offsets[i] += t.offsets[i - 1];
  t.cols.resize(m.cols.size());
  if (!m.values.empty())
    t.values.resize(m.values.size());
  std::vector<std::int64_t> next(t.offsets.begin(), t.offsets.end() - 1);
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t k = m.offsets[static_cast<std::size_t>(r)];
         k < m.offsets[static_cast<std::size_t>(r) + 1]; ++k) {
      const auto c = static_cast<std::size_t>(m.cols[static_cast<std::size_t>(k)]);
      const auto dst = static_cast<std::size_t>(next[c]++);
      t.cols[dst] = static_cast<std::int32_t>(r);
      if (!m.values.empty())
        t.values[dst] = m.values[static_cast<std::size_t>(k)];
    }
  return t;
}

std::vector<std::int64_t> Dataset::nodes_in(Split s) const {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < num_nodes; ++i)
    if (split[static_cast<std::size_t>(i)] == s)
      out.push_back(i);
  return out;
}

std::vector<std::int64_t> Dataset::class_counts() const {
  std::vector<std::int64_t> c(static_cast<std::size_t>(num_classes), 0);
  for (auto l : labels)
    ++c[static_cast<std::size_t>(l)];
  return c;
}

Csr Dataset::in_neighbours() const {
  // Edges as a [num_nodes x num_nodes] matrix of rows src, columns dst, in file order; its
  // transpose lists, for each dst, the sources in ascending order.
  Csr by_src;
  by_src.rows = by_src.cols_count = num_nodes;
  by_src.offsets.assign(static_cast<std::size_t>(num_nodes) + 1, 0);
  for (auto s : edge_src)
    ++by_src.offsets[static_cast<std::size_t>(s) + 1];
  for (std::size_t i = 1; i < by_src.offsets.size(); ++i)
    by_src.offsets[i] += by_src.offsets[i - 1];
  by_src.cols.resize(edge_src.size());
  std::vector<std::int64_t> next(by_src.offsets.begin(), by_src.offsets.end() - 1);
  for (std::size_t e = 0; e < edge_src.size(); ++e)
    by_src.cols[static_cast<std::size_t>(next[static_cast<std::size_t>(edge_src[e])]++)] =
        static_cast<std::int32_t>(edge_dst[e]);
  return transpose(by_src);
}

Expected cora_expected() {
  return {2708, 10556, 49216, {351, 217, 418, 818, 426, 298, 180}};
}

Dataset load_dataset(const std::filesystem::path& dir, const LoadOptions& opts) {
  Dataset d;
  d.name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  read_nodes(dir / "nodes.tsv", opts, d);
  read_edges(dir / "edges.tsv", d);
  if (opts.expect)
    check_expected(d, *opts.expect, dir);
  return d;
}

} // namespace samebits::nn
