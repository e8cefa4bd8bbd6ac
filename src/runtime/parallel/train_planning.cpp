#include "runtime/parallel/train_planning.h"

namespace trident::parallel {

std::string TrainPlanning::missing() const {
  std::string out;
  auto need = [&](bool set, const char* name) {
    if (!set) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  need(bool(stage_memory), "stage_memory");
  need(bool(mfu), "mfu");
  need(bool(active_mlp_params_per_layer), "active_mlp_params_per_layer");
  need(bool(check_prediction), "check_prediction");
  need(bool(straggler_watch), "straggler_watch");
  need(bool(report), "report");
  return out;
}

}  // namespace trident::parallel
