// The training loop (see training_loop.h).
#include "runtime/parallel/training_loop.h"

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
#include "core/vocab_padding.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/memory_model.h"
#include "plan/mfu.h"
#include "report/html_page.h"
#include "report/output_file.h"
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
#include "report/rehearsal_report.h"
#include "rehearse/rehearsal_prediction.h"
#include "runtime/parallel/resource_check.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/straggler_watch.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "launch/openmp_wait.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/run_agreement.h"

namespace trident::parallel {

namespace {

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

void print_problems(const InputError& e) {
  std::fprintf(stderr, "trident train: %zu problem%s\n", e.problems().size(), e.problems().size() == 1 ? "" : "s");
  for (const auto& p : e.problems()) {
    std::fprintf(stderr, "  - %s\n    fix: %s\n", p.what.c_str(), p.fix.c_str());
    if (!p.code.empty()) std::fprintf(stderr, "    code: %s\n", p.code.c_str());
  }
}

// Validation micro-batches: the token file's validation split, or synthetic sequences of
// another seed.
std::unique_ptr<BatchSource> validation_source(const TrainSettings& s) {
  const auto& m = s.run.model;
  return s.data ? token_file_validation_source(s.data, m.seq_len, s.seed)
                : synthetic_source(m.vocab, m.seq_len, s.seed + 1);
}

// The planner's memory of each pipeline stage for this run (fp32 recipe, no overhead).
std::vector<plan::StageMemory> planned_stages(const TrainSettings& s) {
  ExecutionSpec exec = s.run.exec;
  exec.precision = Precision::FP32;
  exec.grad_bits = 32;
  const Layout& L = s.run.layout;
  return plan::stage_memory(s.run.model, exec, plan::MemoryInputs{L.tp, L.pp, L.dp, 0, L.cp});
}

// The planner's memory per rank: the largest stage.
double planned_bytes(const TrainSettings& s) {
  double most = 0;
  for (const auto& st : planned_stages(s)) most = std::max(most, st.total_bytes());
  return most;
}

// Activation memory of every rank (ActivationMemory: slots, slot bytes, recompute scratch).
struct RankActivations {
  int64_t stage = 0;
  ActivationMemory memory;
};

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

// The middle of the values (the mean of the two middle ones for an even count); not empty.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The peak MFU divides by, all ranks together. CPU ranks: the FMA peak of a core (what `trident
// bench` writes as the device's peak: per second of the thread's own CPU time, so a busy machine
// does not lower it) times the cores each rank may use. GPU ranks: the best 1536^3 sgemm rate.
struct Peak {
  double flops = 0;
  std::string how;
  std::string which;  // the summary's short name of it: "AVX-512 FMA, 16 chains, x 2 cores"
};

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
                         (model.attention_sinks ? ", attention sinks" : "");
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
  const std::string scaling = rs.type == "llama3" ? fmt::format(", llama3 scaling x {:g} (frequency factors {:g} / {:g}, "
                                                                "original context {})",
                                                                rs.factor, rs.low_freq_factor, rs.high_freq_factor,
                                                                rs.original_max_position)
                                                  : "";
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
                plan::active_mlp_params_per_layer(model), (long long)model.experts_per_token,
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

// The inputs the run check reads, opened once: the token file (unless the command opened it)
// and the checkpoint to resume. A file that cannot be read is a problem among the others.
std::optional<checkpoint::CheckpointReader> open_inputs(TrainSettings& s, Problems& problems) {
  std::optional<checkpoint::CheckpointReader> resume;
  try {
    if (!s.data && !s.data_path.empty()) s.data = std::make_shared<const data::TokenFile>(s.data_path);
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) problems.add(p.what, p.fix, p.code);
  }
  try {
    if (!s.resume_path.empty()) {
      resume.emplace(s.resume_path);
      if (s.resume_meta.is_null()) s.resume_meta = resume->meta();
      checkpoint::checked_model(*resume);  // its tensors are the model its meta describes
    } else if (!s.init_from_path.empty()) {  // the weights of a new run
      resume.emplace(s.init_from_path);
      if (s.init_from_meta.is_null()) s.init_from_meta = resume->meta();
      checkpoint::checked_model(*resume);
    }
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) problems.add(p.what, p.fix, p.code);
  }
  return resume;
}

