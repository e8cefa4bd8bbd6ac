// trident generate: sample text from a checkpoint written by `trident train`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "core/standard_output.h"
#include "report/output_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/run_meta.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/init.h"

namespace trident::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, prompt = "\n", logits_path;
  int64_t tokens = 200, top_k = 40, threads = 0;
  double temperature = 0.8;
  uint64_t seed = 1;
};

// The flags through the options' one parser (the same ranges and messages as train's --seed,
// the text the user gave in every refusal), all problems together.
std::vector<OptionDef> generate_options() {
  return {
      {"checkpoint", "generate", "checkpoint directory written by `trident train --checkpoint DIR`", false, "DIR", "required"},
      {"prompt", "generate", "text to continue", false, "TEXT", "a new line"},
      {"tokens", "generate", "tokens to generate", false, "INT", "200", 1, 1000000},
      {"temperature", "generate", "sampling temperature (above 0)", false, "NUM", "0.8"},
      {"top-k", "generate", "sample among the k most likely tokens, 0 = all", false, "INT", "40"},
      {"seed", "generate", "sampling seed", false, "INT", "1"},
      {"threads", "generate", "CPU threads, 0 = all cores", false, "INT", "all cores"},
      {"logits", "generate", "also write each step's next-token logits (f32, tokens x vocab) to FILE", false, "FILE", "none"},
  };
}

GenerateArgs parse_generate(const CliOptions& options) {
  Problems p;
  const OptionValues v = options.collect(p);
  GenerateArgs a;
  if (auto x = v.get_string("checkpoint")) a.checkpoint = *x;
  else p.add("generate reads a checkpoint: --checkpoint is missing", "give --checkpoint DIR (written by `trident train "
             "--checkpoint DIR`)", "generate-checkpoint");
  a.prompt = v.get_string("prompt").value_or(a.prompt);
  a.logits_path = v.get_string("logits").value_or("");
  a.tokens = v.get_int("tokens", p).value_or(a.tokens);
  a.top_k = v.get_int("top-k", p).value_or(a.top_k);
  a.seed = uint64_t(v.get_int("seed", p).value_or(int64_t(a.seed)));
  a.threads = v.get_int("threads", p).value_or(a.threads);
  if (auto t = v.get_double("temperature", p)) {
    if (*t > 0) a.temperature = *t;
    else p.add(fmt::format("--temperature {} must be above 0", *v.get_string("temperature")),
               "use e.g. --temperature 0.8", "generate-temperature");
  }
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (a.threads > cores)
    p.add("--threads " + std::to_string(a.threads) + " is outside 0 .. " + std::to_string(cores) + " (this machine's cores)",
          "use --threads " + std::to_string(cores) + " or fewer (0 = all)", "generate-threads");
  // --logits is written at the end: never over the checkpoint or one of its files.
  std::vector<NamedPath> inputs;
  add_folder_input(inputs, {a.checkpoint, "--checkpoint"});
  check_outputs({{a.logits_path, "--logits"}}, inputs, p);
  p.throw_if_any();
  return a;
}

