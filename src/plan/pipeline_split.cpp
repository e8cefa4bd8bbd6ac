// The layers of each pipeline chunk and stage (declared in plan/cost_model.h): the planner's even
// split, or the run's --pipeline-layout.
#include <algorithm>

#include "plan/cost_model.h"

namespace trident::plan {

// chunk_layers(layers, pp, v): core/chunk_layers.cpp (the trainer's stage split uses it too).

std::vector<int64_t> stage_layers(int64_t layers, int64_t pp, int64_t v) {
  // Stage i holds chunks i, i + pp, ... (v of them): v x the base count, plus one for each of
  // them among chunks 1 .. rest (chunk_layers), counted without listing the chunks.
  const int64_t p = std::max<int64_t>(pp, 1), vs = std::max<int64_t>(v, 1), chunks = p * vs;
  const int64_t base = layers / chunks, rest = layers % chunks;
  std::vector<int64_t> out(size_t(p), vs * base);
  out[0] += std::min(rest / p, vs - 1);  // chunks pp, 2 pp, ... up to rest
  for (int64_t i = 1; i < p && i <= rest; ++i) out[size_t(i)] += std::min((rest - i) / p + 1, vs);
  return out;
}

std::vector<int64_t> chunk_layers(int64_t layers, int64_t pp, const ExecutionSpec& e) {
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;
  if (!e.pipeline_layout.empty() && e.pipeline_layout.chunks() == std::max<int64_t>(pp, 1) * v)
    return e.pipeline_layout.decoders;
  return chunk_layers(layers, pp, v);
}

std::vector<int64_t> stage_layers(int64_t layers, int64_t pp, const ExecutionSpec& e) {
  if (e.pipeline_layout.empty()) {
    return stage_layers(layers, pp, e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1);
  }
  const std::vector<int64_t> chunks = chunk_layers(layers, pp, e);
  const int64_t p = std::max<int64_t>(pp, 1);
  std::vector<int64_t> out(size_t(p), 0);
  for (size_t c = 0; c < chunks.size(); ++c) out[c % size_t(p)] += chunks[c];  // chunk c runs on stage c % pp
  return out;
}

}  // namespace trident::plan
