// trident export: a checkpoint's weights under Hugging Face's names, as model.safetensors and
// config.json in OUT, so transformers (GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(OUT))
// or any other implementation of the family loads them. Whatever layout wrote the checkpoint, its
// one reader (runtime/checkpoint) gives whole logical tensors.
//
// GPT -> GPT-2 names (HF's Conv1D keeps weights as [in, out], so the matrices are transposed):
//   wte [V, C]                 -> transformer.wte.weight [V, C] (also the tied lm_head)
//   wpe [T, C]                 -> transformer.wpe.weight
//   layers.i.ln1_w / ln1_b     -> transformer.h.i.ln_1.weight / bias
//   layers.i.qkv_w [3C, C]     -> transformer.h.i.attn.c_attn.weight [C, 3C] (q, k, v blocks)
//   layers.i.qkv_b             -> transformer.h.i.attn.c_attn.bias
//   layers.i.attn_proj_w [C,C] -> transformer.h.i.attn.c_proj.weight (transposed), bias
//   layers.i.ln2_w / ln2_b     -> transformer.h.i.ln_2.weight / bias
//   layers.i.fc_w [F, C]       -> transformer.h.i.mlp.c_fc.weight [C, F], bias
//   layers.i.fc_proj_w [C, F]  -> transformer.h.i.mlp.c_proj.weight [F, C], bias
//   lnf_w / lnf_b              -> transformer.ln_f.weight / bias
//
// Llama -> Llama names (nn.Linear keeps [out, in], as Trident does: nothing is transposed):
//   wte [V, C]                     -> model.embed_tokens.weight
//   layers.i.ln1_w                 -> model.layers.i.input_layernorm.weight
//   layers.i.q_w [C, C]            -> model.layers.i.self_attn.q_proj.weight (rows permuted, below)
//   layers.i.kv_w [2 kv hd, C]     -> ...k_proj.weight (first kv hd rows, permuted) and v_proj.weight
//   layers.i.attn_proj_w [C, C]    -> ...self_attn.o_proj.weight
//   layers.i.ln2_w                 -> model.layers.i.post_attention_layernorm.weight
//   layers.i.gate_up_w [2F, C]     -> ...mlp.gate_proj.weight (first F rows) and up_proj.weight
//   layers.i.fc_proj_w [C, F]      -> ...mlp.down_proj.weight
//   lnf_w, head_w [V, C]           -> model.norm.weight, lm_head.weight
// Trident rotates the pairs (2i, 2i+1) of a head (Meta's layout); Hugging Face's Llama rotates
// (i, i + hd/2). Within each head of q and k, row 2i goes to row i and row 2i+1 to i + hd/2 (the
// permutation of HF's own conversion script), so both compute the same attention.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "report/output_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/engine/run_meta.h"

