// A checkpoint directory: the input is its manifest.json, then a NUL byte, then the bytes of
// shard-00000.bin (no NUL: a manifest alone). Read as `trident generate`, `export` and `--resume`
// read it: CheckpointReader (the manifest checks), every tensor, the tokenizer of its meta, the
// one check of its meta's model against the tensors (checked_model), and the whole model's
// parameters assembled by read_shard.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_input.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/run_meta.h"
#include "runtime/nn/param_layout.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t manifest_bytes = nul ? size_t(nul - data) : size;
  const std::string dir = (fuzz::scratch_dir() / "ckpt").string();
  std::filesystem::create_directories(dir);
  fuzz::write_scratch("ckpt/manifest.json", data, manifest_bytes);
  if (nul) fuzz::write_scratch("ckpt/shard-00000.bin", nul + 1, size - manifest_bytes - 1);
  else fuzz::remove_scratch("ckpt/shard-00000.bin");
  fuzz::accept_refusal([&] {
    const checkpoint::CheckpointReader reader(dir);
    for (const std::string& name : reader.names()) reader.tensor(name);
    engine::tokenizer_from_json(reader.meta().value("tokenizer", nlohmann::json::object()));
    const ModelSpec m = checkpoint::checked_model(reader);
    checkpoint::read_shard(reader, nn::ParamLayout(nn::Shard::whole(m)), "");
  });
  return 0;
}