// The one run check, on every rank before any work: the problems found while parsing, the
// inputs, check_trainable and the world size, all reported together. Returns the checkpoint to
// resume from (opened once, with the token file, into s).
std::optional<checkpoint::CheckpointReader> check_on_every_rank(TrainSettings& s, const Problems& parsed, bool mpi,
                                                                comm::World& ranks,
                                                                int world) {
  Problems problems = parsed;
  std::optional<checkpoint::CheckpointReader> resume = open_inputs(s, problems);
  check_trainable(s, problems);
  const int64_t need = s.run.layout.world_size();
  if (world != need) {
    if (mpi)
      problems.add("mpirun started " + std::to_string(world) + " ranks but the layout " + s.run.layout.describe() +
                       " needs " + std::to_string(need),
                   "run mpirun -np " + std::to_string(need) + ", or change --dp/--tp/--cp/--pp so their product is " +
                       std::to_string(world),
                   "world-size-matches-layout");
    else
      problems.add("the layout " + s.run.layout.describe() + " needs " + std::to_string(need) +
                       " ranks, but this is one process (not started by mpirun)",
                   "run mpirun -np " + std::to_string(need) + " trident train ..., or drop --dp/--tp/--cp/--pp",
                   "world-size-matches-layout");
  }
  // Every rank resolved the same run and found the same problems (else each would check and
  // train its own, or one would stop while the others wait for it).
  if (mpi && world > 1) {
    auto fingerprint = run_fingerprint(s);
    std::string found;
    for (const auto& p : problems.list()) found += p.code + ": " + p.what + "\n";
    fingerprint.push_back({"the problems found", found.empty() ? "none" : found});
    check_ranks_agree(fingerprint, ranks);
  }
  problems.throw_if_any();  // every rank holds the same problems: all stop before any work
  return resume;
}

// Loads the checkpoint into the trainer on every rank; returns the step it holds (--init-from:
// its weights only, and step 0 of the new run).
int64_t resume_from(DistTrainer& trainer, ProcessGroups& groups, checkpoint::CheckpointReader& resume,
                    const TrainSettings& s) {
  const bool weights_only = s.resume_path.empty();
  // A checkpoint that does not fit is found by some ranks only: all agree before going on.
  std::optional<InputError> error;
  try {
    load_checkpoint(trainer, resume, weights_only);
  } catch (const InputError& e) {
    error = e;
  }
  double ok = error ? 0 : 1;
  all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
  if (error) throw *error;
  if (ok < 0.5) {
    Problems p;
    p.add("checkpoint '" + resume.dir() + "' does not fit this model on another rank", "see rank 0's message",
          "resume-model");
    p.throw_if_any();
  }
  return weights_only ? 0 : resume.meta().value("step", int64_t(0));
}

// Metrics file: opened by rank 0 before any step; every rank learns whether it could.
void open_metrics(MetricsWriter& metrics, int rank, const TrainSettings& s, ProcessGroups& groups) {
  double ok = 1;
  if (rank == 0 && !s.metrics_path.empty() && !metrics.open(s.metrics_path)) ok = 0;
  all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
  if (ok < 0.5) {
    Problems p;
    p.add("cannot write the metrics file '" + s.metrics_path + "'", "check the folder exists and is writable",
          "metrics-open");
    p.throw_if_any();
  }
}

// Every rank's activation memory and its stage, for rank 0's start-up table.
std::vector<RankActivations> gather_activations(DistTrainer& trainer, ProcessGroups& groups, const Mesh& mesh,
                                                int world) {
  std::vector<RankActivations> activations(static_cast<size_t>(world));
  const ActivationMemory a = trainer.activation_memory();
  const float mine[3] = {float(a.slots), float(a.slot_bytes), float(a.scratch_bytes)};
  std::vector<float> all(size_t(3) * world);
  groups.world->all_gather(mine, all.data(), 3, comm::DType::F32);
  for (int r = 0; r < world; ++r)
    activations[size_t(r)] = {mesh.coords_of(r).pp(),
                              {int64_t(all[size_t(r) * 3]), double(all[size_t(r) * 3 + 1]), double(all[size_t(r) * 3 + 2])}};
  return activations;
}

// One line of the metrics file; with several ranks, where the step went (mean share over ranks).
nlohmann::json metrics_line(int64_t done, double loss, double lr, double tps, double mfu, double grad_norm,
                            double seconds, const std::optional<double>& v, const std::vector<PhaseTimes>& row,
                            int world) {
  nlohmann::json j = {{"step", done}, {"loss", loss}, {"lr", lr}, {"tokens_per_s", tps}, {"mfu", mfu},
                      {"grad_norm", grad_norm}, {"step_s", seconds}};
  if (v) j["val_loss"] = *v;
  if (world > 1) {  // where the step went, mean share over ranks
    PhaseTimes mean;
    for (const auto& p : row) {
      mean.compute += p.compute / world, mean.tp += p.tp / world, mean.pp += p.pp / world;
      mean.bubble += p.bubble / world, mean.dp_exposed += p.dp_exposed / world;
      mean.optimizer += p.optimizer / world, mean.total += p.total / world, mean.ep += p.ep / world;
    }
    const double T = mean.total > 0 ? mean.total : 1;
    j["time_shares"] = {{"compute", mean.compute / T}, {"tp", mean.tp / T}, {"pp", mean.pp / T},
                        {"bubble", mean.bubble / T}, {"dp_exposed", mean.dp_exposed / T},
                        {"optimizer", mean.optimizer / T}, {"other", mean.other() / T}};
    if (mean.ep > 0) j["time_shares"]["ep_alltoall"] = mean.ep / T;
  }
  return j;
}

