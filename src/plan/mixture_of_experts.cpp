#include "plan/mixture_of_experts.h"

#include <algorithm>
#include <cmath>

namespace trident::plan {

double moe_layer_share(const ModelSpec& m) {
  if (!m.is_moe() || m.layers <= 0) return 0;
  return double(m.moe_layers()) / double(m.layers);
}

MoeCompute moe_compute(const ModelSpec& m, double T, int64_t tp, int64_t ep, double peak, double peak_efficiency,
                       const CostConstants& c, int64_t etp, double hbm_Bps, double weight_bytes, double element_bytes) {
  MoeCompute mc;
  const double h = double(m.hidden), t = double(std::max<int64_t>(tp, 1)), et = double(std::max<int64_t>(etp, 1));
  const double k = double(m.experts_per_token), E = double(m.experts);
  const double fe = double(m.expert_ffn_hidden), f = double(m.ffn_hidden);
  const double in_width = double(m.mlp_matrices() - 1);  // GELU: f; SwiGLU: gate and up fused, 2f
  ep = std::max<int64_t>(ep, 1);
  mc.local_experts = m.experts / ep;
  // Each tp rank routes its own T / tp tokens and sends their T k / tp copies over the ep group;
  // the etp group gathers what its ranks received: T k ep etp / (tp E) rows per local expert when
  // balanced, at width fe / etp. Unpadded: an expert's GEMM runs on the rows it received.
  const double own = T / t;
  mc.tokens_per_expert = own * k * double(ep) * et / E;
  const double batch = double(mc.local_experts);
  mc.router_s = gemm_time_s(own, h, E, 1, peak, peak_efficiency, c);
  mc.router_flops = 2 * own * h * E;
  // Each expert GEMM (m rows, k x n weights, `batch` local experts) at the larger of its compute
  // time and its HBM bytes: the weights, the rows it reads and the rows it writes.
  const double rows = mc.tokens_per_expert;
  auto expert_gemm = [&](double kk, double n) {
    const double compute = gemm_time_s(rows, kk, n, batch, peak, peak_efficiency, c);
    const double weights = batch * kk * n * weight_bytes;
    const double memory = hbm_Bps > 0 && rows > 0 ? (weights + batch * rows * (kk + n) * element_bytes) / hbm_Bps : 0.0;
    mc.routed_compute_s += compute;
    mc.expert_weight_bytes += weights;
    mc.routed_memory_s += memory;
    mc.routed_memory_bound = mc.routed_memory_bound || memory > compute;
    return std::max(compute, memory);
  };
  mc.routed_s = expert_gemm(h, in_width * fe / et) + expert_gemm(fe / et, h);
  if (hbm_Bps > 0) {
    mc.router_score_bytes = own * (3 * 4 * E + 12 * k);
    mc.router_score_s = mc.router_score_bytes / hbm_Bps;
  }
  mc.routed_flops = 2 * own * k * h * (in_width + 1) * fe;  // the model's routed FLOPs / tp, at any etp
  if (m.shared_experts > 0) {
    const double fs = double(m.shared_experts) * fe;
    mc.shared_s = gemm_time_s(T, h, in_width * fs / t, 1, peak, peak_efficiency, c) + gemm_time_s(T, fs / t, h, 1, peak, peak_efficiency, c);
    mc.shared_flops = 2 * T * h * (in_width + 1) * fs / t;
  }
  mc.dense_s = gemm_time_s(T, h, in_width * f / t, 1, peak, peak_efficiency, c) + gemm_time_s(T, f / t, h, 1, peak, peak_efficiency, c);
  mc.dense_flops = 2 * T * h * (in_width + 1) * f / t;
  const double share = moe_layer_share(m);
  mc.mlp_s = share * (mc.router_s + mc.routed_s + mc.shared_s) + (1 - share) * mc.dense_s;
  mc.mlp_flops = share * (mc.router_flops + mc.routed_flops + mc.shared_flops) + (1 - share) * mc.dense_flops;
  mc.score_s = share * mc.router_score_s;
  return mc;
}

double alltoall_efficiency(const GroupLink& link, const CostConstants& c) {
  return c.alltoall_efficiency > 0 ? c.alltoall_efficiency : link_efficiency(link.kind, c);
}

double alltoall_latency_s(const GroupLink& link, const CostConstants& c) {
  // Never below the link's own latency: a slower link (another host) adds to the call's cost.
  return std::max(c.alltoall_latency_us * 1e-6, link.latency_s);
}

double alltoall_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bw = link.bandwidth_Bps * alltoall_efficiency(link, c);
  return double(n - 1) * alltoall_latency_s(link, c) + double(n - 1) / double(n) * bytes / bw;
}

