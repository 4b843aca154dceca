// GPU benchmarks of segment_reduce (presorted anchor shapes) and aggregate (the synthetic graph of
// the GraphSAGE inference benchmark), every CUDA variant.
#include "gpu_common.hpp"

#include <fmt/format.h>
#include <random>

namespace samebits::bench {

namespace {

// Presorted CSR offsets: `edges` positions with uniformly random targets among `segs`, counted.
Tensor sorted_offsets(std::int64_t edges, std::int64_t segs, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> d(0, segs - 1);
  std::vector<std::int64_t> off(static_cast<std::size_t>(segs + 1), 0);
  for (std::int64_t k = 0; k < edges; ++k)
    ++off[static_cast<std::size_t>(d(gen) + 1)];
  for (std::int64_t s = 0; s < segs; ++s)
    off[static_cast<std::size_t>(s + 1)] += off[static_cast<std::size_t>(s)];
  return Tensor::from_vector(off, {segs + 1}, Device::cuda());
}

// `edges` edges on `nodes` nodes, each from a uniformly random node to a node at most `reach`
// node numbers away (wrapping around), as a validated CSR on the host.
Csr local_graph(std::int64_t nodes, std::int64_t edges, std::int64_t reach, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> node(0, nodes - 1), step(-reach, reach);
  std::vector<std::int32_t> src(static_cast<std::size_t>(edges)),
      dst(static_cast<std::size_t>(edges));
  for (std::size_t k = 0; k < src.size(); ++k) {
    const std::int64_t d = node(gen);
    dst[k] = static_cast<std::int32_t>(d);
    src[k] = static_cast<std::int32_t>(((d + step(gen)) % nodes + nodes) % nodes);
  }
  return csr_from_edges(Tensor::from_vector(src, {edges}), Tensor::from_vector(dst, {edges}),
                        nodes);
}

std::string count(std::int64_t n) {
  if (n % 1000000 == 0)
    return fmt::format("{}M", n / 1000000);
  if (n % 1000 == 0)
    return fmt::format("{}k", n / 1000);
  return std::to_string(n);
}

} // namespace

void bench_segment(Report& r) {
  struct Anchor {
    std::int64_t e, n, f;
  };
  const Anchor anchors[] = {{10'000'000, 1'000'000, 1},
                            {2'000'000, 100'000, 64},
                            {2'000'000, 1000, 64},
                            {1'000'000, 2708, 128}};
  for (const auto& a : anchors) {
    const std::int64_t scale = r.quick ? 10 : 1;
    const std::int64_t e = a.e / scale, n = std::max<std::int64_t>(1, a.n / scale);
    Tensor off = sorted_offsets(e, n, 5);
    Tensor src = gpu_normal({e, a.f});
    Tensor out = Tensor::empty({n, a.f}, DType::f32, Device::cuda());
    const std::string shape = fmt::format("E={} N={} F={}", count(e), count(n), a.f);
    const double bytes = 4.0 * (e + n) * a.f + 8.0 * (n + 1);
    for (const auto& v : list_variants("segment_reduce")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { segment_reduce(src, off, out, Reduce::sum, o); });
      r.add({"segment", "segment_reduce sum", shape, v.name, std::string(to_string(v.level)), ms,
             bytes, "presorted; offsets checked on the device every call"});
    }
  }

  // The synthetic graph: 1M nodes, 20M random edges, 128 features.
  const std::int64_t nodes = r.quick ? 100'000 : 1'000'000, edges = 20 * nodes, f = 128;
  const Csr csr = csr_from_edges(gpu_index(edges, nodes, DType::i32, 3).to(Device::cpu()),
                                 gpu_index(edges, nodes, DType::i32, 4).to(Device::cpu()), nodes);
  const Csr g = csr.to(Device::cuda());
  Tensor x = gpu_normal({nodes, f});
  Tensor out = Tensor::empty({nodes, f}, DType::f32, Device::cuda());
  const std::string shape = fmt::format("graph N={} E={} F={}", count(nodes), count(edges), f);
  // Bytes: x read once, out written once, CSR read once (the E*F gathered reads hit x again).
  const double bytes = 8.0 * nodes * f + 4.0 * edges + 8.0 * (nodes + 1);
  for (Reduce red : {Reduce::sum, Reduce::mean, Reduce::amax})
    for (const auto& v : list_variants("aggregate")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { aggregate(g.view(), x, out, red, o); }, 20, 3);
      r.add({"segment",
             fmt::format("aggregate {}", red == Reduce::sum    ? "sum"
                                         : red == Reduce::mean ? "mean"
                                                               : "amax"),
             shape, v.name, std::string(to_string(v.level)), ms, bytes,
             fmt::format("validated Csr; gathered rows {:.1f} GB", 4.0 * edges * f / 1e9)});
    }
  // A graph with locality (a mesh, or a graph whose nodes were reordered for it): the same sizes,
  // every neighbour within kReach node numbers of its node, so the gathered rows come from L2.
  {
    constexpr std::int64_t kReach = 2048;
    const Csr lg = local_graph(nodes, edges, kReach, 6).to(Device::cuda());
    const std::string lshape =
        fmt::format("local graph N={} E={} F={}", count(nodes), count(edges), f);
    for (const auto& v : list_variants("aggregate")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { aggregate(lg.view(), x, out, Reduce::sum, o); }, 20, 3);
      r.add({"segment", "aggregate sum", lshape, v.name, std::string(to_string(v.level)), ms, bytes,
             fmt::format("validated Csr; neighbours within {} nodes", kReach)});
    }
  }
  // The same with an unvalidated graph view: the index check kernel and a host sync every call.
  for (const auto& v : list_variants("aggregate")) {
    if (v.backend != DeviceType::cuda || v.level != Determinism::portable)
      continue;
    Options o{.level = v.level, .variant = v.name};
    const CsrGraph unchecked{g.offsets, g.indices};
    const double ms = time_ms([&] { aggregate(unchecked, x, out, Reduce::sum, o); }, 20, 3);
    r.add({"segment", "aggregate sum (unchecked graph)", shape, v.name,
           std::string(to_string(v.level)), ms, bytes, "indices checked on the device every call"});
  }
}

} // namespace samebits::bench
