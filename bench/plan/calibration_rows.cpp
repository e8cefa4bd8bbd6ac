#include "calibration_rows.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/problems.h"

namespace trident::calibration {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

// The cluster preset whose GPU is `gpu` (catalog key), with 8 GPUs per node.
ClusterSpec cluster_for(const std::string& gpu) {
  for (const auto& name : cluster_preset_names()) {
    ClusterSpec c = cluster_preset(name);
    if (c.gpu.name == gpu_preset(gpu).name && c.intra.kind == LinkKind::NVLink) return c;
  }
  ClusterSpec c = cluster_preset("dgx-a100-80g");
  c.gpu = gpu_preset(gpu);
  return c;
}

}  // namespace

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({{"cannot read calibration file " + path, "check the path", "calibration"}});
  const std::string source = std::filesystem::path(path).stem().string();
  std::vector<Row> rows;
  std::vector<std::string> header;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto cells = split(line);
    if (header.empty()) {
      header = cells;
      continue;
    }
    auto col = [&](const std::string& name) -> std::string {
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i < cells.size() ? cells[i] : "";
      return "";
    };
    auto num = [&](const std::string& name) -> int64_t {
      try {
        return std::stoll(col(name));
      } catch (const std::exception&) {
        throw InputError({{path + " line " + std::to_string(line_no) + ": column '" + name + "' is '" + col(name) +
                               "', not a whole number",
                           "fix the row", "calibration"}});
      }
    };
    // A 0/1 switch: anything else is an error, never read as on or off.
    auto zero_or_one = [&](const std::string& name) -> bool {
      const int64_t x = num(name);
      if (x != 0 && x != 1)
        throw InputError({{path + " line " + std::to_string(line_no) + ": column '" + name + "' is '" + col(name) +
                               "', not 0 or 1",
                           "write 0 (off) or 1 (on), or leave it empty for the default", "calibration"}});
      return x == 1;
    };
    Row r;
    r.source = source;
    r.name = col("name");
    RunSpec& run = r.run;
    run.model.name = r.name;
    run.model.family = col("family") == "llama" ? ModelFamily::Llama : ModelFamily::GPT;
    run.model.layers = num("layers");
    run.model.hidden = num("hidden");
    run.model.heads = num("heads");
    run.model.kv_heads = col("kv_heads").empty() ? run.model.heads : num("kv_heads");
    run.model.ffn_hidden = col("ffn_hidden").empty() ? 4 * run.model.hidden : num("ffn_hidden");
    run.model.seq_len = num("seq");
    run.model.vocab = num("vocab");
    // 0: the run trained without dropout (no masks, no dropped attention probabilities stored);
    // 1: with; empty: the family's default.
    if (!col("dropout").empty()) run.model.dropout = zero_or_one("dropout") ? 1 : 0;
    run.cluster = cluster_for(col("gpu"));
    run.cluster.gpus_per_node = num("gpus_per_node");
    // Rack-scale systems: the hosts a run's NVLink domain spans (GB200 NVL72: up to 18).
    if (!col("hosts_per_nvlink_domain").empty()) run.cluster.hosts_per_nvlink_domain = num("hosts_per_nvlink_domain");
    const int64_t gpus = num("gpus");
    run.cluster.nodes = (gpus + run.cluster.gpus_per_node - 1) / run.cluster.gpus_per_node;
    run.layout.tp = num("tp");
    run.layout.pp = num("pp");
    run.layout.cp = col("cp").empty() ? 1 : num("cp");
    run.layout.dp = num("dp");
    run.layout.order = col("order").empty() ? "tp-dp-pp" : col("order");
    ExecutionSpec& x = run.exec;
    if (!col("stack").empty()) {
      const StackPreset* s = find_stack(col("stack"));
      if (!s) throw InputError({{path + ": unknown stack '" + col("stack") + "'", "use " + join_choices(stack_names()), "calibration"}});
      apply_stack(*s, x);
      x.stack = s->name;
    }
    x.global_batch_size = num("global_batch");
    x.micro_batch_size = num("micro_batch");
    x.virtual_stages = num("virtual_stages");
    x.schedule = x.virtual_stages > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
    // A setting the parser does not know is an error, never the default.
    auto parsed = [&](bool ok, const std::string& name, const char* fix) {
      if (!ok)
        throw InputError({{path + " line " + std::to_string(line_no) + ": column '" + name + "' is '" + col(name) + "'",
                           fix, "calibration"}});
    };
    parsed(parse_recompute(col("recompute"), x.recompute), "recompute", "write none, selective or full");
    x.sequence_parallel = zero_or_one("sequence_parallel");
    if (!col("precision").empty())
      parsed(parse_precision(col("precision"), x.precision), "precision", "write bf16, fp16, fp32 or fp8");
    if (!col("zero").empty()) x.zero = int(num("zero"));
    if (!col("attention").empty())
      parsed(parse_attention(col("attention"), x.attention), "attention", "write flash or unfused");
    if (!col("overlap").empty())
      parsed(parse_overlap(col("overlap"), x.overlap), "overlap",
             "write tp, dp, pp joined by + (a comma would split the cell), none or all");
    if (!col("grad_bits").empty()) x.grad_bits = int(num("grad_bits"));
    // Recipe settings over the stack's (0/1): the p2p volume and FP8 cast fusion a source states.
    for (auto [name, setting] : {std::pair{"pipeline_sends_whole_tensor", &x.recipe.pipeline_sends_whole_tensor},
                                 {"dp_after_pipeline_flush", &x.recipe.dp_after_pipeline_flush},
                                 {"fp8_fused_casts", &x.recipe.fp8_fused_casts},
                                 {"fused_swiglu", &x.recipe.fused_swiglu}})
      if (!col(name).empty()) *setting = zero_or_one(name);
    if (!col("stack_compute_efficiency").empty()) {
      double k = 0;
      try {
        k = std::stod(col("stack_compute_efficiency"));
      } catch (const std::exception&) {
      }
      if (!(k > 0 && k <= 1))
        throw InputError({{path + " line " + std::to_string(line_no) + ": stack_compute_efficiency '" +
                               col("stack_compute_efficiency") + "' is not a number above 0 and at most 1",
                           "fix the row", "calibration"}});
      x.recipe.compute_efficiency = k;
    }
    try {
      r.published_s = std::stod(col("iteration_s"));
    } catch (const std::exception&) {
      throw InputError({{path + " line " + std::to_string(line_no) + ": no iteration_s", "fix the row", "calibration"}});
    }
    r.published_mfu = col("mfu_pct");
    r.fitted = col("fitted") == "1";
    Problems p;
    check_run(run, true, p);
    p.throw_if_any();
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<Row> read_folder(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".csv") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  std::vector<Row> rows;
  for (const auto& f : files) {
    auto more = read_rows(f);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

std::vector<Row> read_rows_of(const std::vector<std::string>& paths) {
  std::vector<Row> rows;
  for (const auto& p : paths) {
    auto more = std::filesystem::is_directory(p) ? read_folder(p) : read_rows(p);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

}  // namespace trident::calibration
