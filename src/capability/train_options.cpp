// The options of `trident train` as data (cmd_train.cpp reads them, runtime/parallel's
// read_dist_train_options turns them into a run): here, without the runtime, so that the
// planning commands know every key a config file for train may hold.
#include "capability/train_options.h"

#include "core/failure_rate.h"

namespace trident::capability {

namespace {

std::vector<OptionDef> train_options() {
  return {
      {"global-batch-size", "training", "sequences per optimizer step (default = micro-batch size x dp)", false, "INT", "micro-batch-size x dp"},
      {"micro-batch-size", "training", "sequences per forward/backward (default 8)", false, "INT", "8"},
      input_path({"data", "training", "token file from `trident data prepare` (default: the bundled fortunes corpus)", false,
                  "FILE", "bundled corpus"}),
      {"steps", "training", "optimizer steps to reach (default 200)", false, "INT", "200"},
      {"lr", "training", "peak learning rate (default 1e-3)", false, "NUM", "1e-3"},
      {"min-lr", "training", "learning rate at the end of the cosine decay (default lr/10)", false, "NUM", "lr/10"},
      {"warmup", "training", "linear warm-up steps (default steps/10)", false, "INT", "steps/10"},
      {"weight-decay", "training", "AdamW decoupled weight decay on matrices and embeddings (default 0.1)", false, "NUM", "0.1"},
      {"grad-clip", "training", "max global gradient norm, 0 = off (default 1.0)", false, "NUM", "1.0"},
      {"seed", "training", "seed of the initial weights and of the batch sampler (default 1)", false, "INT", "1"},
      {"metrics", "training", "write every step as a JSON line to this file (rank 0)", false, "FILE", "none"},
      {"eval-every", "training", "validation loss every N steps (default steps/5; 0 = only at the end)", false, "INT", "steps/5"},
      {"eval-batches", "training", "micro-batches per validation (default 4)", false, "INT", "4"},
      {"checkpoint", "training", "write a checkpoint directory here at the end (any layout can load it)", false, "DIR", "none"},
      {"checkpoint-every", "training",
       "also write it every N steps; auto: after the second step, timed, then every sqrt(2 x save time x MTBF) / step "
       "time steps (Young/Daly; MTBF from --failures-per-1000-gpu-days and the ranks)",
       false, "INT|auto", "0"},
      failure_rate_option(),
      {"stop-at", "training", "stop after this step (the schedule still runs to --steps; resume later)", false, "INT", "steps"},
      input_path({"resume", "training", "continue the run of this checkpoint directory: every setting not given is the "
                  "checkpoint's (bit-identical losses); more --steps or a new layout are applied and printed, another "
                  "value of a setting that defines the run is refused", false, "DIR", "none"}),
      input_path({"init-from", "training", "start a new run from this checkpoint's model and weights (any layout wrote "
                  "it): step 0, new optimizer moments, this run's own schedule", false, "DIR", "none"}),
      {"threads", "training", "CPU threads per rank (default: OMP_NUM_THREADS when set, else the node's cores / its ranks)", false, "INT", "OMP_NUM_THREADS or cores / ranks"},
      {"device", "training", "cpu (default) or cuda (one GPU, chosen by the node-local rank)", false, "cpu|cuda", "cpu"},
      {"gpu-comm", "training", "how GPU ranks talk: nccl (one GPU per rank) or mpi-host (ranks share GPUs through host-staged MPI; for tests)", false, "nccl|mpi-host", "nccl"},
      {"mtp-loss-scaling-factor", "training", "with --mtp-num-layers: the objective adds this / the layers x each multi-token-prediction layer's mean loss (Megatron's; default 0.1)", false, "NUM", "0.1"},
      {"moe-aux-loss-coeff", "mixture of experts", "load-balancing loss coefficient (default 0.01)", false, "NUM", "0.01"},
      {"moe-z-loss-coeff", "mixture of experts", "router z-loss coefficient (default 0)", false, "NUM", "0"},
      {"moe-drop", "mixture of experts", "drop the assignments past an expert's capacity (default on; --no-moe-drop "
       "keeps every token)", true, "", "on"},
      {"moe-normalise", "mixture of experts", "combine weights = the chosen scores over their sum, Mixtral's (default "
       "on; --no-moe-normalise: the scores themselves)", true, "", "on"},
      {"moe-router-bias-update-rate", "mixture of experts", "with --moe-router-enable-expert-bias: each step moves an "
       "expert's bias by this towards the mean load (Megatron-Core's; default 1e-3)", false, "NUM", "1e-3"},
      {"log-every", "training", "progress line every N steps (default steps/20)", false, "INT", "steps/20", 1},
  };
}

std::vector<OptionDef> run_options() {
  return {
      {"trace-comm", "distributed", "log every send, receive and collective with step and rank", true, "", "off"},
      {"report", "distributed", "write the rehearsal report as JSON to this file", false, "FILE", "none"},
      {"html", "distributed", "write the rehearsal report as one self-contained HTML page (rank 0)", false, "FILE", "none"},
      {"comm-timeout", "distributed", "seconds a rank waits on one communication before failing (default 300)", false, "NUM", "300"},
      {"stage-layers", "distributed", "explicit pipeline split, layers per stage: 2,3,3", false, "LIST", "even split"},
      input_path({"prediction-cluster", "distributed", "cluster TOML from `trident bench` for the planner's prediction",
                  false, "FILE", "none"}),
      // The prediction's cost table, read as plan and simulate read --cost (under the cluster
      // file's own [cost] keys).
      input_path({"cost", "cost", "cost table TOML for the rehearsal report's prediction (as plan --cost)", false, "FILE",
                  "the --prediction-cluster file's [cost]"}),
      {"bucket-mib", "distributed", "data-parallel gradient bucket of the plain-DP all-reduce, MiB (default 4; "
       "ZeRO-1 reduces the whole buffer, ZeRO-2/3 layer by layer)", false, "NUM", "4"},
      // --elastic: this process supervises; its ranks are started by the launcher (mpirun / srun).
      {"elastic", "elastic", "run without mpirun: start the ranks with the launcher, and when ranks die or hang re-plan "
       "on the nodes left (as trident replan, keeping the global batch), reshard the last checkpoint and resume there "
       "(docs/resilience.md)", true, "", "off"},
      {"ranks-per-node", "elastic", "with elastic: ranks per node (a node is what fails: one lost rank loses its node; "
       "rank r is on node r / N, the launcher's by-slot order; under Slurm SLURM_NTASKS_PER_NODE)", false, "INT", "1", 1},
      {"evict-stragglers", "elastic", "with elastic: a rank named a straggler (slower than its stage's prediction, "
       "see straggler-factor) stops the run there after a save, and the run resumes without its node", true, "", "off"},
      {"straggler-factor", "distributed", "a rank is named a straggler when its compute over its stage's predicted "
       "compute (median of its last 5 steps) is above this many times the median rank's (needs a prediction cluster)",
       false, "NUM", "1.5", 1},
      {"launcher", "elastic", "with elastic: the command that starts the ranks, before its rank count "
       "(default mpirun, srun under Slurm)", false, "TEXT", "mpirun"},
  };
}

}  // namespace

std::vector<OptionDef> dist_train_options() {
  std::vector<OptionDef> out = layout_options();
  for (const auto& d : execution_options())
    if (d.name != "global-batch-size" && d.name != "micro-batch-size") out.push_back(d);  // train has its own
  for (auto& d : run_options()) out.push_back(d);
  return out;
}

std::vector<OptionDef> train_command_options() {
  return concat({model_options(), train_options(), dist_train_options()});
}

}  // namespace trident::capability
