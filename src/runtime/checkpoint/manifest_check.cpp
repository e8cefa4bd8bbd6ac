#include "runtime/checkpoint/manifest_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/checked_size.h"
#include "core/model_spec.h"

namespace trident::checkpoint {

namespace {

using json = nlohmann::json;

const std::string kRedo = "use an intact checkpoint directory written by `trident train --checkpoint DIR`";

// A value of the wrong kind in the manifest: reported by the caller with where it is.
struct Malformed {
  std::string what;
};

int64_t integer(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key)) throw Malformed{"lacks '" + key + "'"};
  const json& v = j.at(key);
  if (!v.is_number_integer()) throw Malformed{"'" + key + "' is " + v.dump() + ", not a whole number"};
  return v.get<int64_t>();
}

// [a, b] (or [a] when `allow_one`) of whole numbers.
std::vector<int64_t> integers(const json& j, const std::string& key, size_t want, bool allow_one = false) {
  if (!j.is_object() || !j.contains(key)) throw Malformed{"lacks '" + key + "'"};
  const json& v = j.at(key);
  if (!v.is_array() || !(v.size() == want || (allow_one && v.size() == 1)))
    throw Malformed{fmt::format("'{}' is {}, not a list of {} whole numbers", key, v.dump().substr(0, 80), want)};
  std::vector<int64_t> out;
  for (const json& x : v) {
    if (!x.is_number_integer()) throw Malformed{fmt::format("'{}' holds {}, not a whole number", key, x.dump())};
    out.push_back(x.get<int64_t>());
  }
  return out;
}

std::string text(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key)) throw Malformed{"lacks '" + key + "'"};
  if (!j.at(key).is_string()) throw Malformed{"'" + key + "' is " + j.at(key).dump().substr(0, 80) + ", not a string"};
  return j.at(key).get<std::string>();
}

// A shard name the reader may open: a plain file name inside the checkpoint directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

struct Slice {
  std::string file;
  int64_t offset, r0, c0, nr, nc;
};

// The model sizes a checkpoint's meta describes: positive whole numbers within the options' bounds.
void check_model(const json& model, int64_t total_bytes, const std::string& where, Problems& problems) {
  try {
    if (!model.is_object()) throw Malformed{"is " + model.dump().substr(0, 80) + ", not a table of sizes"};
    ModelSpec m;
    m.name = text(model, "name");
    m.layers = integer(model, "layers");
    m.hidden = integer(model, "hidden");
    m.heads = integer(model, "heads");
    m.ffn_hidden = integer(model, "ffn_hidden");
    m.seq_len = integer(model, "seq_len");
    m.vocab = integer(model, "vocab");
    m.kv_heads = model.contains("kv_heads") ? integer(model, "kv_heads") : m.heads;
    if (model.contains("family") && text(model, "family") == "llama") m.family = ModelFamily::Llama;
    if (model.contains("tied_embeddings") && !model.at("tied_embeddings").is_boolean())
      throw Malformed{"'tied_embeddings' is not true or false"};
    if (model.contains("tied_embeddings")) m.tied = model.at("tied_embeddings").get<bool>() ? 1 : 0;
    if (model.contains("head_dim")) m.head_size = integer(model, "head_dim");
    if (model.contains("attention_sinks") && !model.at("attention_sinks").is_boolean())
      throw Malformed{"'attention_sinks' is not true or false"};
    if (model.contains("attention_sinks")) m.attention_sinks = model.at("attention_sinks").get<bool>();  // [heads] a layer
    if (model.contains("rope_theta") && !model.at("rope_theta").is_number())
      throw Malformed{"'rope_theta' is not a number"};
    // A mixture-of-experts model's sizes (absent: dense).
    const auto optional = [&](const char* key) { return model.contains(key) ? integer(model, key) : int64_t(0); };
    m.experts = optional("experts");
    m.experts_per_token = optional("experts_per_token");
    m.expert_ffn_hidden = optional("expert_ffn_hidden");
    m.shared_experts = optional("shared_experts");
    m.moe_dense_layers = optional("moe_dense_layers");
    m.moe_layer_freq = model.contains("moe_layer_freq") ? integer(model, "moe_layer_freq") : 1;
    if (model.contains("capacity_factor") && !model.at("capacity_factor").is_number())
      throw Malformed{"'capacity_factor' is not a number"};
    if (model.contains("capacity_factor")) m.capacity_factor = model.at("capacity_factor").get<double>();
    Problems sizes;
    validate_model(m, sizes);  // positive sizes, heads dividing hidden, a parameter count within 64 bits
    for (const Problem& x : sizes.list()) problems.add(where + ": " + x.what, kRedo, "checkpoint-meta");
    if (!sizes.empty()) return;
    // Every parameter is stored in f32 once at least: a model larger than the shards is not this checkpoint's.
    const CheckedCount need = CheckedCount(count_parameters(m).total) * 4;
    if (!need.ok() || need.value_or(0) > total_bytes)
      problems.add(fmt::format("{}: a model of {} parameters ({} bytes in f32) but the shards hold {} bytes", where,
                               count_parameters(m).total, need.value_or(-1), total_bytes),
                   kRedo, "checkpoint-meta");
  } catch (const Malformed& e) {
    problems.add(where + " " + e.what, kRedo, "checkpoint-meta");
  }
}

