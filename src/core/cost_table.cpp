#include "core/cost_table.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/suggest.h"

namespace trident {

extern const char* const kBuiltinCostToml;  // generated from data/cost/builtin.toml (src/core/CMakeLists.txt)

const std::vector<CostField>& cost_fields() {
  // Ranges: a share of a peak is above 0 (a time divided by it) and at most 1 (no kernel beats
  // the hardware); the other factors are bounded far beyond any measured value (a GEMM dimension
  // of a million, a second per launch, a hundred bytes moved per byte stored).
  constexpr double kShare = 1, kFactor = 100, kDim = 1e6;
  static const std::vector<CostField> fields = {
      {"gemm_peak_efficiency", &CostTable::gemm_peak_efficiency, "share of the 16-bit peak a large GEMM reaches", 0,
       kShare, true},
      {"gemm_half_dim", &CostTable::gemm_half_dim, "GEMM dimension that halves the efficiency", 0, kDim, false},
      {"fp8_gemm_efficiency", &CostTable::fp8_gemm_efficiency, "share of the FP8 peak a large FP8 GEMM reaches", 0,
       kShare, true},
      {"attention_efficiency", &CostTable::attention_efficiency, "fused attention: share of the 16-bit peak", 0,
       kShare, true},
      {"flash_backward_factor", &CostTable::flash_backward_factor, "fused attention backward over forward", 0, kFactor,
       true},
      {"hbm_efficiency", &CostTable::hbm_efficiency, "share of HBM bandwidth memory-bound kernels reach", 0, kShare,
       true},
      {"elementwise_traffic_per_stored_byte", &CostTable::elementwise_traffic_per_stored_byte,
       "HBM bytes of non-GEMM kernels per stored activation byte", 0, kFactor, false},
      {"fp8_cast_bytes_per_element", &CostTable::fp8_cast_bytes_per_element, "HBM bytes to cast one GEMM input to FP8",
       0, kFactor, false},
      {"nvlink_efficiency", &CostTable::nvlink_efficiency, "NVLink collectives: bus bandwidth over link bandwidth", 0,
       kShare, true},
      {"pcie_efficiency", &CostTable::pcie_efficiency, "PCIe collectives: bus bandwidth over link bandwidth", 0, kShare,
       true},
      {"network_efficiency", &CostTable::network_efficiency, "InfiniBand/Ethernet: bus bandwidth over link bandwidth",
       0, kShare, true},
      {"alltoall_efficiency", &CostTable::alltoall_efficiency,
       "EP all-to-all: achieved rate over link bandwidth (0: the link's collective share above; up to 4, both "
       "directions of shared memory at once)",
       0, 4 * kShare, false},
      {"alltoall_latency_us", &CostTable::alltoall_latency_us,
       "EP all-to-all: fixed cost of one call per peer, microseconds (the link's latency where larger)", 0, kDim, false},
      {"kernel_launch_us", &CostTable::kernel_launch_us, "fixed cost per kernel call (launch, dispatch, ramp and tail), microseconds", 0, kDim, false},
      {"host_launch_us", &CostTable::host_launch_us,
       "host time to issue one kernel from Python (PyTorch eager + the framework), microseconds: a floor under a "
       "micro-batch's time",
       0, kDim, false},
      {"overlap_slowdown", &CostTable::overlap_slowdown, "slowdown of compute per second of hidden communication", 0,
       kShare, false},
      {"dp_bucket_mb", &CostTable::dp_bucket_mb, "gradient bucket size, MB", 0, kDim, true},
      {"optimizer_bytes_per_param", &CostTable::optimizer_bytes_per_param,
       "optimizer HBM bytes per parameter (0: from the precision)", 0, kFactor * 10, false},
  };
  return fields;
}

std::string range_text(const CostField& f) {
  return f.above_min ? fmt::format("above {:g} and at most {:g}", f.min, f.max) : fmt::format("{:g} .. {:g}", f.min, f.max);
}

std::string cost_value_problem(const CostField& f, double value, const std::string& shown) {
  const bool in = std::isfinite(value) && (f.above_min ? value > f.min : value >= f.min) && value <= f.max;
  if (in) return "";
  return fmt::format("{} is outside its range ({})", shown, range_text(f));
}

const std::string& builtin_cost_text() {
  static const std::string text = kBuiltinCostToml;
  return text;
}

namespace {

std::string canonical_key(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

const CostField* find_field(const std::string& key) {
  const std::string k = canonical_key(key);
  for (const auto& f : cost_fields())
    if (k == f.name) return &f;
  return nullptr;
}

// The catalog key of a GPU ("h100-80g"), or its name when it is not from the catalog.
std::string gpu_key(const GpuSpec& gpu) {
  for (const auto& k : gpu_preset_names())
    if (gpu_preset(k).name == gpu.name) return k;
  return gpu.name;
}

bool set_fields(const toml::table& t, const std::string& where, CostTable& table, Problems& problems) {
  bool any = false;
  for (const auto& [k, node] : t) {
    const std::string key(k.str());
    const CostField* f = find_field(key);
    if (!f) {
      std::vector<std::string> known;
      for (const auto& field : cost_fields()) known.push_back(field.name);
      problems.add("unknown cost key '" + key + "' in " + where,
                   did_you_mean(key, known) + "use one of the keys of data/cost/builtin.toml (run with --help to list them)", "cost-key");
      continue;
    }
    auto v = node.value<double>();
    if (!v) {
      problems.add("cost key '" + key + "' in " + where + " must be a number", "write " + key + " = 0.8", "cost-key");
      continue;
    }
    const std::string bad = cost_value_problem(*f, *v, fmt::format("cost key '{}' in {} = {}", key, where, *v));
    if (!bad.empty()) {
      problems.add(bad, "give " + key + " a value " + range_text(*f), "cost-range");
      continue;
    }
    table.*(f->member) = *v;
    any = true;
  }
  return any;
}

// A GPU table's `borrow = "KEY"`: the table of the same file whose values it takes before its own
// (one level: the borrowed table may not borrow in turn). Null, with a problem, when it is not that.
const toml::table* borrowed_table(const toml::table& root, const std::string& name, const toml::table& t,
                                  const std::string& origin, Problems& problems) {
  const toml::node* b = t.get("borrow");
  if (!b) return nullptr;
  const auto other = b->value<std::string>();
  const toml::table* to = other ? root[*other].as_table() : nullptr;
  if (!to || *other == name || !is_gpu_preset(*other) || to->contains("borrow")) {
    problems.add("borrow in [" + name + "] of " + origin + " must name another GPU's table of the same file that borrows none",
                 "write borrow = \"gb200-186g\" with a [gb200-186g] table in the file, or give the keys themselves", "cost-key");
    return nullptr;
  }
  return to;
}

// A GPU's table: the borrowed table's values, then its own keys over them.
void set_gpu_table(const toml::table& root, const std::string& name, const toml::table& t, const std::string& origin,
                   CostTable& table, Problems& problems) {
  if (const toml::table* from = borrowed_table(root, name, t, origin, problems)) {
    const std::string other = *t.get("borrow")->value<std::string>();
    set_fields(*from, origin + " [" + other + "]", table, problems);
    table.borrowed_from = other;
  }
  toml::table own = t;
  own.erase("borrow");
  set_fields(own, origin + " [" + name + "]", table, problems);
}

}  // namespace

void apply_cost_toml(const std::string& text, const std::string& origin, const GpuSpec& gpu, CostTable& table,
                     Problems& problems) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    problems.add("malformed TOML in " + origin + " at line " + std::to_string(e.source().begin.line) + ": " +
                     std::string(e.description()),
                 "fix the TOML syntax of the cost table", "cost-file");
    return;
  }
  const std::string key = gpu_key(gpu);
  // Flat keys and [cost] and [default] apply to every GPU; a table named by the GPU's key to it.
  toml::table flat;
  for (const auto& [k, node] : root)
    if (!node.is_table()) flat.insert(k, node);
  set_fields(flat, origin, table, problems);
  for (const char* common : {"cost", "default"})
    if (const toml::table* t = root[common].as_table()) set_fields(*t, origin + " [" + common + "]", table, problems);
  // A run config (as `trident bench` writes: [cluster] and [cost]) may be given as a cost file:
  // its other tables are not cost tables.
  static const std::set<std::string> config_tables = {"model", "cluster", "layout", "training", "distributed",
                                                      "output"};
  for (const auto& [k, node] : root) {
    const std::string name(k.str());
    const toml::table* t = node.as_table();
    if (!t || name == "cost" || name == "default" || config_tables.count(name)) continue;
    if (!is_gpu_preset(name) && name != key) {
      problems.add("unknown table [" + name + "] in cost file " + origin,
                   did_you_mean(name, gpu_preset_names()) + "name a GPU of the catalog (" + join_choices(gpu_preset_names()) + "), or use [default]",
                   "cost-file");
      continue;
    }
    if (name == key) {
      set_gpu_table(root, name, *t, origin, table, problems);
    } else {
      CostTable scratch;  // still check the keys of other GPUs' tables
      set_gpu_table(root, name, *t, origin, scratch, problems);
    }
  }
}