namespace trident::cli {
namespace {

using checkpoint::NamedTensor;
using checkpoint::safetensors_bytes;

struct ExportArgs {
  std::string checkpoint, format = "safetensors", out;
};

// The one place export touches the checkpoint: a whole logical tensor by name.
NamedTensor read_tensor(const checkpoint::CheckpointReader& reader, const std::string& name, const std::string& hf_name,
                        bool transpose) {
  checkpoint::CheckpointReader::Tensor t = reader.tensor(name);
  NamedTensor out{hf_name, t.shape, std::move(t.data)};
  if (transpose && t.shape.size() == 2) {
    const int64_t r = t.shape[0], c = t.shape[1];
    std::vector<float> tr(out.data.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) tr[size_t(j * r + i)] = out.data[size_t(i * c + j)];
    out.data = std::move(tr);
    out.shape = {c, r};
  }
  return out;
}

std::vector<NamedTensor> gpt2_tensors(const checkpoint::CheckpointReader& reader, const ModelSpec& m) {
  std::vector<NamedTensor> t;
  t.push_back(read_tensor(reader, "wte", "transformer.wte.weight", false));
  t.push_back(read_tensor(reader, "wpe", "transformer.wpe.weight", false));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("transformer.h.{}.", l);
    t.push_back(read_tensor(reader, p + "ln1_w", h + "ln_1.weight", false));
    t.push_back(read_tensor(reader, p + "ln1_b", h + "ln_1.bias", false));
    t.push_back(read_tensor(reader, p + "qkv_w", h + "attn.c_attn.weight", true));
    t.push_back(read_tensor(reader, p + "qkv_b", h + "attn.c_attn.bias", false));
    t.push_back(read_tensor(reader, p + "attn_proj_w", h + "attn.c_proj.weight", true));
    t.push_back(read_tensor(reader, p + "attn_proj_b", h + "attn.c_proj.bias", false));
    t.push_back(read_tensor(reader, p + "ln2_w", h + "ln_2.weight", false));
    t.push_back(read_tensor(reader, p + "ln2_b", h + "ln_2.bias", false));
    t.push_back(read_tensor(reader, p + "fc_w", h + "mlp.c_fc.weight", true));
    t.push_back(read_tensor(reader, p + "fc_b", h + "mlp.c_fc.bias", false));
    t.push_back(read_tensor(reader, p + "fc_proj_w", h + "mlp.c_proj.weight", true));
    t.push_back(read_tensor(reader, p + "fc_proj_b", h + "mlp.c_proj.bias", false));
  }
  t.push_back(read_tensor(reader, "lnf_w", "transformer.ln_f.weight", false));
  t.push_back(read_tensor(reader, "lnf_b", "transformer.ln_f.bias", false));
  return t;
}

// Rows [first, first + rows) of a [R, C] tensor.
NamedTensor row_block(const NamedTensor& t, int64_t first, int64_t rows, const std::string& name) {
  const int64_t C = t.shape.size() > 1 ? t.shape[1] : 1;
  NamedTensor out{name, t.shape.size() > 1 ? std::vector<int64_t>{rows, C} : std::vector<int64_t>{rows}, {}};
  out.data.assign(t.data.begin() + first * C, t.data.begin() + (first + rows) * C);
  return out;
}

// Interleaved rotary pairs (2i, 2i+1) to halves (i, i + hd/2), head by head (see the top).
void to_half_rotary(NamedTensor& t, int64_t head_dim) {
  const int64_t R = t.shape[0], C = t.shape[1], half = head_dim / 2;
  std::vector<float> out(t.data.size());
  for (int64_t r = 0; r < R; ++r) {
    const int64_t head = r / head_dim, j = r % head_dim;
    const int64_t to = head * head_dim + (j % 2 == 0 ? j / 2 : half + j / 2);
    std::copy(t.data.begin() + r * C, t.data.begin() + (r + 1) * C, out.begin() + to * C);
  }
  t.data = std::move(out);
}

std::vector<NamedTensor> llama_tensors(const checkpoint::CheckpointReader& reader, const ModelSpec& m) {
  const int64_t hd = m.head_dim(), kv = m.kv_dim(), F = m.ffn_hidden;
  std::vector<NamedTensor> t;
  t.push_back(read_tensor(reader, "wte", "model.embed_tokens.weight", false));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("model.layers.{}.", l);
    t.push_back(read_tensor(reader, p + "ln1_w", h + "input_layernorm.weight", false));
    t.push_back(read_tensor(reader, p + "q_w", h + "self_attn.q_proj.weight", false));
    to_half_rotary(t.back(), hd);
    const NamedTensor kv_w = read_tensor(reader, p + "kv_w", "", false);
    t.push_back(row_block(kv_w, 0, kv, h + "self_attn.k_proj.weight"));
    to_half_rotary(t.back(), hd);
    t.push_back(row_block(kv_w, kv, kv, h + "self_attn.v_proj.weight"));
    t.push_back(read_tensor(reader, p + "attn_proj_w", h + "self_attn.o_proj.weight", false));
    t.push_back(read_tensor(reader, p + "ln2_w", h + "post_attention_layernorm.weight", false));
    const NamedTensor gate_up = read_tensor(reader, p + "gate_up_w", "", false);
    t.push_back(row_block(gate_up, 0, F, h + "mlp.gate_proj.weight"));
    t.push_back(row_block(gate_up, F, F, h + "mlp.up_proj.weight"));
    t.push_back(read_tensor(reader, p + "fc_proj_w", h + "mlp.down_proj.weight", false));
  }
  t.push_back(read_tensor(reader, "lnf_w", "model.norm.weight", false));
  t.push_back(read_tensor(reader, "head_w", "lm_head.weight", false));
  return t;
}

nlohmann::json llama_config(const ModelSpec& m) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", m.vocab},
          {"hidden_size", m.hidden},
          {"intermediate_size", m.ffn_hidden},
          {"num_hidden_layers", m.layers},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.kv_heads},
          {"head_dim", m.head_dim()},
          {"max_position_embeddings", m.seq_len},
          {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-5},  // the runtime's RMSNorm epsilon
          {"rope_theta", m.rope_theta},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"torch_dtype", "float32"}};
}

