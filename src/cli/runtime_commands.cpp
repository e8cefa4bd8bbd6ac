// The runtime commands' names and help (see runtime_commands.h): one table, read by the
// executable's help and by the library's registrations.
#include "cli/runtime_commands.h"

#include <stdexcept>

#include "capability/train_options.h"
#include "plan/survivor_replan.h"

namespace trident::cli {

const std::vector<RuntimeCommand>& runtime_commands() {
  static const std::vector<RuntimeCommand> commands = {
      {"train", "train a GPT: one process, or any dp x tp x pp layout under mpirun (bundled corpus by default)",
       capability::train_command_options},
      {"generate", "sample text from a checkpoint of `trident train`"},
      {"export", "write a checkpoint's weights as Hugging Face safetensors + config.json (GPT-2, Llama, Mixtral or Qwen2-MoE names)"},
      {"import", "read a Hugging Face model folder (config.json, *.safetensors, tokenizer.json) into a new checkpoint "
                 "for train --init-from, generate and export"},
      {"data", "prepare token files for training (`trident data prepare TEXT OUT`)"},
      {"rehearse", "rehearse a plan on this machine (scaled down, emulated hosts with shaped links) and judge its "
                   "prediction"},
      {"replan", "the best layout for the GPUs left after a failure (a count, lost nodes or a Slurm node list), its "
                 "slowdown, and whether the last checkpoint reshards into it",
       plan::replan_options},
      {"bench", "measure this machine (peaks, and the shares of them matmuls, memory-bound kernels and MPI reach) "
                "and write a cluster and cost TOML"},
  };
  return commands;
}

const char* runtime_command_help(const std::string& name) {
  for (const RuntimeCommand& c : runtime_commands())
    if (name == c.name) return c.help;
  throw std::logic_error("no runtime command '" + name + "' in runtime_commands()");
}

}  // namespace trident::cli
