#include "runtime/comm/mpi_world.h"
#include "equivalence_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <tuple>

#include "runtime/parallel/batch_source.h"

namespace trident::parallel::testing {

ModelSpec tiny_model(const Case& c) {
  const bool llama = c.llama;
  ModelSpec m;
  m.family = ModelFamily::GPT;
  m.layers = 4;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 128;
  m.seq_len = 16;
  m.vocab = 64;
  if (llama) {
    // Grouped-query attention: 4 query heads share 2 kv heads (split over tp 2, replicated
    // over tp 4); a SwiGLU width that is not a multiple of the hidden size.
    m.family = ModelFamily::Llama;
    m.kv_heads = 2;
    m.ffn_hidden = 96;
  }
  if (c.qwen3) m.head_size = 16, m.qk_norm = true, m.rope_theta = 1e6, m.norm_eps = 1e-6;
  if (c.gpt_oss) m.sliding_window = 6, m.full_attention_every = 2, m.attention_sinks = true;
  if (c.gpt_oss_model) m.qkv_bias = m.proj_bias = m.mlp_bias = 1, m.router_bias = true, m.activation_clamp = 0.1;
  m.mtp_layers = c.mtp;
  if (c.experts > 0) {
    m.experts = c.experts, m.experts_per_token = 2, m.expert_ffn_hidden = 48, m.moe_dense_layers = 0;
    m.capacity_factor = 1.0;
    m.shared_experts = c.shared_experts;
    m.moe_layer_freq = c.moe_layer_freq;
    if (c.deepseek_router) m.router_score = "sigmoid", m.router_expert_bias = true, m.router_topk_scaling = 2.5;
    // Top-4 in the best 2 of 4 groups (each group's 2 experts summed): with top-2 in 2 groups the
    // groups would keep the plain top-2 (the best expert's group and the second's).
    if (c.group_limited) m.experts_per_token = 4, m.router_groups = 4, m.router_group_topk = 2;
  }
  if (c.deepseek_v3) {
    m.q_lora_rank = 16, m.kv_lora_rank = 16, m.qk_nope_head_dim = 8, m.qk_rope_head_dim = 4, m.v_head_dim = 8;
    m.kv_heads = m.heads, m.norm_eps = 1e-6;
    m.moe_dense_layers = 1, m.shared_experts = 1;
  }
  if (c.yarn)
    m.rope_scaling = c.deepseek_v3 ? RopeScaling{"yarn", 4.0, 1.0, 1.0, 16, 32.0, 1.0, 1.0, 1.0, true}
                                   : RopeScaling{"yarn", 4.0, 1.0, 1.0, 16, 32.0, 1.0, 1.0, 0.0, false};
  return m;
}

TrainerOptions options(const Case& c) {
  TrainerOptions o;
  o.adamw.lr = 3e-3;
  o.adamw.min_lr = 3e-4;
  o.adamw.warmup_steps = 2;
  o.adamw.decay_steps = kSteps;
  o.adamw.grad_clip = 1.0;
  o.seed = 42;
  o.bucket_floats = 4096;  // several buckets per stage, so overlap and ordering are exercised
  o.moe.drop = c.drop;
  if (c.gpt_oss_model) o.moe.normalise = true;  // GPT-OSS's softmax over the top-k logits
  o.moe.aux_coeff = 0.01, o.moe.z_coeff = 0.001;
  o.moe.bias_update_rate = 0.01;  // moves the bias enough in 20 steps to change the routing
  o.mtp_loss_scaling = 0.3;
  return o;
}

RunSpec run_for(const Case& c) {
  RunSpec run;
  run.model = tiny_model(c);
  run.model.vocab = c.vocab;
  run.layout = c.layout;
  run.exec.global_batch_size = 8;
  run.exec.micro_batch_size = c.micro_batch;
  run.exec.sequence_parallel = c.sequence_parallel;
  run.exec.schedule = c.schedule;
  run.exec.virtual_stages = c.virtual_stages;
  run.exec.zero = c.zero;
  run.exec.recompute = c.recompute;
  run.exec.precision = Precision::FP32;
  return run;
}

// Trains `c` on the ranks of `base` (MPI_COMM_NULL: one process, a world of one without MPI).
Result start(const Case& c, MPI_Comm base) {
  Result r;
  RunSpec run = run_for(c);
  Mesh mesh(run.layout, 8);
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = 120;
  if (base == MPI_COMM_NULL) {
    r.groups = make_single_process_groups(ctx);
  } else {
    comm::MpiWorld base_world(base);
    r.groups = make_process_groups(mesh, ctx, base_world);
  }
  r.data = synthetic_source(run.model.vocab, run.model.seq_len, 7);
  TrainerOptions o = options(c);
  o.stage_layers = c.stage_layers;
  r.trainer = std::make_unique<DistTrainer>(run, r.groups, *r.data, o);
  return r;
}

void Result::run(const Case& c, int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    losses.push_back(trainer->step(s));
    mtp_losses.push_back(trainer->mtp_losses());
    if (c.experts > 0) routing.push_back(trainer->routing_stats());
  }
}

