// Mixture-of-experts terms of the memory and step-time models.
//
// A MoE layer routes each of the T tokens of a micro-batch to k of E experts. The experts are
// laid out on Megatron-Core's expert grid (core/mesh.h): each ep rank holds E / ep experts, each
// split over etp ranks (expert tensor parallel; etp 1: whole). As in Megatron-Core (which needs
// sequence parallel for MoE with tp > 1) each tp rank routes its own T / tp tokens and
// dispatches their T k / tp copies by an all-to-all on its ep group (and back: combine); with
// etp > 1 the etp group all-gathers the rows it received (a reduce-scatter on the way back), so
// a local expert runs on T k ep etp / (tp E) rows at width fe / etp. The expert work is done
// once, not on every tp rank: routed FLOPs per GPU are the model's / tp at any etp (folding, etp
// 1, or etp = tp), as the runtime trains them (folded, or split over its etp group). The shared experts stay split over tp, as a dense MLP.
// The dispatch is unpadded, as the
// runtime's (variable counts) and Megatron's without --moe-pad-expert-input-to-capacity: a
// rank sends its T k routed copies and its experts' GEMMs run on the rows they receive, charged
// at the balanced load T k ep / E per local expert (a router trained with the load-balancing
// loss stays near it; an imbalance beyond it is not charged). The capacity factor cf bounds an
// expert's rows at cf x the mean and only sizes the activation memory. Model FLOPs count what the tokens
// use: k routed experts plus the shared ones (active parameters). Layers that keep a dense MLP (moe_dense_layers) are averaged
// into the per-layer terms with their share of the layers.
#pragma once

#include <cstdint>
#include <string>

#include "core/execution_spec.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "plan/cost_model.h"
#include "plan/dim_link.h"

namespace trident::plan {

// Share of the layers that are MoE layers (1 for Mixtral, 58/61 for DeepSeek-V3; 0 when dense).
double moe_layer_share(const ModelSpec& model);

// The MLP part of one layer (forward, one micro-batch of `tokens` on one GPU), for a MoE model.
struct MoeCompute {
  int64_t local_experts = 0;       // E / ep on this GPU, whole
  double tokens_per_expert = 0;    // token copies a local expert takes when balanced: T k ep / E
  double router_s = 0, router_flops = 0;    // T x h x E logits
  // The router's score function (softmax or sigmoid) and top-k over the T / tp x E fp32 logits,
  // memory-bound: the score function reads the logits and writes the scores, top-k reads them
  // (3 x 4 bytes per logit), and writes k fp32 weights and int64 indices per token (12 k bytes).
  double router_score_bytes = 0, router_score_s = 0;  // at the memory-bound kernels' HBM rate
  // Roofline of the experts' GEMMs: with few rows per expert a grouped GEMM is bound by reading
  // the local experts' weights (and its rows in and out) from HBM, not by the tensor cores. Each
  // of the two expert GEMMs (in, out) takes the larger of its compute time and its bytes / HBM.
  double routed_compute_s = 0;       // the expert GEMMs at the GEMM peak x efficiency
  double expert_weight_bytes = 0;    // local experts' weights read by one forward (weight_bytes each)
  double routed_memory_s = 0;        // (weights + rows in + rows out) / HBM, both GEMMs
  bool routed_memory_bound = false;  // the memory time won in at least one of them
  // Local experts' GEMMs at full width on the whole micro-batch's copies: every tp rank executes them, so these are executed FLOPs, t times the model's.
  double routed_s = 0, routed_flops = 0;
  double shared_s = 0, shared_flops = 0;    // shared experts, every token
  double dense_s = 0, dense_flops = 0;      // the dense MLP of a dense layer
  // Per layer, the dense layers averaged in.
  double mlp_s = 0, mlp_flops = 0;
  double score_s = 0;  // router_score_s with the MoE layers' share (memory-bound, not a GEMM)
};
// peak_flops and peak_efficiency: those of the weight GEMMs (FP8 when the run uses it). hbm_Bps:
// the memory-bound kernels' HBM rate (router scores, the GEMMs' memory floor); weight_bytes and
// element_bytes: the GEMM operands' sizes (FP8 1, bf16 2). hbm_Bps 0: the GEMMs at their compute
// time and no score kernels (what the FLOP tests look at).
MoeCompute moe_compute(const ModelSpec& model, double tokens, int64_t tp, int64_t ep, double peak_flops,
                       double peak_efficiency, const CostConstants& c, int64_t etp = 1, double hbm_Bps = 0,
                       double weight_bytes = 2, double element_bytes = 2);

// moe_compute for one micro-batch of `model` (one cp rank's sequence) as the run executes it: the
// weight GEMMs' peak and efficiency (FP8 when the run and the GPU use it), the memory-bound
// kernels' HBM rate, FP8 (1 byte) or 16-bit operands. Defined with the rates in cost_model.cpp;
// layer_compute and the report's breakdown both call it.
MoeCompute layer_moe_compute(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, const GpuSpec& gpu,
                             const CostConstants& c, int64_t ep, int64_t etp);

// All-to-all of an S-byte send buffer over n ranks: each rank keeps 1/n and sends the rest,
// (n-1) alpha + (n-1)/n S / beta, alpha the call's per-peer latency (alltoall_latency_s).
double alltoall_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c);
// The larger of alltoall_latency_us (0 where the cost table leaves it out) and the link's latency.
double alltoall_latency_s(const GroupLink& link, const CostConstants& c);
// The share of the link's bandwidth an all-to-all reaches: alltoall_efficiency where the cost table
// sets it (above 0), else the link's collective share (nvlink, pcie or network_efficiency).
double alltoall_efficiency(const GroupLink& link, const CostConstants& c);

