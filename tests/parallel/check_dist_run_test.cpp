// Bad input to a distributed run is reported before any work, every problem at once, each
// naming its values and a fix.
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/training_loop.h"
#include "train_app/planning.h"

using namespace trident;

namespace {

parallel::TrainSettings tiny() {
  parallel::TrainSettings s;
  s.planning = train_app::planning();
  auto& m = s.run.model;
  m.layers = 4, m.hidden = 32, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 64;
  s.run.exec.global_batch_size = 8;
  s.run.exec.micro_batch_size = 2;
  s.run.exec.precision = Precision::FP32;
  return s;
}

std::string all_problems(const parallel::TrainSettings& s) {
  Problems p;
  parallel::check_trainable(s, p);
  std::string out;
  for (const auto& x : p.list()) out += x.what + " | " + x.fix + " [" + x.code + "]\n";
  return out;
}

TEST(CheckDistRun, a_valid_3d_run_has_no_problems) {
  auto s = tiny();
  s.run.layout = Layout{.tp = 2, .dp = 2, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
}

TEST(CheckDistRun, every_size_that_does_not_divide_is_reported_together) {
  auto s = tiny();
  s.run.model.vocab = 63;
  s.run.model.heads = s.run.model.kv_heads = 3;
  s.run.model.hidden = 30;
  s.run.model.ffn_hidden = 75;
  s.run.layout = Layout{.tp = 2, .dp = 3, .pp = 8};
  const std::string text = all_problems(s);
  for (const char* code : {"[tp-divides-heads]", "[tp-divides-ffn]", "[pp-exceeds-layers]", "[batch-divisibility]"})
    EXPECT_NE(text.find(code), std::string::npos) << code << " missing in:\n" << text;
  EXPECT_EQ(text.find("vocab"), std::string::npos) << "the vocabulary is padded, not refused:\n" << text;
}

// GPT-2's 50,257 tokens at tp 2: padded to 50,432 (128 x tp), as the planner assumes.
TEST(CheckDistRun, gpt2_vocabulary_at_tp2_is_padded_not_refused) {
  auto s = tiny();
  s.run.model.vocab = 50257;
  s.run.layout = Layout{.tp = 2, .dp = 2, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
}

// The loop's own values and the device are part of the one run check, all reported together.
TEST(CheckDistRun, values_of_the_loop_and_the_device_are_checked_with_the_layout) {
  auto s = tiny();
  s.steps = 0;
  s.adamw.lr = 0;
  s.eval_batches = 0;
  s.threads = 0, s.threads_given = true;
  s.comm_timeout_s = 0;
  s.device = "tpu";
  s.run.model.heads = s.run.model.kv_heads = 3;
  s.run.layout = Layout{.tp = 2, .dp = 4};
  const std::string text = all_problems(s);
  for (const char* code : {"[train-steps]", "[train-lr]", "[train-eval]", "[train-threads]", "[comm-timeout]",
                           "[train-device]", "[tp-divides-heads]"})
    EXPECT_NE(text.find(code), std::string::npos) << code << " missing in:\n" << text;
  s = tiny();
  s.gpu_comm = "mpi-host";  // a GPU transport on CPU ranks
  EXPECT_NE(all_problems(s).find("[gpu-comm]"), std::string::npos);
}

TEST(CheckDistRun, unsupported_features_are_refused_not_ignored) {
  auto s = tiny();
  for (int zero : {2, 3}) {
    s.run.exec.zero = zero;
    EXPECT_EQ(all_problems(s), "") << "ZeRO " << zero << " trains";
  }
  s.run.exec.precision = Precision::BF16;  // ZeRO-3 gathers fp32 units: no bf16 copy of them
  const std::string text = all_problems(s);
  EXPECT_NE(text.find("[zero-stage]"), std::string::npos) << text;
}

TEST(CheckDistRun, what_the_runtime_cannot_execute_is_refused_with_its_fix) {
  auto s = tiny();
  s.run.layout = Layout{.pp = 2};
  s.run.model.kv_heads = 2;
  s.run.exec.precision = Precision::BF16;
  s.run.exec.schedule = ScheduleKind::ZeroBubbleH1;
  s.run.exec.recompute = Recompute::Full;  // ZB-H1's weight pass needs the activations full recomputation drops
  s.run.exec.sequence_parallel = true;
  const std::string text = all_problems(s);
  for (const char* code : {"[train-gqa]", "[train-precision]", "[train-zb-h1]", "[sp-needs-tp]"})
    EXPECT_NE(text.find(code), std::string::npos) << code << " missing in:\n" << text;
  s = tiny();
  s.device = "cuda";
  s.run.exec.precision = Precision::BF16;  // bf16 runs on the CUDA backend
  EXPECT_NE(all_problems(s).find("[no-cuda-build]"), std::string::npos) << "cuda without its kernels";
  s.make_device_kernels = [] { return std::unique_ptr<kernels::Kernels>(); };  // a build with CUDA sets them
  EXPECT_EQ(all_problems(s), "");
}

TEST(CheckDistRun, llama_with_grouped_query_attention_trains_on_every_layout_the_kv_heads_allow) {
  auto s = tiny();
  s.run.model.family = ModelFamily::Llama;
  s.run.model.kv_heads = 2;
  s.run.model.ffn_hidden = 96;
  for (int64_t tp : {1, 2, 4}) {
    s.run.layout = Layout{.tp = tp, .dp = 1, .pp = 2};
    EXPECT_EQ(all_problems(s), "") << "tp " << tp;
  }
  s.run.model.tied = 1;  // the runtime's Llama head is its own tensor
  s.run.model.hidden = 36;  // head size 9: RoPE needs pairs
  const std::string text = all_problems(s);
  for (const char* code : {"[train-tied-embeddings]", "[train-rope-head-dim]"})
    EXPECT_NE(text.find(code), std::string::npos) << code << " missing in:\n" << text;
}

// Qwen3's attention trains in the Llama layer (a head width of its own, QK-norm, its epsilon); an
// odd --head-dim is refused by name (it used to reach the stage's raw error), and both stay
// refused in a GPT model.
TEST(CheckDistRun, llama_with_qwen3_attention_trains_and_an_odd_head_dim_is_refused) {
  auto s = tiny();
  s.run.model.family = ModelFamily::Llama;
  s.run.model.kv_heads = 2;
  s.run.model.head_size = 16, s.run.model.qk_norm = true, s.run.model.norm_eps = 1e-6;
  s.run.layout = Layout{.tp = 2, .dp = 1, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.model.head_size = 7;
  EXPECT_NE(all_problems(s).find("--head-dim 7 is odd"), std::string::npos) << all_problems(s);
  s.run.model.head_size = 16, s.run.model.family = ModelFamily::GPT, s.run.model.kv_heads = s.run.model.heads;
  const std::string text = all_problems(s);
  EXPECT_NE(text.find("QK-norm"), std::string::npos) << text;
  EXPECT_NE(text.find("[train-architecture]"), std::string::npos) << text;
}

// GPT-OSS's attention trains in the Llama layer (a sliding window on alternate layers, sinks) at
// tp x cp x pp; both stay refused by name in a GPT model.
TEST(CheckDistRun, llama_with_gpt_oss_attention_trains_and_a_gpt_model_refuses_it) {
  auto s = tiny();
  s.run.model.family = ModelFamily::Llama;
  s.run.model.kv_heads = 2;
  s.run.model.sliding_window = 8, s.run.model.full_attention_every = 2, s.run.model.attention_sinks = true;
  s.run.layout = Layout{.tp = 2, .cp = 2, .dp = 1, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.model.family = ModelFamily::GPT, s.run.model.kv_heads = s.run.model.heads;
  const std::string text = all_problems(s);
  for (const char* what : {"sliding-window attention (8 tokens)", "attention sinks", "[train-architecture]"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " missing in:\n" << text;
}

// GPT-OSS's biases (every linear layer's, the router's) and clamped unit train in the Llama layer's
// dense and MoE layers; a mix Megatron's switches cannot give, MLP biases with shared experts, and
// the clamp in a GPT model (no gate) are refused by name.
TEST(CheckDistRun, llama_with_gpt_oss_biases_and_clamp_trains_and_other_mixes_are_refused) {
  auto s = tiny();
  s.run.model.family = ModelFamily::Llama;
  s.run.model.kv_heads = 2;
  s.run.model.qkv_bias = s.run.model.proj_bias = s.run.model.mlp_bias = 1, s.run.model.activation_clamp = 7;
  s.run.layout = Layout{.tp = 2, .cp = 2, .dp = 1, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.model.experts = 4, s.run.model.experts_per_token = 2, s.run.model.expert_ffn_hidden = 64;
  s.run.model.router_bias = true;
  s.run.layout.etp = 2;  // each expert split over the tp ranks (Megatron-Core's expert grid without folding)
  EXPECT_EQ(all_problems(s), "");
  s.run.model.proj_bias = s.run.model.mlp_bias = 0, s.run.model.router_bias = false;  // Qwen2's q/k/v alone
  EXPECT_EQ(all_problems(s), "");
  s.run.model.proj_bias = 1;  // q/k/v and o without the MLP's
  std::string text = all_problems(s);
  for (const char* what : {"biases on q/k/v yes, the output projection yes, the MLP no and the router no", "[train-biases]"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " missing in:\n" << text;
  s.run.model.mlp_bias = 1, s.run.model.router_bias = true, s.run.model.shared_experts = 1;
  text = all_problems(s);
  EXPECT_NE(text.find("MLP biases with 1 shared experts"), std::string::npos) << text;
  s.run.model.shared_experts = 0, s.run.model.family = ModelFamily::GPT, s.run.model.kv_heads = s.run.model.heads;
  text = all_problems(s);
  for (const char* what : {"gated unit clamped at 7", "[train-architecture]"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " missing in:\n" << text;
}

// DeepSeek-V3's multi-token prediction trains after the Llama layers on any tp x cp x pp x dp with
// ZeRO 1-2; a GPT model, zb-h1's split backward and ZeRO-3 refuse it by name.
TEST(CheckDistRun, llama_with_mtp_trains_and_gpt_zb_h1_zero3_refuse_it) {
  auto s = tiny();
  s.run.model.family = ModelFamily::Llama;
  s.run.model.kv_heads = 2;
  s.run.model.mtp_layers = 1;
  s.run.layout = Layout{.tp = 2, .cp = 2, .dp = 1, .pp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.layout = Layout{.dp = 2, .pp = 2};
  s.run.exec.zero = 2;
  EXPECT_EQ(all_problems(s), "");
  s.run.exec.zero = 3;
  s.run.exec.schedule = ScheduleKind::ZeroBubbleH1;
  std::string text = all_problems(s);
  for (const char* what : {"zb-h1's split backward with multi-token prediction", "ZeRO-3 with multi-token prediction",
                           "[train-mtp]"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " missing in:\n" << text;
  s.run.exec.zero = 0, s.run.exec.schedule = ScheduleKind::OneFOneB;
  s.run.model.family = ModelFamily::GPT, s.run.model.kv_heads = s.run.model.heads;
  text = all_problems(s);
  for (const char* what : {"1 multi-token-prediction layer", "[train-architecture]"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " missing in:\n" << text;
}

TEST(CheckDistRun, zero_bubble_h1_and_recomputation_run) {
  auto s = tiny();
  s.run.layout = Layout{.pp = 2};
  s.run.exec.schedule = ScheduleKind::ZeroBubbleH1;
  s.run.exec.recompute = Recompute::Selective;
  EXPECT_EQ(all_problems(s), "");
  s.run.exec.schedule = ScheduleKind::OneFOneB;
  s.run.exec.recompute = Recompute::Full;
  EXPECT_EQ(all_problems(s), "");
}

// The MoE layer trains in one stage model with pp and dp, shared experts included, under every
// schedule (zb-h1's split backward too); a negative coefficient is refused by name.
TEST(CheckDistRun, moe_trains_with_shared_experts_and_zb_h1_and_refuses_a_negative_coefficient) {
  auto s = tiny();
  s.run.model.experts = 4;
  s.run.model.experts_per_token = 2;
  s.run.model.expert_ffn_hidden = 64;
  EXPECT_EQ(all_problems(s), "");
  s.run.model.shared_experts = 1;
  EXPECT_EQ(all_problems(s), "");
  s.run.layout = Layout{.pp = 2};
  s.run.exec.schedule = ScheduleKind::ZeroBubbleH1;
  EXPECT_EQ(all_problems(s), "");
  s.moe.aux_coeff = -1;
  const std::string text = all_problems(s);
  EXPECT_NE(text.find("[train-moe-coeff]"), std::string::npos) << text;
  EXPECT_EQ(text.find("zb-h1"), std::string::npos) << text;
}

// Expert parallel trains with plain data parallelism; ZeRO over the expert-data-parallel group
// and the MoE layer under cp are refused, each naming the value and the fix.
TEST(CheckDistRun, expert_parallel_trains_and_what_it_lacks_is_refused_with_a_reason) {
  auto s = tiny();
  s.run.layout = Layout{.tp = 1, .cp = 1, .dp = 4, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2};
  s.run.model.experts = 4;
  s.run.model.experts_per_token = 2;
  s.run.model.expert_ffn_hidden = 64;
  EXPECT_EQ(all_problems(s), "");
  s.run.exec.zero = 1;
  EXPECT_EQ(all_problems(s), "");
  // ZeRO-2/3 shard the experts' gradients (and weights) over the expert-data-parallel group.
  s.run.exec.zero = 2;
  EXPECT_EQ(all_problems(s), "");
  s.run.exec.zero = 3;
  EXPECT_EQ(all_problems(s), "");
  // Under cp with dropping the capacity is the whole micro-batch's (the ranks share the routing).
  s.run.exec.zero = 0;
  s.run.layout = Layout{.tp = 1, .cp = 2, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2};
  EXPECT_EQ(all_problems(s), "");
}

// Context parallel trains on the CPU when 2 x cp chunks cut the sequence (and, with sequence
// parallel, tp cuts a cp rank's rows); otherwise each problem names the fix.
TEST(CheckDistRun, context_parallel_runs_when_2cp_chunks_cut_the_sequence) {
  auto s = tiny();
  s.run.layout = Layout{.tp = 2, .cp = 2, .dp = 1, .pp = 2, .order = "tp-cp-ep-dp-pp"};
  s.run.exec.sequence_parallel = true;
  EXPECT_EQ(all_problems(s), "");
  s.run.layout.cp = 4;
  s.run.model.seq_len = 12;  // 8 chunks do not cut 12 tokens; cp 4 x tp 2 does not divide them either
  std::string text = all_problems(s);
  // One rule, one code: the planner's check says it, the runtime does not repeat it under another.
  const std::string said = "2 x cp = 8";
  const size_t at = text.find(said);
  EXPECT_NE(text.find("sequence length 12 is not divisible by 2 x cp = 8"), std::string::npos) << text;
  EXPECT_EQ(text.find(said, at + said.size()), std::string::npos) << text;
  EXPECT_NE(text.find("[cp-divides-sequence]"), std::string::npos) << text;
  EXPECT_EQ(text.find("[cp-divides-seq]"), std::string::npos) << text;
  EXPECT_NE(text.find("not divisible by cp x tp (8)"), std::string::npos) << text;
  s = tiny();
  s.run.layout = Layout{.tp = 1, .cp = 2, .dp = 1, .pp = 1, .order = "tp-cp-ep-dp-pp"};
  s.device = "cuda";
  text = all_problems(s);
  EXPECT_NE(text.find("[cp-device]"), std::string::npos) << text;
}

TEST(CheckDistRun, sequence_parallel_is_accepted_when_tp_divides_the_sequence) {
  auto s = tiny();
  s.run.layout = Layout{.tp = 2, .dp = 1, .pp = 1};
  s.run.exec.sequence_parallel = true;
  EXPECT_EQ(all_problems(s), "");
  s.run.model.seq_len = 15;
  const std::string text = all_problems(s);
  EXPECT_NE(text.find("[sp-divides-seq]"), std::string::npos) << text;
  EXPECT_NE(text.find("seq_len (15) is not divisible by tp (2)"), std::string::npos) << text;
}

TEST(CheckDistRun, an_uneven_split_must_cover_the_layers) {
  auto s = tiny();
  s.run.layout = Layout{.pp = 2};
  s.stage_layers = {1, 2};
  EXPECT_NE(all_problems(s).find("[stage-split]"), std::string::npos);
  s.stage_layers = {1, 3};
  EXPECT_EQ(all_problems(s), "");
}

TEST(CheckDistRun, interleaving_needs_micro_batches_in_multiples_of_the_stages) {
  auto s = tiny();
  s.run.layout = Layout{.pp = 2};
  s.run.exec.schedule = ScheduleKind::Interleaved;
  s.run.exec.virtual_stages = 2;
  s.run.exec.global_batch_size = 6;  // 3 micro-batches for 2 stages
  EXPECT_NE(all_problems(s), "");
}

}  // namespace

TEST(CheckDistRun, selective_recompute_under_flash_reruns_the_attention_or_is_refused) {
  auto s = tiny();
  s.device = "cuda";
  s.run.exec.attention = AttentionKind::Flash;
  s.run.exec.recompute = Recompute::Selective;
  s.run.exec.recompute_flash_attention = true;  // what the runtime's selective recompute does
  EXPECT_EQ(all_problems(s).find("[train-selective-flash]"), std::string::npos) << all_problems(s);
  s.run.exec.recompute_flash_attention = false;
  EXPECT_NE(all_problems(s).find("[train-selective-flash]"), std::string::npos) << all_problems(s);
}

// The runtime trains Megatron-Core's expert grid as planned: experts folded over tp (etp 1) or
// split over etp, over any order, at ep > 1; without ep at etp = tp only (its experts' gradients go
// over the dense ranks), and zb-h1 with whole experts only. The rest is refused by name.
TEST(CheckDistRun, moe_layouts_the_runtime_does_not_lay_out_as_planned_are_refused) {
  auto s = tiny();
  s.run.model.experts = 4;
  s.run.model.experts_per_token = 2;
  s.run.model.expert_ffn_hidden = 64;
  s.run.layout = Layout{.tp = 1, .cp = 1, .dp = 4, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2, .etp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "tp-cp-dp-pp", .ep = 1, .etp = 2};
  EXPECT_EQ(all_problems(s), "");
  // Folded over tp (etp 1) at ep 2 and 4, split at tp 1, ep before tp in the order: trains.
  for (int64_t ep : {2, 4}) {
    s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = ep, .etp = 1};
    EXPECT_EQ(all_problems(s), "") << "ep " << ep;
  }
  s.run.layout = Layout{.tp = 1, .cp = 1, .dp = 4, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2, .etp = 2};
  EXPECT_EQ(all_problems(s), "");
  s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "ep-tp-dp-pp", .ep = 2, .etp = 2};
  EXPECT_EQ(all_problems(s), "");
  // Without ep at etp != tp: no EDP group over tp x dp is built.
  s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 1, .etp = 1};
  const std::string no_ep = all_problems(s);
  EXPECT_NE(no_ep.find("[train-expert-layout]"), std::string::npos) << no_ep;
  EXPECT_NE(no_ep.find("use --ep 2 or more"), std::string::npos) << no_ep;
  // zb-h1 with experts split over etp: refused.
  s.run.layout = Layout{.tp = 2, .cp = 1, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp", .ep = 2, .etp = 2};
  s.run.exec.schedule = ScheduleKind::ZeroBubbleH1;
  const std::string zb = all_problems(s);
  EXPECT_NE(zb.find("[train-expert-layout]"), std::string::npos) << zb;
  EXPECT_NE(zb.find("zb-h1 with experts split over etp 2"), std::string::npos) << zb;
}

// runtime/parallel links no planner: its caller hands the planner's pieces in (TrainSettings::planning).
// Settings without them are refused by name, never run with a piece silently missing.
TEST(CheckDistRun, settings_without_the_planning_side_are_refused_by_name) {
  auto s = tiny();
  s.planning = {};
  EXPECT_EQ(s.planning.missing(), "stage_memory, mfu, active_mlp_params_per_layer, check_prediction, straggler_watch, report");
  Problems p;
  try {
    parallel::check_trainable(s, p);
    ADD_FAILURE() << "check_trainable ran without the prediction check";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("planning.check_prediction"), std::string::npos) << e.what();
  }
  try {
    parallel::run_training(s);
    ADD_FAILURE() << "run_training ran without its planning side";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lacks stage_memory, mfu"), std::string::npos) << e.what();
  }
  EXPECT_EQ(train_app::planning().missing(), "") << "train_app::planning() leaves a field unset";
}
