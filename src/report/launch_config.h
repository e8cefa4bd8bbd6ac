// What `trident plan --emit` writes: the chosen run as a Trident config file that every command
// reads, or as the launch arguments of Megatron-LM or the config of torchtitan.
// The mapping to the other frameworks is documented in docs/launch-mapping.md.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/run_spec.h"

namespace trident {

// A TOML file with one table per option section, written by walking the option table `defs`:
// each option takes the chosen run's value (run_option_texts) when it has one, else the value
// the user gave, else is left out. Options named in `skip` (presentation: --json, --top, ...)
// are left out. Values are typed from the option's type (INT, NUM, switch, text).
std::string config_toml(const std::vector<OptionDef>& defs, const OptionValues& given, const RunSpec& chosen,
                        const std::set<std::string>& skip, const std::vector<std::string>& header);

// Megatron-LM's pretrain_gpt.py arguments for the run, one per line, with comments where
// Megatron has no equivalent (they say so; nothing is dropped silently).
std::string megatron_args(const RunSpec& run);

// torchtitan's TOML job config sections for the run ([parallelism], [activation_checkpoint],
// [training]), with comments where torchtitan has no equivalent.
std::string torchtitan_toml(const RunSpec& run);

}  // namespace trident
