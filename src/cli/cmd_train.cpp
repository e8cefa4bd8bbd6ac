// trident train: parse the options, check the run, hand it to the runtime's one training loop
// (runtime/parallel/training_loop.h) — one process, or any dp x tp x pp layout under mpirun.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/output_path.h"
#include "core/run_spec.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"
#include "runtime/engine/run_meta.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/training_loop.h"
#include "runtime/kernels/ops.h"
#ifdef TRIDENT_HAVE_CUDA
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/gpu_groups.h"
#endif

namespace trident::cli {
namespace {

std::vector<OptionDef> train_options() {
  return {
      {"global-batch-size", "training", "sequences per optimizer step (default = micro-batch size x dp)", false, "INT", "micro-batch-size x dp"},
      {"micro-batch-size", "training", "sequences per forward/backward (default 8)", false, "INT", "8"},
      {"data", "training", "token file from `trident data prepare` (default: the bundled fortunes corpus)", false, "FILE", "bundled corpus"},
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
      {"checkpoint-every", "training", "also write it every N steps", false, "INT", "0"},
      {"stop-at", "training", "stop after this step (the schedule still runs to --steps; resume later)", false, "INT", "steps"},
      {"resume", "training", "continue from this checkpoint directory (same settings give bit-identical losses)", false, "DIR", "none"},
      {"threads", "training", "CPU threads per rank (default: the node's cores / its ranks)", false, "INT", "cores / ranks"},
      {"device", "training", "cpu (default) or cuda (one GPU, chosen by the node-local rank)", false, "cpu|cuda", "cpu"},
      {"gpu-comm", "training", "how GPU ranks talk: nccl (one GPU per rank) or mpi-host (ranks share GPUs through host-staged MPI; for tests)", false, "nccl|mpi-host", "nccl"},
      {"log-every", "training", "progress line every N steps (default steps/20)", false, "INT", "steps/20", 1},
  };
}

// The kernel set of a non-CPU device. CUDA throws InputError naming CUDA's own reason when no
// GPU is usable; a build without the CUDA backend says how to get one.
std::function<std::unique_ptr<kernels::Kernels>()> device_kernels(const std::string& device, bool share, Problems& p) {
  if (device == "cpu") return nullptr;
#ifdef TRIDENT_HAVE_CUDA
  (void)p;
  return [share] { return cuda::make_cuda_kernels(share); };
#else
  (void)share;
  p.add("--device cuda was asked, but this trident was built without the CUDA backend",
        "rebuild where the CUDA toolkit is at /usr/local/cuda (cmake -DTRIDENT_CUDA=ON), or use --device cpu",
        "no-cuda-build");
  return nullptr;
#endif
}

struct TrainArgs {
  std::unique_ptr<CliOptions> options;
};

int run_train(TrainArgs& args) {
  Problems p;
  OptionValues values = args.options->collect(p);
  p.throw_if_any();

  // Resume: the checkpoint supplies the model when no model option is given.
  std::optional<checkpoint::CheckpointReader> resume;
  std::optional<double> resumed_rope_theta;  // no flag sets it: the checkpoint's model keeps its own
  if (auto r = values.get_string("resume")) {
    resume.emplace(*r);
    const bool model_given = values.has("model") || values.has("layers") || values.has("hidden") || values.has("heads");
    if (!model_given) {
      ModelSpec cm = engine::model_from_json(resume->meta()["model"]);
      resumed_rope_theta = cm.rope_theta;
      values.set("family", to_string(cm.family), *r);
      values.set("kv-heads", std::to_string(cm.kv_heads), *r);
      values.set("layers", std::to_string(cm.layers), *r);
      values.set("hidden", std::to_string(cm.hidden), *r);
      values.set("heads", std::to_string(cm.heads), *r);
      values.set("ffn-hidden", std::to_string(cm.ffn_hidden), *r);
      values.set("seq-len", std::to_string(cm.seq_len), *r);
      values.set("vocab", std::to_string(cm.vocab), *r);
    }
  }

  // Data first: its vocabulary is the model's default vocabulary.
  std::string data_path;
  if (auto d = values.get_string("data")) data_path = *d;
  else data_path = data::bundled_token_file(true);
  {
    // Outputs before any work: none may replace an input, a special file or another output.
    std::vector<NamedPath> inputs = args.options->input_paths();
    inputs.push_back({data_path, "the token file"});
    inputs.push_back({data_path + ".tokenizer", "the token file's tokenizer"});
    if (auto r = values.get_string("resume")) inputs.push_back({*r, "--resume"});
    if (auto c = values.get_string("prediction-cluster")) inputs.push_back({*c, "--prediction-cluster"});
    if (auto c = values.get_string("cost")) inputs.push_back({*c, "--cost"});
    std::vector<NamedPath> outputs;
    for (const char* name : {"metrics", "report", "html"})
      if (auto o = values.get_string(name)) outputs.push_back({*o, std::string("--") + name});
    check_outputs(outputs, inputs, p);
    // --checkpoint may be the --resume directory: the checkpoint is read whole before training,
    // and every save swaps a complete new directory in (the previous one stays until then).
    std::vector<NamedPath> ckpt_inputs;
    for (const auto& in : inputs)
      if (in.what != "--resume") ckpt_inputs.push_back(in);
    if (auto c = values.get_string("checkpoint")) check_outputs({{*c, "--checkpoint"}}, ckpt_inputs, p, OutputKind::Directory);
    p.throw_if_any();
  }
  data::TokenFile file(data_path);

  // Model: a small default when none is described.
  if (!values.has("model") && !values.has("layers") && !values.has("hidden") && !values.has("heads")) {
    values.set("layers", "4", "default");
    values.set("hidden", "256", "default");
    values.set("heads", "4", "default");
    if (!values.has("seq-len")) values.set("seq-len", "256", "default");
  }
  if (!values.has("vocab") && !values.has("model")) values.set("vocab", std::to_string(file.vocab()), data_path);
  ModelSpec model = resolve_model(values, p);
  if (resumed_rope_theta) model.rope_theta = *resumed_rope_theta;
  if (p.empty()) validate_model(model, p);
  // Settings of mixture-of-experts layers on a dense model would change nothing: refused.
  if (p.empty() && !model.is_moe())
    for (const char* name : {"experts-per-token", "expert-ffn-hidden", "shared-experts", "moe-dense-layers", "capacity-factor"})
      if (values.has(name))
        p.add(fmt::format("--{} (from {}) applies to mixture-of-experts layers, but {} is dense (train trains dense "
                          "models only)", name, values.source(name), model.name.empty() ? "the model" : model.name),
              fmt::format("drop --{} for train", name), "train-moe");
  if (p.empty() && model.vocab < file.vocab())
    p.add(fmt::format("vocab ({}) is smaller than the token file's vocabulary ({}, {})", model.vocab, file.vocab(), data_path),
          fmt::format("use --vocab {} or more", file.vocab()), "train-vocab");

  auto get_int = [&](const char* name, int64_t def) { return values.get_int(name, p).value_or(def); };
  auto get_double = [&](const char* name, double def) { return values.get_double(name, p).value_or(def); };
  const int64_t steps = get_int("steps", 200);
  const int64_t micro = get_int("micro-batch-size", 8);
  const int64_t global = get_int("global-batch-size", micro);
  engine::AdamWConfig opt;
  opt.lr = get_double("lr", 1e-3);
  opt.min_lr = get_double("min-lr", opt.lr / 10);
  opt.warmup_steps = get_int("warmup", std::max<int64_t>(1, steps / 10));
  opt.decay_steps = steps;
  opt.weight_decay = get_double("weight-decay", 0.1);
  opt.grad_clip = get_double("grad-clip", 1.0);
  const uint64_t seed = uint64_t(get_int("seed", 1));
  const int64_t eval_every = get_int("eval-every", std::max<int64_t>(1, steps / 5));
  const int64_t eval_batches = get_int("eval-batches", 4);
  const int64_t ckpt_every = get_int("checkpoint-every", 0);
  const int64_t threads = get_int("threads", 0);  // 0: the runtime shares the node's cores among its ranks
  const int64_t stop_at = std::min(steps, get_int("stop-at", steps));
  const int64_t log_every = get_int("log-every", std::max<int64_t>(1, steps / 20));
  if (steps <= 0) p.add(fmt::format("--steps {} must be positive", steps), "use --steps 1 or more", "train-steps");
  if (!(opt.lr > 0)) p.add(fmt::format("--lr {} must be positive", opt.lr), "use e.g. --lr 1e-3", "train-lr");
  if (values.has("threads") && threads <= 0) p.add(fmt::format("--threads {} must be positive", threads), "use --threads 1 or more", "train-threads");
  const std::string device = values.get_string("device").value_or("cpu");
  if (device != "cpu" && device != "cuda")
    p.add("--device '" + device + "' is unknown", "use --device cpu or --device cuda", "train-device");
  if (eval_batches <= 0) p.add("--eval-batches must be positive", "use --eval-batches 1 or more", "train-eval");
  if (p.empty() && file.size() < 2 * (model.seq_len + 1))
    p.add(fmt::format("token file '{}' has {} tokens, too few for sequences of {}", data_path, file.size(), model.seq_len),
          "use more text or a smaller --seq-len", "data-too-small");
  if (resume && p.empty()) {
    const ModelSpec cm = engine::model_from_json(resume->meta()["model"]);
    if (cm.family != model.family || cm.kv_heads != model.kv_heads || cm.rope_theta != model.rope_theta ||
        cm.layers != model.layers ||
        cm.hidden != model.hidden || cm.heads != model.heads ||
        cm.ffn_hidden != model.ffn_hidden || cm.seq_len != model.seq_len || cm.vocab != model.vocab)
      p.add("the checkpoint's model differs from the one asked for", "drop the model options to use the checkpoint's",
            "resume-model");
    const int64_t done = resume->meta().value("step", int64_t(0));
    if (done >= steps)
      p.add(fmt::format("the checkpoint is already at step {}, --steps is {}", done, steps),
            fmt::format("use --steps {} or more", done + 1), "resume-steps");
  }
  p.throw_if_any();

  // Tokenizer (for the checkpoint, so `trident generate` can decode).
  const data::Tokenizer tokenizer = data::tokenizer_of(file);  // a BPE file's own, which must be there

  parallel::TrainSettings s;
  s.run.model = model;
  s.run.exec.micro_batch_size = micro;
  s.run.exec.global_batch_size = global;
  s.run.exec.precision = Precision::FP32;
  s.adamw = opt;
  s.steps = steps;
  s.stop_at = stop_at;
  s.seed = seed;
  s.data_path = data_path;
  s.tokenizer = engine::tokenizer_to_json(tokenizer);
  s.eval_every = eval_every;
  s.eval_batches = eval_batches;
  s.log_every = log_every;
  s.metrics_path = values.get_string("metrics").value_or("");
  s.checkpoint_path = values.get_string("checkpoint").value_or("");
  s.checkpoint_every = ckpt_every;
  s.resume_path = values.get_string("resume").value_or("");
  s.threads = int(threads);
  s.device = device;
  // GPU ranks: NCCL, or MPI staged through host memory so several ranks can share one GPU.
  const std::string gpu_comm = values.get_string("gpu-comm").value_or("nccl");
  if (gpu_comm != "nccl" && gpu_comm != "mpi-host")
    p.add("--gpu-comm '" + gpu_comm + "' is unknown", "use --gpu-comm nccl or --gpu-comm mpi-host", "gpu-comm");
  else if (values.has("gpu-comm") && device == "cpu")
    p.add("--gpu-comm is for GPU ranks, but --device is cpu (CPU ranks always talk through MPI)",
          "drop --gpu-comm, or add --device cuda", "gpu-comm");
  s.make_device_kernels = device_kernels(device, gpu_comm == "mpi-host", p);
#ifdef TRIDENT_HAVE_CUDA
  if (device == "cuda") {
    const cuda::GpuComm how = gpu_comm == "mpi-host" ? cuda::GpuComm::MpiHost : cuda::GpuComm::Nccl;
    s.device_groups = [how](kernels::Kernels& k) -> parallel::GroupWrap {
      auto& gpu = dynamic_cast<cuda::CudaKernels&>(k);
      return [&gpu, how](std::unique_ptr<comm::MpiCommunicator> mpi) {
        MPI_Comm handle = mpi->handle();
        return cuda::make_gpu_group(std::move(mpi), handle, gpu, how);
      };
    };
  }
#endif
  parallel::read_dist_train_options(values, s, p);
  if (!values.has("global-batch-size")) s.run.exec.global_batch_size = micro * std::max<int64_t>(1, s.run.layout.dp);
  if (p.empty()) parallel::check_trainable(s, p);  // the one run check; run_training repeats it on every rank
  p.throw_if_any();
  return parallel::run_training(s);
}

Runner setup_train(CLI::App& cmd) {
  auto args = std::make_shared<TrainArgs>();
  args->options = std::make_unique<CliOptions>(cmd, concat({model_options(), train_options(), parallel::dist_train_options()}));
  return [args] { return run_train(*args); };
}

TRIDENT_COMMAND("train", "train a GPT: one process, or any dp x tp x pp layout under mpirun (bundled corpus by default)",
                setup_train);

}  // namespace
}  // namespace trident::cli
