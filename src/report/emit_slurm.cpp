// `trident plan --emit slurm`: an sbatch script that runs the planned job in Megatron-LM (or
// torchtitan) on the plan's nodes: one task per node, torchrun starting one process per GPU, the
// environment the framework requires and every argument of the launch.
#include <fmt/format.h>

#include "report/launch_config.h"

namespace trident {

namespace {

std::string args_array(const std::string& name, const std::vector<std::string>& args) {
  std::string s = name + "=(\n";
  for (const auto& a : args) s += "  " + shell_arg(a) + "\n";
  return s + ")\n";
}

}  // namespace

std::string slurm_script(const RunSpec& run, const FrameworkLaunch& f, int64_t train_iters) {
  const ClusterSpec& c = run.cluster;
  const bool megatron = f.framework == "Megatron-LM";
  std::string s = "#!/bin/bash\n";
  s += fmt::format("#SBATCH --job-name=trident-{}\n", megatron ? "megatron" : "torchtitan");
  s += fmt::format("#SBATCH --nodes={}\n", c.nodes);
  s += "#SBATCH --ntasks-per-node=1\n";  // torchrun on each node starts its GPUs' processes
  s += fmt::format("#SBATCH --gpus-per-node={}\n", c.gpus_per_node);
  s += "#SBATCH --exclusive\n";
  for (const auto& option : f.sbatch) s += "#SBATCH " + option + "\n";
  s += "# Written by trident plan --emit slurm.\n";
  for (const auto& line : f.comments) s += "# " + line + "\n";
  s += "set -euo pipefail\n\n";
  for (const auto& [name, value] : f.env) s += fmt::format("export {}={}\n", name, value);
  s += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  s += "MASTER_PORT=${MASTER_PORT:-29500}\n\n";
  s += args_array("PLAN_ARGS", f.args) + "\n";
  const std::string torchrun = fmt::format(
      "srun --kill-on-bad-exit=1 torchrun --nnodes \"$SLURM_NNODES\" --nproc-per-node {} --rdzv-backend c10d \\\n"
      "  --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" --rdzv-id \"$SLURM_JOB_ID\" \\\n",
      c.gpus_per_node);
  if (megatron) {
    s += "MEGATRON_LM=${MEGATRON_LM:-/opt/megatron-lm}   # a Megatron-LM checkout at the commit named above\n";
    s += "# Data and tokenizer: synthetic tokens unless DATA_ARGS names yours (--data-path, --tokenizer-type ...).\n";
    s += fmt::format("read -r -a DATA_ARGS <<< \"${{DATA_ARGS:---mock-data --tokenizer-type NullTokenizer "
                     "--vocab-size {}}}\"\n",
                     run.model.vocab);
    s += fmt::format("TRAIN_ARGS=(\n  --train-iters \"${{TRAIN_ITERS:-{}}}\"\n  --lr \"${{LR:-3.0e-4}}\"\n"
                     "  --min-lr \"${{MIN_LR:-3.0e-5}}\"\n  --lr-decay-style cosine\n  --lr-warmup-iters "
                     "\"${{WARMUP_ITERS:-0}}\"\n  --log-interval 1\n  --eval-iters 0\n)\n\n",
                     train_iters);
    s += torchrun + "  \"$MEGATRON_LM/pretrain_gpt.py\" \"${PLAN_ARGS[@]}\" \"${DATA_ARGS[@]}\" \"${TRAIN_ARGS[@]}\"\n";
    return s + f.after_run;
  }
  if (!f.toml.empty()) {
    s += "CONFIG=\"${SLURM_SUBMIT_DIR:-.}/trident-torchtitan-$SLURM_JOB_ID.toml\"\n";
    s += "cat > \"$CONFIG\" <<'TOML'\n" + f.toml + "TOML\n\n";
    s += torchrun + fmt::format("  -m torchtitan.train --job.config_file \"$CONFIG\" --training.steps \"${{TRAIN_ITERS:-{}}}\"\n",
                                train_iters);
    return s + f.after_run;
  }
  // This torchtitan version takes its model from a Python config: the job stops before starting
  // anything unless MODEL_ARGS names it (else torchtitan would train its own default model).
  s += "# The model comes from torchtitan's Python config: name it in MODEL_ARGS.\n";
  s += fmt::format("if [ -z \"${{MODEL_ARGS:-}}\" ]; then\n  echo \"MODEL_ARGS is empty: set it to the torchtitan "
                   "config of {} (layers {}, hidden {}, heads {}, kv heads {}, ffn {}, vocab {})\" >&2\n  exit 2\nfi\n",
                   run.model.name, run.model.layers, run.model.hidden, run.model.heads, run.model.kv_heads,
                   run.model.ffn_hidden, run.model.vocab);
  s += "read -r -a MODEL_ARGS <<< \"$MODEL_ARGS\"\n\n";
  s += torchrun + fmt::format("  -m torchtitan.train \"${{MODEL_ARGS[@]}}\" \"${{PLAN_ARGS[@]}}\" --training.steps "
                              "\"${{TRAIN_ITERS:-{}}}\"\n",
                              train_iters);
  return s + f.after_run;
}

}  // namespace trident
