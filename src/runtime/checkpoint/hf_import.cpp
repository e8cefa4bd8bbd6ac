// Hugging Face folder -> Trident checkpoint (see hf_import.h).
#include "runtime/checkpoint/hf_import.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "capability/capability.h"
#include "core/hf_config.h"
#include "core/input_file.h"
#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/engine/run_meta.h"
#include "runtime/nn/param_layout.h"

namespace trident::checkpoint {
namespace {

namespace fs = std::filesystem;
const char* const kFix = "give the folder transformers' save_pretrained wrote, whole";

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The class whose names the folder holds, from config.json's model_type.
std::optional<HfClass> class_of(const std::string& type) {
  if (type == "gpt2") return HfClass::Gpt2;
  if (type == "llama" || type == "mistral") return HfClass::Llama;
  if (type == "mixtral") return HfClass::Mixtral;
  if (type == "qwen2_moe") return HfClass::Qwen2Moe;
  if (type == "qwen3") return HfClass::Qwen3;
  if (type == "qwen3_moe") return HfClass::Qwen3Moe;
  if (type == "deepseek_v3") return HfClass::DeepseekV3;
  return std::nullopt;
}

// Every tensor of the folder: which open file holds it.
struct Weights {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> where;
};

// model.safetensors.index.json's weight_map (each file it names opened once), or the one
// model.safetensors; problems for a tensor the index and the files disagree on.
Weights open_weights(const std::string& dir, Problems& p) {
  Weights w;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    if (!fs::exists(dir + "/model.safetensors")) {
      p.add("'" + dir + "' holds neither model.safetensors nor model.safetensors.index.json", kFix, "import-weights");
      return w;
    }
    w.files.push_back(std::make_unique<SafetensorsFile>(dir + "/model.safetensors"));
    for (const auto& [name, e] : w.files.back()->tensors()) w.where[name] = w.files.back().get();
    return w;
  }
  const auto text = read_input_file({index_path, "safetensors index", "HF_DIR", "import-index"}, uint64_t(64) << 20, p);
  if (!text) return w;
  const nlohmann::json index = nlohmann::json::parse(*text, nullptr, false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    p.add("'" + index_path + "' has no weight_map {tensor: file}", kFix, "import-index");
    return w;
  }
  std::map<std::string, const SafetensorsFile*> by_file;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      p.add(fmt::format("'{}' maps tensor '{}' to {}, not a file name", index_path, name, file.dump().substr(0, 60)), kFix,
            "import-index");
      continue;
    }
    const std::string f = file.get<std::string>();
    // A file of the folder, never one elsewhere (../, an absolute path).
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      p.add(fmt::format("'{}' maps tensor '{}' to '{}', not a file of the folder", index_path, name, f), kFix,
            "import-index");
      continue;
    }
    if (!by_file.count(f)) {
      w.files.push_back(std::make_unique<SafetensorsFile>(dir + "/" + f));
      by_file[f] = w.files.back().get();
    }
    const SafetensorsFile* sf = by_file[f];
    if (!sf->tensors().count(name))
      p.add(fmt::format("'{}' puts tensor '{}' in '{}', which does not hold it", index_path, name, f), kFix, "import-index");
    else
      w.where[name] = sf;
  }
  for (const auto& [f, sf] : by_file)
    for (const auto& [name, e] : sf->tensors())
      if (!w.where.count(name) || w.where[name] != sf)
        p.add(fmt::format("'{}' holds tensor '{}', which '{}' does not map to it", sf->path(), name, index_path), kFix,
              "import-index");
  return w;
}

// The folder's tokenizer.json (and tokenizer_config.json, kept as text for export), or bytes.
struct ImportedTokenizer {
  data::Tokenizer tokenizer = data::Tokenizer::bytes();
  std::optional<std::string> config;
  std::string summary = "bytes (the folder has no tokenizer.json)";
};

ImportedTokenizer read_tokenizer(const std::string& dir, const ModelSpec& m, Problems& p) {
  ImportedTokenizer t;
  const std::string path = dir + "/tokenizer.json";
  if (!fs::exists(path)) return t;
  const auto text = read_input_file({path, "tokenizer.json", "HF_DIR", "hf-tokenizer-file"}, uint64_t(64) << 20, p);
  if (!text) return t;
  try {
    t.tokenizer = data::Tokenizer::from_hf_json(*text, path);
  } catch (const InputError& e) {
    for (const auto& problem : e.problems()) p.add(problem.what, problem.fix, problem.code);
    return t;
  }
  const data::HfTokenizer& hf = *t.tokenizer.hf();
  if (hf.vocab() > m.vocab)
    p.add(fmt::format("{} has ids up to {}, past the model's vocab_size {}", path, hf.vocab() - 1, m.vocab),
          "give the tokenizer.json of this model", "hf-tokenizer-vocab");
  t.summary = fmt::format("{}: byte-level BPE, {} ids ({} merges, {} added tokens)", path, hf.vocab(), hf.merges(), hf.added());
  const std::string config_path = dir + "/tokenizer_config.json";
  if (fs::exists(config_path))
    t.config = read_input_file({config_path, "tokenizer_config.json", "HF_DIR", "hf-tokenizer-file"}, uint64_t(16) << 20, p);
  return t;
}

