#include "runtime/parallel/dist_train.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "capability/capability.h"
#include "core/checked_size.h"
#include "core/dimensions.h"
#include "core/input_file.h"
#include "core/output_path.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/run_meta.h"

namespace trident::parallel {

using capability::check_executable;
using capability::layout_ranks;

int64_t launcher_world_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* x = std::getenv(v)) return std::max(1LL, std::atoll(x));
  return 1;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(v)) return true;
  return false;
}

void read_dist_train_options(const OptionValues& values, TrainSettings& s, Problems& problems) {
  Layout& L = s.run.layout;
  const LayoutSizes sizes = read_layout_sizes(values, problems);
  apply_layout_sizes(sizes, L);
  // dp, when not given, is what the launcher's ranks leave.
  if (const int64_t group = layout_ranks({{"tp", L.tp}, {"pp", L.pp}, {"cp", L.cp}});
      !sizes.get(Dim::DP) && group > 0 && launcher_world_size() % group == 0)
    L.dp = std::max<int64_t>(1, launcher_world_size() / group);
  validate_layout(L, problems);
  // Execution settings through core's one parser and its checks (virtual stages without
  // interleaving, the ZeRO range, ...), taken whole: what the runtime cannot run is refused by the
  // capability check, never dropped here. Batch sizes stay cmd_train's (its defaults differ).
  ExecutionSpec& x = s.run.exec;
  const int64_t global_batch = x.global_batch_size, micro_batch = x.micro_batch_size;
  x = resolve_execution(values, problems);
  x.global_batch_size = global_batch;
  x.micro_batch_size = micro_batch;
  // train's default is fp32; an explicit --precision or a --stack preset sets it (and is checked).
  const bool stack_given = values.has("stack");
  if (!values.has("precision") && !stack_given) x.precision = Precision::FP32;
  if (!values.has("grad-bits") && !stack_given) x.grad_bits = 32;
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
  if (!s.resume_path.empty() && !s.init_from_path.empty())
    problems.add("--init-from '" + s.init_from_path + "' and --resume '" + s.resume_path +
                     "' both given: --resume continues a run (its weights, optimizer state and schedule), "
                     "--init-from starts a new one from a checkpoint's weights",
                 "drop one of them", "resume-init-from");
  // --init-from: the checkpoint's weights only, so only its model must be this run's.
  const bool init = s.resume_meta.is_null();
  const nlohmann::json& meta = init ? s.init_from_meta : s.resume_meta;
  const std::string& path = init ? s.init_from_path : s.resume_path;
  if (meta.is_null()) return;
  const ModelSpec& m = s.run.model;
  const ModelSpec cm = engine::model_from_json(meta["model"]);
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
      {"the RoPE base of --model", fmt::format("{}", m.rope_theta), fmt::format("{}", cm.rope_theta)},
      {"the rope scaling of --model", m.rope_scaling.type.empty() ? "none" : m.rope_scaling.type,
       cm.rope_scaling.type.empty() ? "none" : cm.rope_scaling.type},
      {"--rope-scaling-factor", fmt::format("{}", m.rope_scaling.factor), fmt::format("{}", cm.rope_scaling.factor)},
      {"--rope-low-freq-factor", fmt::format("{}", m.rope_scaling.low_freq_factor),
       fmt::format("{}", cm.rope_scaling.low_freq_factor)},
      {"--rope-high-freq-factor", fmt::format("{}", m.rope_scaling.high_freq_factor),
       fmt::format("{}", cm.rope_scaling.high_freq_factor)},
      {"--rope-original-max-position", n(m.rope_scaling.original_max_position),
       n(cm.rope_scaling.original_max_position)},
      {"--yarn-beta-fast", fmt::format("{}", m.rope_scaling.beta_fast), fmt::format("{}", cm.rope_scaling.beta_fast)},
      {"--yarn-beta-slow", fmt::format("{}", m.rope_scaling.beta_slow), fmt::format("{}", cm.rope_scaling.beta_slow)},
      {"--mscale", fmt::format("{}", m.rope_scaling.mscale), fmt::format("{}", cm.rope_scaling.mscale)},
      {"--mscale-all-dim", fmt::format("{}", m.rope_scaling.mscale_all_dim), fmt::format("{}", cm.rope_scaling.mscale_all_dim)},
      {"--yarn-correction-range-round-to-int", yes_no(m.rope_scaling.truncate), yes_no(cm.rope_scaling.truncate)},
      {"--experts", n(m.experts), n(cm.experts)},
      {"--experts-per-token", n(m.experts_per_token), n(cm.experts_per_token)},
      {"--expert-ffn-hidden", n(m.expert_ffn_hidden), n(cm.expert_ffn_hidden)},
      {"--shared-experts", n(m.shared_experts), n(cm.shared_experts)},
      {"--moe-dense-layers", n(m.moe_dense_layers), n(cm.moe_dense_layers)},
      {"--moe-layer-freq", n(m.moe_layer_freq), n(cm.moe_layer_freq)},
      {"--capacity-factor", fmt::format("{}", m.capacity_factor), fmt::format("{}", cm.capacity_factor)},
      // GPT-OSS's attention: a window changes no tensor shape, so only this check sees it.
      {"--window-size", n(m.sliding_window), n(cm.sliding_window)},
      {"--window-attn-skip-freq", n(m.full_attention_every), n(cm.full_attention_every)},
      {"--mtp-num-layers", n(m.mtp_layers), n(cm.mtp_layers)},
      {"--moe-router-num-groups", n(m.router_groups), n(cm.router_groups)},
      {"--moe-router-group-topk", n(m.router_group_topk), n(cm.router_group_topk)},
      {"--attention-sinks", yes_no(m.attention_sinks), yes_no(cm.attention_sinks)},
      // Biases change the tensors; the clamped unit only the function, so only this check sees it.
      {"--add-qkv-bias", yes_no(m.has_qkv_bias()), yes_no(cm.has_qkv_bias())},
      {"--add-bias-linear", fmt::format("{}/{}/{}", yes_no(m.has_proj_bias()), yes_no(m.has_mlp_bias()), yes_no(m.router_bias)),
       fmt::format("{}/{}/{}", yes_no(cm.has_proj_bias()), yes_no(cm.has_mlp_bias()), yes_no(cm.router_bias))},
      {"--activation-func-clamp-value", fmt::format("{}", m.activation_clamp), fmt::format("{}", cm.activation_clamp)},
      {"--multi-latent-attention", yes_no(m.is_mla()), yes_no(cm.is_mla())},
      {"--q-lora-rank", n(m.q_lora_rank), n(cm.q_lora_rank)},
      {"--kv-lora-rank", n(m.kv_lora_rank), n(cm.kv_lora_rank)},
      {"--qk-head-dim", n(m.qk_nope_head_dim), n(cm.qk_nope_head_dim)},
      {"--qk-pos-emb-head-dim", n(m.qk_rope_head_dim), n(cm.qk_rope_head_dim)},
      {"--v-head-dim", n(m.v_head_dim), n(cm.v_head_dim)},
      {"--moe-router-score-function", m.router_score, cm.router_score},
      {"--moe-router-enable-expert-bias", yes_no(m.router_expert_bias), yes_no(cm.router_expert_bias)},
      {"--moe-router-topk-scaling-factor", fmt::format("{}", m.router_topk_scaling),
       fmt::format("{}", cm.router_topk_scaling)}};
  std::string differ, flags;
  for (const auto& [flag, asked, stored] : sizes)
    if (asked != stored) {
      differ += fmt::format("{}{} {} (the checkpoint's is {})", differ.empty() ? "" : ", ", flag, asked, stored);
      const std::string f = std::string(flag).rfind("--", 0) == 0 ? flag : "--model";
      if (flags.find(f) == std::string::npos) flags += (flags.empty() ? "" : ", ") + f;
    }
  if (!differ.empty())
    problems.add(fmt::format("the checkpoint '{}' holds another model than the one asked for: {}", path, differ),
                 "drop " + flags + (init ? " (--init-from takes the checkpoint's model with its weights), or start "
                                           "without --init-from"
                                         : " (a resumed run keeps the checkpoint's model), or start a new run without "
                                           "--resume"),
                 "resume-model");
  if (init) return;
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
    if (in.path != s.resume_path && in.path != s.init_from_path) add_input(inputs, in);
  add_input(inputs, {s.data_path, "the token file"});
  if (!s.data_path.empty()) add_input(inputs, {s.data_path + ".tokenizer", "the token file's tokenizer"});
  add_input(inputs, {s.prediction_cluster, "--prediction-cluster"});
  add_input(inputs, {s.prediction_cost, "--cost"});
  // --checkpoint may be the --resume directory: the checkpoint is read whole before training,
  // and every save swaps a complete new directory in (the previous one stays until then).
  const std::vector<NamedPath> ckpt_inputs = inputs;
  add_folder_input(inputs, {s.resume_path, "--resume"});
  add_folder_input(inputs, {s.init_from_path, "--init-from"});
  const std::vector<NamedPath> files = {{s.metrics_path, "--metrics"}, {s.report_path, "--report"}, {s.html_path, "--html"}};
  check_outputs(files, inputs, problems);
  if (s.checkpoint_path.empty()) return;
  check_outputs({{s.checkpoint_path, "--checkpoint"}}, ckpt_inputs, problems, OutputKind::Directory);
  checkpoint::check_temporary_dir(s.checkpoint_path, problems);
  // Each save replaces the folder whole and first clears its temporary sibling: an output in
  // either, or a --resume of DIR.saving, would be lost (other inputs in DIR are refused above).
  std::vector<NamedPath> kept = files;
  kept.push_back({s.resume_path, "--resume"});
  kept.push_back({s.init_from_path, "--init-from"});
  check_outside(kept, {s.checkpoint_path, "--checkpoint"}, checkpoint::temporary_dir(s.checkpoint_path), problems);
  std::error_code ec;  // a save replaces a checkpoint directory whole: never another folder or file
  if (std::filesystem::exists(s.checkpoint_path, ec) && !checkpoint::is_checkpoint(s.checkpoint_path))
    problems.add("--checkpoint '" + s.checkpoint_path + "' exists and is not a Trident checkpoint directory",
                 "give a new path, or a checkpoint directory to replace", "checkpoint-path");
}

}  // namespace

