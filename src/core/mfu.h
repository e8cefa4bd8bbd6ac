// MFU under both conventions of counting causal attention, with the one Trident leads with
// named: every report (plan, lint, simulate, train) prints and writes both figures. The figure
// and its text here; the model FLOPs that fill it are the planner's (plan/mfu.h: mfu_of), which
// the trainer is handed by its caller.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trident {

struct Mfu {
  double model_flops = 0;         // one step, attention counted in full
  double model_flops_causal = 0;  // the same with the causal half of attention only
  double peak_flops = 0;          // of all the GPUs (ranks) of the step
  double step_s = 0;
  double full() const { return step_s > 0 && peak_flops > 0 ? model_flops / (step_s * peak_flops) : 0; }
  double causal() const { return step_s > 0 && peak_flops > 0 ? model_flops_causal / (step_s * peak_flops) : 0; }
};

// "MFU 34.3% (attention counted in full ...; 24.5% with causal attention halved ...)".
std::string mfu_text(const Mfu& m);
// {"mfu": .., "mfu_causal_halved": .., "mfu_convention": ..}: merged into a report's JSON.
nlohmann::json mfu_json(const Mfu& m);

}  // namespace trident
