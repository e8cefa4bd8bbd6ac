// trident export: a checkpoint's weights under Hugging Face's names, as model.safetensors and
// config.json in OUT, so transformers (GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(OUT))
// or any other implementation of the family loads them. Whatever layout wrote the checkpoint, its
// one reader (runtime/checkpoint) gives whole logical tensors.
//
// GPT -> GPT-2 names, Llama -> Llama names, a Llama-family mixture of experts -> Mixtral names, or
// Qwen2-MoE's when it has shared experts, dense layers or unnormalised weights
// (runtime/checkpoint/hf_names.cpp spells out each mapping). What no Hugging Face class computes
// (GELU experts, a tied Llama head) is refused by name rather than exported wrong.
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
#include "runtime/checkpoint/hf_names.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/engine/run_meta.h"

namespace trident::cli {
namespace {

using checkpoint::NamedTensor;

struct ExportArgs {
  std::string checkpoint, format = "safetensors", out;
};

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
  const nn::MoeOptions router = engine::router_from_json(reader.meta().value("router", nlohmann::json()), m);
  checkpoint::check_hf_exportable(m, p);
  p.throw_if_any();
  const checkpoint::HfModel hf = checkpoint::hf_model(reader, m, router);
  const std::string weights =
      checkpoint::safetensors_bytes(hf.tensors, {{"format", "pt"}, {"source", "trident export"}});
  std::vector<std::pair<std::string, std::string>> files = {{"model.safetensors", weights},
                                                             {"config.json", hf.config.dump(2) + "\n"}};
  // A Hugging Face tokenizer (imported, or one a run trained with): its tokenizer.json as it was
  // read, and the tokenizer_config.json import kept (else one that names the fast tokenizer), so
  // AutoTokenizer loads the folder.
  const nlohmann::json tok = reader.meta().value("tokenizer", nlohmann::json::object());
  std::string tokenizer_note;
  if (tok.is_object() && tok.value("kind", std::string()) == "hf-bpe") {
    const data::Tokenizer t = engine::tokenizer_from_json(tok);  // checked before it is written
    files.push_back({"tokenizer.json", t.hf()->json_text()});
    const nlohmann::json kept = reader.meta().value("hf_tokenizer_config", nlohmann::json());
    files.push_back({"tokenizer_config.json",
                     kept.is_string() ? kept.get<std::string>()
                                      : nlohmann::json{{"tokenizer_class", "PreTrainedTokenizerFast"},
                                                       {"model_max_length", m.seq_len},
                                                       {"clean_up_tokenization_spaces", false}}
                                                .dump(2) + "\n"});
    tokenizer_note = ", tokenizer.json and tokenizer_config.json";
  }
  write_export(a.out, files);
  int64_t values = 0;
  for (const auto& t : hf.tensors) values += int64_t(t.data.size());
  std::printf("exported %zu tensors (%lld parameters, %s names) from %s to %s/model.safetensors and config.json%s\n",
              hf.tensors.size(), static_cast<long long>(values), hf.names.c_str(), a.checkpoint.c_str(), a.out.c_str(),
              tokenizer_note.c_str());
  if (tokenizer_note.empty())
    std::printf("no tokenizer files: the checkpoint's tokenizer is Trident's own (%s), not a tokenizer.json\n",
                tok.value("kind", std::string("bytes")).c_str());
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
