// The equivalence tests' machinery: a small model trained for kSteps by the DistTrainer on a
// layout of MPI ranks, against the same trainer on a world of one (as `trident train` runs one
// process): the losses within 1e-5 relative and the final parameters element by element.
// Shared by the dense layouts (equivalence_test.cpp, 8 ranks) and the mixture-of-experts ones
// (moe_equivalence_test.cpp, 4 ranks).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"

namespace trident::parallel::testing {

constexpr int64_t kSteps = 20;

// A layout is mixture-of-experts when experts > 0: every layer routes its tokens to top-2 of
// `experts` SwiGLU / GELU experts (Mixtral's shape, scaled down), dropping above the capacity
// factor 1 when `drop`, keeping every assignment otherwise.
struct Case {
  std::string name;
  Layout layout;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int zero = 0;
  int64_t virtual_stages = 1;
  std::vector<int64_t> stage_layers = {};
  bool sequence_parallel = false;
  int64_t micro_batch = 2;
  bool llama = false;
  Recompute recompute = Recompute::None;
  int64_t vocab = 64;  // an odd one is padded (128 x tp) unevenly across the TP ranks
  // Largest final-parameter difference allowed. A vocabulary split over both TP ranks sums the
  // softmax in another order than one process; AdamW carries that rounding (each step moves a
  // weight by at most lr = 3e-3) into the weights with tiny gradients: ~3e-5 after 20 steps.
  double param_tol = 2e-5;
  int64_t experts = 0;
  bool drop = false;
  int64_t shared_experts = 0;  // besides the routed ones: one MLP of shared x 48 columns, split over tp
  int64_t moe_layer_freq = 1;  // every N-th layer a MoE layer, the others dense
  // Qwen3's attention on the Llama layer: heads of 16 on hidden 32 (4 x 16 = 64 query features),
  // QK-norm, rope theta 1e6, norm epsilon 1e-6 (with llama = true).
  bool qwen3 = false;
  // GPT-OSS's attention on the Llama layer: a sliding window of 6 keys (the sequence is 16: under
  // cp 2 the chunks are 4 rows, so windows cross chunk boundaries) on layers 0 and 2, full
  // attention on layers 1 and 3, a learned sink per head (with llama = true).
  bool gpt_oss = false;
  // GPT-OSS's whole layer (with gpt_oss): biases on q/k/v, o, the experts (or dense MLP) and the
  // router, and the clamped gated unit at 0.1, inside the gate and up values' spread.
  bool gpt_oss_model = false;
  // DeepSeek-V3's router: sigmoid scores, top-k on score + an expert bias (moved 0.01 a step
  // towards the mean load), weights normalised and scaled by 2.5.
  bool deepseek_router = false;
  // DeepSeek-V3's multi-token prediction: this many MTP layers on the last stage, their losses
  // weighted 0.3 / mtp (Llama family).
  int64_t mtp = 0;
  // DeepSeek-V3's group-limited routing (with deepseek_router): the 8 experts in 4 groups, each
  // token's top-4 within its best 2 groups.
  bool group_limited = false;
  // DeepSeek-V3's shape (with llama = true and experts): multi-head latent attention (q_lora 16,
  // kv_lora 16, query/key heads of nope 8 + rope 4, values of 8), the first layer dense, one
  // shared expert, and DeepSeek-V3's router (deepseek_router).
  bool deepseek_v3 = false;
  // YaRN over an original context of 16 (the sequence's), factor 4: with deepseek_v3 DeepSeek-V3's
  // form (mscale = mscale_all_dim = 1: MLA's softmax scale x 1.296), else GPT-OSS's (truncate false,
  // attention factor 1.139 on cos and sin); under cp each chunk at its whole-sequence positions.
  bool yarn = false;
};

struct Result {
  std::vector<double> losses;
  std::vector<RoutingStats> routing;  // per step (mixture of experts)
  std::vector<std::vector<double>> mtp_losses;  // per step, each MTP depth's loss
  std::unique_ptr<BatchSource> data;  // the trainer reads it
  std::unique_ptr<DistTrainer> trainer;
  ProcessGroups groups;
  // Steps [from, to): their losses and routing appended.
  void run(const Case& c, int64_t from, int64_t to);
};

ModelSpec tiny_model(const Case& c);
TrainerOptions options(const Case& c);
RunSpec run_for(const Case& c);
// The trainer of `c` on the ranks of `base` (MPI_COMM_NULL: one process, a world of one without
// MPI), before its first step; train() runs its kSteps steps.
Result start(const Case& c, MPI_Comm base);
Result train(const Case& c, MPI_Comm base);
// The single-process reference of c's model (family, vocabulary, experts, dropping), computed once per rank.
const Result& reference(const Case& c);
// Trains c on ranks 0 .. world-1 of MPI_COMM_WORLD (the others wait) and checks losses,
// routing (mixture of experts: tokens per expert and the dropped assignments, every step) and
// final parameters against the reference; rank 0 prints the largest relative loss difference.
void expect_same_as_single_process(const Case& c);

}  // namespace trident::parallel::testing