// The run as the prediction sees it: under expert parallelism with the load imbalance the steps
// measured (the median after the warm-up steps; the router's, at this run's weights), unless
// --moe-load-imbalance gave one.
RunSpec rehearsed_routing(const RunSpec& run, const RehearsalData& report) {
  RunSpec r = run;
  if (report.ep_load_imbalance_given) return r;
  std::vector<double> measured(report.ep_load_imbalance.begin() +
                                   std::min<ptrdiff_t>(report.warmup, ptrdiff_t(report.ep_load_imbalance.size())),
                               report.ep_load_imbalance.end());
  if (measured.empty()) measured = report.ep_load_imbalance;
  if (r.layout.ep > 1 && !measured.empty()) r.model.moe_load_imbalance = std::max(1.0, median(measured));
  return r;
}

// The straggler watch: each rank's stage's compute as the planner predicts it on the prediction
// cluster (the rehearsal's prediction run); off without one, `off` says why. With --stage-layers
// (one per stage) stage s is predicted as stage s of the same run with that many layers in every
// stage (its own layers, and the embedding or logits where it is first or last).
StragglerWatch straggler_watch(const TrainSettings& s, const Mesh& mesh, int world, std::string& off) {
  if (s.prediction_cluster.empty() || special_file_kind(s.prediction_cluster) == "missing") {
    off = "no prediction cluster file ('" + s.prediction_cluster + "': run `trident bench` first)";
    return {};
  }
  const int64_t pp = s.run.layout.pp;
  if (!s.stage_layers.empty() && int64_t(s.stage_layers.size()) != pp) {
    off = "--stage-layers splits virtual stages, which the prediction does not split so";
    return {};
  }
  try {
    const RunSpec r = rehearse::prediction_run(s.run, s.prediction_cluster, std::max(1u, std::thread::hardware_concurrency()),
                                     s.prediction_cost);
    std::vector<double> stage_s(static_cast<size_t>(pp));
    for (int64_t st = 0; st < pp; ++st) {
      RunSpec even = r;
      if (!s.stage_layers.empty()) even.model.layers = s.stage_layers[size_t(st)] * pp;
      const plan::Estimate e = plan::estimate(even, 0.0);
      if (int64_t(e.stages.size()) != pp) {
        off = "the prediction has no time per pipeline stage";
        return {};
      }
      const plan::StageTime& t = e.stages[size_t(st)];
      stage_s[size_t(st)] = double(e.micro_batches) * (t.compute_forward_s + t.compute_backward_s);
    }
    std::vector<double> predicted;
    std::vector<int64_t> stage_of;
    for (int rank = 0; rank < world; ++rank) {
      stage_of.push_back(mesh.coords_of(rank).pp());
      predicted.push_back(stage_s[size_t(stage_of.back())]);
    }
    StragglerRule rule;
    rule.factor = s.straggler_factor;
    return StragglerWatch(predicted, stage_of, rule);
  } catch (const std::exception& x) {
    off = std::string("the planner failed: ") + x.what();
    return {};
  }
}

// Thrown on every rank at the same step when --evict-stragglers stops the run for a straggler.
struct StragglersEvicted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Rank 0's rehearsal report: the measured shares beside the planner's prediction, as text
// (several ranks), JSON (--report) and a page (--html).
void write_rehearsal(RehearsalData& report, const TrainSettings& s, const Mesh& mesh, const std::vector<float>& mems,
                     int world) {
  for (int r = 0; r < world; ++r)
    report.ranks.push_back({r, mesh.coords_of(r), mems[size_t(r) * 2], mems[size_t(r) * 2 + 1]});
  try {
    // Not opened here: a FIFO would block; the cluster file's reader refuses special files.
    report.ep_load_imbalance_given = s.moe_load_imbalance_given;
    if (special_file_kind(s.prediction_cluster) == "missing") report.prediction_missing = "no cluster file '" + s.prediction_cluster + "': run `trident bench` first";
    else
      report.prediction = rehearse::predict(rehearsed_routing(s.run, report), s.prediction_cluster,
                                  std::max(1u, std::thread::hardware_concurrency()), s.prediction_cost);
  } catch (const std::exception& e) {
    report.prediction_missing = std::string("planner failed: ") + e.what();
  }
  if (world > 1) std::printf("%s", rehearsal_text(report).c_str());
  if (!s.report_path.empty()) {
    write_output_file(s.report_path, rehearsal_json(report).dump(2) + "\n", "--report");
    std::printf("rehearsal report written to %s\n", s.report_path.c_str());
  }
  if (!s.html_path.empty()) {
    write_output_file(s.html_path, html_page(rehearsal_page(rehearsal_json(report).dump())), "--html");
    std::printf("rehearsal report page written to %s\n", s.html_path.c_str());
  }
}

