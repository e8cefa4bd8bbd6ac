// Layouts vendors published for a model on a GPU and GPU count: `plan` plans each one that
// matches the user's model and cluster beside its own best, so the user sees the published
// recipe's predicted throughput and, term by term, why the search's choice differs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"

namespace trident::plan {

struct PublishedLayout {
  std::string model;  // as published: "DeepSeek-V3"
  // The architecture a model is recognised by (whatever its file or preset name).
  int64_t layers = 0, hidden = 0, heads = 0, vocab = 0, experts = 0, experts_per_token = 0;
  std::string gpu;  // GpuSpec::name of the preset it ran on
  int64_t gpus = 0;
  int64_t tp = 1, pp = 1, vp = 1, cp = 1, ep = 1;
  int zero = 1;                 // 3 where the recipe runs FSDP, else Megatron's distributed optimizer
  int64_t micro_batch = 0;      // 0: not published
  int64_t global_batch = 0;     // 0: not published
  std::string precision;        // as published (BF16, FP8-CS, MXFP8, ...)
  std::string source;           // where it was published, with the row or page
};

// Every published layout of this model (by architecture) on this cluster's GPU and GPU count.
std::vector<PublishedLayout> published_layouts_for(const ModelSpec& model, const ClusterSpec& cluster);
const std::vector<PublishedLayout>& published_layouts();

}  // namespace trident::plan