CostTable builtin_cost(const GpuSpec& gpu) {
  // Parsed once per GPU: the search asks for it per candidate.
  static std::mutex mutex;
  static std::map<std::string, CostTable> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(gpu.name);
  if (it != cache.end()) return it->second;
  CostTable t;
  Problems p;
  apply_cost_toml(builtin_cost_text(), "data/cost/builtin.toml", gpu, t, p);
  t.gpu = gpu_key(gpu);
  t.source = "built-in";
  // [default] holds the A100's kernel efficiencies: another GPU without a table borrows them; a
  // table that borrows another GPU's (`borrow`) is not fitted to this GPU either.
  const toml::table root = toml::parse(std::string_view(builtin_cost_text()), std::string_view("data/cost/builtin.toml"));
  t.calibrated = (root.contains(t.gpu) && t.borrowed_from.empty()) || t.gpu.rfind("a100", 0) == 0;
  cache.emplace(gpu.name, t);
  return t;
}

std::vector<OptionDef> cost_options() {
  std::vector<OptionDef> out = {input_path({"cost", "cost",
                                             "cost table TOML (the form of data/cost/builtin.toml) over the built-in one",
                                             false, "FILE", "built-in"})};
  for (const auto& f : cost_fields()) {
    std::string name = f.name;
    std::replace(name.begin(), name.end(), '_', '-');
    // The range is the field's (checked in resolve_cost, with an open bound for shares).
    out.push_back({name, "cost", std::string(f.help) + "; " + range_text(f), false, "NUM", "built-in table of the GPU",
                   -1e18, 1e18});
  }
  return out;
}