int run_generate(const GenerateArgs& a) {
  const checkpoint::CheckpointReader c(a.checkpoint);
  const ModelSpec m = checkpoint::checked_model(c);  // its tensors are the model its meta describes
  const data::Tokenizer tok = engine::tokenizer_from_json(c.meta().value("tokenizer", nlohmann::json::object()));
  auto k = kernels::make_cpu_kernels(int(a.threads));
  // Forward over one sequence of the full context; the causal mask makes positions past the
  // end irrelevant, so the context is left-aligned and padded.
  // Whatever layout wrote the checkpoint, one process reads the whole logical tensors.
  nn::Shard shard = nn::Shard::whole(m);
  // A mixture of experts routes as it trained (scores, normalisation) but drops no token: the
  // window's padding must not take an expert's capacity, and a token-by-token decoder (Hugging
  // Face's Mixtral) never drops.
  shard.moe = engine::router_from_json(c.meta().value("router", nlohmann::json()), m);
  shard.moe.drop = false;
  nn::GptStage g(*k, shard, {.B = 1, .T = m.seq_len});
  // DeepSeek-V3's expert bias: the checkpoint's, which chose the experts in training.
  std::vector<std::vector<float>> bias;
  if (m.is_moe() && m.router_expert_bias) {
    // The MTP layers' routers too (they run in the forward pass; rows after the model's).
    bias = engine::expert_bias_from_json(c.meta(), engine::expert_bias_layers(m), m.experts);
    for (int64_t l = 0, at = 0; l < m.layers + shard.mtp_count(); ++l)
      if (shard.moe_layer(l)) g.set_expert_bias(l, bias[size_t(at++)].data());
  }
  const std::vector<float> params = checkpoint::read_shard(c, g.layout(), "");
  k->from_host(g.params(), params.data(), params.size());
  g.params_updated();
  nn::Activations acts(g);
  std::vector<int32_t> context = tok.encode(a.prompt);
  for (auto& t : context) t = std::min<int32_t>(t, int32_t(m.vocab - 1));
  std::vector<int32_t> window(size_t(m.seq_len), 0), targets(size_t(m.seq_len), 0);
  std::vector<float> logits(static_cast<size_t>(m.vocab));
  std::string logits_dump;  // --logits: each step's next-token logits, f32, for checks against other models
  std::printf("%s", a.prompt.c_str());
  for (int64_t i = 0; i < a.tokens; ++i) {
    const int64_t n = std::min<int64_t>(int64_t(context.size()), m.seq_len);
    std::copy(context.end() - n, context.end(), window.begin());
    g.forward(acts, window.data(), targets.data());
    // Rows are the padded vocabulary wide; its first m.vocab columns are the tokens.
    const int64_t row = g.shard().vocab_local();
    k->to_host(logits.data(), kernels::f32_data(acts.logits(), "generate") + (n - 1) * row, size_t(m.vocab));
    if (!a.logits_path.empty()) logits_dump.append(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
    // Top-k sampling at the given temperature.
    std::vector<int32_t> ids(static_cast<size_t>(m.vocab));
    for (int32_t v = 0; v < int32_t(m.vocab); ++v) ids[size_t(v)] = v;
    const int64_t kk = a.top_k > 0 ? std::min(a.top_k, m.vocab) : m.vocab;
    std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(),
                      [&](int32_t x, int32_t y) { return logits[size_t(x)] > logits[size_t(y)]; });
    std::vector<double> prob(static_cast<size_t>(kk));
    double sum = 0;
    for (int64_t j = 0; j < kk; ++j)
      sum += prob[size_t(j)] = std::exp((logits[size_t(ids[size_t(j)])] - logits[size_t(ids[0])]) / a.temperature);
    double r = double(nn::mix64(a.seed * 0x9E3779B97F4A7C15ull + uint64_t(i)) >> 11) / 9007199254740992.0 * sum;
    int32_t next = ids[size_t(kk - 1)];
    for (int64_t j = 0; j < kk; ++j)
      if ((r -= prob[size_t(j)]) <= 0) { next = ids[size_t(j)]; break; }
    context.push_back(next);
    std::printf("%s", tok.decode({next}).c_str());
    // Each token as it comes; a text that cannot be written (a full disk) stops the sampling.
    if (!standard_output_written("generate", "the generated text")) return 1;
  }
  std::printf("\n");
  if (!standard_output_written("generate", "the generated text")) return 1;
  if (!a.logits_path.empty()) write_output_file(a.logits_path, logits_dump, "--logits");
  return 0;
}

Runner setup_generate(CLI::App& cmd) {
  std::shared_ptr<CliOptions> options = std::make_shared<CliOptions>(cmd, generate_options(), false);
  return [options] { return run_generate(parse_generate(*options)); };
}

TRIDENT_COMMAND("generate", runtime_command_help("generate"), setup_generate);

}  // namespace
}  // namespace trident::cli
