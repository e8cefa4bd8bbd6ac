// trident topo: the strategy <-> topology table for a model, a cluster and a layout.
#include <cstdio>
#include <memory>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/run_spec.h"
#include "core/topology.h"
#include "report/topology_report.h"

namespace trident::cli {
namespace {

struct TopoArgs {
  std::unique_ptr<CliOptions> options;
  bool all = false;
  bool json = false;
};

Runner setup_topo(CLI::App& cmd) {
  auto args = std::make_shared<TopoArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  cmd.add_flag("--all", args->all, "list every group instead of a summary");
  cmd.add_flag("--json", args->json, "print JSON instead of the table");
  return [args] {
    Problems problems;
    OptionValues values = args->options->collect(problems);
    problems.throw_if_any();
    RunSpec run = resolve_run(values, /*check_batch=*/false);
    Mesh mesh(run.layout, run.cluster.gpus_per_node);
    TopologyTable table = build_topology(mesh, run.cluster, args->all || args->json ? args->all : false, run.model.is_moe());
    if (args->json) std::printf("%s\n", topology_json(run, table).dump(2).c_str());
    else std::printf("%s", topology_text(run, mesh, table).c_str());
    return 0;
  };
}

TRIDENT_COMMAND("topo", "print every TP / PP / DP group with its GPUs, nodes and link", setup_topo);

}  // namespace
}  // namespace trident::cli
