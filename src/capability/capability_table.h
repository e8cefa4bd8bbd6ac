// The capability table: one row per execution setting that some target cannot run, and a
// column per target. `trident train` (CPU and CUDA ranks) refuses from the train column, the
// rehearsal puts the runtime's value in place from the rehearse column, and the Megatron-LM and
// torchtitan emitters refuse from theirs: a setting's refusals and substitution are written once,
// side by side. What is not a single setting's (combinations of the layout, the schedule and the
// model) stays with its checker: check_executable, the emitters' own rules.
#pragma once

#include <string>
#include <vector>

#include "core/problems.h"
#include "core/run_spec.h"

namespace trident::capability {

struct CapabilityRow {
  const char* setting;  // the options the row is about, as a user gives them
  // `trident train` on ranks of `device` ("cpu", "cuda"): adds what the runtime cannot run.
  void (*train)(const RunSpec& run, const std::string& device, Problems& problems) = nullptr;
  // The rehearsal on CPU ranks: sets the runtime's value and returns the substitution line
  // ("precision bf16 -> fp32 (...)"), "" when the run has it already. nullptr: not substituted
  // (a value train refuses then leaves the recipe not rehearsable).
  std::string (*rehearse)(RunSpec& run) = nullptr;
  // The Megatron-LM and torchtitan launches (--emit): add what the framework cannot run.
  // nullptr: the framework runs every value of the setting.
  void (*megatron)(const RunSpec& run, Problems& problems) = nullptr;
  void (*torchtitan)(const RunSpec& run, bool toml, Problems& problems) = nullptr;
  // A value some target refuses, for the table's tests: sets it on a run that has the defaults.
  void (*example)(RunSpec& run) = nullptr;
};

const std::vector<CapabilityRow>& capability_rows();

// Each column, over every row in the table's order.
void refuse_for_train(const RunSpec& run, const std::string& device, Problems& problems);
std::vector<std::string> substitute_for_rehearsal(RunSpec& run);
void refuse_for_megatron(const RunSpec& run, Problems& problems);
void refuse_for_torchtitan(const RunSpec& run, bool toml, Problems& problems);

}  // namespace trident::capability
