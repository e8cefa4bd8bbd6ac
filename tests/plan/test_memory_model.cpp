// Memory-model terms against hand computations (ZeRO paper, Korthikanti Table 2, schedules).
#include <gtest/gtest.h>

#include "core/units.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"
#include "schedule/schedule.h"

using namespace trident;
using namespace trident::plan;

namespace {
ModelSpec gpt3() { return model_preset("gpt3-175b"); }
}  // namespace

TEST(MemoryModel, mixed_precision_adam_is_18_bytes_per_param_with_fp32_grads) {
  auto b = state_bytes(Precision::BF16, 32);
  EXPECT_EQ(b.weights + b.gradients + b.optimizer, 18);
  b = state_bytes(Precision::BF16, 16);
  EXPECT_EQ(b.weights + b.gradients + b.optimizer, 16);  // the ZeRO paper's 16
  b = state_bytes(Precision::FP32, 32);
  EXPECT_EQ(b.weights + b.gradients + b.optimizer, 16);  // 4 + 4 + 8
}

TEST(MemoryModel, zero_stages_shard_optimizer_then_gradients_then_weights) {
  const ModelSpec m = gpt3();
  ExecutionSpec e;
  e.global_batch_size = 64;
  const double d = 16;
  auto bytes_per_param = [&](int zero) {
    e.zero = zero;
    auto s = stage_memory(m, e, {8, 8, 16, 0})[3];  // a middle stage: layers only
    return (s.weights_bytes + s.gradients_bytes + s.optimizer_bytes) / s.params.total();
  };
  EXPECT_NEAR(bytes_per_param(0), 18, 1e-9);
  EXPECT_NEAR(bytes_per_param(1), 6 + 12 / d, 1e-9);
  EXPECT_NEAR(bytes_per_param(2), 2 + 16 / d, 1e-9);
  EXPECT_NEAR(bytes_per_param(3), 18 / d, 1e-9);
}

TEST(MemoryModel, stage_params_add_up_to_the_model_with_the_padded_vocab) {
  const ModelSpec m = gpt3();
  const auto pc = count_parameters(m);
  auto one = stage_params(m, 1, 1, m.layers, true, true);
  EXPECT_NEAR(one.total(), double(pc.total) + double(padded_vocab(m.vocab, 1) - m.vocab) * m.hidden, 1);
  // pp > 1: the last stage keeps its own copy of the tied output embedding (V/t x h).
  auto last = stage_params(m, 8, 8, 12, false, true);
  EXPECT_NEAR(last.output_params, 51200.0 * 12288 / 8 + 2 * 12288, 1);
}

TEST(MemoryModel, activations_follow_korthikanti_table_2) {
  const ModelSpec m = gpt3();
  ExecutionSpec e;
  e.micro_batch_size = 1;
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h;
  auto bytes = [&](Recompute r, bool sp) {
    e.recompute = r;
    e.sequence_parallel = sp;
    return layer_activations(m, e, 8).bytes;
  };
  EXPECT_NEAR(bytes(Recompute::None, false), sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1);
  EXPECT_NEAR(bytes(Recompute::None, true), sbh * (34 + 5 * a * s / h) / t, 1);
  EXPECT_NEAR(bytes(Recompute::Selective, false), sbh * (10 + 24 / t), 1);
  EXPECT_NEAR(bytes(Recompute::Selective, true), 34 * sbh / t, 1);
  EXPECT_NEAR(bytes(Recompute::Full, false), 2 * sbh, 1);
  EXPECT_NEAR(bytes(Recompute::Full, true), 2 * sbh / t, 1);
}

