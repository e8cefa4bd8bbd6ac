// Text sources and the bundled corpus (see corpus.h).
#include "runtime/data/corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/problems.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

namespace fs = std::filesystem;

namespace trident::data {

namespace {
std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str(), out;
  // Fortune files separate entries with a line holding only '%'.
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) out += (line == "%" ? std::string() : line) + "\n";
  return out;
}
}  // namespace

std::string read_text_source(const std::string& path) {
  std::error_code ec;
  Problems p;
  if (!fs::exists(path, ec)) {
    p.add("text source '" + path + "' does not exist", "give a text file or a folder of text files", "text-missing");
    p.throw_if_any();
  }
  std::string text;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(path, ec)) {
      const auto ext = e.path().extension().string();
      if (e.is_regular_file() && !e.is_symlink() && ext != ".dat" && ext != ".u8") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) text += read_file(f);
  } else {
    text = read_file(path);
  }
  if (text.empty()) {
    p.add("text source '" + path + "' holds no text", "give a non-empty text file or folder", "text-empty");
    p.throw_if_any();
  }
  return text;
}

std::string bundled_token_file(bool verbose) {
  fs::path dir;
  if (const char* d = std::getenv("TRIDENT_DATA_DIR")) dir = d;
  else if (const char* h = std::getenv("HOME")) dir = fs::path(h) / ".cache" / "trident";
  else dir = fs::temp_directory_path() / "trident";
  const fs::path file = dir / "fortunes.tok";
  std::error_code ec;
  if (fs::exists(file, ec)) return file.string();
  if (!fs::is_directory(kBundledCorpusDir, ec)) {
    Problems p;
    p.add(std::string("the bundled corpus ") + kBundledCorpusDir + " is missing",
          "install Debian's fortunes package (bash scripts/install-deps.sh), or pass --data FILE.tok", "no-corpus");
    p.throw_if_any();
  }
  fs::create_directories(dir, ec);
  const std::string text = read_text_source(kBundledCorpusDir);
  const auto tokens = Tokenizer::bytes().encode(text);
  write_token_file(file.string(), tokens, 256, uint32_t(TokenizerKind::Bytes));
  if (verbose)
    std::printf("prepared the bundled corpus: %s (%zu bytes of text from %s, byte-level tokens)\n",
                file.string().c_str(), text.size(), kBundledCorpusDir);
  return file.string();
}

}  // namespace trident::data