EpLinks ep_links(const DimLink& ep, const ClusterSpec& cluster) {
  if (!ep.link.crosses_domains()) return EpLinks(ep.link);
  GroupLink nvlink;
  nvlink.kind = cluster.intra.kind;
  nvlink.bandwidth_Bps = cluster.intra.bandwidth_Bps;
  nvlink.latency_s = cluster.intra.latency_s;
  nvlink.nodes = nvlink.domains = 1;
  // The slowest rank's NVLink peers (+ 1): where the groups tile the domains unevenly some rank
  // has fewer of them than the most a group has in one domain.
  const int64_t g = ep.fewest_members_in_domain > 0 ? ep.fewest_members_in_domain : ep.members_per_node;
  return EpLinks(ep.link, g, nvlink);
}

AlltoallTime hierarchical_alltoall(double bytes, int64_t n, const EpLinks& links, const CostConstants& c) {
  AlltoallTime a;
  a.n = std::max<int64_t>(n, 1);
  const int64_t g = links.members_in_domain > 0 && links.domain_link.bandwidth_Bps > 0
                        ? std::min(links.members_in_domain, a.n) : a.n;
  a.g = g;
  if (n <= 1 || bytes <= 0) return a;
  if (g >= n) {  // every peer on the group's own link
    a.total_s = alltoall_time_s(bytes, n, links.link, c);
    const bool network = links.link.kind == LinkKind::InfiniBand || links.link.kind == LinkKind::Ethernet;
    (network ? a.network_bytes : a.nvlink_bytes) = double(n - 1) / double(n) * bytes;
    a.latency_s = double(n - 1) * alltoall_latency_s(links.link, c);
    (network ? a.network_s : a.nvlink_s) = a.total_s - a.latency_s;
    return a;
  }
  const double nvlink_bw = links.domain_link.bandwidth_Bps * alltoall_efficiency(links.domain_link, c);
  const double network_bw = links.link.bandwidth_Bps * alltoall_efficiency(links.link, c);
  a.nvlink_bytes = double(g - 1) / double(n) * bytes;
  a.network_bytes = double(n - g) / double(n) * bytes;
  a.nvlink_s = a.nvlink_bytes / nvlink_bw;
  a.network_s = a.network_bytes / network_bw;
  a.latency_s = double(g - 1) * alltoall_latency_s(links.domain_link, c) + double(n - g) * alltoall_latency_s(links.link, c);
  a.total_s = a.latency_s + std::max(a.nvlink_s, a.network_s);
  return a;
}

namespace {
// C(a, k) / C(b, k) for a <= b: the chance that k draws without replacement from b miss b - a.
double miss_ratio(double a, double b, double k) {
  if (a < k) return 0;
  double p = 1;
  for (int64_t i = 0; i < int64_t(k); ++i) p *= (a - double(i)) / (b - double(i));
  return p;
}

// An all-to-all through a flex dispatcher: `remote` copies of each of the rank's T/tp tokens
// over the network (one per remote domain), and every routed copy over NVLink (those for its own
// domain's ranks, and those it fans out for tokens that arrived from other domains):
// (g-1) alpha_nvlink + (D-1) alpha_network + max(nvlink bytes / bw, network bytes / bw).
AlltoallTime flex_alltoall(double token_bytes, double k, double remote, int64_t n, const EpLinks& links,
                           const CostConstants& c) {
  AlltoallTime a = hierarchical_alltoall(token_bytes * k, n, links, c);
  if (a.g >= a.n || n <= 1 || token_bytes <= 0) return a;  // inside one domain: the intranode all-to-all
  const double nvlink_bw = links.domain_link.bandwidth_Bps * alltoall_efficiency(links.domain_link, c);
  const double network_bw = links.link.bandwidth_Bps * alltoall_efficiency(links.link, c);
  const double domains = double(a.n) / double(a.g);
  a.network_bytes = token_bytes * remote;
  a.nvlink_bytes = token_bytes * k * double(a.n - 1) / double(a.n);
  a.nvlink_s = a.nvlink_bytes / nvlink_bw;
  a.network_s = a.network_bytes / network_bw;
  a.latency_s = double(a.g - 1) * alltoall_latency_s(links.domain_link, c) +
                std::max(0.0, std::ceil(domains) - 1) * alltoall_latency_s(links.link, c);
  a.total_s = a.latency_s + std::max(a.nvlink_s, a.network_s);
  return a;
}
}  // namespace