// A GPT run without dropout (p = 0, as BLOOM trained): PyTorch runs no dropout kernel and keeps
// no mask, so a layer stores neither the two hidden dropout masks (2sbh) nor the attention
// probabilities' mask and dropped copy (3as^2b of the 5), and the first stage no embedding mask.
// The memory-bound time that these bytes drive falls with them (unfused attention: by 3/5).
TEST(MemoryModel, gpt_without_dropout_stores_no_masks_and_spends_less_on_the_attention_scores) {
  ModelSpec m = gpt3();
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.attention = AttentionKind::Unfused;
  const double s = 2048, h = 12288, a = 96, t = 8, sbh = s * h;
  EXPECT_TRUE(m.has_dropout());
  const double with = layer_activations(m, e, 8).bytes;
  const LayerCompute lc_with = layer_compute(m, e, 8, gpu_preset("a100-80g"), default_constants());
  const double mask_with = stage_memory(m, e, {8, 8, 1, 0})[0].embedding_activation_bytes;
  m.dropout = 0;
  EXPECT_FALSE(m.has_dropout());
  EXPECT_NEAR(layer_activations(m, e, 8).bytes, sbh * (8 + 24 / t + 2 * a * s / (h * t)), 1);
  EXPECT_NEAR(with - layer_activations(m, e, 8).bytes, sbh * (2 + 3 * a * s / (h * t)), 1);
  const LayerCompute lc = layer_compute(m, e, 8, gpu_preset("a100-80g"), default_constants());
  EXPECT_GT(lc_with.attention_elementwise_s, 0);
  EXPECT_NEAR(lc.attention_elementwise_s, 0.4 * lc_with.attention_elementwise_s, 1e-9 * lc_with.attention_elementwise_s);
  EXPECT_LT(lc.forward_s(), lc_with.forward_s());
  EXPECT_GT(mask_with, 0);
  EXPECT_EQ(stage_memory(m, e, {8, 8, 1, 0})[0].embedding_activation_bytes, 0);
  m.family = ModelFamily::Llama;  // Llama's default: no dropout; dropout 1 turns it on
  m.dropout = -1;
  EXPECT_FALSE(m.has_dropout());
  m.dropout = 1;
  EXPECT_TRUE(m.has_dropout());
}

TEST(MemoryModel, micro_batches_in_flight_per_schedule) {
  EXPECT_EQ(chunks_in_flight(ScheduleKind::GPipe, 0, 8, 1, 64), 64);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::OneFOneB, 0, 8, 1, 64), 8);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::OneFOneB, 7, 8, 1, 64), 1);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::OneFOneB, 0, 8, 1, 3), 3);
  // Interleaved, first stage: p v (1 + (p-1)/(p v)) = p v + p - 1 chunks (Korthikanti's factor).
  EXPECT_EQ(chunks_in_flight(ScheduleKind::Interleaved, 0, 8, 3, 64), 8 * 3 + 8 - 1);
  // ZB-H1 holds a micro-batch from its forward until its deferred weight gradient: p on every stage.
  EXPECT_EQ(chunks_in_flight(ScheduleKind::ZeroBubbleH1, 0, 8, 1, 64), 8);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::ZeroBubbleH1, 7, 8, 1, 64), 8);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::ZeroBubbleH1, 7, 8, 1, 3), 3);
}

// ZB-H1 keeps the layer output's and the attention output's gradients until W: 2 sbh more per layer
// (16-bit), split by t under sequence parallelism.
TEST(MemoryModel, zb_h1_layer_keeps_two_output_gradients_until_w) {
  const ModelSpec m = gpt3();
  ExecutionSpec e;
  e.global_batch_size = 64;
  e.recompute = Recompute::Selective;
  const double one = layer_activations(m, e, 8).bytes;
  e.schedule = ScheduleKind::ZeroBubbleH1;
  const double sbh = double(m.seq_len) * e.micro_batch_size * m.hidden;
  EXPECT_NEAR(layer_activations(m, e, 8).bytes - one, 2 * 2 * sbh, 1);
  e.sequence_parallel = true;
  EXPECT_NEAR(layer_activations(m, e, 8).deferred_grad_bytes, 2 * 2 * sbh / 8, 1);
}

// The planner's count is what the runtime's schedule lists keep: a micro-batch's activations from
// its forward until its last backward action (Backward, or BackwardWeight under ZB-H1).
TEST(MemoryModel, micro_batches_in_flight_are_the_schedule_lists_slots) {
  auto slots_held = [](const PipelineSchedule& sc, int64_t stage) {
    int64_t now = 0, peak = 0;
    for (const Action& a : sc.programs[size_t(stage)]) {
      if (a.kind == ActionKind::Forward) peak = std::max(peak, ++now);
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) --now;
    }
    return peak;
  };
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1})
    for (int64_t p : {1, 2, 4, 8})
      for (int64_t m : {1, 3, 4, 8, 16})
        for (int64_t s = 0; s < p; ++s)
          EXPECT_EQ(chunks_in_flight(kind, s, p, 1, m), double(slots_held(build_schedule(kind, p, m, 1), s)))
              << to_string(kind) << " p " << p << " m " << m << " stage " << s;
}