// What the trainer takes from the settings, on the device's kernels.
TrainerOptions trainer_options(const TrainSettings& s, kernels::Kernels& kernels) {
  TrainerOptions o;
  o.adamw = s.adamw;
  o.seed = s.seed;
  o.stage_layers = s.stage_layers;
  o.bucket_floats = std::max<int64_t>(1, int64_t(s.bucket_mib * (1 << 20) / 4));
  o.kernels = &kernels;
  o.compute = s.run.exec.precision == Precision::BF16 ? kernels::DType::BF16 : kernels::DType::F32;
  o.moe = s.moe;
  o.mtp_loss_scaling = s.mtp_loss_scaling;
  return o;
}

// Every rank's phase times of the step (one all-gather) and the step's seconds: the slowest
// rank's.
std::vector<PhaseTimes> gather_phase_times(const PhaseTimes& t, ProcessGroups& groups, int world, double& seconds) {
  const int fields = 14;
  float mine[fields] = {float(t.compute), float(t.tp), float(t.pp), float(t.bubble), float(t.dp_exposed),
                        float(t.optimizer), float(t.weight), float(t.total), float(t.cp), float(t.cp_attention),
                        float(t.zero_gather), float(t.ep), float(t.ep_wait), float(t.norm_wait)};
  std::vector<float> all(size_t(fields) * world);
  groups.world->all_gather(mine, all.data(), fields, comm::DType::F32);
  std::vector<PhaseTimes> row(world);
  seconds = 0;
  for (int r = 0; r < world; ++r) {
    const float* x = &all[size_t(r) * fields];
    row[r] = PhaseTimes{x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13]};
    seconds = std::max(seconds, double(x[7]));
  }
  seconds = world == 1 ? t.total : seconds;
  return row;
}

// The load over the steps on rank 0's node: every rank's CPU time against the node's busy time
// (ranks on several nodes: not separable from one node's /proc/stat, so not reported).
void record_load(const engine::LoadProbe& load_probe, ProcessGroups& groups, const ResourceView& resources, int world,
                 int threads, RehearsalData& report) {
  MachineLoad load = load_probe.stop();
  double ranks_cpu_s = load.self_cpu_s;
  all_reduce_f64(*groups.world, &ranks_cpu_s, 1, comm::ReduceOp::Sum);
  if (resources.own_node_ranks == world && load.known) {
    load.self_cpu_s = ranks_cpu_s;
    load.threads = std::max(1, std::min(load.cores, world * threads));
    report.load = load;
  }
}

// The metrics-write error every rank stops with at step `done`; `kept` says what of the run is kept.
void throw_metrics_write(const TrainSettings& s, const std::string& metrics_error, int64_t done,
                         const std::string& kept) {
  Problems p;
  p.add(fmt::format("{} (the metrics file, at step {}); the run stopped there",
                    metrics_error.empty() ? "rank 0 could not write the metrics file '" + s.metrics_path + "'"
                                          : metrics_error,
                    done),
        "free space on its disk, or give --metrics a path on another disk; " + kept, "metrics-write");
  p.throw_if_any();
}

// A write (or the close) of the metrics file; a failure is kept in `error` for the next check.
void write_metrics(MetricsWriter& metrics, const nlohmann::json& j, std::string& error) {
  try {
    metrics.write(j);
  } catch (const InputError& e) {
    error = e.problems().front().what;
  }
}
void close_metrics(MetricsWriter& metrics, std::string& error) {
  try {
    metrics.close();
  } catch (const InputError& e) {
    error = e.problems().front().what;
  }
}

// This rank's communicators of the run (MPI groups, wrapped for the device).
ProcessGroups open_groups(const TrainSettings& s, const Mesh& mesh, bool mpi, comm::World& world, kernels::Kernels& k) {
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = s.comm_timeout_s;
  ctx->trace = s.trace_comm;
  const GroupWrap wrap = s.device_groups ? s.device_groups(k) : GroupWrap{};
  return mpi ? make_process_groups(mesh, ctx, world, wrap) : make_single_process_groups(ctx);
}

void warn_stop_without_checkpoint(const TrainSettings& s) {
  if (s.stop_at >= 0 && s.stop_at < s.steps && s.checkpoint_path.empty())
    std::fprintf(stderr,
                 "trident train: warning: --stop-at %lld ends the run before its %lld steps, but without --checkpoint "
                 "nothing is saved to resume from: add --checkpoint DIR (then --resume DIR continues)\n",
                 (long long)s.stop_at, (long long)s.steps);
}

