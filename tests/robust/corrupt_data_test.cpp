// Corrupt data: token files (the payload checksum of version 2, ids outside the vocabulary, a
// header whose size wraps), the tokenizer beside a BPE token file, and checkpoint manifests that
// parse and keep valid shard checksums but contradict themselves. Each is an InputError with
// its code and the file, never a crash, an allocation from an absurd shape or library text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"
#include "runtime/engine/run_meta.h"

using namespace trident;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("trident-corrupt-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The problems (with their codes) an action throws; "" when it throws none.
template <class F>
std::string refusal(F&& action) {
  try {
    action();
  } catch (const InputError& e) {
    std::string s;
    for (const auto& p : e.problems()) s += p.what + " [" + p.code + "]\n";
    return s;
  }
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class T>
void put(std::string& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

}  // namespace

TEST(CorruptTokenFile, version_2_carries_a_checksum_of_its_tokens_that_the_reader_verifies) {
  Scratch s;
  const std::string path = s.path("a.tok");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back((i * 7) % 256);
  data::write_token_file(path, tokens, 256, 0);
  std::string good = bytes_of(path);
  uint32_t version = 0;
  uint64_t stored = 0;
  std::memcpy(&version, good.data() + 8, 4);
  std::memcpy(&stored, good.data() + 32, 8);
  EXPECT_EQ(version, 2u);
  EXPECT_EQ(stored, data::fnv1a64(reinterpret_cast<const unsigned char*>(good.data()) + 64, good.size() - 64));
  EXPECT_EQ(data::TokenFile(path).payload_checksum(), stored);
  // A flipped bit in one token (still inside the vocabulary): only the checksum sees it.
  std::string bad = good;
  bad[64 + 2 * 1000] ^= 0x01;
  write(path, bad);
  const std::string why = refusal([&] { data::TokenFile f(path); });
  EXPECT_TRUE(has(why, "[token-file-checksum]")) << why;
  EXPECT_TRUE(has(why, path)) << why;
}

TEST(CorruptTokenFile, version_1_still_reads_and_ids_outside_the_vocabulary_are_refused) {
  Scratch s;
  const std::string path = s.path("old.tok");
  data::write_token_file(path, std::vector<int32_t>(500, 9), 256, 0);
  std::string old = bytes_of(path);
  put<uint32_t>(old, 8, 1);   // version 1
  put<uint64_t>(old, 32, 0);  // which had no checksum
  write(path, old);
  EXPECT_EQ(data::TokenFile(path).version(), 1u);
  put<uint16_t>(old, 64 + 2 * 123, 300);  // id 300 in a vocabulary of 256: the embedding has no row 300
  write(path, old);
  const std::string why = refusal([&] { data::TokenFile f(path); });
  EXPECT_TRUE(has(why, "token id 300 at position 123, outside its vocabulary of 256")) << why;
}

TEST(CorruptTokenFile, a_header_whose_size_wraps_around_64_bits_is_refused) {
  // 2^62 tokens of 4 bytes is 2^64 bytes, which wraps to 0: the 64-byte header alone would match.
  Scratch s;
  const std::string path = s.path("wrap.tok");
  std::string header(64, '\0');
  std::memcpy(header.data(), "TRDTOKEN", 8);
  put<uint32_t>(header, 8, 1);
  put<uint32_t>(header, 12, 256);
  put<uint64_t>(header, 16, uint64_t(1) << 62);
  put<uint32_t>(header, 24, 4);
  write(path, header);
  const std::string why = refusal([&] { data::TokenFile f(path); });
  EXPECT_TRUE(has(why, "[token-file-size]")) << why;
}

TEST(CorruptTokenFile, a_bpe_token_file_needs_its_whole_tokenizer_beside_it) {
  Scratch s;
  const std::string path = s.path("bpe.tok");
  const data::Tokenizer bpe = data::Tokenizer::from_merges({{104, 101}, {256, 108}, {257, 108}});  // "he", "hel", "hell"
  data::write_token_file(path, {258, 111, 32, 258}, bpe.vocab(), uint32_t(data::TokenizerKind::Bpe));
  const data::TokenFile file(path);
  const std::string missing = refusal([&] { data::tokenizer_of(file); });
  EXPECT_TRUE(has(missing, "[tokenizer-missing]")) << missing;
  EXPECT_TRUE(has(missing, path + ".tokenizer")) << missing;
  data::Tokenizer::from_merges({{104, 101}}).save(path + ".tokenizer");  // only the first merge
  const std::string truncated = refusal([&] { data::tokenizer_of(file); });
  EXPECT_TRUE(has(truncated, "[tokenizer-truncated]")) << truncated;
  EXPECT_TRUE(has(truncated, "token id 258")) << truncated;
  write(path + ".tokenizer", "trident-tokenizer 1 bpe\n104 101\n256 108\n257");  // cut inside a line
  const std::string cut = refusal([&] { data::tokenizer_of(file); });
  EXPECT_TRUE(has(cut, "[tokenizer-file]")) << cut;
  bpe.save(path + ".tokenizer");
  EXPECT_EQ(data::tokenizer_of(file).decode({258, 111}), "hello");
}

// Found by fuzz/tokenizer_fuzz.cpp: each merge may join a token with itself, doubling it, so
// forty lines spelled a terabyte of tokens and the reader died of memory. Refused with the count.
TEST(CorruptTokenizer, merges_that_double_a_token_forty_times_are_refused_before_any_memory_is_taken) {
  Scratch s;
  std::string text = "trident-tokenizer 1 bpe\n97 97\n";
  std::vector<std::pair<int32_t, int32_t>> merges = {{97, 97}};
  for (int32_t i = 0; i < 40; ++i) {
    text += std::to_string(256 + i) + " " + std::to_string(256 + i) + "\n";
    merges.push_back({256 + i, 256 + i});
  }
  write(s.path("doubling.tokenizer"), text);
  const std::string file = refusal([&] { data::Tokenizer::load(s.path("doubling.tokenizer")); });
  EXPECT_TRUE(has(file, "[tokenizer-file]")) << file;
  EXPECT_TRUE(has(file, "more than 64 MiB")) << file;
  EXPECT_TRUE(has(file, "doubling.tokenizer")) << file;
  json list = json::array();
  for (auto [a, b] : merges) list.push_back({a, b});
  const std::string meta = refusal([&] { engine::tokenizer_from_json({{"kind", "bpe"}, {"merges", list}}); });
  EXPECT_TRUE(has(meta, "the checkpoint's tokenizer")) << meta;
  EXPECT_TRUE(has(meta, "more than 64 MiB")) << meta;
}

namespace {

// A two-shard checkpoint of w [4, 3] (rows 0-1 on rank 0, rows 2-3 on rank 1) and b [3].
std::string sample_checkpoint(const Scratch& s) {
  const std::string dir = s.path("c.ckpt");
  checkpoint::begin_save(dir);
  std::vector<float> w(12), b{7, 8, 9};
  for (int i = 0; i < 12; ++i) w[size_t(i)] = float(i);
  checkpoint::ShardWriter r0(dir, 0), r1(dir, 1);
  r0.add("w", 4, 3, 0, 0, 2, 3, w.data());
  r1.add("w", 4, 3, 2, 0, 2, 3, w.data() + 6);
  r1.add("b", 3, 1, 0, 0, 3, 1, b.data());
  r0.finish();
  r1.finish();
  checkpoint::finish_save(dir, {{"step", 7}});
  return dir;
}

// Opens the checkpoint after `edit` changed its manifest (the shards and their checksums stay
// valid) and reads every tensor; returns the refusal.
template <class F>
std::string crafted(const Scratch& s, F&& edit) {
  const std::string dir = sample_checkpoint(s);
  json m = json::parse(bytes_of(dir + "/manifest.json"));
  edit(m);
  write(dir + "/manifest.json", m.dump());
  return refusal([&] {
    checkpoint::CheckpointReader r(dir);
    for (const auto& name : r.names()) r.tensor(name);
  });
}

}  // namespace

TEST(CraftedCheckpoint, an_untouched_manifest_reads) {
  Scratch s;
  EXPECT_EQ(crafted(s, [](json&) {}), "");
}

TEST(CraftedCheckpoint, shapes_that_overflow_or_exceed_the_shards_are_refused_before_any_allocation) {
  Scratch s;
  const std::string huge = crafted(s, [](json& m) { m["tensors"]["w"]["shape"] = {int64_t(1) << 40, int64_t(1) << 40}; });
  EXPECT_TRUE(has(huge, "tensor 'w'")) << huge;
  EXPECT_TRUE(has(huge, "over 2^62")) << huge;
  const std::string big = crafted(s, [](json& m) { m["tensors"]["w"]["shape"] = {1 << 20, 3}; });
  EXPECT_TRUE(has(big, "but the shards hold")) << big;
  const std::string negative = crafted(s, [](json& m) { m["tensors"]["b"]["shape"] = {-3}; });
  EXPECT_TRUE(has(negative, "sizes must be positive")) << negative;
}

TEST(CraftedCheckpoint, slices_that_overlap_leave_holes_or_leave_their_file_are_refused) {
  Scratch s;
  // Rows 1-2 instead of 2-3: still 12 elements "covered", row 1 twice and row 3 never.
  const std::string overlap = crafted(s, [](json& m) {
    for (auto& slice : m["tensors"]["w"]["slices"])
      if (slice["start"][0] == 2) slice["start"][0] = 1;
  });
  EXPECT_TRUE(has(overlap, "slices that overlap")) << overlap;
  const std::string outside = crafted(s, [](json& m) { m["tensors"]["b"]["slices"][0]["offset"] = 1 << 20; });
  EXPECT_TRUE(has(outside, "at byte 1048576")) << outside;
  const std::string hole = crafted(s, [](json& m) { m["tensors"]["w"]["slices"].erase(1); });
  EXPECT_TRUE(has(hole, "holding 6 of its 12 elements")) << hole;
  const std::string escape = crafted(s, [](json& m) {
    m["files"]["../escape.bin"] = m["files"]["shard-00000.bin"];
  });
  EXPECT_TRUE(has(escape, "not a file name inside the checkpoint directory")) << escape;
}

TEST(CraftedCheckpoint, unknown_dtypes_wrong_types_and_missing_shards_are_named) {
  Scratch s;
  const std::string dtype = crafted(s, [](json& m) { m["tensors"]["b"]["dtype"] = "f16"; });
  EXPECT_TRUE(has(dtype, "has dtype 'f16'")) << dtype;
  // A number where the format name goes: the JSON library would throw its own type error.
  const std::string format = crafted(s, [](json& m) { m["format"] = 7; });
  EXPECT_TRUE(has(format, "[checkpoint-manifest]")) << format;
  const std::string offset = crafted(s, [](json& m) { m["tensors"]["b"]["slices"][0]["offset"] = "zero"; });
  EXPECT_TRUE(has(offset, "'offset' is \"zero\", not a whole number")) << offset;
  const std::string step = crafted(s, [](json& m) { m["meta"]["step"] = -4; });
  EXPECT_TRUE(has(step, "[checkpoint-meta]")) << step;
  const std::string model = crafted(s, [](json& m) {
    m["meta"]["model"] = {{"name", "x"}, {"layers", 4096}, {"hidden", 1 << 20}, {"heads", 16}, {"ffn_hidden", 1 << 22},
                          {"seq_len", 16}, {"vocab", 256}};
  });
  EXPECT_TRUE(has(model, "the checkpoint's model")) << model;
  EXPECT_TRUE(has(model, "but the shards hold")) << model;
  const std::string missing = crafted(s, [&](json& m) {
    m["files"]["shard-00002.bin"] = m["files"]["shard-00000.bin"];
  });
  EXPECT_TRUE(has(missing, "shard-00002.bin' is missing")) << missing;
}

TEST(CraftedCheckpoint, a_key_given_twice_is_refused_not_silently_the_last) {
  Scratch s;
  const std::string dir = sample_checkpoint(s);
  std::string text = bytes_of(dir + "/manifest.json");
  const size_t at = text.find("\"tensors\"");
  ASSERT_NE(at, std::string::npos);
  // A second "b" before the real one, with a shape of its own.
  text.insert(text.find('{', at) + 1, "\"b\": {\"shape\": [1], \"dtype\": \"f32\", \"slices\": []},");
  write(dir + "/manifest.json", text);
  const std::string why = refusal([&] { checkpoint::CheckpointReader r(dir); });
  EXPECT_TRUE(has(why, "gives the key 'b' twice")) << why;
}

TEST(CraftedCheckpoint, a_tokenizer_with_a_merge_of_tokens_not_yet_made_is_refused) {
  const std::string why = refusal([] { engine::tokenizer_from_json({{"kind", "bpe"}, {"merges", {{104, 101}, {999, 1}}}}); });
  EXPECT_TRUE(has(why, "bad merge 1")) << why;
  const std::string model = refusal([] { engine::model_from_json(nullptr); });
  EXPECT_TRUE(has(model, "[checkpoint-meta]")) << model;
  EXPECT_FALSE(has(model, "json.exception")) << model;
}