// The ep group's links as its all-to-all uses them: NVLink between the g members that share an
// NVLink domain (a DGX node of 8, a GB200 NVL72 rack), the network between domains.
struct EpLinks {
  GroupLink link;                 // the slowest group's: the network (per-GPU share) when it leaves its domain
  int64_t members_in_domain = 0;  // g: its members in one NVLink domain (0: every peer on `link`)
  GroupLink domain_link;          // between the g members of one domain (the cluster's intra link)
  EpLinks() = default;
  EpLinks(const GroupLink& l) : link(l) {}  // NOLINT: one link for every peer
  EpLinks(const GroupLink& l, int64_t g, const GroupLink& d) : link(l), members_in_domain(g), domain_link(d) {}
};
// g: the fewest members a crossing ep group has in one domain (DimLink::fewest_members_in_domain:
// the rank that sends most over the network, which the all-to-all waits for); where the groups
// tile the domains evenly (ep 64 on 8-GPU nodes, ep 32 in a 64-GPU rack) every rank has g.
EpLinks ep_links(const DimLink& ep, const ClusterSpec& cluster);

// Hierarchical all-to-all of an S-byte send buffer over n ranks, g of them in the sender's NVLink
// domain: (g-1)/n of S goes over NVLink, (n-g)/n over the network, both at once:
// time = (g-1) alpha_nvlink + (n-g) alpha_network + max((g-1)/n S / nvlink bw, (n-g)/n S / network bw).
// A group inside one domain (g = n, or no domain link): alltoall_time_s on its link.
struct AlltoallTime {
  int64_t n = 1, g = 1;
  double nvlink_bytes = 0, network_bytes = 0;  // what one rank sends on each
  double nvlink_s = 0, network_s = 0;          // their wire times (the larger counts)
  double latency_s = 0;                        // (g-1) alpha_nvlink + (n-g) alpha_network
  double total_s = 0;
};
AlltoallTime hierarchical_alltoall(double bytes, int64_t n, const EpLinks& links, const CostConstants& c);

// Flex dispatchers (DeepEP, HybridEP) send a token once to each NVLink domain that holds one of
// its k experts, and fan it out there over NVLink. Of the D = n / g domains of an ep group, the
// expected number a token's copies reach besides its own, with routing balanced (experts drawn
// uniformly, as the force-balanced benchmarks route): (D - 1) x (1 - P(a domain is missed)),
// P = C(E - E/D, k) / C(E, k) (k of E experts, E/D in each domain). Node-limited routing (DeepSeek-V3:
// router_groups 8, router_group_topk 4) where the groups tile the domains (G a multiple of D):
// the token picks M of G groups first, P >= C(G - G/D, M) / C(G, M); the larger P is taken.
double flex_remote_domains(const ModelSpec& model, int64_t n, int64_t g);

struct EpComm {
  MoeDispatcher dispatcher = MoeDispatcher::AllToAll;
  double remote_domains = 0;  // flex: the domains besides its own a token goes to (flex_remote_domains)
  double message_bytes = 0;   // token copies one GPU sends: T / tp x k x h x element bytes (its own tokens)
  double dispatch_bytes = 0;  // the forward dispatch's: message_bytes, at 1 + 1/32 bytes an element under FP8 dispatch
  double dispatch_s = 0;      // the forward dispatch (FP8 rows under --moe-fp8-dispatch, else alltoall_s)
  AlltoallTime dispatch;      // its parts
  double load_imbalance = 1;  // moe_load_imbalance: the busiest rank moves that many times its share of them
  double alltoall_s = 0;      // one all-to-all on the ep link, the busiest rank's bytes
  AlltoallTime alltoall;      // its parts: NVLink inside the domain, network between (hierarchical_alltoall)
  int64_t forward_alltoalls = 0;   // dispatch + combine
  int64_t backward_alltoalls = 0;  // their gradients, and the recomputed forward ones
  // Before each dispatch (forward, and the recomputed one) the ranks exchange how many rows each
  // expert gets, as variable counts need (Megatron's all-to-all dispatcher likewise exchanges its
  // tokens per expert): an all-to-all of E int32 counts, its latency in effect.
  double count_exchange_s = 0;
  int64_t forward_count_exchanges = 0, backward_count_exchanges = 0;
  // etp > 1: the etp group all-gathers the rows its ranks received (dispatch) and
  // reduce-scatters their outputs (combine), ring collectives of etp x message_bytes on the etp
  // link, as often as the all-to-alls.
  double etp_gather_bytes = 0, etp_gather_s = 0;
  double forward_s = 0;       // per layer, MoE share included
  double backward_s = 0;
};
EpComm ep_comm_per_layer(const ModelSpec& model, const ExecutionSpec& exec, int64_t ep, const EpLinks& links,
                         const CostConstants& c, int64_t tp = 1, int64_t etp = 1, const GroupLink& etp_link = {});

