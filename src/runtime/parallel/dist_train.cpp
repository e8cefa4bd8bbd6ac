#include "runtime/parallel/dist_train.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "core/checked_size.h"
#include "core/input_file.h"
#include "core/output_path.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/run_meta.h"
#include "runtime/kernels/ops.h"
#include "runtime/parallel/stage_split.h"
#include "schedule/schedule.h"

namespace trident::parallel {

namespace {
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
  };
}

// The ranks of some layout dimensions, or 0 when one is not positive or the product is beyond
// any cluster (check_run names such a layout with every term; here it must not wrap around).
static int64_t layout_ranks(std::initializer_list<SizeTerm> dims) {
  Problems named_by_check_run;
  for (const SizeTerm& d : dims)
    if (d.value <= 0) return 0;
  return checked_product("", dims, kMaxGpus, "", named_by_check_run).value_or(0);
}

int64_t launcher_world_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* x = std::getenv(v)) return std::max(1LL, std::atoll(x));
  return 1;
}
}  // namespace

std::vector<OptionDef> dist_train_options() {
  std::vector<OptionDef> out = layout_options();
  for (const auto& d : execution_options())
    if (d.name != "global-batch-size" && d.name != "micro-batch-size") out.push_back(d);  // train has its own
  for (auto& d : run_options()) out.push_back(d);
  return out;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(v)) return true;
  return false;
}

void read_dist_train_options(const OptionValues& values, TrainSettings& s, Problems& problems) {
  Layout& L = s.run.layout;
  if (auto v = values.get_int("tp", problems)) L.tp = *v;
  if (auto v = values.get_int("pp", problems)) L.pp = *v;
  if (auto v = values.get_int("cp", problems)) L.cp = *v;
  if (auto v = values.get_int("ep", problems)) L.ep = *v;
  if (auto v = values.get_string("order")) L.order = *v;
  else L.order = default_order(L.cp, L.ep);
  if (auto v = values.get_int("dp", problems)) L.dp = *v;
  else if (const int64_t group = layout_ranks({{"tp", L.tp}, {"pp", L.pp}, {"cp", L.cp}});
           group > 0 && launcher_world_size() % group == 0)
    L.dp = std::max<int64_t>(1, launcher_world_size() / group);
  validate_layout(L, problems);
  // Execution settings through core's one parser and its checks (virtual stages without
  // interleaving, the ZeRO range, ...); batch sizes stay cmd_train's.
  const ExecutionSpec e = resolve_execution(values, problems);
  ExecutionSpec& x = s.run.exec;
  x.schedule = e.schedule;
  x.virtual_stages = e.virtual_stages;
  x.zero = e.zero;
  x.recompute = e.recompute;
  x.sequence_parallel = e.sequence_parallel;
  x.attention = e.attention;
  x.overlap = e.overlap;
  x.stack = e.stack;
  // train's default is fp32; an explicit --precision or a --stack preset sets it (and is checked).
  const bool stack_given = values.has("stack");
  x.precision = values.has("precision") || stack_given ? e.precision : Precision::FP32;
  x.grad_bits = values.has("grad-bits") || stack_given ? e.grad_bits : 32;
  if (auto v = values.get_bool("trace-comm", problems)) s.trace_comm = *v;
  if (auto v = values.get_string("report")) s.report_path = *v;
  if (auto v = values.get_string("html")) s.html_path = *v;
  if (auto v = values.get_double("comm-timeout", problems)) s.comm_timeout_s = *v;
  if (auto v = values.get_string("stage-layers")) {
    std::stringstream in(*v);
    std::string item;
    while (std::getline(in, item, ',')) {
      int64_t k = 0;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), k);
      if (ec == std::errc() && end == item.data() + item.size() && !item.empty())
        s.stage_layers.push_back(k);
      else
        problems.add("--stage-layers '" + *v + "': '" + item + "' is not a whole number of 64 bits",
                     "list layers per stage separated by commas, e.g. 2,3,3", "stage-split");
    }
  }
  if (auto v = values.get_string("prediction-cluster")) s.prediction_cluster = *v;
  if (auto v = values.get_string("cost")) s.prediction_cost = *v;
  if (auto v = values.get_double("bucket-mib", problems)) s.bucket_mib = *v;
}

