#include "core/run_values.h"

#include <fmt/format.h>

#include "core/dimensions.h"

namespace trident {

std::map<std::string, std::string> run_option_texts(const RunSpec& run) {
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  std::map<std::string, std::string> v = {
      {"nodes", std::to_string(run.cluster.nodes)},
      {"gpus-per-node", std::to_string(run.cluster.gpus_per_node)},
      {"micro-batch-size", std::to_string(e.micro_batch_size)},
      {"schedule", to_string(e.schedule)},
      {"virtual-stages", std::to_string(e.virtual_stages)},
      {"account-for-embedding-in-pipeline-split", e.embedding_in_pipeline_split ? "true" : "false"},
      {"account-for-loss-in-pipeline-split", e.loss_in_pipeline_split ? "true" : "false"},
      {"pipeline-layout", e.pipeline_layout.text},
      {"zero", std::to_string(e.zero)},
      {"recompute", to_string(e.recompute)},
      {"sequence-parallel", e.sequence_parallel ? "true" : "false"},
      {"recompute-flash-attention", e.recompute_flash_attention ? "true" : "false"},
      {"precision", to_string(e.precision)},
      {"grad-bits", std::to_string(e.grad_bits)},
      {"attention", to_string(e.attention)},
      {"fp8-params", e.recipe.fp8_params ? "true" : "false"},
      {"optimizer-state-bits", std::to_string(e.recipe.optimizer_state_bits)},
      {"cp-kind", to_string(e.recipe.cp_kind)},
      {"moe-dispatcher", to_string(e.recipe.moe_dispatcher)},
      {"moe-fp8-dispatch", e.recipe.moe_fp8_dispatch ? "true" : "false"},
      {"moe-ep-overlap", e.recipe.moe_ep_overlap ? "true" : "false"},
      {"cuda-graphs", to_string(e.recipe.cuda_graphs)},
      {"dp-overlap-per-chunk", e.recipe.dp_overlap_per_chunk ? "true" : "false"},
      {"pipeline-sends-whole-tensor", e.recipe.pipeline_sends_whole_tensor ? "true" : "false"},
      {"dp-after-pipeline-flush", e.recipe.dp_after_pipeline_flush ? "true" : "false"},
      {"fp8-fused-casts", e.recipe.fp8_fused_casts ? "true" : "false"},
      {"fused-swiglu", e.recipe.fused_swiglu ? "true" : "false"},
      {"stack-compute-efficiency", fmt::format("{}", e.recipe.compute_efficiency)},
      {"overlap", to_string(overlap_in_effect(e.overlap, e.schedule))},
      {"tied-embeddings", run.model.tied_embeddings() ? "true" : "false"},
  };
  // No scope is the default: an empty value would reach a command line as an empty word, which a
  // rehearsal's command read back by words takes for the next flag's value.
  if (e.recipe.cuda_graph_scopes.any()) v["cuda-graph-scope"] = to_string(e.recipe.cuda_graph_scopes);
  if (e.recompute_modules.any()) v["recompute-modules"] = to_string(e.recompute_modules);
  v.merge(layout_option_texts(l));
  if (e.global_batch_size > 0) v["global-batch-size"] = std::to_string(e.global_batch_size);
  return v;
}

}  // namespace trident
