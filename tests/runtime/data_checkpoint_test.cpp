// Token files, the batch sampler, tokenizers and checkpoints: round trips, determinism, and
// clear refusals of damaged files.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checksum.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_file.h"
#include "runtime/data/tokenizer.h"

using namespace trident;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("trident_rt_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::vector<char> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write_all(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(b.data(), std::streamsize(b.size()));
}

std::string problem_text(const InputError& e) {
  std::string s;
  for (auto& p : e.problems()) s += p.what + " | " + p.fix + " [" + p.code + "]\n";
  return s;
}

TEST(TokenFile, round_trip_keeps_every_token_and_the_vocabulary) {
  const auto path = temp_path("rt.tok");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back((i * 37) % 300);
  data::write_token_file(path, tokens, 300, 0);
  data::TokenFile f(path);
  EXPECT_EQ(f.size(), 1000);
  EXPECT_EQ(f.vocab(), 300);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(f.at(i), tokens[size_t(i)]);
  fs::remove(path);
}

TEST(TokenFile, wide_vocabulary_uses_four_byte_tokens) {
  const auto path = temp_path("wide.tok");
  data::write_token_file(path, {70000, 1, 69999}, 70001, 0);
  data::TokenFile f(path);
  EXPECT_EQ(f.at(0), 70000);
  EXPECT_EQ(fs::file_size(path), 64u + 3 * 4);
  fs::remove(path);
}

void expect_refused(const std::string& path, const std::string& code) {
  try {
    data::TokenFile f(path);
    FAIL() << "accepted a bad token file (" << code << ")";
  } catch (const InputError& e) {
    EXPECT_NE(problem_text(e).find(code), std::string::npos) << problem_text(e);
    EXPECT_NE(problem_text(e).find(path), std::string::npos) << "the error names the file";
  }
}

TEST(TokenFile, wrong_magic_version_or_size_is_refused_with_its_reason) {
  const auto path = temp_path("bad.tok");
  data::write_token_file(path, std::vector<int32_t>(100, 7), 256, 0);
  const auto good = read_all(path);
  auto bad = good;
  bad[0] = 'X';
  write_all(path, bad);
  expect_refused(path, "token-file-magic");
  bad = good;
  bad[8] = 9;  // version 9
  write_all(path, bad);
  expect_refused(path, "token-file-version");
  bad = good;
  bad.resize(bad.size() - 10);  // truncated
  write_all(path, bad);
  expect_refused(path, "token-file-size");
  write_all(path, std::vector<char>(10, 0));  // shorter than the header
  expect_refused(path, "token-file-size");
  fs::remove(path);
  expect_refused(path, "token-file-open");
}

TEST(BatchSampler, same_seed_same_batches_and_replica_slices_match_the_global_batch) {
  const auto path = temp_path("s.tok");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back(i % 251);
  data::write_token_file(path, tokens, 256, 0);
  data::TokenFile f(path);
  const int64_t T = 16, B = 8;
  data::BatchSampler a(f, data::train_split(f, T), T, 42), b(f, data::train_split(f, T), T, 42),
      c(f, data::train_split(f, T), T, 43);
  std::vector<int32_t> ta(B * T), ga(B * T), tb(B * T), gb(B * T), tc(B * T), gc(B * T);
  a.fill(5, 0, B, ta.data(), ga.data());
  b.fill(5, 0, B, tb.data(), gb.data());
  c.fill(5, 0, B, tc.data(), gc.data());
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  for (int64_t i = 0; i < B * T; ++i)
    if (i % T != T - 1) ASSERT_EQ(ga[size_t(i)], ta[size_t(i + 1)]) << "targets are the inputs shifted by one";
  // Replica r of 4 takes sequences [2r, 2r+2): exactly its slice of the global batch.
  for (int r = 0; r < 4; ++r) {
    std::vector<int32_t> t(2 * T), g(2 * T);
    a.fill(5, 2 * r, 2, t.data(), g.data());
    EXPECT_TRUE(std::equal(t.begin(), t.end(), ta.begin() + 2 * r * T));
  }
  // Training and validation never overlap.
  const auto tr = data::train_split(f, T), va = data::val_split(f, T);
  EXPECT_LE(tr.end, va.begin);
  for (int s = 0; s < 50; ++s) EXPECT_LE(a.sequence_start(s, 0) + T + 1, tr.end);
  fs::remove(path);
}

TEST(Tokenizer, bpe_round_trips_text_and_compresses_it) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  auto bpe = data::Tokenizer::train_bpe(text, 300);
  EXPECT_GT(bpe.vocab(), 270);  // merges stop early when no pair repeats
  EXPECT_LE(bpe.vocab(), 300);
  const auto ids = bpe.encode(text);
  EXPECT_EQ(bpe.decode(ids), text);
  EXPECT_LT(ids.size() * 3, text.size());
  const auto path = temp_path("tok.txt");
  bpe.save(path);
  EXPECT_EQ(data::Tokenizer::load(path).encode(text), ids);
  fs::remove(path);
  EXPECT_EQ(data::Tokenizer::bytes().decode(data::Tokenizer::bytes().encode("héllo\n")), "héllo\n");
}