namespace {

// The values of the training loop itself: each must be usable, or the run is refused.
void check_training_values(const TrainSettings& s, Problems& problems) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (s.steps < 1) problems.add("--steps " + n(s.steps) + " must be at least 1", "use --steps 1 or more", "train-steps");
  if (!(s.adamw.lr > 0) || !std::isfinite(s.adamw.lr))
    problems.add(fmt::format("--lr {} must be a positive finite number", s.adamw.lr), "use e.g. --lr 1e-3", "train-lr");
  if (s.stop_at == 0)
    problems.add("--stop-at 0 stops before the first step", "use --stop-at 1 or more, or drop it", "train-stop-at");
  if (s.eval_batches < 1)
    problems.add("--eval-batches " + n(s.eval_batches) + " must be at least 1", "use --eval-batches 1 or more",
                 "train-eval");
  if (s.threads_given && s.threads < 1)
    problems.add("--threads " + n(s.threads) + " must be at least 1", "use --threads 1 or more, or drop it for the "
                 "node's cores shared by its ranks", "train-threads");
  if (!(s.comm_timeout_s > 0))
    problems.add(fmt::format("--comm-timeout {} is not positive", s.comm_timeout_s), "give seconds, e.g. 300",
                 "comm-timeout");
  if (!(s.bucket_mib > 0))
    problems.add(fmt::format("--bucket-mib {} is not positive", s.bucket_mib), "give e.g. 4", "bucket-mib");
  // Checked before the run (read at its end): a FIFO or a device here would block or never end.
  if (!s.prediction_cost.empty())
    check_input_file({s.prediction_cost, "cost table", "--cost", "cost-file"}, kMaxSettingsBytes, problems);
}

// The device: one this build has, and the way its ranks talk.
void check_device(const TrainSettings& s, Problems& problems) {
  if (s.device != "cpu" && s.device != "cuda") {
    problems.add("--device '" + s.device + "' is unknown", "use --device cpu or --device cuda", "train-device");
    return;
  }
  if (s.device == "cuda" && !s.make_device_kernels)
    problems.add("--device cuda was asked, but this trident was built without the CUDA backend",
                 "rebuild where the CUDA toolkit is at /usr/local/cuda (cmake -DTRIDENT_CUDA=ON), or use --device cpu",
                 "no-cuda-build");
  if (!s.gpu_comm.empty() && s.gpu_comm != "nccl" && s.gpu_comm != "mpi-host")
    problems.add("--gpu-comm '" + s.gpu_comm + "' is unknown", "use --gpu-comm nccl or --gpu-comm mpi-host", "gpu-comm");
  else if (!s.gpu_comm.empty() && s.device == "cpu")
    problems.add("--gpu-comm is for GPU ranks, but --device is cpu (CPU ranks always talk through MPI)",
                 "drop --gpu-comm, or add --device cuda", "gpu-comm");
}

// The token file against the model: ids the embedding has rows for, and enough tokens for a batch.
void check_data(const TrainSettings& s, Problems& problems) {
  if (!s.data) return;
  const ModelSpec& m = s.run.model;
  const data::TokenFile& file = *s.data;
  if (m.vocab > 0 && m.vocab < file.vocab())
    problems.add(fmt::format("vocab ({}) is smaller than the token file's vocabulary ({}, {})", m.vocab, file.vocab(),
                             file.path()),
                 fmt::format("use --vocab {} or more", file.vocab()), "train-vocab");
  if (m.seq_len > 0 && file.size() < 2 * (m.seq_len + 1))
    problems.add(fmt::format("token file '{}' has {} tokens, too few for sequences of {} (it needs 2 x (seq-len + 1) "
                             "= {}: a training and a validation sequence)",
                             file.path(), file.size(), m.seq_len, 2 * (m.seq_len + 1)),
                 "use more text or a smaller --seq-len", "data-too-small");
}

