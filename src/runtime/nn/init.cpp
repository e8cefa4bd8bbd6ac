// GPT-2 initialisation (see init.h).
#include "runtime/nn/init.h"

#include <cmath>
#include <string>

namespace trident::nn {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float counter_normal(uint64_t key, uint64_t counter) {
  const uint64_t a = mix64(key ^ mix64(2 * counter)), b = mix64(key ^ mix64(2 * counter + 1));
  const double u1 = (double(a >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  const double u2 = double(b >> 11) / 9007199254740992.0;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

namespace {
uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
}  // namespace

void init_gpt2(const ParamLayout& layout, uint64_t seed, float* out) {
  const Shard& s = layout.shard();
  const float proj_std = 0.02f / std::sqrt(2.0f * float(s.model.layers));
  for (const TensorView& t : layout.tensors()) {
    float* p = out + t.offset;
    if (t.kind == ParamKind::Bias) continue;  // zeros
    if (t.kind == ParamKind::Norm) {
      const float v = ends_with(t.name, "_w") ? 1.0f : 0.0f;
      for (int64_t i = 0; i < t.size(); ++i) p[i] = v;
      continue;
    }
    // Keyed by the logical name and the global coordinates, so any slice draws the same values.
    const std::string logical = layout.global(t, 0, 0).name;
    const uint64_t key = mix64(seed) ^ hash_name(logical);
    const bool proj = ends_with(t.name, "attn_proj_w") || ends_with(t.name, "fc_proj_w");
    const float stdv = proj ? proj_std : 0.02f;
    const bool vocab_rows = logical == "wte" || logical == "head_w";
#pragma omp parallel for schedule(static)
    for (int64_t lr = 0; lr < t.rows; ++lr) {
      const ParamLayout::Global g0 = layout.global(t, lr, 0);
      if (vocab_rows && g0.row >= s.model.vocab) {  // vocabulary padding stays zero
        for (int64_t c = 0; c < t.cols; ++c) p[lr * t.cols + c] = 0.0f;
        continue;
      }
      for (int64_t c = 0; c < t.cols; ++c)
        p[lr * t.cols + c] = stdv * counter_normal(key, uint64_t(g0.row * g0.cols + g0.col + c));
    }
  }
}

}  // namespace trident::nn
