// What `trident plan --emit` writes: the chosen run as a Trident config file that every command
// reads, or as the launch arguments of Megatron-LM or the config of torchtitan.
// The mapping to the other frameworks is documented in docs/launch-mapping.md.
#pragma once

#include <set>
#include <utility>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"

namespace trident {

// A TOML file with one table per option section, written by walking the option table `defs`:
// each option takes the chosen run's value (run_option_texts) when it has one, else the value
// the user gave, else is left out. Options named in `skip` (presentation: --json, --top, ...)
// are left out. Values are typed from the option's type (INT, NUM, switch, text).
std::string config_toml(const std::vector<OptionDef>& defs, const OptionValues& given, const RunSpec& chosen,
                        const std::set<std::string>& skip, const std::vector<std::string>& header);

// A launch in another framework: the environment and arguments that make it run the planned job,
// or the refusals naming what that framework cannot express (then nothing is printed to run).
struct FrameworkLaunch {
  std::string framework;  // "Megatron-LM", "torchtitan"
  std::string version;    // the version the settings are written for (and checked against)
  std::string entry;      // what the arguments go to ("pretrain_gpt.py", "-m torchtitan.train")
  std::vector<std::string> comments;                       // header lines, without "# "
  std::vector<std::pair<std::string, std::string>> env;    // environment the framework requires
  std::vector<std::string> args;                           // "--flag value" or "--switch"
  std::string toml;                                        // torchtitan's TOML form: the job file
  Problems refusals;                                       // what the framework cannot express
};

// Megatron-LM (Megatron-Core) pretrain_gpt.py: every setting the prediction assumes, or refusals.
FrameworkLaunch megatron_launch(const RunSpec& run);

// torchtitan: the current --section.option flag form, or (toml) the last version that reads a
// TOML job file.
FrameworkLaunch torchtitan_launch(const RunSpec& run, bool toml);

// "--flag value" as shell words: the value single-quoted when it holds shell characters.
std::string shell_arg(const std::string& arg);

// The launch as text: comments, `export` lines, then the arguments one per line (or the TOML).
std::string launch_text(const FrameworkLaunch& launch);

// A complete sbatch script running the launch on run.cluster (one task per node, torchrun
// starting one process per GPU); train_iters: the steps to run.
std::string slurm_script(const RunSpec& run, const FrameworkLaunch& launch, int64_t train_iters);

}  // namespace trident
