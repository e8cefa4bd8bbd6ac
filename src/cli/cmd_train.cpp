// trident train: train a GPT-2 model in this process (CPU engine), with a start-up table,
// progress lines, JSON-lines metrics, validation loss, checkpoints and bit-identical resume.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/run_spec.h"
#include "plan/memory_model.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/corpus.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"
#include "runtime/engine/perf.h"
#include "runtime/engine/run_meta.h"
#include "runtime/engine/trainer.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/kernels/ops.h"
#ifdef TRIDENT_HAVE_CUDA
#include "runtime/cuda/cuda_kernels.h"
#endif

namespace trident::cli {
namespace {

std::vector<OptionDef> train_options() {
  return {
      {"global-batch-size", "training", "sequences per optimizer step (default = micro-batch size)", false, "INT", "micro-batch-size"},
      {"micro-batch-size", "training", "sequences per forward/backward (default 8)", false, "INT", "8"},
      {"data", "training", "token file from `trident data prepare` (default: the bundled fortunes corpus)", false, "FILE", "bundled corpus"},
      {"steps", "training", "optimizer steps to reach (default 200)", false, "INT", "200"},
      {"lr", "training", "peak learning rate (default 1e-3)", false, "NUM", "1e-3"},
      {"min-lr", "training", "learning rate at the end of the cosine decay (default lr/10)", false, "NUM", "lr/10"},
      {"warmup", "training", "linear warm-up steps (default steps/10)", false, "INT", "steps/10"},
      {"weight-decay", "training", "AdamW decoupled weight decay on matrices and embeddings (default 0.1)", false, "NUM", "0.1"},
      {"grad-clip", "training", "max global gradient norm, 0 = off (default 1.0)", false, "NUM", "1.0"},
      {"seed", "training", "seed of the initial weights and of the batch sampler (default 1)", false, "INT", "1"},
      {"metrics", "training", "write every step as a JSON line to this file", false, "FILE", "none"},
      {"eval-every", "training", "validation loss every N steps (default steps/5; 0 = only at the end)", false, "INT", "steps/5"},
      {"eval-batches", "training", "micro-batches per validation (default 4)", false, "INT", "4"},
      {"checkpoint", "training", "write a checkpoint to this file at the end", false, "FILE", "none"},
      {"checkpoint-every", "training", "also write it every N steps", false, "INT", "0"},
      {"stop-at", "training", "stop after this step (the schedule still runs to --steps; resume later)", false, "INT", "steps"},
      {"resume", "training", "continue from this checkpoint (same settings give bit-identical losses)", false, "FILE", "none"},
      {"threads", "training", "CPU threads (default: all cores)", false, "INT", "all cores"},
      {"device", "training", "cpu (default) or cuda (one GPU, chosen by the node-local rank)", false, "cpu|cuda", "cpu"},
      {"log-every", "training", "progress line every N steps (default steps/20)", false, "INT", "steps/20"},
  };
}

// The kernel set of the device asked for. CUDA throws InputError naming CUDA's own reason
// when no GPU is usable; a build without the CUDA backend says how to get one.
std::unique_ptr<kernels::Kernels> make_kernels(const std::string& device, int threads) {
  if (device == "cpu") return kernels::make_cpu_kernels(threads);
#ifdef TRIDENT_HAVE_CUDA
  return cuda::make_cuda_kernels();
#else
  Problems p;
  p.add("--device cuda was asked, but this trident was built without the CUDA backend",
        "rebuild where the CUDA toolkit is at /usr/local/cuda (cmake -DTRIDENT_CUDA=ON), or use --device cpu",
        "no-cuda-build");
  p.throw_if_any();
  return nullptr;
#endif
}

struct TrainArgs {
  std::unique_ptr<CliOptions> options;
};

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}
std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }
std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s / 60), int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s / 3600), int(s / 60) % 60);
}

