// The start-up table of `trident train` (rank 0): the model, data, batch, execution, device, the
// peak MFU divides by, the step's FLOPs, memory against the planner's, activations per stage.
#include "runtime/parallel/training_loop_parts.h"


#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/input_file.h"
#include "core/rope_scaling.h"
#include "core/vocab_padding.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/machine_load.h"
#include "runtime/engine/machine_rates.h"
#include "runtime/engine/perf.h"
#include "runtime/engine/run_meta.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/checkpointing.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/metrics_writer.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/resource_check.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/straggler_watch.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "launch/openmp_wait.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/run_agreement.h"

namespace trident::parallel::loop_detail {

namespace {

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace

// The planner's memory of each pipeline stage for this run (fp32 recipe, no overhead).
std::vector<PlannedStage> planned_stages(const TrainSettings& s) {
  ExecutionSpec exec = s.run.exec;
  exec.precision = Precision::FP32;
  exec.grad_bits = 32;
  const Layout& L = s.run.layout;
  return s.planning.stage_memory(s.run.model, exec, L.tp, L.pp, L.dp, L.cp);
}

// The planner's memory per rank: the largest stage.
double planned_bytes(const TrainSettings& s) {
  double most = 0;
  for (const auto& st : planned_stages(s)) most = std::max(most, st.total_bytes);
  return most;
}

// Per pipeline stage: the largest activation memory of its ranks beside the planner's
// activations of that stage, so the recomputation recipe's saving can be checked against it.
void print_activations(const TrainSettings& s, const std::vector<RankActivations>& ranks) {
  const auto planned = planned_stages(s);
  std::printf("  activations recompute %s; per stage: measured (largest rank: micro-batch slots from the stage's "
              "buffer plan + shared layer scratch) vs planner (plan::stage_memory activations, fp32)\n",
              to_string(s.run.exec.recompute).c_str());
  for (const auto& st : planned) {
    const ActivationMemory* most = nullptr;
    for (const auto& r : ranks)
      if (r.stage == st.stage && (!most || r.memory.total() > most->total())) most = &r.memory;
    if (!most) continue;
    std::printf("              stage %lld: %lld slots %s + scratch %s = %s vs %s (measured / planner %.3f)\n",
                (long long)st.stage, (long long)most->slots, mib(most->slot_bytes).c_str(),
                mib(most->scratch_bytes).c_str(), mib(most->total()).c_str(), mib(st.activations_bytes).c_str(),
                st.activations_bytes > 0 ? most->total() / st.activations_bytes : 0.0);
  }
}

Peak measure_peak(const TrainSettings& s, kernels::Kernels& k, comm::Communicator& world, int threads,
                  int64_t node_ranks) {
  Peak p;
  const int64_t cores = affinity_cores(), hardware = std::max(1u, std::thread::hardware_concurrency());
  double rank_cores = 1, fma_share = 0;
  launch::FmaPeak fma;
  if (!s.make_device_kernels) {
    fma = launch::fma_peak();
    // Pinned ranks have their cores; unpinned ones share the node's (4 ranks on 2 cores: half each).
    const double share = cores < hardware ? double(cores) : double(cores) / double(std::max<int64_t>(1, node_ranks));
    rank_cores = std::min(double(threads), share);
    // As bench: the higher of the chains and sgemm (where OpenBLAS outruns the chains, the
    // chains' loop is not the CPU's widest and sgemm's rate is the better bound).
    p.flops = std::max(fma.flops_per_s * rank_cores, engine::measure_matmul_flops(k));
    fma_share = fma.flops_per_s * rank_cores;
  } else {
    p.flops = engine::measure_matmul_flops(k);
  }
  double sums[3] = {p.flops, rank_cores, fma_share};
  all_reduce_f64(world, sums, 3, comm::ReduceOp::Sum);
  p.flops = sums[0];
  if (s.make_device_kernels) {
    p.how = "the best 1536^3 sgemm of every rank, summed";
    p.which = "best 1536^3 sgemm";
    return p;
  }
  p.how = fmt::format("per rank the higher of the FMA peak {} x the cores it uses ({:.3g} in all) and its best "
                      "1536^3 sgemm, as trident bench takes the peak",
                      fma.describe(), sums[1]);
  p.which = sums[2] >= p.flops * (1 - 1e-9)
                ? fmt::format("{:.1f} GFLOP/s/core, {} {}, {} chains, x {:.3g} cores", fma.flops_per_s / 1e9,
                              fma.loop.isa, fma.loop.fused ? "FMA" : "multiply + add", fma.loop.chains, sums[1])
                : fmt::format("sgemm above the {} FMA peak on some rank", fma.loop.isa);
  return p;
}

void print_startup(const TrainSettings& s, int world, const DistTrainer& trainer, const BatchSource& data,
                   const std::string& device, const std::string& threads, const Peak& peak, double step_flops,
                   int64_t first_step, const std::vector<RankActivations>& activations) {
  const ModelSpec& model = s.run.model;
  const Layout& L = s.run.layout;
  const auto& x = s.run.exec;
  const ParamCount pc = count_parameters(model);
  const int64_t accum = x.global_batch_size / (x.micro_batch_size * L.dp);
  const bool llama = model.family == ModelFamily::Llama;
  std::printf("trident train: %s %s, %s on %d %s\n", llama ? "Llama" : "GPT", model.name.c_str(), L.describe().c_str(),
              world, world == 1 ? "process (no MPI)" : "MPI ranks");
  // Qwen3's attention settings where the model has them (QK-norm, its norm epsilon).
  const std::string kv = (llama ? fmt::format(", {} kv heads", model.kv_heads) : "") +
                         (model.qk_norm ? ", QK-norm" : "") +
                         (model.is_mla() ? fmt::format(", MLA (q_lora {}, kv_lora {}, heads {} + {} rope, values {})",
                                                       model.q_lora_rank, model.kv_lora_rank, model.qk_nope_head_dim,
                                                       model.qk_rope_head_dim, model.v_head_dim)
                                         : "") +
                         (model.norm_eps != 1e-5 ? fmt::format(", norm epsilon {:g}", model.norm_eps) : "") +
                         (model.sliding_window > 0
                              ? fmt::format(", sliding window {}{}", model.sliding_window,
                                            model.full_attention_every > 0
                                                ? fmt::format(" (full attention every {} layers)", model.full_attention_every)
                                                : "")
                              : "") +
                         (model.attention_sinks ? ", attention sinks" : "") +
                         // GPT-OSS's biases and clamped unit in the Llama layer (GPT's biases are its family's).
                         (llama && model.has_qkv_bias() ? ", q/k/v biases" : "") +
                         (llama && model.has_proj_bias() ? ", linear biases" : "") +
                         (model.is_moe() && model.router_bias ? ", router bias" : "") +
                         (model.activation_clamp > 0 ? fmt::format(", gated unit clamped at {:g}", model.activation_clamp) : "");
  std::printf("  model       %lld layers, hidden %lld, %lld heads (head dim %lld)%s, ffn %lld, seq %lld, vocab %lld\n",
              (long long)model.layers, (long long)model.hidden, (long long)model.heads, (long long)model.head_dim(),
              kv.c_str(), (long long)model.ffn_hidden, (long long)model.seq_len, (long long)model.vocab);
  const int64_t padded = padded_vocab(model.vocab, L.tp);
  if (padded != model.vocab)
    std::printf("  vocab pad   %lld padded to %lld = the next multiple of %lld x tp %lld (Megatron's alignment, as the "
                "planner counts it): %lld zero rows per run, %lld rows per tp rank, no probability or gradient\n",
                (long long)model.vocab, (long long)padded, (long long)kVocabMultiple, (long long)L.tp,
                (long long)(padded - model.vocab), (long long)(padded / L.tp));
  const RopeScaling& rs = model.rope_scaling;
  std::string scaling = rs.type == "llama3" ? fmt::format(", llama3 scaling x {:g} (frequency factors {:g} / {:g}, "
                                                          "original context {})",
                                                          rs.factor, rs.low_freq_factor, rs.high_freq_factor,
                                                          rs.original_max_position)
                                            : "";
  if (rs.type == "yarn")
    scaling = fmt::format(", yarn scaling x {:g} (original context {}, beta {:g} / {:g}{}, attention factor {:.6g}, "
                          "softmax scale x {:.6g})",
                          rs.factor, rs.original_max_position, rs.beta_fast, rs.beta_slow,
                          rs.truncate ? "" : " unrounded", yarn::attention_factor(rs),
                          model.is_mla() ? yarn::softmax_multiplier(rs) : 1.0);
  if (llama)
    std::printf("  parameters  %s = %lld layers x %s + wte %s + final norm %s + head %s (untied; RoPE theta %g%s)\n",
                human_count(double(pc.total)).c_str(), (long long)model.layers, human_count(double(pc.per_layer)).c_str(),
                human_count(double(pc.token_embedding)).c_str(), human_count(double(pc.final_norm)).c_str(),
                human_count(double(pc.output_layer)).c_str(), model.rope_theta, scaling.c_str());
  else
    std::printf("  parameters  %s = %lld layers x %s + wte %s + wpe %s + final norm %s (tied head)\n",
                human_count(double(pc.total)).c_str(), (long long)model.layers, human_count(double(pc.per_layer)).c_str(),
                human_count(double(pc.token_embedding)).c_str(), human_count(double(pc.position_embedding)).c_str(),
                human_count(double(pc.final_norm)).c_str());
  if (model.is_moe()) {
    const int64_t moe_layers = model.moe_layers(), skipped = model.experts - model.experts_per_token;
    const std::string shared =
        model.shared_experts > 0
            ? fmt::format(" + {} shared x {} (split over tp)", model.shared_experts, human_count(double(pc.expert_params)))
            : std::string();
    const std::string freq =
        model.moe_layer_freq > 1 ? fmt::format(", then one layer in {} a MoE layer", model.moe_layer_freq) : std::string();
    std::printf("  experts     %lld MoE layers (the first %lld dense%s), each router %s + %lld experts x %s (ffn %lld)%s, "
                "top-%lld, %s; active parameters %s of %s = total - %lld MoE layers x %lld unchosen experts x %s\n",
                (long long)moe_layers, (long long)model.moe_dense_layers, freq.c_str(), human_count(double(pc.router_per_layer)).c_str(),
                (long long)model.experts, human_count(double(pc.expert_params)).c_str(),
                (long long)model.expert_ffn_hidden, shared.c_str(), (long long)model.experts_per_token,
                s.moe.drop ? fmt::format("capacity factor {:g}", model.capacity_factor).c_str() : "no dropping",
                human_count(double(pc.total - moe_layers * skipped * pc.expert_params)).c_str(),
                human_count(double(pc.total)).c_str(), (long long)moe_layers, (long long)skipped,
                human_count(double(pc.expert_params)).c_str());
    // DeepSeek-V3's router where the model has it: sigmoid scores, the expert bias, scaled weights.
    const std::string bias = model.router_expert_bias ? fmt::format(", top-k on score + expert bias (moved {:g} a step "
                                                                    "towards the mean load)", s.moe.bias_update_rate)
                                                      : "";
    const std::string scaled =
        (model.router_topk_scaling != 1.0 ? fmt::format(", weights x {:g}", model.router_topk_scaling) : "") +
        (model.router_groups > 0 ? fmt::format(", group-limited: the experts in {} groups, each token's top-k in its "
                                               "best {} (by each group's top {} scores summed)",
                                               model.router_groups, model.router_group_topk,
                                               model.experts_per_token / model.router_group_topk)
                                 : "");
    std::printf("  router      %s scores%s, %s%s, load-balancing loss x %g, z-loss x %g (once per micro-batch)\n",
                model.router_score.c_str(), bias.c_str(),
                s.moe.normalise ? "chosen weights over their sum" : "chosen scores as weights", scaled.c_str(),
                s.moe.aux_coeff, s.moe.z_coeff);
  }
  if (model.mtp_layers > 0)  // DeepSeek-V3's multi-token prediction
    std::printf("  mtp         %lld multi-token-prediction layer%s on the last stage, %s (enorm, hnorm, eh_proj [%lld, %lld] "
                "embedding first, one %s layer, a final norm; the embedding and head shared), depth k predicting token "
                "t+k+1; loss weighted %g / %lld (logged as mtp_k loss)\n",
                (long long)model.mtp_layers, model.mtp_layers > 1 ? "s" : "", human_count(double(pc.mtp)).c_str(),
                (long long)model.hidden, (long long)(2 * model.hidden),
                model.is_moe_layer(model.layers - 1) ? "MoE" : "dense", s.mtp_loss_scaling, (long long)model.mtp_layers);
  std::printf("  data        %s\n", data.describe().c_str());
  std::printf("  batch       global %lld = micro %lld x %lld accumulation x dp %lld; %lld tokens per step\n",
              (long long)x.global_batch_size, (long long)x.micro_batch_size, (long long)accum, (long long)L.dp,
              (long long)(x.global_batch_size * model.seq_len));
  std::string stages;
  for (int64_t k : trainer.split().layers_of) stages += (stages.empty() ? "" : ",") + std::to_string(k);
  std::printf("  execution   schedule %s, virtual stages %lld, layers per stage %s, ZeRO %d, %s%s%s\n",
              to_string(x.schedule).c_str(), (long long)x.virtual_stages, stages.c_str(), x.zero,
              to_string(x.precision).c_str(), x.sequence_parallel ? ", sequence parallel" : "",
              x.recompute != Recompute::None ? (", recompute " + to_string(x.recompute)).c_str() : "");
  if (L.cp > 1)
    std::printf("  context     cp %lld: each sequence of %lld tokens in %lld chunks of %lld, cp rank r holding chunks r and "
                "%lld-r (causal load balancing); ring attention over the cp group; dense gradients summed over dp x cp "
                "= %lld ranks\n",
                (long long)L.cp, (long long)model.seq_len, (long long)(2 * L.cp), (long long)(model.seq_len / (2 * L.cp)),
                (long long)(2 * L.cp - 1), (long long)(L.dp * L.cp));
  if (world > 1)
    std::printf("  comm        timeout %g s per operation, DP gradient bucket %g MiB%s\n", s.comm_timeout_s, s.bucket_mib,
                s.trace_comm ? ", tracing every operation" : "");
  std::printf("  seed        %llu (initial weights and batch sampler)\n", (unsigned long long)s.seed);
  const int64_t eval_every = s.eval_every >= 0 ? s.eval_every : std::max<int64_t>(1, s.steps / 5);
  std::printf("  validation  %s, %lld micro-batches of %lld sequences\n",
              eval_every > 0 ? fmt::format("every {} steps and at the end", eval_every).c_str() : "at the end",
              (long long)s.eval_batches, (long long)x.micro_batch_size);
  std::printf("  optimizer   AdamW lr %.2e -> %.2e (warm-up %lld, cosine to step %lld), betas %.2f/%.3f, wd %.2f "
              "(matrices, embeddings), clip %.2f\n",
              s.adamw.lr, s.adamw.min_lr, (long long)s.adamw.warmup_steps, (long long)s.steps, s.adamw.beta1,
              s.adamw.beta2, s.adamw.weight_decay, s.adamw.grad_clip);
  std::printf("  device      %s x %d; MFU's peak %.1f GFLOP/s in all: %s\n", device.c_str(), world, peak.flops / 1e9,
              peak.how.c_str());
  if (!threads.empty()) std::printf("  threads     %s\n", threads.c_str());
  if (!s.make_device_kernels)
    std::printf("  BLAS        OpenBLAS core %s\n", launch::blas_core_note(kernels::blas_core_name()).c_str());
  if (model.is_moe())  // plan::model_flops_per_step with the MLP a token uses: top-k experts and the router
    std::printf("  step FLOPs  3 B (L (2 s (h (h + 2 kv) + h^2 + a) + 4 s^2 h) + 2 s h V) = %.2f GFLOP (B %lld, "
                "kv %lld; a = %.0f active MLP params per layer: MoE layers (top-%lld + %lld shared) x %lld h f_e "
                "+ h E, f_e %lld, E %lld; %lld of %lld layers MoE, the others %lld h f)\n",
                step_flops / 1e9, (long long)x.global_batch_size, (long long)model.kv_dim(),
                s.planning.active_mlp_params_per_layer(model), (long long)model.experts_per_token,
                (long long)model.shared_experts, (long long)model.mlp_matrices(), (long long)model.expert_ffn_hidden,
                (long long)model.experts, (long long)model.moe_layers(), (long long)model.layers,
                (long long)model.mlp_matrices());
  else if (llama)  // plan::model_flops_per_step: Q h x h, K and V h x kv, projection h x h, three h x f MLP matrices
    std::printf("  step FLOPs  3 B (L (2 s (h (h + 2 kv) + h^2 + 3 h f) + 4 s^2 h) + 2 s h V) = %.2f GFLOP (B %lld, "
                "kv %lld, f %lld)\n",
                step_flops / 1e9, (long long)x.global_batch_size, (long long)model.kv_dim(), (long long)model.ffn_hidden);
  else
    std::printf("  step FLOPs  72 B s L h^2 (1 + s/6h + V/12Lh) = %.2f GFLOP (B %lld)\n", step_flops / 1e9,
                (long long)x.global_batch_size);
  const double bytes = trainer.allocated_bytes(), planned_max = planned_bytes(s);
  std::printf("  memory      rank 0: %s (weights, grads, AdamW m,v, activation slots, buffers); planner %s per rank "
              "(plan::stage_memory, fp32 recipe, no overhead)\n",
              mib(bytes).c_str(), mib(planned_max).c_str());
  print_activations(s, activations);
  if (!s.resume_path.empty()) {
    std::string taken;
    for (const std::string& o : s.resume_taken) taken += (taken.empty() ? "" : ", ") + o;
    std::printf("  resume      from %s at step %lld; the checkpoint's run: every setting not given is its own (%s)\n",
                s.resume_path.c_str(), (long long)first_step, taken.empty() ? "all were given" : taken.c_str());
    for (const std::string& c : s.resume_changes) std::printf("              changed: %s\n", c.c_str());
  }
  if (!s.init_from_path.empty())
    std::printf("  init from   %s: its weights (step %lld of its run); a new run from step 0, new AdamW moments, this "
                "run's schedule\n",
                s.init_from_path.c_str(), (long long)s.init_from_meta.value("step", int64_t(0)));
  std::fflush(stdout);
}

}  // namespace trident::parallel::loop_detail
