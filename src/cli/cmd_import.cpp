// trident import HF_DIR CKPT: a Hugging Face model folder into a new Trident checkpoint, for
// `train --init-from CKPT`, `generate --checkpoint CKPT` and `export` (runtime/checkpoint/hf_import.h).
// The checkpoint format has no layout (logical tensors): any dp / tp / pp / ep run of train reads
// its own slices of it, so import takes no layout flags.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "runtime/checkpoint/hf_import.h"

namespace trident::cli {
namespace {

struct ImportArgs {
  std::string hf_dir, out;
  int64_t seq_len = 0;  // 0: config.json's max_position_embeddings
};

int run_import(const ImportArgs& a) {
  namespace fs = std::filesystem;
  Problems p;
  std::error_code ec;
  if (!fs::is_directory(a.hf_dir, ec))
    p.add("HF_DIR '" + a.hf_dir + "' is not a folder", "give the folder of config.json and *.safetensors", "import-input");
  // A new folder only: an import never replaces an input, a checkpoint or anything else.
  if (fs::exists(fs::symlink_status(a.out, ec)))
    p.add("CKPT '" + a.out + "' exists", "import into a new folder (import never replaces a checkpoint or a file)",
          "output-path");
  std::vector<NamedPath> inputs;
  add_folder_input(inputs, {a.hf_dir, "HF_DIR"});
  check_outputs({{a.out, "CKPT"}}, inputs, p, OutputKind::Directory);
  checkpoint::check_temporary_dir(a.out, p);
  if (a.seq_len < 0) p.add("--seq-len " + std::to_string(a.seq_len) + " is below 1", "give the training length, e.g. --seq-len 2048", "import-seq-len");
  p.throw_if_any();
  const checkpoint::ImportSummary s =
      checkpoint::import_hf(a.hf_dir, a.out, a.seq_len > 0 ? std::optional<int64_t>(a.seq_len) : std::nullopt);
  const ModelSpec& m = s.model;
  std::printf("imported %lld tensors (%lld parameters, %s, %s names) from %lld safetensors file%s in %s into checkpoint %s\n",
              (long long)s.hf_tensors, (long long)s.values, s.dtypes.c_str(), checkpoint::hf_class_names(s.cls),
              (long long)s.files, s.files == 1 ? "" : "s", a.hf_dir.c_str(), a.out.c_str());
  std::printf("model: %s, %s, %lld layers, hidden %lld, heads %lld (kv %lld), ffn %lld, vocab %lld, seq-len %lld",
              m.name.c_str(), to_string(m.family).c_str(), (long long)m.layers, (long long)m.hidden, (long long)m.heads,
              (long long)m.kv_heads, (long long)m.ffn_hidden, (long long)m.vocab, (long long)m.seq_len);
  if (m.is_moe())
    std::printf(", %lld experts (top %lld, width %lld)", (long long)m.experts, (long long)m.experts_per_token,
                (long long)m.expert_ffn_hidden);
  std::printf("\ntokenizer: %s\n", s.tokenizer.c_str());
  return 0;
}

Runner setup_import(CLI::App& cmd) {
  auto args = std::make_shared<ImportArgs>();
  cmd.add_option("HF_DIR", args->hf_dir, "Hugging Face model folder: config.json, model.safetensors or sharded "
                                         "*.safetensors with model.safetensors.index.json, tokenizer.json")
      ->required()
      ->type_name("DIR");
  cmd.add_option("CKPT", args->out, "new checkpoint folder to write")->required()->type_name("DIR");
  cmd.add_option("--seq-len", args->seq_len, "training sequence length (default: config.json's max_position_embeddings)")
      ->type_name("INT");
  return [args] { return run_import(*args); };
}

TRIDENT_COMMAND("import", runtime_command_help("import"), setup_import);

}  // namespace
}  // namespace trident::cli
