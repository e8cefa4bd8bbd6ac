// What `trident plan --emit` writes: the chosen run as a Trident config file that every command
// reads, or as the launch arguments of Megatron-LM or the config of torchtitan.
// The mapping to the other frameworks is documented in docs/launch-mapping.md.
#pragma once

#include <optional>
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
  std::vector<std::string> sbatch;  // sbatch options beyond the nodes and GPUs ("--time=...", "--requeue")
  std::string after_run;            // shell lines the sbatch script runs after the job (requeue until done)
};

// Saving for failures in a launch (report/emit_checkpoint.cpp): where the checkpoints go, how
// often (the Young/Daly interval of plan/goodput.h), and the job's time limit.
struct LaunchCheckpoint {
  std::string dir;              // relative paths are under the directory the job starts in (sbatch: the submit directory)
  int64_t interval_steps = 0;   // save every N steps (0: never, no failures expected)
  int64_t time_limit_min = 0;   // the sbatch --time
  int64_t exit_margin_min = 0;  // Megatron saves and exits this long before the limit (--exit-duration-in-mins)
  std::string why;              // one comment line: where the interval and limit come from
};
std::vector<OptionDef> launch_checkpoint_options();  // --checkpoint-dir --time
// The options as given, checked before the search; `emit` is plan's --emit value (the options
// apply to a framework's launch, --time to an sbatch script or Megatron's exit, or to a FILE.toml that keeps them).
struct LaunchCheckpointOptions {
  std::string dir = "checkpoints";
  std::optional<int64_t> time_limit_min;
  std::string time_text;
};
LaunchCheckpointOptions read_launch_checkpoint(const OptionValues& values, const std::string& emit, bool emit_is_file,
                                               Problems& problems);
// interval_steps from the goodput, the time limit from --time or the predicted time (with failures)
// of `train_iters` steps, capped at two days (the script requeues itself until the last step is saved).
LaunchCheckpoint launch_checkpoint(const LaunchCheckpointOptions& given, int64_t interval_steps, double save_s,
                                   double seconds_per_step_with_failures, int64_t train_iters);
// Adds the framework's save/load/interval settings, the sbatch time limit and requeue, and the
// requeue-until-done lines to a launch.
void add_checkpointing(FrameworkLaunch& launch, const LaunchCheckpoint& ckpt, int64_t train_iters);
// "D-HH:MM:SS" for Slurm's --time.
std::string slurm_time(int64_t minutes);

// Megatron-LM (Megatron-Core) pretrain_gpt.py: every setting the prediction assumes, or refusals.
FrameworkLaunch megatron_launch(const RunSpec& run);

// torchtitan: the current --section.option flag form, or (toml) the last version that reads a
// TOML job file.
// With ckpt: its [checkpoint] settings (enable, folder, interval) too.
FrameworkLaunch torchtitan_launch(const RunSpec& run, bool toml, const LaunchCheckpoint* ckpt = nullptr);

// "--flag value" as shell words: the value single-quoted when it holds shell characters.
std::string shell_arg(const std::string& arg);

// The launch as text: comments, `export` lines, then the arguments one per line (or the TOML).
std::string launch_text(const FrameworkLaunch& launch);

// A complete sbatch script running the launch on run.cluster (one task per node, torchrun
// starting one process per GPU); train_iters: the steps to run.
std::string slurm_script(const RunSpec& run, const FrameworkLaunch& launch, int64_t train_iters);

}  // namespace trident
