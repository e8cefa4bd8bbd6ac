// trident export: a checkpoint's weights under Hugging Face's GPT-2 names, as model.safetensors
// and config.json in OUT, so transformers (GPT2LMHeadModel.from_pretrained(OUT)) or any other
// GPT-2 implementation loads them. Whatever layout wrote the checkpoint, its one reader
// (runtime/checkpoint) gives whole logical tensors.
//
// Names and shapes (Trident -> Hugging Face; HF's Conv1D keeps weights as [in, out], so the
// matrices are transposed):
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
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/safetensors.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "report/output_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/run_meta.h"

namespace trident::cli {
namespace {

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

int run_export(const ExportArgs& a) {
  namespace fs = std::filesystem;
  Problems p;
  if (a.format != "safetensors")
    p.add("--format '" + a.format + "' is not supported", "use --format safetensors", "export-format");
  std::error_code ec;
  // OUT is a folder export owns: never the checkpoint, a file, a link or a device.
  check_outputs({{a.out, "OUT"}}, {{a.checkpoint, "--checkpoint"}}, p, OutputKind::Directory);
  if (fs::exists(a.out, ec) && checkpoint::is_checkpoint(a.out))
    p.add("OUT '" + a.out + "' holds a Trident checkpoint", "export into another folder", "output-path");
  p.throw_if_any();
  const checkpoint::CheckpointReader reader(a.checkpoint);
  const ModelSpec m = engine::model_from_json(reader.meta()["model"]);
  if (m.family != ModelFamily::GPT)
    p.add("the checkpoint holds a " + to_string(m.family) + " model; export writes GPT-2 names only",
          "export a GPT checkpoint (Llama models have no Hugging Face name mapping in export yet)", "export-family");
  p.throw_if_any();
  const std::vector<NamedTensor> tensors = gpt2_tensors(reader, m);
  fs::create_directories(a.out, ec);
  if (ec) throw InputError({{"cannot create the folder '" + a.out + "': " + ec.message(), "give a writable path", "output-path"}});
  write_output_file((fs::path(a.out) / "model.safetensors").string(),
                    safetensors_bytes(tensors, {{"format", "pt"}, {"source", "trident export"}}), "OUT");
  write_output_file((fs::path(a.out) / "config.json").string(), gpt2_config(m).dump(2) + "\n", "OUT");
  int64_t values = 0;
  for (const auto& t : tensors) values += int64_t(t.data.size());
  std::printf("exported %zu tensors (%lld parameters, GPT-2 names) from %s to %s/model.safetensors and config.json\n",
              tensors.size(), static_cast<long long>(values), a.checkpoint.c_str(), a.out.c_str());
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

TRIDENT_COMMAND("export", "write a checkpoint's weights as Hugging Face GPT-2 safetensors + config.json", setup_export);

}  // namespace
}  // namespace trident::cli
