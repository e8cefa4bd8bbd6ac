// A token file (both format versions: 1 without, 2 with the payload checksum), opened as
// `trident train --data FILE` opens it: the memory-mapped reader, the tokenizer beside it (a
// small valid BPE is kept there, so a BPE file's ids are checked against it), the train and
// validation splits and one batch drawn from each.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool tokenizer_written = [] {
    // 256 bytes + 64 merges: ids 0 .. 319.
    std::vector<std::pair<int32_t, int32_t>> merges;
    for (int32_t i = 0; i < 64; ++i) merges.push_back({'a' + i % 26, i == 0 ? 'b' : 255 + i});
    data::Tokenizer::from_merges(merges).save((fuzz::scratch_dir() / "data.tok.tokenizer").string());
    return true;
  }();
  (void)tokenizer_written;
  const std::string path = fuzz::write_scratch("data.tok", data, size);
  fuzz::accept_refusal([&] {
    const data::TokenFile file(path);
    const data::Tokenizer tokenizer = data::tokenizer_of(file);
    std::vector<int32_t> head(size_t(std::min<int64_t>(file.size(), 64)));
    file.read(0, int64_t(head.size()), head.data());
    tokenizer.decode(head);
    constexpr int64_t seq = 8;
    if (file.size() < 2 * (seq + 1)) return;  // train refuses such a file before sampling
    std::vector<int32_t> tokens(2 * seq), targets(2 * seq);
    for (const data::Split split : {data::train_split(file, seq), data::val_split(file, seq)}) {
      const data::BatchSampler sampler(file, split, seq, 1234);
      sampler.fill(0, 0, 2, tokens.data(), targets.data());
    }
  });
  return 0;
}
