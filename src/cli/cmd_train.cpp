// trident train: parse the options, check the run, hand it to the runtime's one training loop
// (runtime/parallel/training_loop.h) — one process, or any dp x tp x pp layout under mpirun.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <optional>

#include "capability/train_options.h"
#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/run_spec.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"
#include "runtime/engine/run_meta.h"
#include "runtime/parallel/dist_train.h"
#include "train_app/elastic_supervisor.h"
#include "train_app/planning.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/training_loop.h"
#ifdef TRIDENT_HAVE_CUDA
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/gpu_groups.h"
#endif

namespace trident::cli {
namespace {

struct TrainArgs {
  std::unique_ptr<CliOptions> options;
};

// Adds the problems of an input that cannot be read to the others (reported together).
template <class F>
void reading(Problems& p, F&& read) {
  try {
    read();
  } catch (const InputError& e) {
    for (const auto& x : e.problems()) p.add(x.what, x.fix, x.code);
  }
}

// Reads an input the run check opens too (the token file, the checkpoint to resume): what it
// lacks is reported once, by the run check, with every other problem.
template <class F>
void reading_for_defaults(F&& read) {
  try {
    read();
  } catch (const InputError&) {
  }
}

// Parses the options into TrainSettings (defaults from the checkpoint being resumed and from the
// token file) and hands them over: every check of the run is the runtime's one run check
// (parallel::check_trainable, in run_training), which reports the problems found here with its own.
// OpenMP's own setting stands in for --threads: a job script that sets OMP_NUM_THREADS gets it.
// Its first entry ("4" of "4,2", the outer level) counts; anything else is a problem.
void threads_from_environment(parallel::TrainSettings& s, Problems& p) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!env || !*env) return;
  const std::string text = env, first = text.substr(0, text.find(','));
  int64_t n = 0;
  auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), n);
  if (ec != std::errc() || end != first.data() + first.size() || n < 1) {
    p.add("OMP_NUM_THREADS '" + text + "' is not a positive whole number",
          "set OMP_NUM_THREADS=2 (or unset it), or give --threads", "train-threads");
    return;
  }
  s.threads = n;
  s.threads_given = true;
  s.threads_from = "OMP_NUM_THREADS";
}

