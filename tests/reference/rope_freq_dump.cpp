// Writes, for each Hugging Face config.json given, what the trainer makes of its rotary embedding
// (yarn_freq_test.py checks it against a transcription of Hugging Face's _compute_yarn_parameters):
// the rotary part's width, each pair's frequency (rope_inv_freq as the CPU kernel takes it), the
// attention factor, MLA's softmax-scale multiplier, and the CPU rope kernel's rotation of (1, 0)
// in every pair at a few positions, a attention (cos, sin) each.
// usage: rope_freq_dump CONFIG.json... > out.json
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/problems.h"
#include "core/rope_scaling.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/rope.h"

using namespace trident;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rope_freq_dump CONFIG.json...\n");
    return 2;
  }
  auto k = kernels::make_cpu_kernels(1);
  nlohmann::json out = nlohmann::json::array();
  for (int a = 1; a < argc; ++a) {
    Problems p;
    const auto m = model_from_hf_config_file(argv[a], "config", p);
    if (!m || !p.empty()) {
      for (const auto& x : p.list()) std::fprintf(stderr, "%s: %s (%s)\n", argv[a], x.what.c_str(), x.fix.c_str());
      return 2;
    }
    const int64_t hd = m->is_mla() ? m->qk_rope_head_dim : m->head_dim();
    const kernels::RopeFreq f = nn::rope_freq(*m, hd);
    std::vector<double> inv;
    for (int i = 0; i < hd / 2; ++i) inv.push_back(double(float(kernels::rope_inv_freq<double>(f, i, int(hd)))));
    nlohmann::json rotated = nlohmann::json::object();
    for (int64_t pos : {0, 1, 7, 100, 4095, 32768, 131071}) {
      std::vector<float> x(size_t(hd), 0.0f);
      for (int64_t i = 0; i < hd; i += 2) x[size_t(i)] = 1.0f;
      k->rope_at(kernels::Tensor{x.data(), x.size()}, 1, 1, hd, hd, f, false, pos);
      rotated[std::to_string(pos)] = x;
    }
    out.push_back({{"config", argv[a]},
                   {"dim", hd},
                   {"inv_freq", inv},
                   {"attention_factor", f.attention},
                   {"softmax_multiplier", m->is_mla() ? yarn::softmax_multiplier(m->rope_scaling) : 1.0},
                   {"rotated", rotated}});
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