// The rehearsal report's run-wide values (warm-up steps, the measured wire times); steps come later.
RehearsalData start_report(const TrainSettings& s, const DistTrainer& trainer, int64_t run_steps) {
  RehearsalData report;
  report.run = s.run;
  report.warmup = s.warmup_steps >= 0 ? std::min(s.warmup_steps, std::max<int64_t>(0, run_steps - 1))
                                      : std::min<int64_t>(2, run_steps / 4);
  report.pp_message_s = trainer.pp_message_s();
  report.cp_block_s = trainer.cp_block_s();
  report.ep_clock_error_s = trainer.ep_clock_error_s();
  return report;
}

void add_report_step(RehearsalData& report, const DistTrainer& trainer, double loss, const std::vector<PhaseTimes>& row) {
  report.losses.push_back(loss);
  report.cp_blocks = trainer.cp_blocks_per_step();
  report.times.push_back(row);
  if (trainer.routing_stats().ep_load_imbalance > 0) report.ep_load_imbalance.push_back(trainer.routing_stats().ep_load_imbalance);
}

// Every rank's trainer buffers and peak resident bytes, as pairs (one all-gather).
std::vector<float> gather_memory(const DistTrainer& trainer, ProcessGroups& groups, int world) {
  float mem[2] = {float(trainer.allocated_bytes()), float(engine::peak_rss_bytes())};
  std::vector<float> mems(size_t(2) * world);
  groups.world->all_gather(mem, mems.data(), 2, comm::DType::F32);
  return mems;
}

// What a run did, for its last lines.
struct RunTotals {
  int64_t steps = 0;
  double total_s = 0;
  std::vector<double> timed;  // seconds of the steps after the first
  double measured_peak = 0, peak_flops = 0;
  bool peak_raised = false;
  std::string peak_which;  // which peak: Peak::which
  double last_val = 0;
};

// Rank 0's last lines: speed (the median step), MFU against the peak, memory against the plan.
void print_summary(const TrainSettings& s, const RunTotals& r, const std::vector<float>& mems) {
  const std::vector<double>& timed = r.timed;
  const double total_s = r.total_s;
  // The median step: one step stalled by the machine (another job, a page-in) moves a mean of
  // few steps far from what the steps take (22 tokens/s after lines of 3,844).
  const double step_s = timed.empty() ? total_s : median(timed);
  const double mean_s = timed.empty() ? total_s : std::accumulate(timed.begin(), timed.end(), 0.0) / double(timed.size());
  const double slowest = timed.empty() ? total_s : *std::max_element(timed.begin(), timed.end());
  const plan::Mfu mfu = plan::mfu_of(s.run.model, s.run.exec.global_batch_size, step_s, r.peak_flops);
  const int64_t tokens_per_step = s.run.exec.global_batch_size * s.run.model.seq_len;
  std::printf("done: %lld steps in %s; %.0f tokens/s, %s: median of the %zu steps after the first, %.4g s (mean "
              "%.4g s, slowest %.4g s), against a peak of %.1f GFLOP/s (%s)%s; validation loss %.4f\n",
              (long long)r.steps, duration(total_s).c_str(), double(tokens_per_step) / step_s,
              plan::mfu_text(mfu).c_str(), timed.size(), step_s, mean_s, slowest, r.peak_flops / 1e9, r.peak_which.c_str(),
              r.peak_raised ? fmt::format(" (raised from the measured {:.1f}: a step ran faster than it)", r.measured_peak / 1e9).c_str()
                            : "",
              r.last_val);
  std::printf("peak memory: %s resident (getrusage, rank 0) vs %s trainer buffers vs %s planner prediction\n",
              mib(mems[1]).c_str(), mib(mems[0]).c_str(), mib(planned_bytes(s)).c_str());
}

// One step's line of the log; per_step (the median so far) gives the time left.
void print_step(const TrainSettings& s, int64_t done, double loss, double lr, double tps, const plan::Mfu& mfu,
                double per_step, const std::optional<double>& v, const std::vector<double>& mtp) {
  std::string mtp_text;  // Megatron's "mtp_1 loss": each multi-token-prediction depth's own
  for (size_t k = 0; k < mtp.size(); ++k) mtp_text += fmt::format(" | mtp_{} loss {:.4f}", k + 1, mtp[k]);
  std::printf("step %5lld/%lld | loss %.4f%s | lr %.2e | %8.0f tok/s | MFU %5.1f%% | ETA %s%s\n", (long long)done,
              (long long)s.steps, loss, mtp_text.c_str(), lr, tps, 100.0 * mfu.full(),
              duration(per_step * double(s.steps - done)).c_str(), v ? fmt::format(" | val loss {:.4f}", *v).c_str() : "");
  std::fflush(stdout);
}