Result train(const Case& c, MPI_Comm base) {
  Result r = start(c, base);
  r.run(c, 0, kSteps);
  return r;
}

const Result& reference(const Case& c) {
  static std::map<std::tuple<bool, int64_t, int64_t, bool, int64_t, int64_t, bool, bool, bool, int64_t, bool, bool, bool, bool>,
                  Result>
      refs;
  const auto key =
      std::make_tuple(c.llama, c.vocab, c.experts, c.drop, c.shared_experts, c.moe_layer_freq, c.qwen3, c.gpt_oss,
                      c.deepseek_router, c.mtp, c.group_limited, c.deepseek_v3, c.gpt_oss_model, c.yarn);
  auto it = refs.find(key);
  if (it == refs.end()) {
    Case one{c.llama ? "single llama" : "single", Layout{}};
    one.llama = c.llama, one.vocab = c.vocab, one.experts = c.experts, one.drop = c.drop;
    one.shared_experts = c.shared_experts, one.moe_layer_freq = c.moe_layer_freq, one.qwen3 = c.qwen3;
    one.gpt_oss = c.gpt_oss, one.gpt_oss_model = c.gpt_oss_model;
    one.deepseek_router = c.deepseek_router;
    one.mtp = c.mtp;
    one.group_limited = c.group_limited;
    one.deepseek_v3 = c.deepseek_v3;
    one.yarn = c.yarn;
    it = refs.emplace(key, train(one, MPI_COMM_NULL)).first;
  }
  return it->second;
}

// Element (r, c) of a shard tensor in the whole model's tensor of the same logical name (the
// layout's own mapping, which checkpoints use too); 0 for a row of vocabulary padding.
namespace {

float whole_value(const nn::ParamLayout& whole, const float* wp, const nn::ParamLayout& shard,
                  const nn::TensorView& view, int64_t r, int64_t c) {
  const nn::ParamLayout::Global g = shard.global(view, r, c);
  const bool vocab_rows = g.name == "wte" || g.name == "head_w";
  if (vocab_rows && g.row >= shard.shard().model.vocab) return 0.0f;  // padding stays zero
  const nn::TensorView* w = whole.find(g.name);
  return wp[w->offset + g.row * w->cols + g.col];
}

// Another layout sums in another order than one process (ring attention's blocks under cp, the
// row-parallel halves under tp: about 1e-7 relative), so a token whose k-th and (k+1)-th router
// scores lie within that of each other may go to the other expert. Such a near tie moves exactly
// one assignment in one layer, in a layer where one process saw a gap below kNearTie; a wrong
// dispatch moves many, with no such gap. Returns the first step whose routing differs by one such
// move, else the run's length (every step compared in full).
constexpr double kNearTie = 1e-5;
size_t steps_before_a_near_tie(const Case& c, const Result& got, const Result& ref) {
  const size_t n = std::min(got.routing.size(), ref.routing.size());
  if (c.experts == 0) return got.losses.size();
  for (size_t s = 0; s < n; ++s) {
    const auto& a = got.routing[s].tokens_per_expert;
    const auto& b = ref.routing[s].tokens_per_expert;
    if (a == b) continue;
    if (a.size() != b.size()) return got.losses.size();
    int64_t moved = 0, layers = 0;
    size_t layer = 0;
    for (size_t l = 0; l < a.size(); ++l) {
      if (a[l].size() != b[l].size()) return got.losses.size();
      int64_t here = 0;
      for (size_t e = 0; e < a[l].size(); ++e) here += std::abs(a[l][e] - b[l][e]);
      moved += here, layers += here > 0;
      if (here > 0) layer = l;
    }
    const bool tie = moved == 2 && layers == 1 && ref.routing[s].closest_tie.at(layer) < kNearTie;
    return tie ? s : got.losses.size();
  }
  return got.losses.size();
}

}  // namespace