nlohmann::json gpt2_config(const ModelSpec& m) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", m.vocab},
          {"n_positions", m.seq_len},
          {"n_ctx", m.seq_len},
          {"n_embd", m.hidden},
          {"n_layer", m.layers},
          {"n_head", m.heads},
          {"n_inner", m.ffn_hidden},
          {"activation_function", "gelu_new"},  // tanh approximation, as Trident's kernels
          {"layer_norm_epsilon", 1e-5},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

// The files of OUT, whole or not at all: written into a temporary sibling folder first, which
// then takes OUT's name (a new OUT) or gives up its files to OUT (an existing folder), so an
// export stopped half-way (a full disk) leaves no half-written folder.
void write_export(const std::string& out, const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::string dir = out;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string stage = unique_temp_path(dir);
  std::error_code ec;
  try {
    if (!fs::create_directory(stage, ec) || ec)
      throw InputError({{"cannot create the folder '" + stage + "' next to OUT: " + ec.message(), "give a writable path",
                         "output-path"}});
    for (const auto& [name, bytes] : files) write_output_file(stage + "/" + name, bytes, "OUT");
    if (!fs::exists(dir, ec)) {
      if (std::rename(stage.c_str(), dir.c_str()) != 0)
        throw InputError({{"cannot rename '" + stage + "' to OUT '" + out + "': " + std::strerror(errno),
                           "give a writable path", "output-path"}});
      sync_directory(parent_directory(dir));
      return;
    }
    for (const auto& [name, bytes] : files)
      if (std::rename((stage + "/" + name).c_str(), (dir + "/" + name).c_str()) != 0)
        throw InputError({{"cannot move '" + name + "' into OUT '" + out + "': " + std::strerror(errno),
                           "give a writable path", "output-path"}});
    sync_directory(dir);
    fs::remove(stage, ec);
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
}

int run_export(const ExportArgs& a) {
  namespace fs = std::filesystem;
  Problems p;
  if (a.format != "safetensors")
    p.add("--format '" + a.format + "' is not supported", "use --format safetensors", "export-format");
  std::error_code ec;
  // OUT is a folder export owns: never the checkpoint, a file, a link or a device.
  std::vector<NamedPath> inputs;
  add_folder_input(inputs, {a.checkpoint, "--checkpoint"});
  check_outputs({{a.out, "OUT"}}, inputs, p, OutputKind::Directory);
  if (fs::exists(a.out, ec) && checkpoint::is_checkpoint(a.out))
    p.add("OUT '" + a.out + "' holds a Trident checkpoint", "export into another folder", "output-path");
  p.throw_if_any();
  const checkpoint::CheckpointReader reader(a.checkpoint);
  const ModelSpec m = checkpoint::checked_model(reader);  // its tensors are the model its meta describes
  const bool llama = m.family == ModelFamily::Llama;
  if (llama && m.tied_embeddings())
    p.add("the checkpoint holds a Llama model with a tied head, which Hugging Face's Llama does not load",
          "export a Llama checkpoint with its own head (the runtime's default)", "export-family");
  p.throw_if_any();
  const std::vector<NamedTensor> tensors = llama ? llama_tensors(reader, m) : gpt2_tensors(reader, m);
  write_export(a.out, {{"model.safetensors", safetensors_bytes(tensors, {{"format", "pt"}, {"source", "trident export"}})},
                       {"config.json", (llama ? llama_config(m) : gpt2_config(m)).dump(2) + "\n"}});
  int64_t values = 0;
  for (const auto& t : tensors) values += int64_t(t.data.size());
  std::printf("exported %zu tensors (%lld parameters, %s names) from %s to %s/model.safetensors and config.json\n",
              tensors.size(), static_cast<long long>(values), llama ? "Hugging Face Llama" : "GPT-2", a.checkpoint.c_str(),
              a.out.c_str());
  return 0;
}

Runner setup_export(CLI::App& cmd) {
  auto args = std::make_shared<ExportArgs>();
  cmd.add_option("--checkpoint", args->checkpoint, "checkpoint directory written by `trident train --checkpoint DIR`")
      ->required()
      ->type_name("DIR");
  cmd.add_option("--format", args->format, "output format")->type_name("safetensors")->default_str("safetensors");
  cmd.add_option("OUT", args->out, "folder to write model.safetensors and config.json into")->required()->type_name("DIR");
  return [args] { return run_export(*args); };
}

TRIDENT_COMMAND("export", runtime_command_help("export"), setup_export);

}  // namespace
}  // namespace trident::cli
