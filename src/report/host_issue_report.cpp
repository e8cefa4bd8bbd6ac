#include "report/host_issue_report.h"

#include <fmt/format.h>

namespace trident::plan {

namespace {

std::string graphs_text(const RecipeSettings& r) {
  if (r.cuda_graphs == CudaGraphs::None) return "no CUDA graphs";
  if (r.cuda_graphs == CudaGraphs::FullIteration) return "CUDA graphs full-iteration: the step is one graph";
  return "CUDA graphs " + to_string(r.cuda_graphs) + " over " +
         (r.cuda_graph_scopes.any() ? to_string(r.cuda_graph_scopes) : std::string("the whole layer"));
}

}  // namespace

std::string host_issue_text(const Estimate& e) {
  if (!python_issued(e.run.exec)) return "";
  const StageTime& st = e.stages[e.pipeline.slowest_stage];
  const HostIssue& h = st.host_issue;
  if (!h.applies)
    return fmt::format("  host issue floor: none ({}; the host issues the step in one launch)\n",
                       graphs_text(e.run.exec.recipe));
  return fmt::format("  host issue floor ({}, {}): per micro-batch {}; x {} micro-batches = {:.3f} s\n",
                     e.run.exec.stack, graphs_text(e.run.exec.recipe), describe(h), e.micro_batches, e.time.host);
}

nlohmann::json host_issue_json(const Estimate& e) {
  if (!python_issued(e.run.exec)) return nullptr;
  const StageTime& st = e.stages[e.pipeline.slowest_stage];
  const HostIssue& h = st.host_issue;
  // exposed_s = max(0, launches x host_launch_us - gpu_s) per micro-batch; x micro-batches per step.
  return {{"applies", h.applies},
          {"cuda_graphs", to_string(e.run.exec.recipe.cuda_graphs)},
          {"cuda_graph_scope", to_string(e.run.exec.recipe.cuda_graph_scopes)},
          {"kernels_per_micro_batch", h.kernels},
          {"graphed_kernels", h.graphed},
          {"graph_launches", h.graphs},
          {"forward_launches", h.forward_launches},
          {"backward_launches", h.backward_launches},
          {"host_launch_us", h.launch_us},
          {"host_s", h.host_s},
          {"gpu_s", h.gpu_s},
          {"exposed_per_micro_batch_s", h.exposed_s},
          {"micro_batches", e.micro_batches},
          {"seconds_per_step", e.time.host}};
}

}  // namespace trident::plan