// Megatron-Core's EP communication overlap (--moe-ep-overlap) runs here: the alltoall or flex
// dispatcher, pp 1 or the interleaved schedule, no full recomputation. "" when it applies, else
// what it lacks.
std::string ep_overlap_blocker(const ExecutionSpec& exec, int64_t pp);
// Under it the all-to-alls of one layer and micro-batch (forward and backward) run behind the
// same layer's compute of the adjacent micro-batch (forward of one merged with backward of the
// other): exposed = what that compute cannot cover (overlap_with, all of it can hide: the
// step's first forward and last backward, which have no partner, are not charged apart).
Overlapped ep_overlap_per_layer(const EpComm& ec, double layer_forward_s, double layer_backward_s,
                                const ExecutionSpec& exec, int64_t pp, const CostConstants& c);

// Load imbalance (ModelSpec::moe_load_imbalance = x, ep > 1): the most loaded ep rank's experts
// take x times the mean rows of a dispatch, and every all-to-all that follows their GEMMs waits
// for them: (x - 1) times the balanced GEMM time, the mean over the ep ranks of how long each
// waits (the slowest rank itself waits nothing, the step goes at its pace). Forward: the
// experts' GEMMs once before the combine; backward: their input- and weight-gradient GEMMs
// (twice the forward's) before the input gradients go back; full recomputation: the forward
// again. Its extra rows on the wire are in the all-to-all's time (EpComm::load_imbalance).
struct EpWait {
  double imbalance = 1;         // x
  double routed_forward_s = 0;  // the experts' forward GEMMs at the balanced load, per layer (MoE share in)
  double forward_s = 0, backward_s = 0;  // per layer and micro-batch
};
EpWait ep_wait_per_layer(const ModelSpec& model, const ExecutionSpec& exec, int64_t ep, double routed_forward_s);

// Activation elements the MLP of one layer keeps per micro-batch, before the element size
// (Korthikanti's 8 s b f for SwiGLU, 4 s b f for GELU, per token copy), for a MoE model, dense
// layers averaged in. The routed experts' (k x cf token copies, and their permuted input and
// output, 2 s b h k cf) are whole on every tp rank; the shared experts' (every token) and the
// dense MLP's are split over tp. fc2_* are the MLP-out inputs among them (FP8's extra copy).
struct MoeActivationElements {
  double split = 0, whole = 0;
  double fc2_split = 0, fc2_whole = 0;
  double fc1_whole = 0;  // the routed experts' FC1 input: the permuted rows (elements, in `whole` at 2 B)
};
MoeActivationElements moe_mlp_activation_elements(const ModelSpec& model, const RecipeSettings& recipe, double sb,
                                                  int64_t tp = 1, int64_t etp = 1);
// 16-bit bytes an MLP stores per token per unit of its width: GELU 4 (input and output); SwiGLU
// 6 fused (the gate and up projections' output, and the product FC2 reads), 8 in eager ops,
// which also keep silu(gate) for the product's backward (recipe fused_swiglu).
double mlp_activation_width(const ModelSpec& model, const RecipeSettings& recipe);

// Parameters of one layer (averaged over the layers) on one GPU: the dense part (attention,
// norms, router, shared experts, the dense MLP of dense layers) and the routed experts (E / ep
// experts, each 1 / etp of one; tp does not split them).
struct MoeParams {
  double dense = 0;
  double experts = 0;
};
MoeParams moe_params_per_layer(const ModelSpec& model, int64_t tp, int64_t ep, int64_t etp = 1);
// Same with the model's parameter count already made (count_parameters(model)).
MoeParams moe_params_per_layer(const ModelSpec& model, const ParamCount& pc, int64_t tp, int64_t ep, int64_t etp = 1);

}  // namespace trident::plan