// The checkpoint to resume: the same model, and steps left to train.
void check_resume(const TrainSettings& s, Problems& problems) {
  if (s.resume_meta.is_null()) return;
  const ModelSpec& m = s.run.model;
  const ModelSpec cm = engine::model_from_json(s.resume_meta["model"]);
  // Each size the run asks for against the checkpoint's, by its flag: resuming never changes the
  // model (the stored tensors have the checkpoint's shapes), so any difference is refused.
  const auto n = [](int64_t v) { return std::to_string(v); };
  const auto yes_no = [](bool b) { return std::string(b ? "true" : "false"); };
  const std::tuple<const char*, std::string, std::string> sizes[] = {
      {"--family", to_string(m.family), to_string(cm.family)},
      {"--layers", n(m.layers), n(cm.layers)},
      {"--hidden", n(m.hidden), n(cm.hidden)},
      {"--heads", n(m.heads), n(cm.heads)},
      {"--kv-heads", n(m.kv_heads), n(cm.kv_heads)},
      {"--ffn-hidden", n(m.ffn_hidden), n(cm.ffn_hidden)},
      {"--seq-len", n(m.seq_len), n(cm.seq_len)},
      {"--vocab", n(m.vocab), n(cm.vocab)},
      {"--tied-embeddings", yes_no(m.tied_embeddings()), yes_no(cm.tied_embeddings())},
      {"the RoPE base of --model", fmt::format("{}", m.rope_theta), fmt::format("{}", cm.rope_theta)}};
  std::string differ, flags;
  for (const auto& [flag, asked, stored] : sizes)
    if (asked != stored) {
      differ += fmt::format("{}{} {} (the checkpoint's is {})", differ.empty() ? "" : ", ", flag, asked, stored);
      const std::string f = std::string(flag).rfind("--", 0) == 0 ? flag : "--model";
      if (flags.find(f) == std::string::npos) flags += (flags.empty() ? "" : ", ") + f;
    }
  if (!differ.empty())
    problems.add(fmt::format("the checkpoint '{}' holds another model than the one asked for: {}", s.resume_path, differ),
                 "drop " + flags + " (a resumed run keeps the checkpoint's model), or start a new run without --resume",
                 "resume-model");
  const int64_t done = s.resume_meta.value("step", int64_t(0));
  if (done >= s.steps)
    problems.add(fmt::format("the checkpoint is already at step {}, --steps is {}", done, s.steps),
                 fmt::format("use --steps {} or more", done + 1), "resume-steps");
  else if (s.stop_at > 0 && s.stop_at <= done)
    problems.add(fmt::format("the checkpoint is already at step {}, --stop-at is {}", done, s.stop_at),
                 fmt::format("use --stop-at {} or more", done + 1), "resume-steps");
}

// Outputs before any work: none may replace an input, a special file or another output.
void check_output_paths(const TrainSettings& s, Problems& problems) {
  // The one list of inputs: the command's (--config, --data, --cost, ...) and what the run
  // reads besides (the token file's tokenizer, the bundled corpus, the checkpoint's files).
  std::vector<NamedPath> inputs;
  for (const auto& in : s.input_files)
    if (in.path != s.resume_path) add_input(inputs, in);
  add_input(inputs, {s.data_path, "the token file"});
  if (!s.data_path.empty()) add_input(inputs, {s.data_path + ".tokenizer", "the token file's tokenizer"});
  add_input(inputs, {s.prediction_cluster, "--prediction-cluster"});
  add_input(inputs, {s.prediction_cost, "--cost"});
  // --checkpoint may be the --resume directory: the checkpoint is read whole before training,
  // and every save swaps a complete new directory in (the previous one stays until then).
  const std::vector<NamedPath> ckpt_inputs = inputs;
  add_folder_input(inputs, {s.resume_path, "--resume"});
  const std::vector<NamedPath> files = {{s.metrics_path, "--metrics"}, {s.report_path, "--report"}, {s.html_path, "--html"}};
  check_outputs(files, inputs, problems);
  if (s.checkpoint_path.empty()) return;
  check_outputs({{s.checkpoint_path, "--checkpoint"}}, ckpt_inputs, problems, OutputKind::Directory);
  checkpoint::check_temporary_dir(s.checkpoint_path, problems);
  // Each save replaces the folder whole and first clears its temporary sibling: an output in
  // either, or a --resume of DIR.saving, would be lost (other inputs in DIR are refused above).
  std::vector<NamedPath> kept = files;
  kept.push_back({s.resume_path, "--resume"});
  check_outside(kept, {s.checkpoint_path, "--checkpoint"}, checkpoint::temporary_dir(s.checkpoint_path), problems);
  std::error_code ec;  // a save replaces a checkpoint directory whole: never another folder or file
  if (std::filesystem::exists(s.checkpoint_path, ec) && !checkpoint::is_checkpoint(s.checkpoint_path))
    problems.add("--checkpoint '" + s.checkpoint_path + "' exists and is not a Trident checkpoint directory",
                 "give a new path, or a checkpoint directory to replace", "checkpoint-path");
}

}  // namespace

