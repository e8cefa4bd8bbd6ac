// A tokenizer file (FILE.tokenizer beside a BPE token file): Tokenizer::load, then a text
// encoded and decoded with what it read, as `trident generate` and `data prepare` use it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.h"
#include "runtime/data/tokenizer.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("fuzz.tokenizer", data, size);
  fuzz::accept_refusal([&] {
    const data::Tokenizer t = data::Tokenizer::load(path);
    const std::string text = "The quick brown fox, 1234 times: aaaa bbbb\n\tzz";
    if (t.decode(t.encode(text)) != text) std::abort();  // a BPE reproduces its text exactly
  });
  return 0;
}
