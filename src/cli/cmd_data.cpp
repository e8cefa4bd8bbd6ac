// trident data prepare TEXT OUT: tokenize a text file (or a folder of them) into a token file.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/corpus.h"
#include "runtime/engine/run_meta.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

namespace trident::cli {
namespace {

struct DataArgs {
  std::string text, out, tokenizer = "bytes";
  int64_t vocab = 512;
};

// --tokenizer PATH: a tokenizer.json (or a .tokenizer file data prepare wrote), or a checkpoint's
// own (one `trident import` read from a Hugging Face folder, or one a run trained with).
data::Tokenizer tokenizer_at(const std::string& path) {
  if (checkpoint::is_checkpoint(path)) {
    const checkpoint::CheckpointReader c(path);
    return engine::tokenizer_from_json(c.meta().value("tokenizer", nlohmann::json::object()));
  }
  return data::Tokenizer::load(path);
}

int run_prepare(const DataArgs& a) {
  Problems p;
  const bool named = a.tokenizer == "bytes" || a.tokenizer == "bpe";
  std::error_code ec;
  if (!named && !std::filesystem::exists(a.tokenizer, ec))
    p.add("--tokenizer '" + a.tokenizer + "' is neither bytes, bpe nor an existing tokenizer.json or checkpoint",
          "use --tokenizer bytes, bpe, a tokenizer.json or a checkpoint `trident import` wrote", "tokenizer-kind");
  if (a.tokenizer == "bpe" && (a.vocab <= 256 || a.vocab > 65536))
    p.add("--vocab " + std::to_string(a.vocab) + " is outside 257..65536 for a BPE", "use e.g. --vocab 1024", "tokenizer-vocab");
  if (!named && a.vocab != 512)
    p.add("--vocab " + std::to_string(a.vocab) + " sizes a BPE trained on TEXT; the tokenizer '" + a.tokenizer +
              "' has its own vocabulary",
          "drop --vocab", "tokenizer-vocab");
  std::vector<NamedPath> outputs = {{a.out, "OUT"}};
  if (a.tokenizer != "bytes") outputs.push_back({a.out + ".tokenizer", "OUT's tokenizer"});
  std::vector<NamedPath> inputs = {{a.text, "TEXT"}};
  if (!named) add_folder_input(inputs, {a.tokenizer, "--tokenizer"});
  check_outputs(outputs, inputs, p);
  p.throw_if_any();
  const std::string text = data::read_text_source(a.text);
  data::Tokenizer tok = a.tokenizer == "bpe"     ? data::Tokenizer::train_bpe(text, a.vocab)
                        : a.tokenizer == "bytes" ? data::Tokenizer::bytes()
                                                 : tokenizer_at(a.tokenizer);
  const auto tokens = tok.encode(text);
  if (tok.kind() != data::TokenizerKind::Bytes) tok.save(a.out + ".tokenizer");
  data::write_token_file(a.out, tokens, tok.vocab(), uint32_t(tok.kind()));
  std::printf("%s: %zu tokens (vocabulary %lld, %s) from %zu bytes of %s (%.2f bytes per token)\n", a.out.c_str(),
              tokens.size(), (long long)tok.vocab(), named ? a.tokenizer.c_str() : "tokenizer.json byte-level BPE",
              text.size(), a.text.c_str(), double(text.size()) / double(tokens.size()));
  if (tok.kind() == data::TokenizerKind::Bpe) std::printf("tokenizer merges: %s.tokenizer\n", a.out.c_str());
  if (tok.kind() == data::TokenizerKind::HfBpe) std::printf("tokenizer.json: %s.tokenizer\n", a.out.c_str());
  return 0;
}

Runner setup_data(CLI::App& cmd) {
  auto args = std::make_shared<DataArgs>();
  cmd.require_subcommand(1);
  CLI::App* prep = cmd.add_subcommand("prepare", "tokenize TEXT (a file or a folder of text files) into the token file OUT");
  prep->add_option("TEXT", args->text, std::string("text file or folder (the bundled corpus: ") + data::kBundledCorpusDir + ")")
      ->required();
  prep->add_option("OUT", args->out, "token file to write")->required();
  prep->add_option("--tokenizer", args->tokenizer,
                   "bytes (vocabulary 256), bpe (trained on TEXT), a tokenizer.json, or a checkpoint (`trident import`'s: "
                   "the Hugging Face tokenizer it read)");
  prep->add_option("--vocab", args->vocab, "BPE vocabulary size (default 512)");
  return [args, prep] { return prep->parsed() ? run_prepare(*args) : 2; };
}

TRIDENT_COMMAND("data", runtime_command_help("data"), setup_data);

}  // namespace
}  // namespace trident::cli