double flex_remote_domains(const ModelSpec& m, int64_t n, int64_t g) {
  if (g <= 0 || g >= n) return 0;
  const double D = double(n) / double(g), E = double(m.experts), k = double(m.experts_per_token);
  if (D <= 1 || E <= 0) return 0;
  double missed = miss_ratio(E - E / D, E, k);
  const int64_t G = m.router_groups, M = m.router_group_topk;
  const int64_t Di = n / g;
  if (G > 1 && M > 0 && M < G && n % g == 0 && G % Di == 0)
    missed = std::max(missed, miss_ratio(double(G - G / Di), double(G), double(M)));
  return (D - 1) * (1 - missed);
}

std::string ep_overlap_blocker(const ExecutionSpec& e, int64_t pp) {
  if (e.recipe.moe_dispatcher == MoeDispatcher::AllGather) return "the allgather dispatcher (alltoall or flex only)";
  if (pp > 1 && e.schedule != ScheduleKind::Interleaved) return "pp > 1 without the interleaved schedule";
  if (e.recompute == Recompute::Full) return "full recomputation";
  return "";
}

Overlapped ep_overlap_per_layer(const EpComm& ec, double fwd_s, double bwd_s, const ExecutionSpec& e, int64_t pp,
                                const CostConstants& c) {
  const double comm = ec.forward_s + ec.backward_s;
  if (!e.recipe.moe_ep_overlap || !ep_overlap_blocker(e, pp).empty()) return not_overlapped(comm);
  return overlap_with(comm, fwd_s + bwd_s, 0, c);
}

EpComm ep_comm_per_layer(const ModelSpec& m, const ExecutionSpec& e, int64_t ep, const EpLinks& links,
                         const CostConstants& c, int64_t tp, int64_t etp, const GroupLink& etp_link) {
  EpComm ec;
  if (!m.is_moe() || (ep <= 1 && etp <= 1)) return ec;
  const double element = e.precision == Precision::FP32 ? 4 : 2;
  // Each tp rank dispatches its own T / tp tokens (Megatron-Core's MoE with sequence parallel).
  const double tokens = double(e.micro_batch_size) * double(m.seq_len) / double(std::max<int64_t>(tp, 1));
  // Unpadded (variable counts): the routed copies, k per token, whatever the capacity factor.
  ec.message_bytes = tokens * double(m.experts_per_token) * double(m.hidden) * element;
  // The most loaded rank receives (dispatch) and sends back (combine) moe_load_imbalance times the
  // mean rows: the call lasts as long as its share of the wire.
  ec.load_imbalance = std::max(1.0, m.moe_load_imbalance);
  ec.dispatcher = e.recipe.moe_dispatcher;
  const double k = double(m.experts_per_token), x = ec.load_imbalance;
  // FP8 dispatch: 1 byte an element and an 8-bit scale per 32 (MXFP8), the forward dispatch only.
  const double fp8_element = 1.0 + 1.0 / 32;
  ec.dispatch_bytes = e.recipe.moe_fp8_dispatch ? ec.message_bytes / element * fp8_element : ec.message_bytes;
  auto wire = [&](double copy_bytes) {  // one all-to-all of the rank's routed copies of copy_bytes each token
    switch (ec.dispatcher) {
      case MoeDispatcher::AllGather: {
        // The tokens themselves (not their k copies) all-gathered over the ep group, as a ring on the slowest link.
        AlltoallTime a;
        a.n = a.g = std::max<int64_t>(ep, 1);
        const double gathered = double(ep) * copy_bytes / k * x;
        a.total_s = ring_allgather_time_s(gathered, ep, links.link, c);
        a.latency_s = double(ep - 1) * links.link.latency_s;
        a.network_bytes = double(ep - 1) / double(ep) * gathered;
        a.network_s = a.total_s - a.latency_s;
        return a;
      }
      case MoeDispatcher::DeepEP:
      case MoeDispatcher::HybridEP: return flex_alltoall(copy_bytes / k * x, k, ec.remote_domains, ep, links, c);
      case MoeDispatcher::AllToAll: break;
    }
    return hierarchical_alltoall(copy_bytes * x, ep, links, c);
  };
  const int64_t g = hierarchical_alltoall(1, ep, links, c).g;
  if (ec.dispatcher == MoeDispatcher::DeepEP || ec.dispatcher == MoeDispatcher::HybridEP)
    ec.remote_domains = flex_remote_domains(m, ep, g);
  ec.alltoall = wire(ec.message_bytes);
  ec.alltoall_s = ec.alltoall.total_s;
  ec.dispatch = e.recipe.moe_fp8_dispatch ? wire(ec.dispatch_bytes) : ec.alltoall;
  ec.dispatch_s = ec.dispatch.total_s;
  // The row counts: the alltoall dispatcher exchanges them; allgather and flex derive them from
  // the gathered routing (flex: inside its dispatch kernel).
  if (ec.dispatcher == MoeDispatcher::AllToAll)
    ec.count_exchange_s = hierarchical_alltoall(double(m.experts) * 4, ep, links, c).total_s;
  if (etp > 1) {
    ec.etp_gather_bytes = double(etp) * ec.message_bytes * ec.load_imbalance;
    ec.etp_gather_s = ring_allgather_time_s(ec.etp_gather_bytes, etp, etp_link, c);
  }
  const bool recompute = e.recompute == Recompute::Full;
  ec.forward_alltoalls = 2;
  ec.backward_alltoalls = 2 + (recompute ? 2 : 0);
  ec.forward_count_exchanges = 1;
  ec.backward_count_exchanges = recompute ? 1 : 0;
  const double share = moe_layer_share(m);
  const double call_s = ec.alltoall_s + ec.etp_gather_s;  // each all-to-all with its etp gather or scatter
  // Forward: an FP8 dispatch (dispatch_s) and a 16-bit combine; backward: both 16-bit, and the
  // recomputed forward's dispatch and combine again.
  const double fp8_saving = ec.alltoall_s - ec.dispatch_s;
  ec.forward_s = share * (double(ec.forward_alltoalls) * call_s - fp8_saving +
                          double(ec.forward_count_exchanges) * ec.count_exchange_s);
  ec.backward_s = share * (double(ec.backward_alltoalls) * call_s - (recompute ? fp8_saving : 0.0) +
                           double(ec.backward_count_exchanges) * ec.count_exchange_s);
  return ec;
}