int run_train(TrainArgs& args) {
  Problems p;
  OptionValues values = args.options->collect(p);
  parallel::TrainSettings s;
  s.planning = train_app::planning();  // the planner's pieces the trainer takes

  // Resume: the checkpoint's run supplies every setting not given (resumed_run.h); --init-from
  // its model only. A setting given that differs is compared after resolving, below.
  std::optional<checkpoint::CheckpointReader> resume;
  // No flag sets a model's name or rotary base: a resumed model keeps the checkpoint's own.
  std::optional<ModelSpec> resumed_model;
  const std::optional<std::string> resume_path = values.get_string("resume"), init_path = values.get_string("init-from");
  if (resume_path) s.resume_path = *resume_path;
  if (init_path) s.init_from_path = *init_path;
  if (resume_path || init_path) {
    const std::string& dir = resume_path ? *resume_path : *init_path;
    reading_for_defaults([&] { resume.emplace(dir); });
    if (resume) {
      (resume_path ? s.resume_meta : s.init_from_meta) = resume->meta();
      reading(p, [&] {
        if (!values.has("model")) resumed_model = engine::model_from_json(resume->meta()["model"]);
        s.resume_taken = parallel::fill_from_checkpoint(values, resume->meta(), dir, parallel::launcher_world_size(),
                                                        !resume_path);
      });
      if (!resume_path) s.resume_taken.clear();
    }
  }

  // Data: opened (and verified) once here; its vocabulary is the model's default vocabulary.
  s.data_path = values.get_string("data").value_or("");
  if (s.data_path.empty()) reading(p, [&] { s.data_path = data::bundled_token_file(true); });
  if (!s.data_path.empty()) reading_for_defaults([&] { s.data = std::make_shared<const data::TokenFile>(s.data_path); });
  s.input_files = args.options->input_paths(values);

  // Model: a small default when none is described.
  if (!values.has("model") && !values.has("layers") && !values.has("hidden") && !values.has("heads")) {
    values.set("layers", "4", "default");
    values.set("hidden", "256", "default");
    values.set("heads", "4", "default");
    if (!values.has("seq-len")) values.set("seq-len", "256", "default");
  }
  if (!values.has("vocab") && !values.has("model") && s.data) values.set("vocab", std::to_string(s.data->vocab()), s.data_path);
  s.run.model = resolve_model(values, p);
  s.moe_load_imbalance_given = values.has("moe-load-imbalance");
  if (resumed_model) s.run.model.name = resumed_model->name, s.run.model.rope_theta = resumed_model->rope_theta;

  auto get_int = [&](const char* name, int64_t def) { return values.get_int(name, p).value_or(def); };
  auto get_double = [&](const char* name, double def) { return values.get_double(name, p).value_or(def); };
  s.steps = get_int("steps", 200);
  const int64_t micro = get_int("micro-batch-size", 8);
  s.run.exec.micro_batch_size = micro;
  s.run.exec.global_batch_size = get_int("global-batch-size", micro);
  s.run.exec.precision = Precision::FP32;
  engine::AdamWConfig& opt = s.adamw;
  opt.lr = get_double("lr", 1e-3);
  opt.min_lr = get_double("min-lr", opt.lr / 10);
  opt.warmup_steps = get_int("warmup", std::max<int64_t>(1, s.steps / 10));
  opt.decay_steps = s.steps;
  opt.weight_decay = get_double("weight-decay", 0.1);
  opt.grad_clip = get_double("grad-clip", 1.0);
  s.seed = uint64_t(get_int("seed", 1));
  s.eval_every = get_int("eval-every", std::max<int64_t>(1, s.steps / 5));
  s.eval_batches = get_int("eval-batches", 4);
  if (values.get_string("checkpoint-every") == "auto") {
    s.checkpoint_every = parallel::kCheckpointEveryAuto;
    if (!values.has("checkpoint"))
      p.add("--checkpoint-every auto (from " + values.source("checkpoint-every") + ") saves into --checkpoint, which is not given",
            "add --checkpoint DIR", "checkpoint-every-auto");
  } else {
    s.checkpoint_every = get_int("checkpoint-every", 0);
  }
  s.failures_per_1000_gpu_days = get_double("failures-per-1000-gpu-days", kLlama3FailuresPer1000GpuDays);
  // The rate sets only the auto interval: a flag that would change nothing is refused (a config
  // file's key, plan's, is not).
  if (values.has("failures-per-1000-gpu-days") && s.checkpoint_every != parallel::kCheckpointEveryAuto &&
      values.source("failures-per-1000-gpu-days").rfind("--", 0) == 0)
    p.add("--failures-per-1000-gpu-days sets the interval of --checkpoint-every auto, which is not given",
          "add --checkpoint-every auto --checkpoint DIR, or drop it", "failure-rate-unused");
  s.threads = get_int("threads", 0);  // 0: the runtime shares the node's cores among its ranks
  s.threads_given = values.has("threads");
  if (!s.threads_given) threads_from_environment(s, p);
  s.stop_at = get_int("stop-at", -1);
  s.log_every = get_int("log-every", std::max<int64_t>(1, s.steps / 20));
  s.metrics_path = values.get_string("metrics").value_or("");
  s.checkpoint_path = values.get_string("checkpoint").value_or("");
  s.device = values.get_string("device").value_or("cpu");
  s.moe.aux_coeff = get_double("moe-aux-loss-coeff", 0.01);
  s.moe.z_coeff = get_double("moe-z-loss-coeff", 0.0);
  s.moe.drop = values.get_bool("moe-drop", p).value_or(true);
  s.moe.normalise = values.get_bool("moe-normalise", p).value_or(true);
  s.moe.bias_update_rate = get_double("moe-router-bias-update-rate", 1e-3);
  engine::use_model_router(s.moe, s.run.model);  // the meta's router says what the model computes
  if (values.has("moe-router-bias-update-rate") && s.run.model.is_moe() && !s.run.model.router_expert_bias)
    p.add("--moe-router-bias-update-rate (from " + values.source("moe-router-bias-update-rate") +
              ") moves the router's expert bias, which " + s.run.model.name + " does not have",
          "add --moe-router-enable-expert-bias, or drop --moe-router-bias-update-rate", "train-moe");
  if (!s.run.model.is_moe())
    for (const char* name : {"moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-drop", "moe-normalise", "moe-router-bias-update-rate"})
      if (values.has(name))
        p.add(std::string("--") + name + " applies to mixture-of-experts layers, but " + s.run.model.name +
                  " is dense (it has no experts)",
              "drop --" + std::string(name) + ", or give --experts N", "train-moe");
  s.mtp_loss_scaling = get_double("mtp-loss-scaling-factor", 0.1);
  if (values.has("mtp-loss-scaling-factor") && s.run.model.mtp_layers == 0)
    p.add("--mtp-loss-scaling-factor (from " + values.source("mtp-loss-scaling-factor") +
              ") weighs the multi-token-prediction losses, which " + s.run.model.name + " does not have",
          "add --mtp-num-layers N, or drop --mtp-loss-scaling-factor", "train-mtp");
  else if (!(s.mtp_loss_scaling >= 0))
    p.add(fmt::format("--mtp-loss-scaling-factor {:g} is negative", s.mtp_loss_scaling),
          "give --mtp-loss-scaling-factor 0.1 (Megatron's) or another weight of 0 or more", "train-mtp");
  s.gpu_comm = values.get_string("gpu-comm").value_or("");

  // Tokenizer (for the checkpoint, so `trident generate` can decode): a BPE file's own, which must be there.
  if (s.data) reading(p, [&] { s.tokenizer = engine::tokenizer_to_json(data::tokenizer_of(*s.data)); });

#ifdef TRIDENT_HAVE_CUDA
  // GPU ranks: NCCL, or MPI staged through host memory so several ranks can share one GPU.
  if (s.device == "cuda") {
    const bool share = s.gpu_comm == "mpi-host";
    s.make_device_kernels = [share] { return cuda::make_cuda_kernels(share); };
    // For the resource check: this rank's GPU's free memory, and the ranks that share it.
    s.device_memory = [share] {
      const int local = cuda::local_rank_from_env(), ranks = cuda::local_size_from_env();
      const cuda::DeviceInfo gpu = cuda::select_gpu_for_rank(local, ranks, share);
      const int gpus = std::max(1, cuda::gpu_count());
      return parallel::DeviceMemory{double(gpu.free_bytes), share ? (ranks + gpus - 1) / gpus : 1};
    };
    const cuda::GpuComm how = share ? cuda::GpuComm::MpiHost : cuda::GpuComm::Nccl;
    s.device_groups = [how](kernels::Kernels& k) -> parallel::GroupWrap {
      auto& gpu = dynamic_cast<cuda::CudaKernels&>(k);
      return [&gpu, how](std::unique_ptr<comm::Communicator> host, comm::World& group) {
        return cuda::make_gpu_group(std::move(host), group, gpu, how);
      };
    };
  }
#endif
  parallel::read_dist_train_options(values, s, p);
  if (!values.has("global-batch-size")) s.run.exec.global_batch_size = micro * std::max<int64_t>(1, s.run.layout.dp);
  if (resume && resume_path) s.resume_changes = parallel::compare_with_checkpoint(s, values, p);
  const bool elastic = values.get_bool("elastic", p).value_or(false);
  s.evict_stragglers = values.get_bool("evict-stragglers", p).value_or(false);
  s.straggler_factor = get_double("straggler-factor", 1.5);
  // The ranks `train --elastic` starts carry its --evict-stragglers (and are marked by it).
  const bool elastic_rank = std::getenv("TRIDENT_ELASTIC_ATTEMPT") != nullptr;
  for (const char* name : {"ranks-per-node", "launcher", "evict-stragglers"})
    if (!elastic && values.has(name) && !(elastic_rank && std::string(name) == "evict-stragglers"))
      p.add(std::string("--") + name + " (from " + values.source(name) + ") applies to --elastic, which is not given",
            std::string("add --elastic (this process then starts the ranks), or drop --") + name, "elastic-only");
  if (elastic) {
    // The supervisor: the ranks it launches run the checks of the run (and report them).
    train_app::ElasticSetup e{args.options->defs(), values, s, 1, {}};
    train_app::read_elastic_options(values, e, p);
    p.throw_if_any();
    return train_app::run_elastic(e);
  }
  return parallel::run_training(s, p);
}

Runner setup_train(CLI::App& cmd) {
  auto args = std::make_shared<TrainArgs>();
  args->options = std::make_unique<CliOptions>(cmd, capability::train_command_options());
  return [args] { return run_train(*args); };
}

TRIDENT_COMMAND("train", runtime_command_help("train"), setup_train);

}  // namespace
}  // namespace trident::cli