// A two-rank checkpoint: tensor "w" (4 x 3) split by rows between two shard files, "b" (3) whole.
std::string sample_checkpoint(const std::string& name) {
  const auto dir = temp_path(name);
  checkpoint::begin_save(dir);
  std::vector<float> w(12), b{7, 8, 9};
  for (int i = 0; i < 12; ++i) w[size_t(i)] = float(i) * 0.5f;
  checkpoint::ShardWriter r0(dir, 0), r1(dir, 1);
  r0.add("w", 4, 3, 0, 0, 2, 3, w.data());
  r1.add("w", 4, 3, 2, 0, 2, 3, w.data() + 6);
  r1.add("b", 3, 1, 0, 0, 3, 1, b.data());
  r0.finish();
  r1.finish();
  checkpoint::finish_save(dir, {{"step", 7}});
  return dir;
}

TEST(Checkpoint, round_trip_gives_whole_logical_tensors_by_name) {
  const auto dir = sample_checkpoint("c.ckpt");
  const checkpoint::CheckpointReader r(dir);
  EXPECT_EQ(r.meta()["step"], 7);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"b", "w"}));
  const auto w = r.tensor("w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{4, 3}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(w.data[size_t(i)], float(i) * 0.5f);
  EXPECT_EQ(r.tensor("b").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(r.tensor("b").data, (std::vector<float>{7, 8, 9}));
  EXPECT_FALSE(fs::exists(checkpoint::temporary_dir(dir)));
  fs::remove_all(dir);
}

TEST(Checkpoint, a_new_save_replaces_the_old_one_whole_and_a_crashed_save_leaves_it_loadable) {
  const auto dir = sample_checkpoint("swap.ckpt");
  checkpoint::begin_save(dir);  // a save that dies before its manifest: the old one stays
  checkpoint::ShardWriter half(dir, 0);
  std::vector<float> junk(6, 1.0f);
  half.add("w", 4, 3, 0, 0, 2, 3, junk.data());
  half.finish();
  EXPECT_EQ(checkpoint::CheckpointReader(dir).tensor("w").data[1], 0.5f);
  fs::remove_all(dir);
}

TEST(Checkpoint, a_block_reads_only_the_slices_it_overlaps_each_checked_alone) {
  const auto dir = sample_checkpoint("blocks.ckpt");
  const auto shard = dir + "/shard-00001.bin";
  auto bytes = read_all(shard);
  bytes[4] ^= 0x40;  // one flipped bit in w's rows 2..3 (shard 1 holds them, then b)
  write_all(shard, bytes);
  const checkpoint::CheckpointReader r(dir);
  float out[6] = {};
  r.read_block("w", 0, 1, 2, 2, out, 3);  // rows 0..1, columns 1..2: shard 0 only, never shard 1
  EXPECT_EQ(std::vector<float>(out, out + 2), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_EQ(std::vector<float>(out + 3, out + 5), (std::vector<float>{2.0f, 2.5f}));
  EXPECT_EQ(r.tensor("b").data, (std::vector<float>{7, 8, 9}));  // intact slice of the damaged file
  try {
    r.read_block("w", 1, 0, 2, 3, out, 3);  // rows 1..2 reach the damaged slice
    FAIL() << "read a corrupt slice";
  } catch (const InputError& e) {
    EXPECT_NE(problem_text(e).find("checkpoint-hash"), std::string::npos) << problem_text(e);
  }
  // A checkpoint written before slices had checksums is checked by its whole file's.
  std::string text;
  {
    const auto m = read_all(dir + "/manifest.json");
    auto j = nlohmann::json::parse(std::string(m.begin(), m.end()));
    for (auto& [name, t] : j["tensors"].items())
      for (auto& sl : t["slices"]) sl.erase("crc32c");
    text = j.dump(1);
  }
  write_all(dir + "/manifest.json", std::vector<char>(text.begin(), text.end()));
  const checkpoint::CheckpointReader old(dir);
  old.read_block("w", 0, 0, 2, 3, out, 3);  // shard 0 is intact
  EXPECT_EQ(out[5], 2.5f);
  EXPECT_THROW(old.tensor("b"), InputError);  // shard 1's file checksum no longer matches
  fs::remove_all(dir);
}

TEST(Checksum, crc32c_is_castagnolis_and_combines_like_one_pass) {
  const std::string check = "123456789";  // the CRC catalogue's check value for CRC-32C
  EXPECT_EQ(checkpoint::crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(checkpoint::crc32c_hex(checkpoint::crc32c(check.data(), check.size())), "e3069283");
  std::vector<char> bytes(100003);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 131 + i / 7);
  const uint32_t whole = checkpoint::crc32c(bytes.data(), bytes.size());
  uint32_t byte_at_a_time = 0;  // never the folding or three-stream paths that long buffers take
  for (char b : bytes) byte_at_a_time = checkpoint::crc32c(&b, 1, byte_at_a_time);
  EXPECT_EQ(whole, byte_at_a_time);
  for (size_t cut : {size_t(0), size_t(1), size_t(7), size_t(4096), size_t(50001), bytes.size()}) {
    const uint32_t a = checkpoint::crc32c(bytes.data(), cut), b = checkpoint::crc32c(bytes.data() + cut, bytes.size() - cut);
    EXPECT_EQ(checkpoint::crc32c_combine(a, b, bytes.size() - cut), whole) << cut;
    EXPECT_EQ(checkpoint::crc32c(bytes.data() + cut, bytes.size() - cut, a), whole) << cut;  // streamed
  }
}

// The share of a file's pages in the page cache (mincore).
double cached_share(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const size_t n = size_t(fs::file_size(path)), page = size_t(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
  std::vector<unsigned char> in((n + page - 1) / page);
  ::mincore(map, n, in.data());
  ::munmap(map, n);
  ::close(fd);
  return double(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; })) / double(in.size());
}

void drop_cached(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A large slice read into aligned memory (as the trainer's own buffers are) goes from the disk
// straight into place (O_DIRECT): none of it passes the page cache; its bytes and checksum are
// checked as on the other path, and a flipped bit is caught.
TEST(Checkpoint, a_large_aligned_slice_is_read_past_the_page_cache) {
  const auto dir = temp_path("direct.ckpt");
  const int64_t rows = 4 << 10, cols = 1 << 10;  // 16 MiB
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 977) * 0.25f;
  checkpoint::begin_save(dir);
  checkpoint::ShardWriter writer(dir, 0);
  writer.add("w", rows, cols, 0, 0, rows, cols, w.data());
  writer.finish();
  checkpoint::finish_save(dir, {{"step", 1}});
  const auto shard = dir + "/shard-00000.bin";
  const int probe = ::open(shard.c_str(), O_RDONLY | O_DIRECT);
  if (probe < 0) GTEST_SKIP() << "this temporary folder's file system refuses O_DIRECT";
  ::close(probe);
  drop_cached(shard);
  if (cached_share(shard) > 0.1) GTEST_SKIP() << "the shard's pages could not be dropped from the page cache";
  const size_t bytes = w.size() * sizeof(float);
  float* out = static_cast<float*>(std::aligned_alloc(4096, bytes));
  const checkpoint::CheckpointReader r(dir);
  r.read_block("w", 0, 0, rows, cols, out, cols);
  EXPECT_TRUE(std::equal(w.begin(), w.end(), out));
  EXPECT_LT(cached_share(shard), 0.05) << "the slice was read through the page cache";
  {
    const int fd = ::open(shard.c_str(), O_WRONLY);
    const char flip = char(0x5a);
    EXPECT_EQ(::pwrite(fd, &flip, 1, off_t(bytes / 2 + 3)), 1);
    ::close(fd);
  }
  drop_cached(shard);
  EXPECT_THROW(r.read_block("w", 0, 0, rows, cols, out, cols), InputError);
  std::free(out);
  fs::remove_all(dir);
}

// A slice of several read pieces (read and checked in parallel, their checksums joined): its
// checksum is the one-pass CRC-32C of its bytes, it reads back whole, and one flipped bit in its
// first or its last piece is caught.
TEST(Checkpoint, a_large_slice_read_in_pieces_is_checked_end_to_end) {
  const auto dir = temp_path("large.ckpt");
  const int64_t rows = 3 << 10, cols = 1 << 10;  // 12 MiB: three pieces
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 977) * 0.25f;
  checkpoint::begin_save(dir);
  checkpoint::ShardWriter writer(dir, 0);
  writer.add("w", rows, cols, 0, 0, rows, cols, w.data());
  writer.finish();
  checkpoint::finish_save(dir, {{"step", 1}});
  const auto m = read_all(dir + "/manifest.json");
  const auto j = nlohmann::json::parse(std::string(m.begin(), m.end()));
  EXPECT_EQ(j["tensors"]["w"]["slices"][0]["crc32c"], checkpoint::crc32c_hex(checkpoint::crc32c(w.data(), w.size() * 4)));
  EXPECT_EQ(checkpoint::CheckpointReader(dir).tensor("w").data, w);
  const auto shard = dir + "/shard-00000.bin";
  const auto intact = read_all(shard);
  for (size_t at : {size_t(5), intact.size() - 3}) {
    auto bytes = intact;
    bytes[at] ^= 0x08;
    write_all(shard, bytes);
    try {
      checkpoint::CheckpointReader(dir).tensor("w");
      ADD_FAILURE() << "read a slice with a flipped bit at byte " << at;
    } catch (const InputError& e) {
      EXPECT_NE(problem_text(e).find("checkpoint-hash"), std::string::npos) << problem_text(e);
    }
  }
  fs::remove_all(dir);
}

// Checkpoints written before CRC-32C carry FNV-1a 64 per slice and per file: they still read,
// and a flipped bit in one is still found.
TEST(Checkpoint, an_fnv1a64_checkpoint_from_before_crc32c_reads_and_is_checked) {
  const auto dir = sample_checkpoint("fnv.ckpt");
  auto j = nlohmann::json::parse(std::string(read_all(dir + "/manifest.json").data(), read_all(dir + "/manifest.json").size()));
  for (auto& [file, f] : j["files"].items()) {
    const auto bytes = read_all(dir + "/" + file);
    f.erase("crc32c");
    f["fnv1a64"] = checkpoint::fnv1a64_hex(checkpoint::fnv1a64(bytes.data(), bytes.size()));
  }
  for (auto& [name, t] : j["tensors"].items())
    for (auto& sl : t["slices"]) {
      const auto bytes = read_all(dir + "/" + sl["file"].get<std::string>());
      const size_t n = size_t(sl["extent"][0].get<int64_t>() * sl["extent"][1].get<int64_t>()) * 4;
      sl.erase("crc32c");
      sl["fnv1a64"] = checkpoint::fnv1a64_hex(checkpoint::fnv1a64(bytes.data() + sl["offset"].get<int64_t>(), n));
    }
  const std::string text = j.dump(1);
  ASSERT_EQ(text.find("crc32c"), std::string::npos);
  write_all(dir + "/manifest.json", std::vector<char>(text.begin(), text.end()));
  {
    const checkpoint::CheckpointReader r(dir);
    EXPECT_EQ(r.tensor("w").data[11], 5.5f);
    EXPECT_EQ(r.tensor("b").data, (std::vector<float>{7, 8, 9}));
  }
  auto shard = read_all(dir + "/shard-00001.bin");
  shard[shard.size() - 2] ^= 0x10;  // in b
  write_all(dir + "/shard-00001.bin", shard);
  const checkpoint::CheckpointReader r(dir);
  EXPECT_EQ(r.tensor("w").data[0], 0.0f);
  try {
    r.tensor("b");
    FAIL() << "read a corrupt fnv1a64 slice";
  } catch (const InputError& e) {
    EXPECT_NE(problem_text(e).find("checkpoint-hash"), std::string::npos) << problem_text(e);
  }
  // Without slice checksums, the file's FNV-1a 64 finds it.
  for (auto& [name, t] : j["tensors"].items())
    for (auto& sl : t["slices"]) sl.erase("fnv1a64");
  const std::string bare = j.dump(1);
  write_all(dir + "/manifest.json", std::vector<char>(bare.begin(), bare.end()));
  EXPECT_THROW(checkpoint::CheckpointReader(dir).tensor("b"), InputError);
  fs::remove_all(dir);
}

TEST(Checkpoint, truncated_or_corrupt_files_are_refused) {
  const auto dir = sample_checkpoint("bad.ckpt");
  const auto shard = dir + "/shard-00001.bin", manifest = dir + "/manifest.json";
  const auto good_shard = read_all(shard), good_manifest = read_all(manifest);
  auto expect_code = [&](const std::string& code) {
    try {
      checkpoint::CheckpointReader r(dir);
      r.tensor("w");
      FAIL() << "accepted a bad checkpoint (" << code << ")";
    } catch (const InputError& e) {
      EXPECT_NE(problem_text(e).find(code), std::string::npos) << problem_text(e);
    }
  };
  auto bad = good_shard;
  bad.resize(bad.size() / 2);
  write_all(shard, bad);
  expect_code("checkpoint-size");
  bad = good_shard;
  bad[bad.size() / 2] ^= 0x40;  // one flipped bit in the weights
  write_all(shard, bad);
  expect_code("checkpoint-hash");
  write_all(shard, good_shard);
  std::string text(good_manifest.begin(), good_manifest.end());
  write_all(manifest, std::vector<char>(text.begin(), text.begin() + long(text.size() / 2)));
  expect_code("checkpoint-manifest");
  std::string v = text;
  v.replace(v.find("\"version\": 2"), 12, "\"version\": 9");
  write_all(manifest, std::vector<char>(v.begin(), v.end()));
  expect_code("checkpoint-version");
  fs::remove_all(dir);
  expect_code("checkpoint-open");
}

}  // namespace