EpWait ep_wait_per_layer(const ModelSpec& m, const ExecutionSpec& e, int64_t ep, double routed_forward_s) {
  EpWait w;
  w.imbalance = m.moe_load_imbalance;
  w.routed_forward_s = routed_forward_s;
  if (!m.is_moe() || ep <= 1 || !(m.moe_load_imbalance > 1)) return w;
  const double extra = (m.moe_load_imbalance - 1) * routed_forward_s;
  w.forward_s = extra;
  w.backward_s = 2 * extra + (e.recompute == Recompute::Full ? extra : 0.0);
  return w;
}

double mlp_activation_width(const ModelSpec& m, const RecipeSettings& r) {
  if (m.family == ModelFamily::GPT) return 4;  // GELU in + out
  return r.fused_swiglu ? 6 : 8;              // gate and up, product (eager: and silu(gate))
}

MoeActivationElements moe_mlp_activation_elements(const ModelSpec& m, const RecipeSettings& r, double sb, int64_t tp,
                                                  int64_t etp) {
  const double per_width = mlp_activation_width(m, r);
  const double copies = double(m.experts_per_token) * m.capacity_factor;
  const double fe = double(m.expert_ffn_hidden), h = double(m.hidden), f = double(m.ffn_hidden);
  const double shared = double(m.shared_experts), share = moe_layer_share(m);
  // Routed experts per GPU: the T k cf / tp copies of its own tokens, gathered over etp
  // (x etp rows) at width fe / etp: the MLP's elements / tp, the permuted rows x etp / tp.
  const double t = double(std::max<int64_t>(tp, 1)), et = double(std::max<int64_t>(etp, 1));
  MoeActivationElements a;
  a.whole = share * (per_width * sb * fe * copies / t + 2 * sb * h * copies * et / t);
  a.split = share * per_width * sb * fe * shared + (1 - share) * per_width * sb * f;
  a.fc2_whole = share * sb * fe * copies / t;
  a.fc1_whole = share * sb * h * copies * et / t;
  a.fc2_split = share * sb * fe * shared + (1 - share) * sb * f;
  return a;
}

MoeParams moe_params_per_layer(const ModelSpec& m, int64_t tp, int64_t ep, int64_t etp) {
  return moe_params_per_layer(m, count_parameters(m), tp, ep, etp);
}

MoeParams moe_params_per_layer(const ModelSpec& m, const ParamCount& pc, int64_t tp, int64_t ep, int64_t etp) {
  const double t = double(std::max<int64_t>(tp, 1)), share = moe_layer_share(m);
  MoeParams p;
  // Matrices split over tp, the norms and the router replicated.
  p.dense = double(pc.attention_per_layer) / t + double(pc.norms_per_layer) +
            share * (double(pc.router_per_layer) + double(pc.shared_experts_per_layer) / t) +
            (1 - share) * double(pc.mlp_per_layer) / t;
  p.experts = share * double(pc.routed_experts_per_layer) /
              (double(std::max<int64_t>(ep, 1)) * double(std::max<int64_t>(etp, 1)));  // split over etp, not tp
  return p;
}

}  // namespace trident::plan