// The embedding's dropout mask lives from a micro-batch's forward through chunk 0 of stage 0 to
// that chunk's backward: the schedule lists' count, not every chunk in flight on the stage.
TEST(MemoryModel, embedding_dropout_masks_are_the_first_chunks_micro_batches_in_flight) {
  auto first_chunk_held = [](const PipelineSchedule& sc) {
    int64_t now = 0, peak = 0;
    for (const Action& a : sc.programs[0]) {
      if (a.chunk != 0) continue;
      if (a.kind == ActionKind::Forward) peak = std::max(peak, ++now);
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) --now;
    }
    return peak;
  };
  for (int64_t p : {2, 4, 8, 35})
    for (int64_t k : {1, 2, 3, 8}) {
      const int64_t m = k * p;  // interleaving needs a multiple of p
      for (int64_t v : {2, 3, 5})
        EXPECT_EQ(first_chunk_micro_batches_in_flight(ScheduleKind::Interleaved, p, v, m),
                  double(first_chunk_held(build_schedule(ScheduleKind::Interleaved, p, m, v))))
            << "p " << p << " v " << v << " m " << m;
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1})
        EXPECT_EQ(first_chunk_micro_batches_in_flight(kind, p, 1, m), double(first_chunk_held(build_schedule(kind, p, m, 1))))
            << to_string(kind) << " p " << p << " m " << m;
    }
  // Korthikanti's 530B layout (p 35, v 3, m 280): 70 masks, not the stage's 139 chunks in flight.
  const ModelSpec m{"530B", ModelFamily::GPT, 105, 20480, 128, 128, 4 * 20480, 2048, 51200};
  ExecutionSpec e;
  e.global_batch_size = 280;
  e.schedule = ScheduleKind::Interleaved;
  e.virtual_stages = 3;
  e.recompute = Recompute::Selective;
  e.sequence_parallel = true;
  const auto st = stage_memory(m, e, {8, 35, 1, 0});
  EXPECT_EQ(st[0].in_flight, 139);
  EXPECT_EQ(st[0].embedding_in_flight, 70);
  EXPECT_NEAR(st[0].embedding_activation_bytes, 70 * 2048.0 * 20480 / 8, 1);
}

TEST(MemoryModel, first_stage_of_1f1b_holds_one_whole_model_of_activations) {
  const ModelSpec m = gpt3();
  ExecutionSpec e;
  e.global_batch_size = 64;
  e.recompute = Recompute::Selective;
  e.sequence_parallel = true;
  auto st = stage_memory(m, e, {8, 8, 1, 0});
  const double per_layer = layer_activations(m, e, 8).bytes;
  // 8 micro-batches x 12 layers = 96 layers = the model, plus the embedding dropout mask.
  EXPECT_NEAR(st[0].activations_bytes - st[0].embedding_activation_bytes, 96 * per_layer, 1);
  // The last stage holds one micro-batch and the fp32 logits 4 s b V / t.
  EXPECT_NEAR(st[7].logits_bytes - 2 * 2048.0 * 12288 / 8, 4 * 2048.0 * 51200 / 8, 1);
  EXPECT_NEAR(st[7].activations_bytes - st[7].logits_bytes, 12 * per_layer, 1);
}

TEST(MemoryModel, overhead_is_explicit) {
  ExecutionSpec e;
  e.global_batch_size = 8;
  auto st = stage_memory(gpt3(), e, {8, 8, 1, 3 * kGiB});
  EXPECT_DOUBLE_EQ(st[0].overhead_bytes, 3 * kGiB);
  EXPECT_NEAR(st[0].total_bytes(), st[0].weights_bytes + st[0].gradients_bytes + st[0].optimizer_bytes +
                                       st[0].activations_bytes + 3 * kGiB, 1);
}