// Mixture of experts: each MoE layer's routing over the step's global batch (tokens per expert
// before dropping, assignments dropped at the capacity).
void add_routing(nlohmann::json& j, const RoutingStats& r) {
  if (r.empty()) return;
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < r.layers.size(); ++i)
    layers.push_back({{"layer", r.layers[i]}, {"tokens_per_expert", r.tokens_per_expert[i]}, {"dropped", r.dropped[i]}});
  j["moe_routing"] = layers;
  if (r.ep_load_imbalance > 0) j["ep_load_imbalance"] = r.ep_load_imbalance;
}

int train(const TrainSettings& settings, const Problems& parsed, bool mpi, comm::World& ranks) {
  const int rank = ranks.rank(), world = ranks.size();
  TrainSettings s = settings;
  std::optional<checkpoint::CheckpointReader> resume = check_on_every_rank(s, parsed, mpi, ranks, world);
  Problems problems;
  // What the machine has, before anything is allocated (gathered: the same view on every rank).
  Mesh mesh(s.run.layout, std::max<int64_t>(s.run.cluster.gpus_per_node, 1));
  const ResourceView resources = gather_resources(s, ranks, mesh.coords_of(rank).pp());
  check_resources(s, resources, problems);
  problems.throw_if_any();
  const ThreadChoice threads = choose_threads(s, resources.own_node_ranks, affinity_cores(),
                                              std::max(1u, std::thread::hardware_concurrency()));
  const int64_t stop_at = s.stop_at < 0 ? s.steps : std::min(s.stop_at, s.steps);
  const int64_t eval_every = s.eval_every >= 0 ? s.eval_every : std::max<int64_t>(1, s.steps / 5);
  const int64_t log_every = s.log_every > 0 ? s.log_every : std::max<int64_t>(1, s.steps / 20);

  // The device first: its ranks' groups may talk through it (NCCL on the kernels' stream).
  std::unique_ptr<kernels::Kernels> kernels =
      s.make_device_kernels ? s.make_device_kernels() : kernels::make_cpu_kernels(threads.threads);
  ProcessGroups groups = open_groups(s, mesh, mpi, ranks, *kernels);
  auto data = s.data ? token_file_source(s.data, s.run.model.seq_len, s.seed)
                     : synthetic_source(s.run.model.vocab, s.run.model.seq_len, s.seed);
  auto val = validation_source(s);
  TrainerOptions o = trainer_options(s, *kernels);
  if (s.compute_slowdown) o.compute_slowdown = s.compute_slowdown(rank);
  DistTrainer trainer(s.run, groups, *data, o);
  const int64_t first = resume ? resume_from(trainer, groups, *resume, s) : 0;

  MetricsWriter metrics;
  open_metrics(metrics, rank, s, groups);

  const Peak peak = measure_peak(s, *kernels, *groups.world, threads.threads, resources.own_node_ranks);
  const double step_flops = plan::model_flops_per_step(s.run.model, s.run.exec.global_batch_size, s.run.model.vocab);
  // MFU never passes 100%: a step faster than the peak means the peak was measured low, and it is
  // raised to that step's rate (the summary says so).
  double peak_flops = peak.flops;
  bool peak_raised = false;
  const int64_t tokens_per_step = s.run.exec.global_batch_size * s.run.model.seq_len;
  const std::vector<RankActivations> activations = gather_activations(trainer, groups, mesh, world);
  if (rank == 0) {
    print_startup(s, world, trainer, *data, kernels->device_name(),
                  s.make_device_kernels ? ""
                  : launch::openmp_wait_note().empty() ? threads.note
                                               : threads.note + "; " + launch::openmp_wait_note(),
                  peak, step_flops, first, activations);
    warn_stop_without_checkpoint(s);
  }
  const int64_t run_steps = stop_at - first;
  RehearsalData report = start_report(s, trainer, run_steps);
  StragglerWatch watch = world > 1 ? straggler_watch(s, mesh, world, report.straggler_off) : StragglerWatch();
  if (watch.active()) report.straggler_rule = watch.rule().text();
  if (rank == 0 && world > 1) {
    if (watch.active()) {
      std::string per_stage;
      for (int r = 0; r < world; ++r)
        if (mesh.coords_of(r).tp() == 0 && mesh.coords_of(r).dp() == 0 && mesh.coords_of(r)[Dim::CP] == 0)
          per_stage += fmt::format("{}stage {} {:.2f} ms", per_stage.empty() ? "" : ", ", mesh.coords_of(r).pp(),
                                   watch.predicted(r) * 1e3);
      std::printf("stragglers  %s (the first step not judged); predicted compute per step: %s\n",
                  report.straggler_rule.c_str(), per_stage.c_str());
    } else {
      std::printf("stragglers  not watched: %s\n", report.straggler_off.c_str());
    }
  }
  if (s.evict_stragglers && !watch.active()) {
    Problems p;
    p.add("--evict-stragglers evicts ranks slower than their stage's prediction, but there is none: " +
              report.straggler_off,
          "give --prediction-cluster FILE (`trident bench` writes it), or drop --evict-stragglers", "evict-stragglers");
    p.throw_if_any();
  }
  report.first_step = first;  // a resumed run's losses start after the checkpoint's steps

  int64_t saved_at = -1;
  int64_t every = s.checkpoint_every;  // auto: set after the first save, from its measured time
  // Saves during the run overlap the next steps (the run waits for the state's copy only); the
  // last one, and one before a stop, the run waits for whole. Declared after the trainer: a save
  // in flight is joined (and, not completed, removed) before the trainer goes.
  AsyncSaver saver(trainer, groups, s.checkpoint_path);
  int64_t in_flight_step = -1;
  // wait: until the save in flight is in place; else only if every writer is done (after each step).
  auto complete_in_flight = [&](bool wait = true) {
    if (!saver.in_flight()) return;
    if (wait) saver.complete();
    else if (!saver.poll()) return;
    if (rank == 0)
      std::printf("checkpoint: %s in place (the save of step %lld, written in the background: durable %.2f s after "
                  "it began)\n",
                  s.checkpoint_path.c_str(), (long long)in_flight_step, saver.last_durable_seconds()),
          std::fflush(stdout);
  };
  // background: the run goes on while the shard is written (else it returns once the save is in place).
  auto save = [&](double loss, int64_t done, bool background = false) {
    complete_in_flight();
    const auto t0 = std::chrono::steady_clock::now();
    if (background) saver.start(checkpoint_meta(s, done), loss), in_flight_step = done;
    else saver.save_now(checkpoint_meta(s, done), loss);
    saved_at = done;
    // The time the run waited for it: whole (every rank's slices written, synced, and the directory
    // swapped in), or in the background the state's copy only.
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank == 0 && !background)
      std::printf("checkpoint: %s (step %lld) saved in %.2f s\n", s.checkpoint_path.c_str(), (long long)done, took),
          std::fflush(stdout);
    else if (rank == 0)
      std::printf("checkpoint: %s (step %lld) state copied in %.2f s (the run's wait); writing it in the background\n",
                  s.checkpoint_path.c_str(), (long long)done, took),
          std::fflush(stdout);
  };
  // A write error on the metrics file (a full disk) stops every rank at that step, after saving
  // the checkpoint there, so the steps done are kept and the run resumes from them.
  std::string metrics_error;  // rank 0's
  auto stop_if_metrics_failed = [&](double loss, int64_t done) {
    if (s.metrics_path.empty()) return;
    double ok = metrics_error.empty() ? 1 : 0;
    all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
    if (ok > 0.5) return;
    std::string kept = "no --checkpoint was given: the steps are lost";
    if (!s.checkpoint_path.empty()) {
      if (saved_at != done) save(loss, done);
      else complete_in_flight();  // the save at this step, started in the background, put in place
      kept = fmt::format("the checkpoint '{}' holds step {}: continue with --resume {}", s.checkpoint_path, done,
                         s.checkpoint_path);
    }
    throw_metrics_write(s, metrics_error, done, kept);
  };
  const auto t_start = std::chrono::steady_clock::now();
  const engine::LoadProbe load_probe(threads.threads);
  double last_val = NAN, last_loss = NAN;
  std::vector<double> timed;  // seconds of the steps after the first
  for (int64_t step = first; step < stop_at; ++step) {
    if (s.before_step) s.before_step(step, rank);
    const double loss = last_loss = trainer.step(step);
    const int64_t done = step + 1;  // steps counted from 1
    double seconds = 0;
    const std::vector<PhaseTimes> row = gather_phase_times(trainer.last_times(), groups, world, seconds);
    add_report_step(report, trainer, loss, row);
    std::vector<Straggler> named;
    if (watch.active() && done > first + 1) named = watch.observe(done, row);
    for (const Straggler& x : named) {
      report.stragglers.push_back(x.text());
      if (rank == 0) std::printf("straggler: %s\n", x.text().c_str()), std::fflush(stdout);
    }
    if (done > first + 1 || stop_at - first == 1) timed.push_back(seconds);  // the first step warms caches
    if (step_flops / seconds > peak_flops) peak_flops = step_flops / seconds, peak_raised = true;
    std::optional<double> v;
    if ((eval_every > 0 && done % eval_every == 0) || done == stop_at)
      v = last_val = trainer.evaluate(*val, s.eval_batches);
    if (v) report.val_losses.push_back({done, *v});
    if (rank == 0) {
      const plan::Mfu mfu = plan::mfu_of(s.run.model, s.run.exec.global_batch_size, seconds, peak_flops);
      const double tps = double(tokens_per_step) / seconds;
      const double lr = engine::learning_rate(s.adamw, step);
      if (done % log_every == 0 || done == first + 1 || done == stop_at || v)
        print_step(s, done, loss, lr, tps, mfu, timed.empty() ? seconds : median(timed), v, trainer.mtp_losses());
      if (metrics.is_open()) {
        nlohmann::json j =
            metrics_line(done, loss, lr, tps, mfu.full(), trainer.last_grad_norm(), seconds, v, row, world);
        j["mfu_causal_halved"] = mfu.causal();
        // When the step ended (wall clock): `train --elastic` measures the time a failure lost from it.
        j["unix_time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        add_routing(j, trainer.routing_stats());
        for (size_t k = 0; k < trainer.mtp_losses().size(); ++k)
          j["mtp_" + std::to_string(k + 1) + "_loss"] = trainer.mtp_losses()[k];
        if (watch.active() && done > first + 1) {
          const auto& ratios = watch.ratios();
          const auto worst = std::max_element(ratios.begin(), ratios.end());
          j["compute_vs_predicted"] = {{"median", watch.median_ratio()}, {"max", *worst},
                                       {"max_rank", worst - ratios.begin()}};
          if (!named.empty()) {
            std::vector<int> ranks;
            for (const Straggler& x : named) ranks.push_back(x.rank);
            j["stragglers"] = ranks;
          }
        }
        write_metrics(metrics, j, metrics_error);
      }
    }
    complete_in_flight(false);  // a background save in place as soon as it is durable
    if (every == kCheckpointEveryAuto && done >= first + 2 && done < stop_at && !s.checkpoint_path.empty()) {
      // --checkpoint-every auto: save after the second step (the first warms caches), timed, then
      // at the Young/Daly interval.
      const auto t0 = std::chrono::steady_clock::now();
      save(loss, done, true);
      double measured[2] = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), seconds};
      all_reduce_f64(*groups.world, measured, 2, comm::ReduceOp::Max);
      const AutoSaveInterval a = auto_save_interval(measured[0], measured[1], s.failures_per_1000_gpu_days, world);
      every = a.steps;
      if (rank == 0) std::printf("%s\n", auto_save_interval_text(a).c_str()), std::fflush(stdout);
    } else if (every > 0 && done % every == 0 && done < stop_at && !s.checkpoint_path.empty()) {
      save(loss, done, true);
    }
    if (done == stop_at && rank == 0) close_metrics(metrics, metrics_error);
    stop_if_metrics_failed(loss, done);
    if (s.evict_stragglers && !named.empty() && done < stop_at) {
      // Every rank named the same ranks at this step: save here (no step is lost) and stop, so the
      // supervisor (`train --elastic`) restarts without their nodes.
      if (!s.checkpoint_path.empty() && saved_at != done) save(loss, done);
      complete_in_flight();  // a background save of this step: in place before the stop
      std::string which;
      for (const Straggler& x : named) which += fmt::format("{}evicting straggler rank {}: {}", which.empty() ? "" : "; ", x.rank, x.text());
      throw StragglersEvicted(which);
    }
  }
  record_load(load_probe, groups, resources, world, threads.threads, report);
  const std::vector<float> mems = gather_memory(trainer, groups, world);
  if (rank == 0) {
    const RunTotals totals{run_steps, std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(),
                           timed, peak.flops, peak_flops, peak_raised, peak.which, last_val};
    print_summary(s, totals, mems);
    if (world > 1 || !s.report_path.empty() || !s.html_path.empty()) write_rehearsal(report, s, mesh, mems, world);
    std::fflush(stdout);
  }
  if (!s.checkpoint_path.empty() && run_steps > 0) save(last_loss, stop_at);
  return 0;
}

}  // namespace

int run_training(const TrainSettings& s, const Problems& parsed) {
  const bool mpi = launched_by_mpi();
  std::unique_ptr<comm::World> world = comm::open_world(mpi);  // MPI starts here, or a world of one
  const int rank = world->rank();
  int code = 0;
  try {
    code = train(s, parsed, mpi, *world);
  } catch (const InputError& e) {
    if (rank == 0) print_problems(e);
    code = 2;
  } catch (const SaveRefused& e) {
    if (rank == 0) std::fprintf(stderr, "trident train: %s\n", e.what());
    code = 1;
  } catch (const StragglersEvicted& e) {
    if (rank == 0) std::fprintf(stderr, "trident train: %s\n", e.what()), std::fflush(stderr);
    code = 3;
  } catch (const std::exception& e) {
    if (!mpi) throw;
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::fprintf(stderr, "trident train: rank %d (host %s, pid %d) failed: %s\n", rank, host, int(getpid()),
                 e.what());
    std::fflush(stderr);
    world->abort(1);  // the other ranks stop instead of waiting on this one
  }
  comm::close_world(std::move(world));
  return code;
}

}  // namespace trident::parallel
