#include "plan/published_layouts.h"

namespace trident::plan {

// One row per published (model, GPU, GPU count): for the Blackwell rows the latest release's layout
// (data/published_runs/: tests/plan/published_layouts_test.py checks each against the CSV). The
// layouts only: no throughput of these rows is used by the planner (they stay held out).
const std::vector<PublishedLayout>& published_layouts() {
  static const std::vector<PublishedLayout> table = {
      // model, layers, hidden, heads, vocab, experts, top-k, GPU, GPUs, tp, pp, vp, cp, ep, ZeRO, mbs, gbs, precision, source
      {"DeepSeek-V3", 61, 7168, 128, 129280, 256, 8, "B200-SXM-180GB", 256, 1, 8, 2, 1, 32, 1, 1, 4096, "MXFP8",
       "NVIDIA Megatron-Bridge 26.04.01 performance summary, R0091 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"DeepSeek-V3", 61, 7168, 128, 129280, 256, 8, "B200-GB200-186GB", 256, 1, 4, 4, 1, 64, 1, 1, 4096, "MXFP8",
       "NVIDIA Megatron-Bridge 26.08 performance summary, R0002 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"GPT-OSS-120B", 36, 2880, 64, 201088, 128, 4, "B200-SXM-180GB", 64, 1, 1, 1, 1, 8, 1, 4, 1280, "BF16",
       "NVIDIA Megatron-Bridge 26.04.01 performance summary, R0095 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"GPT-OSS-120B", 36, 2880, 64, 201088, 128, 4, "B200-GB200-186GB", 64, 1, 1, 1, 1, 64, 1, 4, 1280, "MXFP8",
       "NVIDIA Megatron-Bridge 26.08 performance summary, R0006 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3 70B", 80, 8192, 64, 128256, 0, 0, "B200-GB200-186GB", 64, 2, 4, 5, 1, 1, 1, 1, 256, "MXFP8",
       "NVIDIA Megatron-Bridge 26.04.01 performance summary, R0078 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3 8B", 32, 4096, 32, 128256, 0, 0, "B200-SXM-180GB", 8, 1, 1, 1, 1, 1, 1, 2, 128, "FP8-CS",
       "NVIDIA Megatron-Bridge 25.11 performance summary, R0252 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3 8B", 32, 4096, 32, 128256, 0, 0, "B200-GB200-186GB", 8, 1, 1, 1, 1, 1, 1, 2, 128, "FP8-CS",
       "NVIDIA Megatron-Bridge 25.11 performance summary, R0243 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3.1 405B", 126, 16384, 128, 128256, 0, 0, "B200-SXM-180GB", 128, 4, 8, 8, 2, 1, 1, 1, 64, "FP8-CS",
       "NVIDIA Megatron-Bridge 25.11 performance summary, R0254 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3.1 405B", 126, 16384, 128, 128256, 0, 0, "B200-GB200-186GB", 128, 2, 1, 1, 1, 1, 3, 1, 64, "BF16",
       "NVIDIA Megatron-Bridge 25.09 performance summary, R0270 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Llama 3.1 405B", 126, 16384, 128, 128256, 0, 0, "B200-GB200-186GB", 256, 4, 16, 8, 1, 1, 1, 1, 1536, "MXFP8",
       "NVIDIA Megatron-Bridge 26.06 performance summary, R0037 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-235B-A22B", 94, 4096, 64, 151936, 128, 8, "B200-SXM-180GB", 256, 1, 8, 1, 1, 8, 1, 1, 8192, "MXFP8",
       "NVIDIA Megatron-Bridge 26.04.01 performance summary, R0105 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-235B-A22B", 94, 4096, 64, 151936, 128, 8, "B200-SXM-180GB", 64, 1, 8, 2, 1, 8, 1, 1, 1024, "FP8-MX",
       "NVIDIA Megatron-Bridge 25.11 performance summary, R0259 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-235B-A22B", 94, 4096, 64, 151936, 128, 8, "B200-GB200-186GB", 256, 1, 8, 3, 1, 32, 1, 1, 8192, "MXFP8",
       "NVIDIA Megatron-Bridge 26.08 performance summary, R0010 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-235B-A22B", 94, 4096, 64, 151936, 128, 8, "B200-GB200-186GB", 64, 2, 1, 1, 1, 64, 1, 1, 1024, "BF16",
       "NVIDIA Megatron-Bridge 25.09 performance summary, R0276 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-30B-A3B", 48, 2048, 32, 151936, 128, 8, "B200-SXM-180GB", 8, 1, 1, 1, 1, 8, 1, 4, 512, "MXFP8",
       "NVIDIA Megatron-Bridge 26.04.01 performance summary, R0100 of data/published_runs/megatron-bridge-blackwell.csv"},
      {"Qwen3-30B-A3B", 48, 2048, 32, 151936, 128, 8, "B200-GB200-186GB", 8, 1, 1, 1, 1, 8, 1, 4, 512, "MXFP8",
       "NVIDIA Megatron-Bridge 26.08 performance summary, R0008 of data/published_runs/megatron-bridge-blackwell.csv"},
      // Hopper: NVIDIA's published Megatron-Core DeepSeek-V3 pre-training on 1024 H100 (TP2 PP8 EP64,
      // a 36 s step); its micro-batch, global batch and virtual stages are not recorded here.
      {"DeepSeek-V3", 61, 7168, 128, 129280, 256, 8, "H100-SXM-80GB", 1024, 2, 8, 1, 1, 64, 1, 0, 0, "",
       "NVIDIA's published Megatron-Core DeepSeek-V3 run on 1024 H100 (TP2 PP8 EP64)"},
  };
  return table;
}

std::vector<PublishedLayout> published_layouts_for(const ModelSpec& m, const ClusterSpec& cluster) {
  std::vector<PublishedLayout> out;
  for (const PublishedLayout& p : published_layouts())
    if (p.layers == m.layers && p.hidden == m.hidden && p.heads == m.heads && p.vocab == m.vocab &&
        p.experts == m.experts && p.experts_per_token == m.experts_per_token && p.gpu == cluster.gpu.name &&
        p.gpus == cluster.world_size())
      out.push_back(p);
  return out;
}

}  // namespace trident::plan
