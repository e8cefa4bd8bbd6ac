#include "core/recipe_settings.h"

#include <fmt/format.h>

namespace trident {

std::string recipe_text(const ExecutionSpec& e, int64_t tp, int64_t cp, int64_t pp) {
  const RecipeSettings& r = e.recipe;
  const ScheduleKind schedule = e.schedule;
  const Precision precision = e.precision;
  std::string s;
  if (r.fp8_params) s += ", FP8 weights";
  if (r.optimizer_state_bits != 32) s += ", " + std::to_string(r.optimizer_state_bits) + "-bit optimizer states";
  if (cp > 1) s += ", cp " + to_string(r.cp_kind);
  if (r.moe_dispatcher != MoeDispatcher::AllToAll) s += ", MoE dispatcher " + to_string(r.moe_dispatcher);
  if (r.moe_fp8_dispatch) s += ", FP8 dispatch";
  if (r.moe_ep_overlap) s += ", EP all-to-alls overlapped";
  if (r.cuda_graphs != CudaGraphs::None)
    s += ", CUDA graphs " + to_string(r.cuda_graphs) +
         (r.cuda_graph_scopes.any() ? " (" + to_string(r.cuda_graph_scopes) + ")" : "");
  if (r.dp_overlap_per_chunk && schedule == ScheduleKind::Interleaved) s += ", DP overlap per chunk";
  // Under sequence parallel (or at tp 1) both ways send the same rows: said only where they differ.
  if (r.pipeline_sends_whole_tensor && pp > 1 && tp > 1 && !e.sequence_parallel) s += ", whole-tensor pipeline sends";
  if (r.dp_after_pipeline_flush && pp > 1) s += ", gradients reduced after the pipeline flush";
  if (r.fp8_fused_casts && quantized_gemms(precision)) s += ", FP8 casts fused";
  if (!r.fused_swiglu) s += ", SwiGLU unfused";
  if (r.compute_efficiency != 1.0) s += fmt::format(", stack compute efficiency {:g}", r.compute_efficiency);
  return s;
}

nlohmann::json recipe_json(const RecipeSettings& r) {
  return {{"fp8_params", r.fp8_params},
          {"optimizer_state_bits", r.optimizer_state_bits},
          {"cp_kind", to_string(r.cp_kind)},
          {"moe_dispatcher", to_string(r.moe_dispatcher)},
          {"moe_fp8_dispatch", r.moe_fp8_dispatch},
          {"moe_ep_overlap", r.moe_ep_overlap},
          {"cuda_graphs", to_string(r.cuda_graphs)},
          {"cuda_graph_scope", to_string(r.cuda_graph_scopes)},
          {"dp_overlap_per_chunk", r.dp_overlap_per_chunk},
          {"pipeline_sends_whole_tensor", r.pipeline_sends_whole_tensor},
          {"dp_after_pipeline_flush", r.dp_after_pipeline_flush},
          {"fp8_fused_casts", r.fp8_fused_casts},
          {"fused_swiglu", r.fused_swiglu},
          {"compute_efficiency", r.compute_efficiency}};
}

}  // namespace trident
