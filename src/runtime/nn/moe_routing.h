// Routing of a mixture-of-experts layer on the host: the router's scores, the top-k choice, the
// capacity and its dropped tokens, the auxiliary losses, and their backward.
//
// Scores are softmax(logits) over the experts, or sigmoid(logits) each (DeepSeek-V3's router,
// Megatron's --moe-router-score-function sigmoid); a token takes its k best (ties: the lower
// expert index), with combine weights equal to the chosen scores, or those scores over their sum
// (normalise, Mixtral's), times the model's routed scaling factor. With an expert bias
// (DeepSeek-V3's e_score_correction_bias, aux-loss-free balancing) the k best are those of
// score + bias; the weights stay the scores'. The bias is no parameter: the trainer moves it
// after each step by rate x sign(mean load - expert's load) (update_expert_bias). An expert keeps at most capacity = ceil(capacity_factor x N k / E)
// of its assignments, the first in token order (Switch/GShard's position policy); the others are
// dropped: their expert output is left out of the token's sum (the residual carries the token).
// Under context parallelism N and the token order are the whole micro-batch's (one process's),
// though each rank holds only its rows of it (GptStage::moe_cp_keep).
// Without dropping every assignment is kept.
//
// Auxiliary losses of one micro-batch of N tokens (Megatron-LM's definitions):
//   load balancing  aux_coeff x E / k x sum_e P_e f_e, with P_e the mean score of expert e (sigmoid
//                   scores: each token's over their sum, as Megatron-Core) and f_e its
//                   assignments (before dropping) over N; f is a constant of the backward;
//   router z-loss   z_coeff x mean_t (logsumexp_e logits[t, e])^2.
// The trainer weighs them once per micro-batch (see GptStage).
//
// Why on the host: the expert of every row decides how many rows each expert's matrix products
// take, which the host must know to launch them (Megatron syncs the tokens per expert too).
// The routing reads N x E logits and writes a few N x k index arrays, small beside the layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trident::nn {

// Router settings of a run (flags of `trident train`; the model's sizes are its ModelSpec).
struct MoeOptions {
  bool normalise = true;          // combine weights = the chosen scores over their sum
  bool drop = true;               // capacity factor applies (false: no token is dropped)
  double capacity_factor = 1.0;   // the model's
  double aux_coeff = 0.01;        // load-balancing loss coefficient
  double z_coeff = 0.0;           // router z-loss coefficient
  // The model's router (ModelSpec's router_score, router_topk_scaling, router_expert_bias).
  bool sigmoid = false;            // sigmoid scores instead of softmax
  double topk_scaling = 1.0;       // combine weights scaled by this (routed_scaling_factor)
  bool expert_bias = false;        // the top-k chosen on score + a per-expert bias
  double bias_update_rate = 1e-3;  // the bias's step (Megatron's --moe-router-bias-update-rate)
  // Group-limited routing (DeepSeek-V3; ModelSpec's router_groups, router_group_topk): the experts
  // in `groups` equal groups, each token choosing among the `group_topk` groups whose top
  // (k / group_topk) selection scores sum highest (Megatron-Core's group_limited_topk; DeepSeek-V3's
  // k 8 / 4 groups: the top 2 of each, as Hugging Face's noaux_tc). 0: no groups.
  int64_t groups = 0;
  int64_t group_topk = 0;
};