// The router's loss coefficients (the MoE layer's structure is the capability check's).
static void check_moe_values(const TrainSettings& s, Problems& problems) {
  if (!(s.moe.bias_update_rate >= 0))
    problems.add(fmt::format("--moe-router-bias-update-rate {:g} is negative", s.moe.bias_update_rate),
                 "give --moe-router-bias-update-rate 1e-3 (Megatron-Core's) or another rate of 0 or more", "train-moe");
  if (!(s.moe.aux_coeff >= 0) || !(s.moe.z_coeff >= 0))
    problems.add("--moe-aux-loss-coeff " + std::to_string(s.moe.aux_coeff) + " / --moe-z-loss-coeff " +
                     std::to_string(s.moe.z_coeff) + ": a coefficient is negative",
                 "give coefficients of 0 or more (0.01 and 0.001 are common)", "train-moe-coeff");
}

void check_trainable(const TrainSettings& s, Problems& problems) {
  check_training_values(s, problems);
  check_device(s, problems);
  check_data(s, problems);
  check_resume(s, problems);
  check_output_paths(s, problems);
  check_executable(s.run, s.device, s.stage_layers, problems);
  if (s.run.model.is_moe()) check_moe_values(s, problems);
  const Layout& L = s.run.layout;
  const int64_t world = layout_ranks({{"tp", L.tp}, {"cp", L.cp}, {"pp", L.pp}, {"dp", L.dp}});
  // The prediction's cluster and cost files (the caller's planner reads them: train_app::planning()).
  if (!s.planning.check_prediction)
    throw std::logic_error("check_trainable: TrainSettings::planning.check_prediction is not set (train_app::planning())");
  s.planning.check_prediction(s, world, problems);
  // --cost feeds only the rehearsal report's prediction, which one process makes only for a report.
  if (!s.prediction_cost.empty() && world == 1 && s.report_path.empty() && s.html_path.empty())
    problems.add("--cost '" + s.prediction_cost + "' is read only by the rehearsal report's prediction, which a "
                 "one-process run makes only with --report or --html",
                 "add --report FILE (or --html FILE), or drop --cost", "cost-unused");
}

}  // namespace trident::parallel
