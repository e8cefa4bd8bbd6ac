// The proof users need: every parallel layout trains a small GPT (and a small Llama: RMSNorm,
// SwiGLU, RoPE, grouped-query attention, untied head) to the same losses (within 1e-5
// relative, fp32) and the same final parameters as one process running the whole model (the
// same trainer on a world of one, as `trident train` runs without mpirun).
// Runs on 8 MPI ranks; a layout of w ranks uses ranks 0..w-1, the others wait.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "runtime/comm/mpi_world.h"
#include "equivalence_harness.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_file.h"

using namespace trident;
using namespace trident::parallel;
using namespace trident::parallel::testing;

namespace {

// One process without MPI and one MPI rank are the same run, bit for bit.
TEST(Equivalence, one_mpi_rank_matches_the_world_of_one_bit_for_bit) {
  const Case c{"single on MPI_COMM_SELF", Layout{}};
  const Result got = train(c, MPI_COMM_SELF);
  const Result& ref = reference(c);
  for (int64_t s = 0; s < kSteps; ++s) EXPECT_EQ(got.losses[s], ref.losses[s]) << "step " << s;
}

// On a token file, a dp2 x pp2 x tp2 run reads exactly what one process reads (the
// BatchSampler, micro-batch m = sequences [m*b, (m+1)*b)): same losses.
TEST(Equivalence, token_file_3d_run_matches_one_process_on_the_same_file) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string path = "dist_equivalence_tokens.bin";
  if (rank == 0) {
    std::vector<int32_t> tokens(20000);
    uint64_t x = 12345;
    for (auto& t : tokens) x = x * 6364136223846793005ull + 1442695040888963407ull, t = int32_t((x >> 33) % 64);
    data::write_token_file(path, tokens, 64, 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Case c{"dp2xtp2xpp2 token file", Layout{.tp = 2, .dp = 2, .pp = 2}};
  RunSpec run = run_for(c);
  const int64_t steps = 8;
  const uint64_t seed = 5;

  // One process, as `trident train` runs it.
  std::vector<double> expected;
  {
    RunSpec one = run;
    one.layout = Layout{};
    ProcessGroups groups = make_single_process_groups(std::make_shared<comm::CommContext>());
    auto data = token_file_source(path, run.model.seq_len, seed);
    DistTrainer trainer(one, groups, *data, options(c));
    for (int64_t s = 0; s < steps; ++s) expected.push_back(trainer.step(s));
  }
  MPI_Comm base;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 8 ? 0 : MPI_UNDEFINED, rank, &base);
  if (rank < 8) {
    auto ctx = std::make_shared<comm::CommContext>();
    ctx->timeout_s = 120;
    comm::MpiWorld base_world(base);
    ProcessGroups groups = make_process_groups(Mesh(run.layout, 8), ctx, base_world);
    auto data = token_file_source(path, run.model.seq_len, seed);
    DistTrainer trainer(run, groups, *data, options(c));
    for (int64_t s = 0; s < steps; ++s) {
      const double loss = trainer.step(s);
      EXPECT_NEAR(loss, expected[s], 1e-5 * std::abs(expected[s])) << "step " << s << " rank " << rank;
    }
    MPI_Comm_free(&base);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

Layout L(int64_t tp, int64_t dp, int64_t pp, std::string order = "tp-dp-pp") {
  return Layout{.tp = tp, .dp = dp, .pp = pp, .order = order};
}

TEST(Equivalence, dp2_matches_single_process) { expect_same_as_single_process({"dp2", L(1, 2, 1)}); }
TEST(Equivalence, dp2_zero1_matches_single_process) { expect_same_as_single_process({"dp2 zero1", L(1, 2, 1), ScheduleKind::OneFOneB, 1}); }
TEST(Equivalence, tp2_matches_single_process) { expect_same_as_single_process({"tp2", L(2, 1, 1)}); }
TEST(Equivalence, pp2_1f1b_matches_single_process) { expect_same_as_single_process({"pp2 1f1b", L(1, 1, 2)}); }
TEST(Equivalence, pp2_gpipe_matches_single_process) {
  expect_same_as_single_process({"pp2 gpipe", L(1, 1, 2), ScheduleKind::GPipe});
}
TEST(Equivalence, pp4_matches_single_process) { expect_same_as_single_process({"pp4", L(1, 1, 4)}); }
TEST(Equivalence, pp2_uneven_split_matches_single_process) {
  expect_same_as_single_process({"pp2 1+3 layers", L(1, 1, 2), ScheduleKind::OneFOneB, 0, 1, {1, 3}});
}
TEST(Equivalence, pp2_interleaved_matches_single_process) {
  expect_same_as_single_process({"pp2 interleaved v2", L(1, 1, 2), ScheduleKind::Interleaved, 0, 2});
}
TEST(Equivalence, pp2_zero_bubble_h1_matches_single_process) {
  expect_same_as_single_process({"pp2 zb-h1", L(1, 1, 2), ScheduleKind::ZeroBubbleH1});
}
TEST(Equivalence, dp2_tp2_matches_single_process) { expect_same_as_single_process({"dp2xtp2", L(2, 2, 1)}); }
TEST(Equivalence, tp2_pp2_matches_single_process) { expect_same_as_single_process({"tp2xpp2", L(2, 1, 2)}); }
TEST(Equivalence, dp2_pp2_gpipe_matches_single_process) {
  expect_same_as_single_process({"dp2xpp2 gpipe", L(1, 2, 2), ScheduleKind::GPipe});
}
// ZeRO-2 (gradients reduce-scattered unit by unit during backward) and ZeRO-3 (weights gathered
// unit by unit ahead of use), alone and with pipeline and tensor parallelism.
TEST(Equivalence, dp2_zero2_matches_single_process) { expect_same_as_single_process({"dp2 zero2", L(1, 2, 1), ScheduleKind::OneFOneB, 2}); }
TEST(Equivalence, dp2_pp2_zero2_matches_single_process) { expect_same_as_single_process({"dp2xpp2 zero2", L(1, 2, 2), ScheduleKind::OneFOneB, 2}); }
TEST(Equivalence, dp2_tp2_zero2_matches_single_process) { expect_same_as_single_process({"dp2xtp2 zero2", L(2, 2, 1), ScheduleKind::OneFOneB, 2}); }
TEST(Equivalence, dp2_zero3_matches_single_process) { expect_same_as_single_process({"dp2 zero3", L(1, 2, 1), ScheduleKind::OneFOneB, 3}); }
TEST(Equivalence, dp2_pp2_zero3_matches_single_process) { expect_same_as_single_process({"dp2xpp2 zero3", L(1, 2, 2), ScheduleKind::OneFOneB, 3}); }
TEST(Equivalence, dp2_tp2_zero3_matches_single_process) { expect_same_as_single_process({"dp2xtp2 zero3", L(2, 2, 1), ScheduleKind::OneFOneB, 3}); }
TEST(Equivalence, dp2_pp2_zero_bubble_h1_selective_recompute_zero3_matches_single_process) {
  Case c{"dp2xpp2 zb-h1 selective zero3", L(1, 2, 2), ScheduleKind::ZeroBubbleH1, 3};
  c.recompute = Recompute::Selective;
  expect_same_as_single_process(c);
}
TEST(Equivalence, dp2_tp2_pp2_interleaved_full_recompute_zero3_matches_single_process) {
  Case c{"dp2xtp2xpp2 interleaved v2 full zero3", L(2, 2, 2), ScheduleKind::Interleaved, 3, 2};
  c.recompute = Recompute::Full;
  expect_same_as_single_process(c);
}
TEST(Equivalence, dp2_pp2_zero1_matches_single_process) {
  expect_same_as_single_process({"dp2xpp2 zero1", L(1, 2, 2), ScheduleKind::OneFOneB, 1});
}
TEST(Equivalence, dp2_tp2_pp2_interleaved_zero1_matches_single_process) {
  expect_same_as_single_process({"dp2xtp2xpp2 interleaved v2 zero1", L(2, 2, 2, "dp-pp-tp"), ScheduleKind::Interleaved, 1, 2});
}
TEST(Equivalence, dp2_pp2_zero_bubble_h1_uneven_matches_single_process) {
  expect_same_as_single_process({"dp2xpp2 zb-h1 3+1 layers", L(1, 2, 2), ScheduleKind::ZeroBubbleH1, 0, 1, {3, 1}});
}
TEST(Equivalence, dp2_tp2_pp2_matches_single_process) { expect_same_as_single_process({"dp2xtp2xpp2", L(2, 2, 2)}); }
TEST(Equivalence, dp2_tp2_pp2_order_pp_dp_tp_zero1_matches_single_process) {
  expect_same_as_single_process({"dp2xtp2xpp2 pp-dp-tp zero1", L(2, 2, 2, "pp-dp-tp"), ScheduleKind::OneFOneB, 1});
}

// Sequence parallel: LayerNorms and residuals on T/tp positions per rank, reduce-scatter /
// all-gather around the TP regions, LayerNorm gradients summed over TP.
// An odd vocabulary (201) at tp 2: padded to 256, rank 0 holds 128 token rows, rank 1 73 and 55
// padding rows; the padding gets no probability and no gradient, so the losses are one process's.
TEST(Equivalence, tp2_odd_vocab_padded_matches_single_process) {
  Case c{"tp2 vocab 201 (padded 256)", L(2, 1, 1)};
  c.vocab = 201, c.param_tol = 6e-5;
  expect_same_as_single_process(c);
}
TEST(Equivalence, dp2_tp2_pp2_odd_vocab_padded_matches_single_process) {
  Case c{"dp2xtp2xpp2 vocab 201 (padded 256)", L(2, 2, 2)};
  c.vocab = 201, c.param_tol = 6e-5;
  expect_same_as_single_process(c);
}

TEST(Equivalence, tp2_sequence_parallel_matches_single_process) {
  expect_same_as_single_process({"tp2 sp", L(2, 1, 1), ScheduleKind::OneFOneB, 0, 1, {}, true});
}
TEST(Equivalence, tp4_sequence_parallel_micro_batch_1_matches_single_process) {
  expect_same_as_single_process({"tp4 sp b1", L(4, 1, 1), ScheduleKind::OneFOneB, 0, 1, {}, true, 1});
}
TEST(Equivalence, dp2_tp2_sequence_parallel_matches_single_process) {
  expect_same_as_single_process({"dp2xtp2 sp", L(2, 2, 1), ScheduleKind::OneFOneB, 0, 1, {}, true});
}
TEST(Equivalence, dp2_tp2_pp2_sequence_parallel_zero1_matches_single_process) {
  expect_same_as_single_process({"dp2xtp2xpp2 sp zero1", L(2, 2, 2), ScheduleKind::OneFOneB, 1, 1, {}, true});
}
TEST(Equivalence, tp2_pp2_interleaved_sequence_parallel_matches_single_process) {
  expect_same_as_single_process({"tp2xpp2 interleaved v2 sp", L(2, 1, 2, "pp-tp-dp"), ScheduleKind::Interleaved, 0, 2, {}, true});
}

// Llama: kv heads split over tp 2 (one each), replicated over tp 4 (two ranks per kv head, their
// kv_w gradients summed and counted once in the norm), the untied head on the last stage.
Case llama(std::string name, Layout layout, ScheduleKind schedule = ScheduleKind::OneFOneB, int zero = 0,
           bool sp = false) {
  Case c{std::move(name), layout, schedule, zero};
  c.sequence_parallel = sp;
  c.llama = true;
  return c;
}
TEST(Equivalence, llama_dp4_zero2_matches_single_process) {
  expect_same_as_single_process(llama("llama dp4 zero2", L(1, 4, 1), ScheduleKind::OneFOneB, 2));
}
TEST(Equivalence, llama_tp2_gqa_matches_single_process) { expect_same_as_single_process(llama("llama tp2 gqa", L(2, 1, 1))); }
TEST(Equivalence, llama_tp4_replicated_kv_heads_matches_single_process) {
  expect_same_as_single_process(llama("llama tp4 kv heads 2 (replicated)", L(4, 1, 1)));
}
TEST(Equivalence, llama_pp2_matches_single_process) { expect_same_as_single_process(llama("llama pp2", L(1, 1, 2))); }
TEST(Equivalence, llama_dp2_tp2_zero1_matches_single_process) {
  expect_same_as_single_process(llama("llama dp2xtp2 zero1", L(2, 2, 1), ScheduleKind::OneFOneB, 1));
}
TEST(Equivalence, llama_tp2_pp2_matches_single_process) { expect_same_as_single_process(llama("llama tp2xpp2", L(2, 1, 2))); }
TEST(Equivalence, llama_tp4_pp2_sequence_parallel_matches_single_process) {
  expect_same_as_single_process(llama("llama tp4xpp2 sp", L(4, 1, 2), ScheduleKind::OneFOneB, 0, true));
}
TEST(Equivalence, llama_pp2_interleaved_matches_single_process) {
  Case c = llama("llama pp2 interleaved v2", L(1, 1, 2), ScheduleKind::Interleaved);
  c.virtual_stages = 2;
  expect_same_as_single_process(c);
}

// Context parallel: each sequence in 2 cp chunks (rank r holds chunks r and 2cp-1-r), ring
// attention over the cp group, dense gradients summed over dp x cp.
Layout LC(int64_t tp, int64_t cp, int64_t dp, int64_t pp) {
  return Layout{.tp = tp, .cp = cp, .dp = dp, .pp = pp, .order = "tp-cp-ep-dp-pp"};
}
TEST(Equivalence, cp2_matches_single_process) { expect_same_as_single_process({"cp2", LC(1, 2, 1, 1)}); }
TEST(Equivalence, cp4_matches_single_process) { expect_same_as_single_process({"cp4", LC(1, 4, 1, 1)}); }
TEST(Equivalence, cp2_tp2_matches_single_process) { expect_same_as_single_process({"cp2xtp2", LC(2, 2, 1, 1)}); }
TEST(Equivalence, cp2_pp2_matches_single_process) { expect_same_as_single_process({"cp2xpp2", LC(1, 2, 1, 2)}); }
TEST(Equivalence, cp2_dp2_matches_single_process) { expect_same_as_single_process({"cp2xdp2", LC(1, 2, 2, 1)}); }
TEST(Equivalence, cp2_dp2_tp2_sequence_parallel_zero1_matches_single_process) {
  expect_same_as_single_process({"cp2xdp2xtp2 sp zero1", LC(2, 2, 2, 1), ScheduleKind::OneFOneB, 1, 1, {}, true});
}
TEST(Equivalence, cp2_pp2_full_recompute_matches_single_process) {
  Case c{"cp2xpp2 1f1b recompute full", LC(1, 2, 1, 2)};
  c.recompute = Recompute::Full;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_cp2_matches_single_process) { expect_same_as_single_process(llama("llama cp2", LC(1, 2, 1, 1))); }
TEST(Equivalence, llama_cp2_tp2_matches_single_process) {
  expect_same_as_single_process(llama("llama cp2xtp2 gqa", LC(2, 2, 1, 1)));
}
TEST(Equivalence, llama_cp2_pp2_zero_bubble_h1_selective_recompute_matches_single_process) {
  Case c = llama("llama cp2xpp2 zb-h1 recompute selective", LC(1, 2, 1, 2), ScheduleKind::ZeroBubbleH1);
  c.recompute = Recompute::Selective;
  expect_same_as_single_process(c);
}

// GPT-OSS's attention (equivalence_harness.h): sinks split with the heads over tp, the window by
// whole-sequence positions under cp (crossing the chunks of 4 rows; the sink merged once per
// row after the ring, its gradient summed over cp), layers' windows by their global index under pp.
Case gpt_oss(Case c) {
  c.gpt_oss = true;
  return c;
}
TEST(Equivalence, llama_gpt_oss_attention_tp2_matches_single_process) {
  expect_same_as_single_process(gpt_oss(llama("llama gpt-oss attention tp2", L(2, 1, 1))));
}
TEST(Equivalence, llama_gpt_oss_attention_cp2_matches_single_process) {
  expect_same_as_single_process(gpt_oss(llama("llama gpt-oss attention cp2", LC(1, 2, 1, 1))));
}
TEST(Equivalence, llama_gpt_oss_attention_cp4_tp2_matches_single_process) {
  expect_same_as_single_process(gpt_oss(llama("llama gpt-oss attention cp4xtp2", LC(2, 4, 1, 1))));
}
TEST(Equivalence, llama_gpt_oss_attention_pp2_matches_single_process) {
  expect_same_as_single_process(gpt_oss(llama("llama gpt-oss attention pp2", L(1, 1, 2))));
}
// GPT-OSS's attention with its YaRN (equivalence_harness.h): the ramped frequencies and the
// attention factor at whole-sequence positions under cp, with tp splitting the heads.
TEST(Equivalence, llama_gpt_oss_yarn_cp2_matches_single_process) {
  Case c = gpt_oss(llama("llama gpt-oss yarn cp2", LC(1, 2, 1, 1)));
  c.yarn = true;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_gpt_oss_yarn_cp2_tp2_matches_single_process) {
  Case c = gpt_oss(llama("llama gpt-oss yarn cp2xtp2", LC(2, 2, 1, 1)));
  c.yarn = true;
  expect_same_as_single_process(c);
}
// The split backward adds the sinks' gradient in its input pass; selective recomputation reruns
// the windowed attention.
TEST(Equivalence, llama_gpt_oss_attention_cp2_pp2_zero_bubble_h1_selective_recompute_matches_single_process) {
  Case c = gpt_oss(llama("llama gpt-oss cp2xpp2 zb-h1 selective", LC(1, 2, 1, 2), ScheduleKind::ZeroBubbleH1));
  c.recompute = Recompute::Selective;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_gpt_oss_attention_tp2_pp2_zero_bubble_h1_selective_recompute_matches_single_process) {
  Case c = gpt_oss(llama("llama gpt-oss tp2xpp2 zb-h1 selective", L(2, 1, 2), ScheduleKind::ZeroBubbleH1));
  c.recompute = Recompute::Selective;
  expect_same_as_single_process(c);
}

// ZB-H1 with the backward split: input gradients in BackwardInput, the linears' weight
// gradients in BackwardWeight (postponed as the schedule lists them).
TEST(Equivalence, pp4_zero_bubble_h1_matches_single_process) {
  expect_same_as_single_process({"pp4 zb-h1", L(1, 1, 4), ScheduleKind::ZeroBubbleH1});
}
TEST(Equivalence, tp2_pp2_zero_bubble_h1_selective_recompute_matches_single_process) {
  Case c{"tp2xpp2 zb-h1 recompute selective", L(2, 1, 2), ScheduleKind::ZeroBubbleH1};
  c.recompute = Recompute::Selective;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_tp4_pp2_zero_bubble_h1_sequence_parallel_matches_single_process) {
  expect_same_as_single_process(llama("llama tp4xpp2 zb-h1 sp", L(4, 1, 2), ScheduleKind::ZeroBubbleH1, 0, true));
}
TEST(Equivalence, llama_dp2_tp2_pp2_zero_bubble_h1_zero1_matches_single_process) {
  expect_same_as_single_process(llama("llama dp2xtp2xpp2 zb-h1 zero1", L(2, 2, 2), ScheduleKind::ZeroBubbleH1, 1));
}

// The split backward is the whole backward in two parts: ZB-H1 gives 1F1B's losses on the same
// layout (the weight gradients are the same sums; only GPT's tied embedding adds its two
// halves in another order).
TEST(Equivalence, zero_bubble_h1_gives_the_losses_of_1f1b_on_the_same_layout) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (bool with_llama : {false, true}) {
    Case zb{"pp4 zb-h1", L(1, 1, 4), ScheduleKind::ZeroBubbleH1}, one{"pp4 1f1b", L(1, 1, 4)};
    zb.llama = one.llama = with_llama;
    MPI_Comm base;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 4 ? 0 : MPI_UNDEFINED, rank, &base);
    if (rank < 4) {
      const Result a = train(one, base), b = train(zb, base);
      double worst = 0;
      for (size_t s = 0; s < a.losses.size(); ++s) {
        EXPECT_NEAR(b.losses[s], a.losses[s], 1e-6 * std::abs(a.losses[s])) << (with_llama ? "llama" : "gpt") << " step " << s;
        worst = std::max(worst, std::abs(b.losses[s] - a.losses[s]) / std::abs(a.losses[s]));
      }
      if (rank == 0)
        std::printf("[ layout  ] %-36s max relative loss difference to 1f1b over %lld steps: %.2e\n",
                    with_llama ? "llama pp4 zb-h1 vs 1f1b" : "pp4 zb-h1 vs 1f1b", (long long)kSteps, worst);
      MPI_Comm_free(&base);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

}  // namespace

// DeepSeek-V3's multi-token prediction (2 MTP layers, weighted 0.3 / 2) after the Llama layers:
// on the last stage under pp (its copy of wte summed with the first stage's), eh_proj replicated
// over tp (its gradient summed over tp under sequence parallelism), under cp the depths' tokens
// and labels gathered from the other chunks. Main and MTP losses within 1e-5 of one process's.
namespace {
Case mtp(Case c) {
  c.mtp = 2;
  return c;
}
}  // namespace
TEST(Equivalence, llama_mtp_pp2_matches_single_process) {
  expect_same_as_single_process(mtp(llama("llama mtp pp2", L(1, 1, 2))));
}
TEST(Equivalence, llama_mtp_dp2_pp2_zero2_matches_single_process) {
  expect_same_as_single_process(mtp(llama("llama mtp dp2xpp2 zero2", L(1, 2, 2), ScheduleKind::OneFOneB, 2)));
}
TEST(Equivalence, llama_mtp_pp2_interleaved_matches_single_process) {
  Case c = mtp(llama("llama mtp pp2 interleaved v2", L(1, 1, 2), ScheduleKind::Interleaved));
  c.virtual_stages = 2;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_mtp_tp2_matches_single_process) {
  expect_same_as_single_process(mtp(llama("llama mtp tp2", L(2, 1, 1))));
}
TEST(Equivalence, llama_mtp_tp2_sequence_parallel_dp2_zero1_matches_single_process) {
  Case c = mtp(llama("llama mtp tp2xdp2 sp zero1", L(2, 2, 1)));
  c.sequence_parallel = true, c.zero = 1;
  expect_same_as_single_process(c);
}
TEST(Equivalence, llama_mtp_cp2_matches_single_process) {
  expect_same_as_single_process(mtp(llama("llama mtp cp2", LC(1, 2, 1, 1))));
}
TEST(Equivalence, llama_mtp_cp2_pp2_full_recompute_matches_single_process) {
  Case c = mtp(llama("llama mtp cp2xpp2 recompute full", LC(1, 2, 1, 2)));
  c.recompute = Recompute::Full;
  expect_same_as_single_process(c);
}