void check_trainable(const TrainSettings& s, Problems& problems) {
  check_training_values(s, problems);
  check_device(s, problems);
  check_data(s, problems);
  check_resume(s, problems);
  check_output_paths(s, problems);
  const RunSpec& r = s.run;
  const auto& m = r.model;
  const auto& L = r.layout;
  const auto& x = r.exec;
  auto n = [](int64_t v) { return std::to_string(v); };
  // The planner's own checks of the run (heads, ffn, layers, batch against the layout), on a
  // cluster of exactly the layout's ranks: the world is what mpirun started, checked at start-up.
  RunSpec sized = r;
  sized.cluster.nodes = 1;
  const int64_t world = layout_ranks({{"tp", L.tp}, {"cp", L.cp}, {"pp", L.pp}, {"dp", L.dp}});
  sized.cluster.gpus_per_node = std::max<int64_t>(1, world);
  check_run(sized, true, problems);
  // --cost feeds only the rehearsal report's prediction, which one process makes only for a report.
  if (!s.prediction_cost.empty() && world == 1 && s.report_path.empty() && s.html_path.empty())
    problems.add("--cost '" + s.prediction_cost + "' is read only by the rehearsal report's prediction, which a "
                 "one-process run makes only with --report or --html",
                 "add --report FILE (or --html FILE), or drop --cost", "cost-unused");

  // What this runtime can execute (the capability check), each refusal with its fix.
  // Both families run in the stage model: GPT (learned positions, tied head) and Llama
  // (RoPE, RMSNorm, SwiGLU, grouped-query attention, untied head).
  if (m.family == ModelFamily::GPT && m.kv_heads > 0 && m.kv_heads != m.heads)
    problems.add("grouped-query attention (kv-heads " + n(m.kv_heads) + " of " + n(m.heads) +
                     " heads) in a GPT-family model: the runtime's GPT layer has one kv head per query head",
                 "use --kv-heads " + n(m.heads) + " (or leave it out) for a GPT model, or --family llama", "train-gqa");
  if (m.family == ModelFamily::Llama) {
    if (m.tied_embeddings())
      problems.add("a Llama model with its output layer tied to the token embedding: the runtime's Llama has an "
                   "untied head", "drop --tied-embeddings for a Llama model", "train-tied-embeddings");
    if (m.heads > 0 && m.hidden % m.heads == 0 && m.head_dim() % 2 != 0)
      problems.add("rotary embeddings rotate pairs of features, but the head size (" + n(m.head_dim()) + " = hidden " +
                       n(m.hidden) + " / heads " + n(m.heads) + ") is odd",
                   "use --hidden and --heads whose quotient is even", "train-rope-head-dim");
  }
  // Context parallel: ring attention over the cp group, each sequence cut into 2 cp chunks.
  if (L.cp > 1 && s.device != "cpu")
    problems.add("context parallel (cp " + n(L.cp) + ") needs the ring-attention kernels, which the " + s.device +
                     " backend lacks", "use --device cpu with --cp, or --cp 1", "cp-device");
  // A seq_len that 2 x cp does not divide is check_run's (cp-divides-sequence), said once.
  if (L.ep > 1)
    problems.add("expert parallel (ep " + n(L.ep) + ") is not trained by the runtime yet (plan, lint, topo and "
                 "simulate model it)", "use --ep 1 for train", "dist-ep");
  if (m.is_moe())
    problems.add("mixture-of-experts models (" + m.name + ", " + n(m.experts) + " experts) are not trained by the "
                 "runtime yet", "train a dense model (--experts 0 or a gpt2-*/gpt3-* preset)", "train-moe");
  // ZeRO 1-3 train (grad_sync.h, zero_shards.h). ZeRO-3 gathers each unit's fp32 master weights
  // and the stage computes from them directly: there is no bf16 copy of a gathered unit yet.
  if (x.zero >= 3 && x.precision == Precision::BF16)
    problems.add("ZeRO-3 with bf16 mixed precision: the runtime gathers the fp32 master weights unit by unit and "
                 "has no bf16 compute copy of a gathered unit",
                 "use --zero 2 with --precision bf16, or --precision fp32 with --zero 3", "zero-stage");
  if (x.precision == Precision::FP16)
    problems.add("fp16 training (loss scaling) is not implemented by the runtime", "use --precision fp32 (or bf16 on "
                 "--device cuda)", "train-precision");
  if (x.precision == Precision::BF16 && !kernels::device_supports(s.device, kernels::DType::BF16))
    problems.add("bf16 mixed precision runs on the CUDA backend only; the " + s.device + " kernels compute in fp32",
                 "use --precision fp32 on --device " + s.device + ", or --device cuda", "train-precision");
  if (x.grad_bits != 32)
    problems.add("--grad-bits " + n(x.grad_bits) + ": the runtime keeps fp32 gradients", "use --grad-bits 32 for train",
                 "train-grad-bits");
  // The software stack the planner models: the runtime is one of them (ExecutionSpec's defaults).
  const std::string from_stack = x.stack.empty() ? "" : " (set by --stack " + x.stack + ")";
  if (x.precision == Precision::FP8)
    problems.add("fp8 training (FP8 matrix products with scaling) is not implemented by the runtime",
                 "use --precision fp32 (or bf16 on --device cuda) for train", "train-precision");
  if (x.attention == AttentionKind::Flash && s.device != "cuda")
    problems.add("flash attention" + from_stack + " is not in the CPU kernels: they compute attention unfused",
                 "use --attention unfused for train on --device cpu", "train-attention");
  if (!(x.overlap == Overlap{}))
    problems.add("--overlap " + to_string(x.overlap) + from_stack +
                     ": the runtime overlaps the DP gradient reduction only; TP collectives and pipeline sends block",
                 "use --overlap dp (the default) for train", "train-overlap");
  if (m.family == ModelFamily::GPT && !m.tied_embeddings())
    problems.add("an untied output layer: the runtime's GPT ties it to the token embedding",
                 "drop --no-tied-embeddings for train", "train-tied-embeddings");
  if (x.schedule == ScheduleKind::ZeroBubbleH1 && x.recompute == Recompute::Full)
    problems.add("zb-h1 postpones each weight-gradient pass past the input-gradient pass, which needs the layer "
                 "activations that --recompute full drops",
                 "use --recompute selective or none with zb-h1, or --schedule 1f1b with full recomputation",
                 "train-zb-h1");
  if (x.sequence_parallel && L.tp == 1)
    problems.add("sequence parallel splits sequences across the tensor-parallel group, but tp is 1",
                 "use --tp 2 or more with --sequence-parallel, or drop it", "sp-needs-tp");
  if (x.sequence_parallel && L.tp > 1 && L.cp >= 1 && m.seq_len % (L.tp * L.cp) != 0)
    problems.add("sequence parallel splits each sequence" + std::string(L.cp > 1 ? " (its T / cp rows on a cp rank)" : "") +
                     " across the TP group, but seq_len (" + n(m.seq_len) + ") is not divisible by " +
                     (L.cp > 1 ? "cp x tp (" + n(L.cp * L.tp) + ")" : "tp (" + n(L.tp) + ")"),
                 "use a --seq-len that is a multiple of " + n(L.tp * L.cp) + ", or drop --sequence-parallel",
                 "sp-divides-seq");
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  const int64_t per = x.micro_batch_size * L.dp;
  if (per > 0 && x.global_batch_size > 0 && x.global_batch_size % per == 0 && L.pp * v <= m.layers)
    check_schedule_shape(x.schedule, L.pp, x.micro_batches(L.dp), v, problems);
  if (!s.stage_layers.empty()) check_stage_split(m.layers, L.pp * v, s.stage_layers, "--stage-layers", problems);
}

}  // namespace trident::parallel
