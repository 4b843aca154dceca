// `samebits bench graphsage`: the price of determinism at inference. Times one GraphSAGE forward
// pass per determinism level on Cora and on a synthetic graph (1M nodes, 20M edges, 128 dense
// features, hidden 128, 16 classes); CUDA events (replaying a CUDA graph of the forward pass
// where the ops allow capture) or the wall clock on the CPU; median of many repetitions.
#include "commands.hpp"
#include "samebits/app/cora.hpp"
#include "samebits/app/graphsage.hpp"
#include "samebits/rng.hpp"
#include "samebits/samebits.hpp"
#include "samebits/stream.hpp"
#include "samebits/util/json_text.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace samebits::cli {

namespace {

struct BenchCli {
  std::string data = "data/cora";
  std::string devices = "auto";
  std::string levels = "not_guaranteed,run_to_run,portable";
  std::string graphs = "cora,synthetic";
  int reps = 200;
  std::int64_t syn_nodes = 1'000'000, syn_edges = 20'000'000, syn_features = 128, syn_hidden = 128;
  std::string json_path;
  int threads = 0;
};

// A random graph with dense features, every value from Philox (seed 2024): the same graph on
// every machine.
nn::Dataset synthetic(std::int64_t n, std::int64_t e, std::int64_t f, std::int64_t classes) {
  nn::Dataset d;
  d.name = fmt::format("synthetic N={} E={} F={}", n, e, f);
  d.num_nodes = n;
  d.num_features = f;
  d.num_classes = classes;
  d.dense_features.resize(static_cast<std::size_t>(n * f));
  for (std::int64_t i = 0; i < n * f; i += 4) { // one Philox block per four values
    const rng::Block b = rng::block(2024, 0, static_cast<std::uint64_t>(i) >> 2);
    for (std::int64_t j = i; j < std::min(i + 4, n * f); ++j)
      d.dense_features[static_cast<std::size_t>(j)] =
          rng::to_unit_float(b[static_cast<std::size_t>(j & 3)]) * 2.0f - 1.0f;
  }
  d.edge_src.resize(static_cast<std::size_t>(e));
  d.edge_dst.resize(static_cast<std::size_t>(e));
  for (std::int64_t i = 0; i < e; ++i) {
    d.edge_src[static_cast<std::size_t>(i)] =
        rng::bits32(2024, 1, static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(n);
    d.edge_dst[static_cast<std::size_t>(i)] =
        rng::bits32(2024, 2, static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(n);
  }
  d.labels.resize(static_cast<std::size_t>(n));
  d.split.assign(static_cast<std::size_t>(n), nn::Split::test);
  for (std::int64_t i = 0; i < n; ++i)
    d.labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % classes);
  d.split[0] = nn::Split::train;
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Timing {
  double ms = 0;
  bool graph = false;
};

Timing time_cpu(nn::GraphSage& model, int reps) {
  std::vector<double> t;
  for (int i = 0; i < 3; ++i)
    model.infer();
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    model.infer();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return {median(t), false};
}

Timing time_cuda(nn::GraphSage& model, Stream stream, Device dev, int reps) {
  for (int i = 0; i < 3; ++i)
    model.infer();
  synchronize(dev, stream);
  // Capture one forward pass; ops that synchronize or allocate during capture make it fail, and
  // the plain launches are timed instead.
  const CudaGraph graph(stream, [&] { model.infer(); });
  CudaEvent a(dev), b(dev);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    a.record(stream);
    if (graph.captured())
      graph.launch(stream);
    else
      model.infer();
    b.record(stream);
    t.push_back(CudaEvent::elapsed_ms(a, b));
  }
  return {median(t), graph.captured()};
}

void run(const BenchCli& o) {
  detail::check_writable(o.json_path, "bench graphsage --json");
  if (o.threads > 0)
    set_num_threads(o.threads);
  const std::vector<Device> devices = device_list(o.devices);
  require_present(devices, "bench graphsage");
  const std::vector<Determinism> levels = parse_level_list(o.levels, /*all_allowed=*/false);
  nlohmann::json out = nlohmann::json::array();
  fmt::print("{:<40} {:<6} {:<15} {:>10} {:>8} {:>6}\n", "graph", "device", "level", "ms", "vs ng",
             "graph");
  for (const auto& gname : comma_items(o.graphs, "graph")) {
    // The synthetic graph takes minutes on a CPU: "auto" runs it on CUDA only.
    std::vector<Device> run_on;
    for (Device dev : devices)
      if (!(dev.is_cpu() && gname == "synthetic" && o.devices == "auto"))
        run_on.push_back(dev);
    if (run_on.empty()) {
      fmt::print(
          "{:<40} skipped: no CUDA device here (--device cpu runs it on the CPU, in minutes)\n",
          gname);
      continue;
    }
    nn::Dataset data;
    std::int64_t hidden = 16;
    if (gname == "cora") {
      data = nn::load_dataset(o.data);
    } else if (gname == "synthetic") {
      data = synthetic(o.syn_nodes, o.syn_edges, o.syn_features, 16);
      hidden = o.syn_hidden;
    } else {
      throw InvalidArgument("bench graphsage: --graphs takes cora and/or synthetic");
    }
    for (Device dev : run_on) {
      double base = 0;
      for (Determinism level : levels) {
        nn::SageConfig cfg;
        cfg.device = dev;
        cfg.level = level;
        cfg.hidden = hidden;
        Timing t;
        const int reps = gname == "cora" ? o.reps : std::max(5, o.reps / 10);
        // The stream, the events and the captured graph belong to the model's GPU.
        const DeviceScope on_device(dev);
        // Destroyed after the model, it gives back what samebits cached for it (release_stream).
        std::optional<CudaStream> stream;
        if (dev.is_cuda()) {
          stream.emplace(dev);
          cfg.stream = stream->stream();
        }
        {
          nn::GraphSage model(data, cfg);
          model.init(0);
          if (dev.is_cpu())
            t = time_cpu(model, reps);
          else
            t = time_cuda(model, stream->stream(), dev, reps);
        }
        if (level == Determinism::not_guaranteed)
          base = t.ms;
        const std::string ratio = base > 0 ? fmt::format("{:.2f}x", t.ms / base) : "-";
        fmt::print("{:<40} {:<6} {:<15} {:>10.4f} {:>8} {:>6}\n", data.name, to_string(dev),
                   to_string(level), t.ms, ratio, t.graph ? "yes" : "no");
        out.push_back({{"graph", data.name},
                       {"device", to_string(dev)},
                       {"level", to_string(level)},
                       {"median_ms", t.ms},
                       {"reps", reps},
                       {"cuda_graph", t.graph},
                       {"hidden", hidden},
                       {"threads", num_threads()}});
      }
    }
  }
  if (!o.json_path.empty())
    detail::write_whole_file(o.json_path, detail::json_text(out, 1) + "\n",
                             "bench graphsage --json");
}

} // namespace

void add_bench_graphsage_command(CLI::App& app) {
  CLI::App* bench = nullptr;
  for (auto* sc : app.get_subcommands([](CLI::App*) { return true; }))
    if (sc->get_name() == "bench")
      bench = sc;
  if (bench == nullptr) {
    bench = app.add_subcommand("bench", "Benchmarks");
    bench->require_subcommand(1);
  }
  auto o = std::make_shared<BenchCli>();
  auto* g = bench->add_subcommand("graphsage", "Time a GraphSAGE forward pass per determinism "
                                               "level on Cora and a synthetic graph");
  g->add_option("--data", o->data, "Cora directory")->capture_default_str();
  g->add_option("--device", o->devices, "cpu, cuda, or a list; auto: cpu (Cora only) plus cuda")
      ->check(device_names(true))
      ->capture_default_str();
  g->add_option("--levels", o->levels, "Determinism levels, comma-separated")
      ->check(level_list(false))
      ->capture_default_str();
  g->add_option("--graphs", o->graphs, "cora and/or synthetic, comma-separated")
      ->check(name_list({"cora", "synthetic"}, "graph"))
      ->capture_default_str();
  g->add_option("--reps", o->reps, "Timed repetitions on Cora (a tenth on the synthetic graph)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  g->add_option("--nodes", o->syn_nodes, "Synthetic graph: nodes")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31))
      ->capture_default_str();
  g->add_option("--edges", o->syn_edges, "Synthetic graph: edges")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 34))
      ->capture_default_str();
  g->add_option("--features", o->syn_features, "Synthetic graph: dense features")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  g->add_option("--hidden", o->syn_hidden, "Synthetic graph: hidden width")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  g->add_option("--threads", o->threads,
                "CPU threads (default: SAMEBITS_NUM_THREADS, else every core)")
      ->check(CLI::Range(1, 1024));
  g->add_option("--json", o->json_path, "Write the timings as JSON to FILE");
  g->callback([o] { run(*o); });
}

} // namespace samebits::cli