int run_train(TrainArgs& args) {
  Problems p;
  OptionValues values = args.options->collect(p);
  p.throw_if_any();

  // Resume: the checkpoint supplies the model when no model option is given.
  std::optional<checkpoint::Checkpoint> resume;
  if (auto r = values.get_string("resume")) {
    resume = checkpoint::load(*r);
    const bool model_given = values.has("model") || values.has("layers") || values.has("hidden") || values.has("heads");
    if (!model_given) {
      ModelSpec cm = engine::model_from_json(resume->meta["model"]);
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
  if (p.empty()) validate_model(model, p);
  if (model.family != ModelFamily::GPT) p.add("the CPU engine trains the GPT family only", "use a GPT model", "train-family");
  if (model.is_moe())
    p.add("mixture-of-experts models (" + model.name + ") are not trained by the runtime yet (plan, lint, topo and "
          "simulate model them)", "train a dense model: --experts 0 or a gpt2-*/gpt3-* preset", "train-moe");
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
  const int64_t threads = get_int("threads", omp_get_num_procs());
  const int64_t stop_at = std::min(steps, get_int("stop-at", steps));
  const int64_t log_every = get_int("log-every", std::max<int64_t>(1, steps / 20));
  if (steps <= 0) p.add(fmt::format("--steps {} must be positive", steps), "use --steps 1 or more", "train-steps");
  if (micro <= 0) p.add(fmt::format("--micro-batch-size {} must be positive", micro), "use 1 or more", "train-batch");
  if (micro > 0 && (global <= 0 || global % micro != 0))
    p.add(fmt::format("global batch ({}) is not a multiple of the micro-batch size ({})", global, micro),
          fmt::format("use --global-batch-size {} or {}", micro * std::max<int64_t>(1, global / micro),
                      micro * (std::max<int64_t>(0, global / micro) + 1)),
          "batch-divides");
  if (!(opt.lr > 0)) p.add(fmt::format("--lr {} must be positive", opt.lr), "use e.g. --lr 1e-3", "train-lr");
  if (threads <= 0) p.add(fmt::format("--threads {} must be positive", threads), "use --threads 1 or more", "train-threads");
  const std::string device = values.get_string("device").value_or("cpu");
  if (device != "cpu" && device != "cuda")
    p.add("--device '" + device + "' is unknown", "use --device cpu or --device cuda", "train-device");
  if (eval_batches <= 0) p.add("--eval-batches must be positive", "use --eval-batches 1 or more", "train-eval");
  if (p.empty() && file.size() < 2 * (model.seq_len + 1))
    p.add(fmt::format("token file '{}' has {} tokens, too few for sequences of {}", data_path, file.size(), model.seq_len),
          "use more text or a smaller --seq-len", "data-too-small");
  if (resume && p.empty()) {
    const ModelSpec cm = engine::model_from_json(resume->meta["model"]);
    if (cm.layers != model.layers || cm.hidden != model.hidden || cm.heads != model.heads ||
        cm.ffn_hidden != model.ffn_hidden || cm.seq_len != model.seq_len || cm.vocab != model.vocab)
      p.add("the checkpoint's model differs from the one asked for", "drop the model options to use the checkpoint's",
            "resume-model");
    const int64_t done = resume->meta.value("step", int64_t(0));
    if (done >= steps)
      p.add(fmt::format("the checkpoint is already at step {}, --steps is {}", done, steps),
            fmt::format("use --steps {} or more", done + 1), "resume-steps");
  }
  p.throw_if_any();

  // More than one rank (--tp/--pp/--dp, or started by mpirun/srun): the distributed runtime
  // (runtime/parallel) trains the same model on the same batches; rank 0 prints the rehearsal report.
  if (!parallel::wants_distributed(values) && values.has("html"))
    p.add("--html writes the rehearsal report, which only a multi-rank run has",
          "run under mpirun or srun (or give --tp/--pp/--dp), or drop --html", "train-html");
  p.throw_if_any();
  if (parallel::wants_distributed(values)) {
    if (resume) p.add("--resume is not supported by the distributed runtime yet", "train from scratch under mpirun", "dist-resume");
    if (device != "cpu")
      p.add("--device " + device + " is not supported by the distributed runtime yet (its ranks run on CPU cores)",
            "use --device cpu with several ranks, or one process with --device cuda", "dist-device");
    p.throw_if_any();
    parallel::DistTrainSettings s;
    s.run.model = model;
    s.run.exec.micro_batch_size = micro;
    s.run.exec.global_batch_size = global;
    s.run.exec.precision = Precision::FP32;
    s.adamw = opt;
    s.steps = steps;
    s.seed = seed;
    s.data_path = data_path;
    parallel::read_dist_train_options(values, s, p);
    p.throw_if_any();
    return parallel::run_distributed_training(s);
  }

  // Tokenizer (for the checkpoint, so `trident generate` can decode).
  data::Tokenizer tokenizer = data::Tokenizer::bytes();
  if (file.tokenizer_kind() == uint32_t(data::TokenizerKind::Bpe)) {
    std::error_code ec;
    if (std::filesystem::exists(data_path + ".tokenizer", ec)) tokenizer = data::Tokenizer::load(data_path + ".tokenizer");
  }

  auto kernels = make_kernels(device, int(threads));
  const int64_t accum = global / micro;
  engine::Trainer trainer(*kernels, model, micro, accum, opt);
  nn::GptStage& g = trainer.model();
  const int64_t n_params = g.layout().total();
  if (resume) {
    const auto& c = *resume;
    if (int64_t(c.params.size()) != n_params) {
      p.add("checkpoint parameter count differs from the model's layout", "use a checkpoint of this model", "resume-size");
      p.throw_if_any();
    }
    kernels->from_host(g.params(), c.params.data(), c.params.size());
    g.params_updated();
    kernels->from_host(trainer.m(), c.m.data(), c.m.size());
    kernels->from_host(trainer.v(), c.v.data(), c.v.size());
    trainer.set_step(c.meta.value("step", int64_t(0)));
  } else {
    trainer.init(seed);
  }

  const data::Split train_split = data::train_split(file, model.seq_len), val_split = data::val_split(file, model.seq_len);
  data::BatchSampler train_sampler(file, train_split, model.seq_len, seed, 0);
  data::BatchSampler val_sampler(file, val_split, model.seq_len, seed, 1);
  auto train_batch = [&](int64_t step, int64_t m, int32_t* tok, int32_t* tgt) {
    train_sampler.fill(step, m * micro, micro, tok, tgt);
  };
  auto val_batch = [&](int64_t, int64_t m, int32_t* tok, int32_t* tgt) { val_sampler.fill(0, m * micro, micro, tok, tgt); };

  // Start-up table.
  const ParamCount pc = count_parameters(model);
  const double matmul_flops = engine::measure_matmul_flops(*kernels);
  const double step_flops = engine::model_flops_per_step(model, global);
  const int64_t tokens_per_step = global * model.seq_len;
  const double param_bytes = 4.0 * double(n_params), act_bytes = 4.0 * double(trainer.activation_floats());
  ExecutionSpec exec;
  exec.global_batch_size = global;
  exec.micro_batch_size = micro;
  exec.precision = Precision::FP32;
  exec.grad_bits = 32;
  const auto planned = plan::stage_memory(model, exec, plan::MemoryInputs{});
  const double planned_bytes = planned.empty() ? 0.0 : planned[0].total_bytes();
  std::printf("trident train: GPT %s on the CPU\n", model.name.c_str());
  std::printf("  model       %lld layers, hidden %lld, %lld heads (head dim %lld), ffn %lld, seq %lld, vocab %lld\n",
              (long long)model.layers, (long long)model.hidden, (long long)model.heads, (long long)model.head_dim(),
              (long long)model.ffn_hidden, (long long)model.seq_len, (long long)model.vocab);
  std::printf("  parameters  %s = %lld layers x %s + wte %s + wpe %s + final norm %s (tied head)\n",
              human_count(double(pc.total)).c_str(), (long long)model.layers, human_count(double(pc.per_layer)).c_str(),
              human_count(double(pc.token_embedding)).c_str(), human_count(double(pc.position_embedding)).c_str(),
              human_count(double(pc.final_norm)).c_str());
  std::printf("  data        %s: %s tokens (%s), train %s / validation %s\n", data_path.c_str(),
              human_count(double(file.size())).c_str(), tokenizer.kind() == data::TokenizerKind::Bpe ? "BPE" : "bytes",
              human_count(double(train_split.end - train_split.begin)).c_str(),
              human_count(double(val_split.end - val_split.begin)).c_str());
  std::printf("  batch       global %lld = micro %lld x %lld accumulation; %lld tokens per step\n", (long long)global,
              (long long)micro, (long long)accum, (long long)tokens_per_step);
  std::printf("  optimizer   AdamW lr %.2e -> %.2e (warm-up %lld, cosine to step %lld), betas %.2f/%.3f, wd %.2f "
              "(matrices, embeddings), clip %.2f\n",
              opt.lr, opt.min_lr, (long long)opt.warmup_steps, (long long)steps, opt.beta1, opt.beta2, opt.weight_decay,
              opt.grad_clip);
  std::printf("  device      %s; measured sgemm %.1f GFLOP/s (1536^3)\n", kernels->device_name().c_str(),
              matmul_flops / 1e9);
  std::printf("  step FLOPs  72 B s L h^2 (1 + s/6h + V/12Lh) = %.2f GFLOP (B %lld)\n", step_flops / 1e9,
              (long long)global);
  std::printf("  memory      weights %s + grads %s + AdamW m,v %s + activations %s (1 micro-batch) = %s\n",
              mib(param_bytes).c_str(), mib(param_bytes).c_str(), mib(2 * param_bytes).c_str(), mib(act_bytes).c_str(),
              mib(4 * param_bytes + act_bytes).c_str());
  std::printf("  planner     %s predicted (plan::stage_memory, fp32 recipe, no overhead)\n", mib(planned_bytes).c_str());
  if (resume) std::printf("  resume      from %s at step %lld\n", values.get_string("resume")->c_str(), (long long)trainer.step());
  std::fflush(stdout);

  std::FILE* metrics = nullptr;
  if (auto mpath = values.get_string("metrics")) {
    metrics = std::fopen(mpath->c_str(), "w");
    if (!metrics) {
      p.add("cannot write metrics file '" + *mpath + "'", "check the folder exists and is writable", "io");
      p.throw_if_any();
    }
  }
  auto save_checkpoint = [&](const std::string& path) {
    checkpoint::Checkpoint c;
    c.meta = {{"format", "trident-checkpoint"}, {"model", engine::model_to_json(model)}, {"step", trainer.step()},
              {"seed", seed}, {"param_count", n_params}, {"data", data_path}, {"micro_batch", micro},
              {"global_batch", global}, {"steps", steps}, {"lr", opt.lr}, {"min_lr", opt.min_lr},
              {"warmup", opt.warmup_steps}, {"tokenizer", engine::tokenizer_to_json(tokenizer)}};
    c.params.resize(size_t(n_params));
    c.m.resize(size_t(n_params));
    c.v.resize(size_t(n_params));
    kernels->to_host(c.params.data(), g.params(), c.params.size());
    kernels->to_host(c.m.data(), trainer.m(), c.m.size());
    kernels->to_host(c.v.data(), trainer.v(), c.v.size());
    checkpoint::save(path, c);
  };

  const auto t_start = std::chrono::steady_clock::now();
  double timed_s = 0.0;
  int64_t timed_steps = 0;
  double last_val = NAN;
  const int64_t first = trainer.step();
  while (trainer.step() < stop_at) {
    const engine::StepResult r = trainer.train_step(train_batch);
    const int64_t s = trainer.step();  // steps done
    if (s > first + 1 || stop_at - first == 1) timed_s += r.seconds, ++timed_steps;  // the first step warms caches
    const double tps = double(tokens_per_step) / r.seconds;
    const double mfu = step_flops / r.seconds / matmul_flops;
    const double per_step = timed_steps > 0 ? timed_s / double(timed_steps) : r.seconds;
    std::optional<double> val;
    if ((eval_every > 0 && s % eval_every == 0) || s == stop_at) val = last_val = trainer.evaluate(val_batch, eval_batches);
    if (s % log_every == 0 || s == first + 1 || s == stop_at || val) {
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | %8.0f tok/s | MFU %5.1f%% | ETA %s%s\n", (long long)s,
                  (long long)steps, r.loss, r.lr, tps, 100.0 * mfu, duration(per_step * double(steps - s)).c_str(),
                  val ? fmt::format(" | val loss {:.4f}", *val).c_str() : "");
      std::fflush(stdout);
    }
    if (metrics) {
      nlohmann::json j = {{"step", s}, {"loss", r.loss}, {"lr", r.lr}, {"tokens_per_s", tps}, {"mfu", mfu},
                          {"grad_norm", r.grad_norm}, {"step_s", r.seconds}};
      if (val) j["val_loss"] = *val;
      std::fprintf(metrics, "%s\n", j.dump().c_str());
      std::fflush(metrics);
    }
    if (ckpt_every > 0 && s % ckpt_every == 0 && s < stop_at)
      if (auto c = values.get_string("checkpoint")) save_checkpoint(*c);
  }
  if (metrics) std::fclose(metrics);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  const double mean_s = timed_steps > 0 ? timed_s / double(timed_steps) : total_s;
  std::printf("done: %lld steps in %s; %.0f tokens/s, MFU %.1f%% (mean of steps after the first); validation loss %.4f\n",
              (long long)(stop_at - first), duration(total_s).c_str(), double(tokens_per_step) / mean_s,
              100.0 * step_flops / mean_s / matmul_flops, last_val);
  std::printf("peak memory: %s resident (getrusage) vs %s engine buffers vs %s planner prediction\n",
              mib(engine::peak_rss_bytes()).c_str(), mib(4 * param_bytes + act_bytes).c_str(),
              mib(planned_bytes).c_str());
  if (auto c = values.get_string("checkpoint")) {
    save_checkpoint(*c);
    std::printf("checkpoint: %s (step %lld)\n", c->c_str(), (long long)trainer.step());
  }
  return 0;
}

Runner setup_train(CLI::App& cmd) {
  auto args = std::make_shared<TrainArgs>();
  args->options = std::make_unique<CliOptions>(cmd, concat({model_options(), train_options(), parallel::dist_train_options()}));
  return [args] { return run_train(*args); };
}

TRIDENT_COMMAND("train", "train a GPT in this process on the CPU (bundled corpus by default)", setup_train);

}  // namespace
}  // namespace trident::cli