// Shard files: plain names, their size on disk as the manifest says. Returns the bytes of each
// intact one; their sum goes to `total`.
std::map<std::string, int64_t> check_files(const json& m, const std::string& dir, CheckedCount& total,
                                           Problems& problems) {
  std::map<std::string, int64_t> file_bytes;
  for (const auto& [file, f] : m.at("files").items()) {
    const std::string where = "shard '" + file + "' of checkpoint '" + dir + "'";
    if (!plain_file_name(file)) {
      problems.add(where + " is not a file name inside the checkpoint directory", kRedo, "checkpoint-manifest");
      continue;
    }
    try {
      const int64_t bytes = integer(f, "bytes");
      // CRC-32C (8 hex digits); checkpoints written before it: FNV-1a 64 (16).
      const bool crc = f.is_object() && f.contains("crc32c");
      const std::string hash = text(f, crc ? "crc32c" : "fnv1a64");
      const size_t digits = crc ? 8 : 16;
      if (bytes < 0 || hash.size() != digits || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw Malformed{fmt::format("has bytes {} and checksum '{}' (want a size and {} hex digits)", bytes,
                                    hash.substr(0, 40), digits)};
      struct stat st {};
      const std::string on_disk = dir + "/" + file;
      if (::stat(on_disk.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        problems.add("checkpoint shard '" + on_disk + "' is missing", kRedo, "checkpoint-size");
        continue;
      }
      if (int64_t(st.st_size) != bytes) {
        problems.add(fmt::format("checkpoint shard '{}' has {} bytes, the manifest says {} (truncated?)", on_disk,
                                 int64_t(st.st_size), bytes),
                     kRedo, "checkpoint-size");
        continue;
      }
      file_bytes[file] = bytes;
      total = total + bytes;
    } catch (const Malformed& e) {
      problems.add(where + " " + e.what, kRedo, "checkpoint-manifest");
    }
  }
  return file_bytes;
}

// Meta: what generate, export and resume read from it.
void check_meta(const json& meta, int64_t total_bytes, Problems& problems) {
  if (meta.contains("model")) check_model(meta.at("model"), total_bytes, "the checkpoint's model", problems);
  if (meta.contains("step") && !(meta.at("step").is_number_unsigned() || (meta.at("step").is_number_integer() &&
                                                                          meta.at("step").get<int64_t>() >= 0)))
    problems.add("the checkpoint's step is " + meta.at("step").dump().substr(0, 80) + ", not a whole number of 0 or more",
                 kRedo, "checkpoint-meta");
  if (meta.contains("seed") && !meta.at("seed").is_number_unsigned())
    problems.add("the checkpoint's seed is " + meta.at("seed").dump().substr(0, 80) + ", not a whole number of 0 or more",
                 kRedo, "checkpoint-meta");
  if (meta.contains("tokenizer") && !meta.at("tokenizer").is_object())
    problems.add("the checkpoint's tokenizer is not a table", kRedo, "checkpoint-meta");
}

// One tensor: f32, a shape of 1 or 2 positive sizes within the data on disk, slices inside the
// tensor and their file that cover it exactly once. Throws Malformed.
void check_tensor(const json& t, const std::map<std::string, int64_t>& file_bytes, int64_t total_bytes) {
  constexpr size_t kMostSlices = 4096;  // more than any layout Trident trains writes per tensor
  if (!t.is_object()) throw Malformed{"is not a table"};
  const std::string dtype = t.contains("dtype") ? text(t, "dtype") : "f32";
  if (dtype != "f32") throw Malformed{"has dtype '" + dtype + "'; this Trident reads f32 tensors"};
  const std::vector<int64_t> shape = integers(t, "shape", 2, true);
  const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
  if (rows <= 0 || cols <= 0) throw Malformed{fmt::format("has shape {}, sizes must be positive", t.at("shape").dump())};
  const CheckedCount elements = CheckedCount(rows) * cols, bytes = elements * 4;
  if (!bytes.ok() || bytes.value_or(0) > total_bytes)
    throw Malformed{fmt::format("has shape {} ({} bytes in f32) but the shards hold {} bytes in all",
                                t.at("shape").dump(), bytes.ok() ? std::to_string(bytes.value_or(0)) : "over 2^62",
                                total_bytes)};
  if (!t.contains("slices") || !t.at("slices").is_array() || t.at("slices").empty())
    throw Malformed{"has no list of slices"};
  if (t.at("slices").size() > kMostSlices)
    throw Malformed{fmt::format("is cut in {} slices, more than {}", t.at("slices").size(), kMostSlices)};
  std::vector<Slice> slices;
  CheckedCount covered = 0;
  for (const json& s : t.at("slices")) {
    Slice x{text(s, "file"), integer(s, "offset"), 0, 0, 0, 0};
    for (const char* key : {"crc32c", "fnv1a64"})
      if (s.contains(key)) text(s, key);  // a slice's own checksum (optional): a string
    const auto start = integers(s, "start", 2), extent = integers(s, "extent", 2);
    x.r0 = start[0], x.c0 = start[1], x.nr = extent[0], x.nc = extent[1];
    auto in_file = file_bytes.find(x.file);
    if (in_file == file_bytes.end())
      throw Malformed{"has a slice in '" + x.file + "', which is not one of the manifest's intact shard files"};
    const CheckedCount end = CheckedCount(x.offset) + CheckedCount(x.nr) * x.nc * 4;
    if (x.r0 < 0 || x.c0 < 0 || x.nr <= 0 || x.nc <= 0 || x.r0 > rows - x.nr || x.c0 > cols - x.nc)
      throw Malformed{fmt::format("has a slice at [{}, {}] of [{}, {}] outside its shape [{}, {}]", x.r0, x.c0,
                                  x.nr, x.nc, rows, cols)};
    if (x.offset < 0 || !end.ok() || end.value_or(0) > in_file->second)
      throw Malformed{fmt::format("has a slice of {} x {} at byte {} of '{}', which has {} bytes", x.nr, x.nc,
                                  x.offset, x.file, in_file->second)};
    covered = covered + CheckedCount(x.nr) * x.nc;
    slices.push_back(x);
  }
  // Overlaps, by rows then columns: sorted by first row, a slice can only meet the ones
  // that start before it ends.
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) { return a.r0 < b.r0; });
  for (size_t i = 0; i < slices.size(); ++i)
    for (size_t j = i + 1; j < slices.size() && slices[j].r0 < slices[i].r0 + slices[i].nr; ++j)
      if (slices[j].c0 < slices[i].c0 + slices[i].nc && slices[i].c0 < slices[j].c0 + slices[j].nc)
        throw Malformed{fmt::format("has slices that overlap (rows from {} and from {})", slices[i].r0,
                                    slices[j].r0)};
  if (!covered.ok() || covered.value_or(0) != elements.value_or(0))
    throw Malformed{fmt::format("has slices holding {} of its {} elements", covered.value_or(-1),
                                elements.value_or(0))};
}

}  // namespace


