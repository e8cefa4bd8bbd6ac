// The recipe settings (ExecutionSpec::recipe) as reports print them: one text and one JSON for
// plan, lint and simulate, so each names the same settings the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/execution_spec.h"

namespace trident {

// ", FP8 weights, 16-bit optimizer states, cp allgather, DP overlap per chunk, whole-tensor pipeline
// sends, gradients reduced after the pipeline flush, FP8 casts fused, SwiGLU unfused": e.recipe's
// settings away from their defaults (cp kind only when cp > 1, per-chunk overlap only when
// interleaved, whole-tensor sends only at tp x pp without sequence parallel, the reduction after
// the flush only when pp > 1, fused casts only with fp8), "" when none.
std::string recipe_text(const ExecutionSpec& e, int64_t tp, int64_t cp, int64_t pp);
// fp8_params, optimizer_state_bits, cp_kind, moe_dispatcher, moe_fp8_dispatch, moe_ep_overlap,
// cuda_graphs, cuda_graph_scope, dp_overlap_per_chunk, pipeline_sends_whole_tensor,
// dp_after_pipeline_flush, fp8_fused_casts, fused_swiglu, compute_efficiency: always all fourteen.
nlohmann::json recipe_json(const RecipeSettings& r);

}  // namespace trident
