// `samebits ops`: which variant runs for every op, backend and level, and what would throw.
#include "commands.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/json_text.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

namespace samebits::cli {

namespace {

struct OpsOptions {
  bool json = false;
  bool variants = false;
  std::string explain_op;
  std::vector<std::int64_t> shape; // --explain with a shape: the kernel choice
  std::int64_t rows = 0;
  int dim = -1;
  std::string dtype = "float32";
};

void print_matrix(const OpsOptions& o) {
  const Determinism levels[] = {Determinism::not_guaranteed, Determinism::run_to_run,
                                Determinism::portable};
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& op : op_names())
      for (DeviceType b : {DeviceType::cpu, DeviceType::cuda})
        for (auto l : levels) {
          auto p = preview_selection(op, b, l);
          j.push_back({{"op", op},
                       {"backend", to_string(b)},
                       {"level", to_string(l)},
                       {"runs", p.runs},
                       {"variant", p.variant}});
        }
    std::cout << detail::json_text(j, 2) << '\n';
    return;
  }
  std::cout << fmt::format("{:<16} {:<5} {:<26} {:<26} {:<26}\n", "op", "", "not_guaranteed",
                           "run_to_run", "portable");
  for (const auto& op : op_names())
    for (DeviceType b : {DeviceType::cpu, DeviceType::cuda}) {
      std::cout << fmt::format("{:<16} {:<5}", op, to_string(b));
      for (auto l : levels) {
        auto p = preview_selection(op, b, l);
        std::cout << fmt::format(" {:<26}", p.runs ? p.variant : "THROWS");
      }
      std::cout << '\n';
    }
  std::cout
      << "\nEach cell: the variant a call at that level runs when it takes the call's arguments; a "
         "variant\n"
         "that does not (see --variants) passes the call to the next one that meets the level.\n"
         "THROWS: the call raises NondeterministicError (or, in warn-only mode, warns once and "
         "runs the\n"
         "best variant there is).";
  if (!cuda_available())
    std::cout << " No CUDA device here: cuda cells show what the build holds.";
  std::cout << '\n';
  std::cout
      << "\nbfloat16/float16, every level, CPU and CUDA: sum, sum_dim, dot, cumsum, index_add,\n"
         "scatter_add, scatter_reduce, segment_reduce, aggregate, bincount (weights),\n"
         "index_select, gather. They run the float32 variants above on exact float32 copies\n"
         "and round once (CUDA index_add: its own cuda.half_* variants, no copies). Other ops\n"
         "(gemm, histc) take float32/float64 only.\n";
}

} // namespace

void add_ops_command(CLI::App& app) {
  auto o = std::make_shared<OpsOptions>();
  auto* cmd = app.add_subcommand("ops", "Show the coverage matrix: op x backend x determinism "
                                        "level, which variant runs and what would throw");
  auto* json = cmd->add_flag("--json", o->json,
                             "Print the matrix (or, with --variants, the variants) as JSON");
  auto* variants =
      cmd->add_flag("--variants", o->variants, "List every variant with its level and technique");
  cmd->add_option("--explain", o->explain_op, "Explain the selection for one op at every level")
      ->check(CLI::Validator(
          [](std::string& op) -> std::string {
            const auto names = op_names();
            if (std::find(names.begin(), names.end(), op) != names.end())
              return "";
            return fmt::format("unknown op '{}' (ops: {})", op, fmt::join(names, ", "));
          },
          "OP"))
      ->excludes(json)
      ->excludes(variants);
  auto* shape =
      cmd->add_option("--shape", o->shape,
                      "With --explain: the shape of the op's main input, comma-separated (src "
                      "[N,F] of a scatter, x [N,F] of a segment op with N CSR positions, the "
                      "tensor of cumsum/sum/sum_dim/dot, [N] values of bincount/histc); prints "
                      "the kernel each CUDA variant launches for it (no GPU needed: the choice "
                      "is a pure function of the shape, under the default launch tuning)")
          ->delimiter(',')
          ->check(CLI::NonNegativeNumber)
          ->needs("--explain");
  cmd->add_option("--rows", o->rows,
                  "With --shape: output rows (scatter targets, segments, bins); 0: N")
      ->check(CLI::NonNegativeNumber)
      ->needs(shape);
  cmd->add_option("--dim", o->dim, "With --shape: the dim of cumsum and sum_dim (-1: the last)")
      ->needs(shape);
  cmd->add_option("--dtype", o->dtype, "With --shape: float32 (default) or float64")
      ->check(CLI::IsMember({"float32", "float64", "f32", "f64"}))
      ->needs(shape);
  cmd->callback([o] {
    if (o->variants) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& v : list_variants()) {
        if (o->json)
          j.push_back({{"op", v.op},
                       {"variant", v.name},
                       {"backend", to_string(v.backend)},
                       {"level", to_string(v.level)},
                       {"technique", v.technique}});
        else
          std::cout << fmt::format("{:<16} {:<28} {:<15} {}\n", v.op, v.name, to_string(v.level),
                                   v.technique);
      }
      if (o->json)
        std::cout << detail::json_text(j, 2) << '\n';
      return;
    }
    if (!o->explain_op.empty() && !o->shape.empty()) {
      const KernelQuery q{o->explain_op, o->shape, o->rows, o->dim,
                          o->dtype == "float64" || o->dtype == "f64" ? DType::f64 : DType::f32};
      std::cout << explain_kernel_choice(q);
      return;
    }
    if (!o->explain_op.empty()) {
      for (DeviceType b : {DeviceType::cpu, DeviceType::cuda})
        for (auto l : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable})
          std::cout << preview_selection(o->explain_op, b, l).explain << "\n";
      return;
    }
    print_matrix(*o);
  });
}

} // namespace samebits::cli