CostTable resolve_cost(const OptionValues& values, const GpuSpec& gpu, Problems& problems) {
  CostTable t = builtin_cost(gpu);
  std::vector<std::string> sources = {"built-in"};
  if (auto path = values.get_string("cost")) {
    if (auto text = read_settings_file(*path, "cost table", "--cost", "cost-file", problems)) {
      apply_cost_toml(*text, *path, gpu, t, problems);
      sources.push_back(*path);
      t.calibrated = true;  // the user's own table for this GPU
    }
  }
  bool keys = false;
  for (const auto& f : cost_fields()) {
    std::string name = f.name;
    std::replace(name.begin(), name.end(), '_', '-');
    if (auto v = values.get_double(name, problems)) {
      const std::string from = values.source(name) == "--" + name ? "" : " (from " + values.source(name) + ")";
      const std::string bad = cost_value_problem(f, *v, "--" + name + " " + *values.get_string(name) + from);
      if (!bad.empty()) {
        problems.add(bad, "give --" + name + " a value " + range_text(f), "cost-range");
        continue;
      }
      t.*(f.member) = *v;
      keys = true;
    }
  }
  if (keys) {
    sources.push_back("[cost] keys");
    t.calibrated = true;  // the user's own values (as trident bench measures them) stand for the GPU
  }
  t.source = fmt::format("{}", [&] {
    std::string s;
    for (const auto& x : sources) s += (s.empty() ? "" : " + ") + x;
    return s;
  }());
  return t;
}

std::string calibration_warning(const CostTable& t) {
  if (t.calibrated) return "";
  const std::string used = t.borrowed_from.empty() ? "the [default] table of data/cost/builtin.toml (the A100's kernel efficiencies)"
                                                    : "the [" + t.borrowed_from + "] table of data/cost/builtin.toml, borrowed";
  return fmt::format("no calibrated cost table for GPU {}: its times use {}{}, not fitted to any run on this GPU; "
                     "give --cost FILE with a [{}] table",
                     t.gpu, used, t.source == "built-in" ? "" : " with " + t.source, t.gpu);
}

std::string cost_toml(const CostTable& t, const std::vector<std::string>& comments) {
  std::string s;
  for (const auto& c : comments) s += "# " + c + "\n";
  s += "[cost]\n";
  for (const auto& f : cost_fields()) s += fmt::format("{} = {}\n", f.name, t.*(f.member));  // shortest exact form
  return s;
}

std::string describe(const CostTable& t) {
  std::string s;
  for (const auto& f : cost_fields()) s += fmt::format("{}{} {:g}", s.empty() ? "" : ", ", f.name, t.*(f.member));
  return s;
}

}  // namespace trident