json parse_manifest(std::istream& in, const std::string& path, Problems& problems) {
  // One set of keys per open object: a key seen twice in the same object is reported.
  std::vector<std::set<std::string>> open;
  std::vector<std::string> duplicates;
  const json::parser_callback_t keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    else if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
    else if (event == json::parse_event_t::key && !open.empty() && parsed.is_string() &&
             !open.back().insert(parsed.get<std::string>()).second)
      duplicates.push_back(parsed.get<std::string>());
    return true;
  };
  json manifest;
  try {
    manifest = json::parse(in, keys);
  } catch (const json::parse_error& e) {
    problems.add(fmt::format("'{}' is not valid JSON (it stops making sense at byte {})", path, e.byte), kRedo,
                 "checkpoint-manifest");
    return nullptr;
  } catch (const json::exception&) {  // the parser's other refusal: a number past every type (out_of_range 406)
    problems.add(fmt::format("'{}' holds a number too large to read: it is damaged or not a Trident manifest", path),
                 kRedo, "checkpoint-manifest");
    return nullptr;
  }
  for (const std::string& key : duplicates)
    problems.add("'" + path + "' gives the key '" + key + "' twice in one table (which one holds?)", kRedo,
                 "checkpoint-manifest");
  return duplicates.empty() ? manifest : json(nullptr);
}

void check_manifest(const json& m, const std::string& dir, int version, Problems& problems) {
  const std::string path = dir + "/manifest.json";
  if (!m.is_object() || !m.contains("format") || m.at("format") != "trident-checkpoint") {
    problems.add("'" + path + "' is not a Trident checkpoint manifest", kRedo, "checkpoint-manifest");
    return;
  }
  if (!m.contains("version") || m.at("version") != version) {
    problems.add(fmt::format("checkpoint '{}' has version {}, this Trident reads version {}", dir,
                             m.contains("version") ? m.at("version").dump() : "(none)", version),
                 kRedo, "checkpoint-version");
    return;
  }
  for (const char* key : {"meta", "files", "tensors"})
    if (!m.contains(key) || !m.at(key).is_object()) {
      problems.add("'" + path + "' lacks its '" + key + "' table", kRedo, "checkpoint-manifest");
      return;
    }

  CheckedCount total = 0;
  const std::map<std::string, int64_t> file_bytes = check_files(m, dir, total, problems);
  const int64_t total_bytes = total.value_or(kMaxCount);
  check_meta(m.at("meta"), total_bytes, problems);
  for (const auto& [name, t] : m.at("tensors").items()) {
    try {
      check_tensor(t, file_bytes, total_bytes);
    } catch (const Malformed& e) {
      problems.add("tensor '" + name + "' of checkpoint '" + dir + "' " + e.what, kRedo, "checkpoint-manifest");
    }
  }
}

}  // namespace trident::checkpoint
