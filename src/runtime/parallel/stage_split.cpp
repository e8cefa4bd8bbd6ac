#include "runtime/parallel/stage_split.h"

#include <numeric>

#include "capability/capability.h"
#include "core/chunk_layers.h"

namespace trident::parallel {

int64_t StageSplit::first_layer_of(int64_t k) const {
  return std::accumulate(layers_of.begin(), layers_of.begin() + k, int64_t{0});
}

StageSplit make_stage_split(const ModelSpec& model, int64_t pp, int64_t v, const std::vector<int64_t>& explicit_layers,
                            Problems& problems) {
  StageSplit s;
  s.pp = pp;
  s.virtual_stages = v;
  if (pp * v > model.layers) {
    problems.add("pp (" + std::to_string(pp) + ") x virtual stages (" + std::to_string(v) + ") = " +
                     std::to_string(pp * v) + " exceeds the model's " + std::to_string(model.layers) + " layers",
                 "use at most " + std::to_string(model.layers) + " pipeline chunks", "pp-above-layers");
    return s;
  }
  if (explicit_layers.empty()) {
    s.layers_of = chunk_layers(model.layers, pp, v);
    return s;
  }
  capability::check_stage_split(model.layers, pp * v, explicit_layers, "the explicit stage split", problems);
  s.layers_of = explicit_layers;
  return s;
}

nn::Shard shard_for(const ModelSpec& model, const StageSplit& split, int64_t stage, int64_t chunk, int64_t tp,
                    int64_t tp_rank) {
  const int64_t k = chunk * split.pp + stage;
  nn::Shard s;
  s.model = model;
  s.first_layer = split.first_layer_of(k);
  s.last_layer = s.first_layer + split.layers_of[k];
  s.has_input = k == 0;
  s.has_output = k == split.pp * split.virtual_stages - 1;
  s.tp_size = tp;
  s.tp_rank = tp_rank;
  return s;
}

}  // namespace trident::parallel
