#include "core/dimensions.h"

#include "core/mesh.h"

namespace trident {

const std::vector<Dimension>& dimensions() {
  static const std::vector<Dimension> table = {
      {.dim = Dim::TP, .name = "tp", .title = "tensor parallel", .help = "tensor-parallel size", .default_text = "1",
       .dense = true, .size = &Layout::tp, .order_optional = false, .ordered = true, .riders = {"sequence-parallel"}, .support = {},
       .megatron_flag = "--tensor-model-parallel-size", .torchtitan_key = "parallelism.tensor_parallel_degree"},
      {.dim = Dim::PP, .name = "pp", .title = "pipeline parallel", .help = "pipeline-parallel size (stages)",
       .default_text = "1", .dense = true, .size = &Layout::pp, .order_optional = false, .ordered = true,
       .riders = {"schedule", "virtual-stages"}, .support = {}, .megatron_flag = "--pipeline-model-parallel-size",
       .torchtitan_key = "parallelism.pipeline_parallel_degree"},
      {.dim = Dim::DP, .name = "dp", .title = "data parallel",
       .help = "data-parallel size (replicas); default world / (tp*cp*pp)", .default_text = "world/(tp*cp*pp)",
       .dense = true, .size = &Layout::dp, .order_optional = false, .ordered = true, .riders = {"zero"}, .support = {},
       .megatron_flag = "", .torchtitan_key = "parallelism.data_parallel_shard_degree"},  // Megatron derives dp
      {.dim = Dim::CP, .name = "cp", .title = "context parallel",
       .help = "context-parallel size (sequence split over ranks, ring attention)", .default_text = "1",
       .dense = true, .size = &Layout::cp, .order_optional = true, .ordered = true, .riders = {}, .support = {},
       .megatron_flag = "--context-parallel-size", .torchtitan_key = "parallelism.context_parallel_degree"},
      {.dim = Dim::EP, .name = "ep", .title = "expert parallel",
       .help = "expert-parallel size (experts sharded over ep ranks of the expert grid; ep x etp divides tp x cp x dp)", .default_text = "1", .dense = false,
       .size = &Layout::ep, .order_optional = true, .ordered = true, .riders = {},
       .support = {},
       .megatron_flag = "--expert-model-parallel-size", .torchtitan_key = "parallelism.expert_parallel_degree"},
      {.dim = Dim::ETP, .name = "etp", .title = "expert tensor parallel",
       .help = "expert-tensor-parallel size: each routed expert split over etp ranks; the expert grid etp x ep x edp "
               "lays out each stage's tp x cp x dp ranks again (default 1: whole experts folded over tp, Megatron-Core's "
               "MoE parallel folding; Megatron's own default is etp = tp)",
       .default_text = "1", .dense = false, .size = &Layout::etp, .order_optional = true, .ordered = false,
       .riders = {}, .support = {}, .megatron_flag = "--expert-tensor-parallel-size",
       .torchtitan_key = "parallelism.expert_tensor_parallel_degree"},
  };
  return table;
}

const Dimension* find_dimension(std::string_view name) {
  for (const Dimension& d : dimensions())
    if (name == d.name) return &d;
  return nullptr;
}

const Dimension& dimension(Dim dim) {
  for (const Dimension& d : dimensions())
    if (d.dim == dim) return d;
  return dimensions().front();  // EDP and DCP are groups, not dimensions: callers pass the six
}

std::vector<OptionDef> dimension_options() {
  std::vector<OptionDef> out;
  // Group sizes: 1 or more (a group of 0 ranks is no layout), so the range says so.
  for (const Dimension& d : dimensions()) out.push_back({d.name, "layout", d.help, false, "INT", d.default_text, 1});
  std::string tokens;
  for (const Dimension& d : dimensions())
    if (d.ordered) tokens += std::string(tokens.empty() ? "" : ", ") + d.name;
  out.push_back({"order", "layout", "rank order, fastest-varying first, of " + tokens + " (tp-cp-ep-dp-pp with cp or ep)",
                 false, "DIMS", "tp-dp-pp"});
  return out;
}

std::optional<int64_t> LayoutSizes::get(Dim d) const {
  auto it = given.find(d);
  if (it == given.end()) return std::nullopt;
  return it->second;
}

LayoutSizes read_layout_sizes(const OptionValues& values, Problems& problems) {
  LayoutSizes s;
  for (const Dimension& d : dimensions())
    if (auto x = values.get_int(d.name, problems)) s.given[d.dim] = *x;
  s.order = values.get_string("order");
  return s;
}

void apply_layout_sizes(const LayoutSizes& sizes, Layout& layout) {
  for (const auto& [dim, size] : sizes.given) layout.*dimension(dim).size = size;
  layout.order = sizes.order ? *sizes.order : default_order(layout.cp, layout.ep);
}

nlohmann::json layout_json(const Layout& layout) {
  nlohmann::json j = nlohmann::json::object();
  for (const Dimension& d : dimensions()) j[d.name] = layout.*d.size;
  j["order"] = layout.order;
  return j;
}

std::string layout_sizes_text(const Layout& layout) {
  std::string s;
  for (const Dimension& d : dimensions())
    if (!d.order_optional || layout.*d.size != 1)
      s += std::string(s.empty() ? "" : " ") + d.name + " " + std::to_string(layout.*d.size);
  return s;
}

Layout layout_from_json(const nlohmann::json& j) {
  Layout l;
  for (const Dimension& d : dimensions()) l.*d.size = j.value(d.name, int64_t(1));
  l.order = j.value("order", default_order(l.cp, l.ep));
  return l;
}

std::map<std::string, std::string> layout_option_texts(const Layout& layout) {
  std::map<std::string, std::string> out;
  for (const Dimension& d : dimensions()) out[d.name] = std::to_string(layout.*d.size);
  out["order"] = layout.order;
  return out;
}

std::vector<SizeTerm> dense_factors(const Layout& layout) {
  std::vector<SizeTerm> out;
  for (const Dimension& d : dimensions())
    if (d.dense) out.push_back({d.name, layout.*d.size});
  return out;
}

nlohmann::json rank_coordinates_json(const Mesh& mesh, int64_t rank) {
  nlohmann::json j = nlohmann::json::object();
  for (const Dimension& d : dimensions()) j[d.name] = mesh.coord_in(d.dim, rank);
  return j;
}

}  // namespace trident