void expect_same_as_single_process(const Case& c) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const Result& ref = reference(c);
  const int w = int(c.layout.world_size());
  MPI_Comm base;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank < w ? 0 : MPI_UNDEFINED, world_rank, &base);
  if (world_rank < w) {
    Result got = train(c, base);
    ASSERT_EQ(got.losses.size(), ref.losses.size());
    const size_t compared = steps_before_a_near_tie(c, got, ref);
    if (compared < got.losses.size() && world_rank == 0)
      std::printf("[ near tie] %-36s step %zu moves one assignment (another order of sums; one process's closest "
                  "tie that step: %.1e): steps 0-%zu compared, final parameters not\n",
                  c.name.c_str(), compared, [&] {
                    double gap = 1;
                    for (double g : ref.routing[compared].closest_tie) gap = std::min(gap, g);
                    return gap;
                  }(), compared - 1);
    double worst_rel = 0;
    for (size_t s = 0; s < compared; ++s) {
      EXPECT_NEAR(got.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s]))
          << c.name << " step " << s << " rank " << world_rank;
      worst_rel = std::max(worst_rel, std::abs(got.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
    }
    if (world_rank == 0) std::printf("[ layout  ] %-36s max relative loss error over %zu steps: %.2e\n", c.name.c_str(),
                                     compared, worst_rel);
    // Multi-token prediction: each depth's loss, every step (the same value on every rank).
    if (c.mtp > 0) {
      double worst_mtp = 0;
      for (size_t s = 0; s < compared; ++s) {
        ASSERT_EQ(got.mtp_losses[s].size(), size_t(c.mtp)) << c.name << " step " << s;
        for (size_t k = 0; k < size_t(c.mtp); ++k) {
          const double want = ref.mtp_losses[s][k];
          EXPECT_NEAR(got.mtp_losses[s][k], want, 1e-5 * std::abs(want)) << c.name << " mtp_" << k + 1 << " step " << s;
          worst_mtp = std::max(worst_mtp, std::abs(got.mtp_losses[s][k] - want) / std::abs(want));
        }
      }
      if (world_rank == 0) std::printf("[ mtp     ] %-36s max relative MTP loss error over %zu steps: %.2e\n",
                                       c.name.c_str(), compared, worst_mtp);
    }
    EXPECT_LT(got.losses.back(), got.losses.front() - 0.1) << c.name << ": training did not lower the loss";
    // Mixture of experts: every step routes the same tokens to the same experts and drops the
    // same assignments (counted over the global batch, the dropped ones by their identity).
    ASSERT_EQ(got.routing.size(), ref.routing.size());
    if (c.experts > 0) {  // the case tests what it says: dropping drops some assignments, no-drop none
      int64_t dropped = 0;
      for (const auto& r : ref.routing)
        for (int64_t d : r.dropped) dropped += d;
      EXPECT_EQ(dropped > 0, c.drop) << c.name << ": " << dropped << " assignments dropped over the run";
    }
    for (size_t s = 0; s < std::min(compared, got.routing.size()); ++s) {
      EXPECT_EQ(got.routing[s].tokens_per_expert, ref.routing[s].tokens_per_expert) << c.name << " step " << s;
      EXPECT_EQ(got.routing[s].dropped, ref.routing[s].dropped) << c.name << " step " << s;
      EXPECT_EQ(got.routing[s].dropped_ids, ref.routing[s].dropped_ids) << c.name << " step " << s;
    }
    // DeepSeek-V3's expert bias: moved by the same loads on every rank, so one process's exactly
    // (and it moved: the test sees the rule at work).
    if (c.deepseek_router && compared == got.losses.size()) {
      EXPECT_EQ(got.trainer->expert_bias(), ref.trainer->expert_bias()) << c.name << " rank " << world_rank;
      int64_t moved = 0;
      for (const auto& b : ref.trainer->expert_bias())
        for (float x : b) moved += x != 0.0f;
      EXPECT_GT(moved, 0) << c.name << ": the expert bias never moved";
      if (world_rank == 0 && got.trainer->expert_bias() == ref.trainer->expert_bias())
        std::printf("[ bias    ] %-36s expert bias equal to one process's (%lld values moved)\n", c.name.c_str(),
                    (long long)moved);
    }
    // Final parameters: every element this rank holds equals the whole model's (after a near
    // tie the experts it moved train on other tokens: not comparable).
    if (compared == got.losses.size()) {
      const nn::ParamLayout& whole = ref.trainer->chunk_layout(0);
      const float* wp = ref.trainer->chunk_params(0);
      double worst = 0;
      std::string worst_name;
      for (int64_t ch = 0; ch < got.trainer->chunks(); ++ch) {
        const nn::ParamLayout& L = got.trainer->chunk_layout(ch);
        const std::vector<float> held = got.trainer->whole_params(ch);  // gathered under ZeRO-3
        const float* p = held.data();
        for (const auto& view : L.tensors())
          for (int64_t r = 0; r < view.rows; ++r)
            for (int64_t col = 0; col < view.cols; ++col) {
              const double d = std::abs(double(p[view.offset + r * view.cols + col]) -
                                        whole_value(whole, wp, L, view, r, col));
              if (d > worst) worst = d, worst_name = view.name;
            }
      }
      EXPECT_LT(worst, c.param_tol) << c.name << " rank " << world_rank << ": largest parameter difference in "
                                    << worst_name;
    }
    MPI_Comm_free(&base);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace trident::parallel::testing
