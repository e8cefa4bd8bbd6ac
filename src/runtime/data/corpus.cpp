// Text sources and the bundled corpus (see corpus.h).
#include "runtime/data/corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/input_file.h"
#include "core/problems.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

namespace fs = std::filesystem;

namespace trident::data {

namespace {

// Fortune files separate entries with a line holding only '%': it becomes an empty line. Every
// other byte stays as it was (a last line without a newline gets none).
std::string without_separators(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = std::min(text.find('\n', i), text.size());
    if (text.compare(i, end - i, "%") != 0) out.append(text, i, end - i);
    if (end < text.size()) out += '\n';
    i = end + 1;
  }
  return out;
}

}  // namespace

std::string read_text_source(const std::string& path) {
  Problems p;
  std::string text;
  const std::string fix = "give a text file or a folder of text files of at most " + size_text(kMaxTextBytes) +
                          " together";
  if (special_file_kind(path) == "a directory") {
    std::error_code ec;
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(path, ec)) {
      const auto ext = e.path().extension().string();
      if (e.is_regular_file() && !e.is_symlink() && ext != ".dat" && ext != ".u8") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    uint64_t total = 0;
    for (auto& f : files) total += fs::file_size(f, ec);
    if (total > kMaxTextBytes)
      p.add(fmt::format("the text files of '{}' hold {:.3g} MiB, above the {} one source may have", path,
                        double(total) / double(1 << 20), size_text(kMaxTextBytes)),
            fix, "text-source");
    else
      for (auto& f : files)
        if (auto part = read_input_file({f.string(), "text file", "TEXT", "text-source"}, kMaxTextBytes, p))
          text += without_separators(*part);
  } else if (auto whole = read_input_file({path, "text source", "TEXT", "text-source"}, kMaxTextBytes, p)) {
    text = without_separators(*whole);
  }
  p.throw_if_any();
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
