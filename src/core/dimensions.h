// The parallel dimensions, one row each: the one description that the layout flags and config
// keys, the order string, the start-up tables and the report columns are generated from. A
// dimension added here appears in every command's flags, in `--order`, in every layout a report
// shows and in the JSON, without touching those writers.
//
// The rules between dimensions and the model (tp divides the heads, cp the sequence, ...) are in
// core/layout_rules.h, one code each.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checked_size.h"
#include "core/layout.h"
#include "core/options.h"
#include "core/problems.h"

namespace trident {

// What a command does with a dimension above 1.
struct DimensionSupport {
  bool plan = true;      // plan searches it (and lint and topo check it)
  bool simulate = true;  // simulate times its communication
  bool train = true;     // trident train runs it (else train refuses it with `train_refusal`)
  const char* train_refusal = "";  // the run check's code when train does not run it
};

struct Dimension {
  Dim dim;
  const char* name;   // the flag (--tp), the config key ([layout] tp), the token in --order, the JSON key
  const char* title;  // "tensor parallel"
  const char* help;   // the flag's help text
  const char* default_text;  // what --help shows as the default
  // A rank coordinate: tp x cp x dp x pp is the world size. ep and etp are not: they lay the
  // tp x cp x dp ranks of a stage out again for the expert layers, as in Megatron-Core.
  bool dense;
  int64_t Layout::*size;
  // --order must name it (tp, dp, pp), or may leave it out while its size is 1 (cp, ep).
  bool order_optional;
  // A token of --order; etp is not: it takes tp's place in the expert grid.
  bool ordered;
  // The options that ride on the dimension (their own flags, in execution_options).
  std::vector<const char*> riders;
  DimensionSupport support;
  // The same setting in the frameworks `plan --emit` writes for.
  const char* megatron_flag;
  const char* torchtitan_key;
};

// Every dimension, in the order reports list them: tp, pp, dp, cp, ep, etp.
const std::vector<Dimension>& dimensions();
// The row of `dim` (TP, CP, DP, PP, EP or ETP) or of a name ("tp"); nullptr for other names.
const Dimension& dimension(Dim dim);
const Dimension* find_dimension(std::string_view name);

// --tp --pp --dp --cp --ep --etp and --order, generated from the table.
std::vector<OptionDef> dimension_options();

// The sizes the options give (unset: not given) and the order: the one reader of the layout
// flags and keys, used by plan (which searches what is unset), train and resolve_layout.
struct LayoutSizes {
  std::map<Dim, int64_t> given;
  std::optional<std::string> order;
  std::optional<int64_t> get(Dim d) const;
};
LayoutSizes read_layout_sizes(const OptionValues& values, Problems& problems);
// Sets each given size on `layout`; the order too, or the default order for its cp and ep.
void apply_layout_sizes(const LayoutSizes& sizes, Layout& layout);

// {"tp": 8, "pp": 8, "dp": 16, "cp": 2, "ep": 1, "order": "..."}: every dimension, for the JSON.
nlohmann::json layout_json(const Layout& layout);
// "tp 8 pp 8 dp 16 cp 2 ep 4": the dimensions --order always names, the others when above 1.
std::string layout_sizes_text(const Layout& layout);
// The layout layout_json wrote (a missing size is 1, a missing order the default).
Layout layout_from_json(const nlohmann::json& j);
// The option texts of a layout ("tp" -> "8", ..., "order" -> "..."), for --emit toml.
std::map<std::string, std::string> layout_option_texts(const Layout& layout);
// The dense sizes as named factors ({"tp", 8}, ...) for the overflow-checked world size.
std::vector<SizeTerm> dense_factors(const Layout& layout);

// A rank's coordinate in every dimension's group, for rank tables: {"tp": 0, "pp": 1, ...}.
class Mesh;
nlohmann::json rank_coordinates_json(const Mesh& mesh, int64_t rank);

}  // namespace trident