struct MoeRouting {
  int64_t N = 0, E = 0, k = 0;
  std::vector<float> probs;        // [N, E] scores (softmax or sigmoid)
  std::vector<float> logits;       // [N, E] the router's logits (sigmoid scores only: the z-loss's softmax)
  std::vector<float> bias;         // [E] the expert bias the top-k was chosen with (empty: none)
  std::vector<float> lse;          // [N] log-sum-exp of each token's logits
  std::vector<int32_t> expert;     // [N k] chosen experts, best first
  std::vector<float> weight;       // [N k] combine weights
  std::vector<int32_t> pos;        // [N k] the assignment's row in expert order, kDropped (-1) when
                                   // dropped, kOtherRank (-2) when another tp rank dispatches it (folded)
  std::vector<int32_t> token;      // [M] token of each expert-order row
  std::vector<int32_t> slot;       // [M] t k + j of each expert-order row
  std::vector<float> row_weight;   // [M] combine weight of each expert-order row
  std::vector<int64_t> offset;     // [E + 1] expert e holds rows [offset[e], offset[e + 1])
  std::vector<int64_t> routed;     // [E] assignments before dropping
  int64_t capacity = 0;            // rows an expert keeps at most (N when nothing is dropped)
  int64_t dropped = 0;             // assignments dropped
  double aux_loss = 0, z_loss = 0; // with their coefficients
  // The auxiliary losses count the whole micro-batch: its tokens and each expert's assignments
  // (N and routed, unless context parallelism splits the micro-batch over ranks).
  int64_t N_all = 0;
  std::vector<int64_t> routed_all;
  // Expert parallelism (set by the layer): rows sent to and received from each EP rank, and the
  // received rows by (rank, local expert), rank-major. Without ep: this rank's rows per expert.
  std::vector<size_t> send_rows, recv_rows;
  std::vector<int64_t> recv_expert_rows;
  // Expert tensor parallel (etp > 1): every etp member's recv_expert_rows, member-major, and the
  // largest member's received rows (each member's block of the gathered rows is that long).
  std::vector<int64_t> etp_rows;
  int64_t etp_stride = 0;
  int64_t rows() const { return int64_t(token.size()); }
};

// pos of an assignment no expert row holds here: dropped at the capacity, or kept but dispatched
// by another tp rank (folded experts, keep_own_rows). Kernels skip every negative pos.
constexpr int32_t kDropped = -1, kOtherRank = -2;

// Routes N tokens over E experts from their logits [N, E] (fp32, host): score_tokens, then
// keep_first at capacity_of(N, ...), then place_rows. bias: [E] the expert bias (o.expert_bias).
MoeRouting route_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o,
                        const float* bias = nullptr);
// The scores, the top-k choice and the assignments per expert (nothing placed yet).
void limit_to_groups(std::vector<float>& sel, int64_t groups, int64_t group_topk, int64_t k);
MoeRouting score_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o,
                        const float* bias = nullptr);
// DeepSeek-V3's aux-loss-free balancing (Megatron-Core's get_updated_expert_bias): each expert's
// bias moves by rate towards the mean load, bias_e += rate x sign(mean_e' load_e' - load_e),
// from one step's assignments per expert counted over every rank.
void update_expert_bias(float* bias, const std::vector<int64_t>& load, double rate);
// Rows an expert keeps of N tokens' assignments (N: all of them, without dropping).
int64_t capacity_of(int64_t N, int64_t E, int64_t k, const MoeOptions& o);
// Which assignments (experts [t k + j], in priority order) their expert keeps at the capacity:
// the first ones. Context parallelism passes the whole micro-batch's, in one process's order.
std::vector<uint8_t> keep_first(const std::vector<int32_t>& expert, int64_t E, int64_t capacity);
// The expert-order rows of r's kept assignments (keep: r.N k flags), the dropped count and the
// auxiliary losses of r's tokens.
void place_rows(MoeRouting& r, const std::vector<uint8_t>& keep, int64_t capacity, const MoeOptions& o);

// Folded experts (etp 1 under tp > 1, Megatron-Core's MoE parallel folding): every tp rank routes
// the whole micro-batch alike (the routing, its drops and auxiliary losses are one process's),
// but dispatches only the assignments of its own tokens (mine: [N] flags). Keeps those expert-order
// rows in their order, recomputes offset and renumbers pos (the others' assignments: kOtherRank).
void keep_own_rows(MoeRouting& r, const std::vector<uint8_t>& mine);

// Sets r's auxiliary losses (load balancing and z-loss, with their coefficients) from the whole
// micro-batch's sums: assignments per expert, scores per expert, squared log-sum-exps, tokens.
void set_aux_losses(MoeRouting& r, const std::vector<int64_t>& routed, const std::vector<double>& score_sums,
                    double lse_squares, int64_t N, const MoeOptions& o);
// This rank's part of those sums: the scores per expert, then the squared log-sum-exps (E + 1).
std::vector<double> aux_sums(const MoeRouting& r);

// Gradient of the router's logits [N, E] (written), from the gradient of each assignment's
// combine weight dweight [N k] (0 for a dropped one) and the weight of this micro-batch's
// auxiliary losses in the objective.
void route_backward(const MoeRouting& r, const float* dweight, double aux_weight, const MoeOptions& o, float* dlogits);

}  // namespace trident::nn