// A number config.json may hold, or `fallback` when it is absent (model_from_hf_config checked the
// keys it reads; these two it leaves to import).
double number_or(const nlohmann::json& config, const char* key, double fallback) {
  return config.contains(key) && config[key].is_number() ? config[key].get<double>() : fallback;
}

nlohmann::json meta_of(const ModelSpec& m, HfClass cls, const nn::MoeOptions& router, const std::string& hf_dir,
                       const ImportedTokenizer& tokenizer) {
  nlohmann::json meta = {{"model", engine::model_to_json(m)},
                         {"step", 0},
                         {"imported_from", {{"path", hf_dir}, {"names", hf_class_names(cls)}}},
                         {"tokenizer", engine::tokenizer_to_json(tokenizer.tokenizer)}};
  if (tokenizer.config) meta["hf_tokenizer_config"] = *tokenizer.config;  // export writes it back as it was
  if (m.is_moe()) meta["router"] = engine::router_to_json(router);
  return meta;
}

}  // namespace

ImportSummary import_hf(const std::string& hf_dir, const std::string& out, std::optional<int64_t> seq_len) {
  Problems p;
  const std::string config_path = hf_dir + "/config.json";
  std::optional<ModelSpec> read = model_from_hf_config_file(config_path, "HF_DIR", p, seq_len);
  p.throw_if_any();
  ModelSpec m = *read;
  // The class whose names the files hold (model_from_hf_config read the type already).
  const auto text = read_input_file({config_path, "Hugging Face config", "HF_DIR", "hf-config-file"}, uint64_t(16) << 20, p);
  p.throw_if_any();
  const nlohmann::json config = nlohmann::json::parse(*text, nullptr, false);
  const std::string type =
      config.contains("model_type") && config["model_type"].is_string() ? config["model_type"].get<std::string>() : "";
  const std::optional<HfClass> cls = class_of(type);
  if (!cls)
    p.add(fmt::format("{}: model_type '{}' is not one import reads (gpt2, llama, mistral, mixtral, qwen2_moe, "
                      "qwen3, qwen3_moe, deepseek_v3: the families the runtime trains)",
                      config_path, type),
          "import a GPT-2, Llama, Mistral, Mixtral, Qwen2-MoE, Qwen3, Qwen3-MoE or DeepSeek-V3 model", "import-family");
  // DeepseekV3Attention's q_a_proj, kv_a_proj_with_mqa and o_proj biases: the MLA layer has none.
  if (cls == HfClass::DeepseekV3 && config.contains("attention_bias") && config["attention_bias"] == true)
    p.add(fmt::format("{}: attention_bias true: the runtime's multi-head latent attention has no biases", config_path),
          "import a DeepSeek-V3 model with attention_bias false (the released ones)", "import-architecture");
  // What the runtime cannot train yet, by field: never dropped.
  for (const std::string& what : capability::beyond_runtime(m))
    p.add(fmt::format("{}: {}: the runtime cannot train it yet", config_path, what),
          "import a model of the families the runtime trains (plain GPT-2, Llama, Mixtral layers)", "import-architecture");
  check_hf_exportable(m, p);
  const int64_t positions = int64_t(number_or(config, "n_positions", 0));
  if (cls == HfClass::Gpt2 && seq_len && positions != *seq_len)
    p.add(fmt::format("--seq-len {}: GPT-2's learned positions (transformer.wpe) hold n_positions {} rows", *seq_len,
                      positions),
          "drop --seq-len for a GPT-2 model", "import-seq-len");
  p.throw_if_any();

  nn::MoeOptions router;
  if (m.is_moe()) {
    engine::use_model_router(router, m);  // DeepSeek-V3's: sigmoid scores, the bias, routed scaling, groups
    router.normalise = m.router_norm_topk;
    router.drop = false;  // Hugging Face's MoE classes never drop a token
    // Hugging Face's load-balancing loss is k x Trident's for the same coefficient (hf_names.cpp).
    router.aux_coeff = number_or(config, "router_aux_loss_coef", 0.0) * double(m.experts_per_token);
    router.z_coeff = number_or(config, "router_z_loss_coef", 0.0);
  }
  if (cls && hf_class(m, router) != *cls)
    p.add(fmt::format("{}: a {} model whose settings Trident exports as {} names (shared experts, dense layers or "
                      "unnormalised weights)", config_path, type, hf_class_names(hf_class(m, router))),
          "import the model as its own class", "import-family");
  p.throw_if_any();

  // Every tensor against the mapping: missing, mis-shaped and extra ones, all together (and the
  // tokenizer's problems with them).
  const ImportedTokenizer tokenizer = read_tokenizer(hf_dir, m, p);
  Weights w = open_weights(hf_dir, p);
  const std::vector<HfPiece> pieces = hf_pieces(m, *cls);
  std::set<std::string> expected;
  std::set<std::string> dtypes;
  std::vector<std::vector<float>> expert_bias;  // DeepSeek-V3's, for the meta
  int64_t values = 0;
  for (const HfPiece& piece : pieces) {
    expected.insert(piece.hf_name);
    auto it = w.where.find(piece.hf_name);
    if (it == w.where.end()) {
      p.add(fmt::format("no tensor '{}' ({} in this config.json's model)", piece.hf_name, shape_text(piece.hf_shape)),
            kFix, "import-tensor-missing");
      continue;
    }
    const SafetensorsEntry& e = it->second->tensors().at(piece.hf_name);
    dtypes.insert(e.dtype);
    if (e.shape != piece.hf_shape) {
      p.add(fmt::format("tensor '{}' of '{}' is {}; config.json gives {}", piece.hf_name, it->second->path(),
                        shape_text(e.shape), shape_text(piece.hf_shape)),
            "give the weights of this config.json", "import-tensor-shape");
      continue;
    }
    if (piece.op == HfPiece::Op::Tied) {  // a copy of a tensor the model shares: equal, or refused
      const HfPiece* primary = nullptr;
      for (const HfPiece& other : pieces)
        if (other.name == piece.name && other.op == HfPiece::Op::Copy) primary = &other;
      if (primary && w.where.count(primary->hf_name) &&
          it->second->read(piece.hf_name) != w.where.at(primary->hf_name)->read(primary->hf_name))
        p.add(fmt::format("tensor '{}' differs from '{}': Trident's multi-token-prediction layer shares the model's",
                          piece.hf_name, primary->hf_name),
              fmt::format("import a checkpoint whose '{}' equals '{}' (DeepSeek-V3's released one)", piece.hf_name,
                          primary->hf_name),
              "import-tensor-tied");
    }
    if (piece.op == HfPiece::Op::ExpertBias) {
      const std::vector<float> b = it->second->read(piece.hf_name);
      if (expert_bias.size() <= size_t(piece.row)) expert_bias.resize(size_t(piece.row) + 1);
      expert_bias[size_t(piece.row)] = b;
    }
    if (piece.op == HfPiece::Op::Zeros) {  // a tensor Trident's model lacks: only zeros say nothing
      for (float v : it->second->read(piece.hf_name))
        if (v != 0.0f) {
          p.add(fmt::format("tensor '{}' is not zero; Trident's model has no such tensor", piece.hf_name),
                "import a model without it", "import-tensor-nonzero");
          break;
        }
    }
  }
  for (const auto& [name, file] : w.where)
    if (!expected.count(name))
      p.add(fmt::format("tensor '{}' of '{}', which a {} model of this config.json does not have", name, file->path(),
                        hf_class_names(*cls)),
            "give the weights of this config.json", "import-tensor-extra");
  p.throw_if_any();

  // The logical tensors, one at a time: each assembled from its pieces, written, freed.
  std::map<std::string, std::vector<const HfPiece*>> of;
  for (const HfPiece& piece : pieces)
    if (piece.op == HfPiece::Op::Copy || piece.op == HfPiece::Op::Transpose || piece.op == HfPiece::Op::HalfRotary ||
        piece.op == HfPiece::Op::Doubled)
      of[piece.name].push_back(&piece);
  const nn::ParamLayout layout(nn::Shard::whole(m));
  begin_save(out);
  try {
    ShardWriter writer(out, 0);
    std::set<std::string> written;
    for (const auto& view : layout.tensors()) {
      const LogicalSlice s = logical_slice(layout.shard(), view);
      if (!written.insert(s.name).second) continue;  // GPT's head: a view of wte
      std::vector<float> data(size_t(s.rows * s.cols));
      int64_t covered = 0;
      for (const HfPiece* piece : of[s.name]) {
        const std::vector<float> hf = w.where.at(piece->hf_name)->read(piece->hf_name);
        from_hf(*piece, hf, data.data(), s.cols);
        covered += int64_t(hf.size());
      }
      if (covered != s.rows * s.cols)
        throw std::logic_error(fmt::format("import: the pieces of '{}' cover {} of its {} values", s.name, covered,
                                           s.rows * s.cols));
      writer.add(s.name, s.rows, s.cols, 0, 0, s.rows, s.cols, data.data());
      values += covered;
    }
    writer.finish();
    nlohmann::json meta = meta_of(m, *cls, router, hf_dir, tokenizer);
    if (!expert_bias.empty()) meta["router"]["expert_bias"] = expert_bias;  // the trainer's table (run_meta.h)
    finish_save(out, meta);
  } catch (...) {
    abandon_save(out);
    throw;
  }
  // Read back by the readers' own check: the meta describes the tensors written.
  checked_model(CheckpointReader(out));
  ImportSummary sum{m, *cls, int64_t(expected.size()), values, int64_t(w.files.size()), "", tokenizer.summary};
  for (const std::string& d : dtypes) sum.dtypes += (sum.dtypes.empty() ? "" : " + ") + d;
  return sum;
}

}  // namespace trident::checkpoint
