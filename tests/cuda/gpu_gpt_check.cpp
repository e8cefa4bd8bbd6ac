// GPU check (needs a GPU; run by scripts/gpu-check.sh): runs GptCuda on a fixed small GPT-2 and
// writes what PyTorch needs to check it (tests/cuda/gpu_torch_check.py):
//   meta.json    shape, batch, precision, AdamW settings, the parameter tensors' layout
//   params.bin   initial fp32 master weights (flat, gpt_param_tensors order)
//   tokens.bin   batch x (seq+1) int32 ids: inputs are [:, :-1], targets [:, 1:]
//   logits.bin   batch x seq x vocab fp32 logits of the first forward
//   grads.bin    flat fp32 gradients of the mean loss at the initial weights
//   losses.txt   line 1: loss at the initial weights; then the loss of each of 10 AdamW steps
// Usage: gpu_gpt_check OUT_DIR fp32|bf16 [flash|matmul]   (attention implementation, default flash)
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/device.h"
#include "runtime/cuda/gpt_cuda.h"

using namespace trident::cuda;

namespace {
template <typename T>
void write_binary(const std::string& path, const std::vector<T>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (std::string(argv[2]) != "fp32" && std::string(argv[2]) != "bf16") ||
      (argc == 4 && std::string(argv[3]) != "flash" && std::string(argv[3]) != "matmul")) {
    std::fprintf(stderr, "usage: gpu_gpt_check OUT_DIR fp32|bf16 [flash|matmul]\n");
    return 2;
  }
  const AttentionKind attention = argc == 4 && std::string(argv[3]) == "matmul" ? AttentionKind::Matmul
                                                                                : AttentionKind::Flash;
  const std::string dir = argv[1];
  const Precision precision = std::string(argv[2]) == "bf16" ? Precision::BF16 : Precision::FP32;
  try {
    select_gpu(local_rank_from_env());
    // Small enough to check in seconds, yet every path of the real one: GPT-2's vocabulary
    // (padded to 50304), head size 64, several attention tiles, 4 layers.
    const GptShape shape{4, 256, 4, 128, 50257};
    const int B = 2, T = 128, steps = 10;
    const AdamW adamw{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    GptCuda model(shape, B, T, precision, 0.0, attention);
    model.init_gpt2(42);

    std::mt19937 rng(7);
    std::uniform_int_distribution<int> id(0, shape.vocab - 1);
    std::vector<int> all(size_t(B) * (T + 1)), tokens, targets;
    for (auto& t : all) t = id(rng);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        tokens.push_back(all[size_t(b) * (T + 1) + t]);
        targets.push_back(all[size_t(b) * (T + 1) + t + 1]);
      }

    write_binary(dir + "/params.bin", model.params());
    write_binary(dir + "/tokens.bin", all);
    write_binary(dir + "/logits.bin", model.forward_logits(tokens));
    model.zero_grad();
    std::vector<float> losses{model.forward_backward(tokens, targets)};
    write_binary(dir + "/grads.bin", model.grads());
    model.zero_grad();
    for (int s = 0; s < steps; ++s) {
      model.zero_grad();
      losses.push_back(model.forward_backward(tokens, targets));
      model.step(adamw);
    }
    std::ofstream out(dir + "/losses.txt");
    for (float l : losses) out << l << "\n";

    std::ofstream meta(dir + "/meta.json");
    meta << "{\"layers\": " << shape.layers << ", \"hidden\": " << shape.hidden << ", \"heads\": " << shape.heads
         << ", \"max_seq\": " << shape.max_seq << ", \"vocab\": " << shape.vocab
         << ", \"padded_vocab\": " << shape.padded_vocab() << ", \"batch\": " << B << ", \"seq\": " << T
         << ", \"precision\": \"" << precision_name(precision) << "\", \"attention\": \"" << attention_name(attention)
         << "\", \"steps\": " << steps << ", \"lr\": " << adamw.lr
         << ", \"beta1\": " << adamw.beta1 << ", \"beta2\": " << adamw.beta2 << ", \"eps\": " << adamw.eps
         << ", \"weight_decay\": " << adamw.weight_decay << ", \"grad_clip\": " << adamw.grad_clip << ", \"tensors\": [";
    const auto& t = model.tensors();
    for (size_t i = 0; i < t.size(); ++i)
      meta << (i ? ", " : "") << "{\"name\": \"" << t[i].name << "\", \"offset\": " << t[i].offset
           << ", \"count\": " << t[i].count << ", \"decay\": " << (t[i].decay ? "true" : "false") << "}";
    meta << "]}\n";
    std::printf("gpu_gpt_check %s %s attention: initial loss %.6f, loss after %d steps %.6f, wrote %s\n", precision_name(precision),
                attention_name(attention), losses[0], steps, losses.back(), dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_gpt_check: %s\n", e.what());
    return 1;
  }
  return 0;
}
