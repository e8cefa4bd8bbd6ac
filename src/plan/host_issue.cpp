#include "plan/host_issue.h"

#include <fmt/format.h>

#include <algorithm>

namespace trident::plan {

namespace {

// One pass of one layer: the launches the host issues for `k` under the graphs' scopes, and the
// kernels those graphs hold. A graphed part is one launch per pass.
struct PassLaunches {
  int64_t launches = 0, graphed = 0, graphs = 0;
};

PassLaunches pass_launches(const ScopedKernels& k, const RecipeSettings& r) {
  const CudaGraphScopes& g = r.cuda_graph_scopes;
  const bool per_layer = r.cuda_graphs == CudaGraphs::Local || r.cuda_graphs == CudaGraphs::TransformerEngine;
  // No scope named: the whole layer (Megatron-Core's default).
  const bool whole = per_layer && !g.any();
  PassLaunches out;
  auto part = [&](int64_t kernels, bool graphed) {
    if (graphed && kernels > 0) out.graphed += kernels, ++out.graphs, ++out.launches;
    else out.launches += kernels;
  };
  if (whole) {
    part(k.total(), true);
    return out;
  }
  part(k.attn, per_layer && g.attn);
  part(k.mlp, per_layer && g.mlp);
  if (per_layer && g.moe) {
    part(k.moe(), true);
  } else {
    part(k.moe_router, per_layer && g.moe_router);
    part(k.moe_preprocess, per_layer && g.moe_preprocess);
    part(k.moe_rest, false);
  }
  return out;
}

}  // namespace

HostIssue host_issue(const ExecutionSpec& e, const KernelCalls& k, int64_t layers, bool first, bool last, double gpu_s,
                     const CostTable& c) {
  HostIssue h;
  h.launch_us = c.host_launch_us;
  h.gpu_s = gpu_s;
  const PassLaunches f = pass_launches(k.scoped_forward, e.recipe), b = pass_launches(k.scoped_backward, e.recipe);
  const int64_t L = std::max<int64_t>(layers, 0);
  h.forward_launches = L * f.launches + (first ? kEmbeddingForwardKernels : 0) + (last ? kLogitsForwardKernels : 0);
  h.backward_launches = L * b.launches + (first ? kEmbeddingKernels - kEmbeddingForwardKernels : 0) +
                        (last ? kLogitsKernels - kLogitsForwardKernels : 0);
  h.graphed = L * (f.graphed + b.graphed);
  h.graphs = L * (f.graphs + b.graphs);
  h.kernels = h.launches() - h.graphs + h.graphed;
  h.applies = python_issued(e) && e.recipe.cuda_graphs != CudaGraphs::FullIteration;
  if (!h.applies) return h;
  h.host_s = double(h.launches()) * c.host_launch_s();
  h.exposed_s = std::max(0.0, h.host_s - gpu_s);
  return h;
}

std::string describe(const HostIssue& h) {
  const std::string graphs =
      h.graphs > 0 ? fmt::format(" ({} kernels in {} CUDA graph launches)", h.graphed, h.graphs) : "";
  return fmt::format("{} + {} = {} launches{} x {:g} us = {:.2f} ms against {:.2f} ms on the GPU: {:.2f} ms exposed",
                     h.forward_launches, h.backward_launches, h.launches(), graphs, h.launch_us, h.host_s * 1e3,
                     h.gpu_s * 1e3, h.exposed_s * 1e3);
}

}  // namespace trident::plan
