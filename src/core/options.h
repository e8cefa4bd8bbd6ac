// Options: one table of named settings shared by command-line flags and TOML config files.
//
// Every setting has one canonical name, the flag without its dashes ("ffn-hidden"). In a TOML
// file it may stand at the top level or in its section's table, with '-' or '_'
// ("[model] ffn_hidden = 16384"). Flags override the file. Values are kept as text with where
// they came from, and typed on use, so an error can say "--tp 'x' (from run.toml) is not a
// whole number". Commands list the option groups they accept; a key no group knows is an error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

struct OptionDef {
  std::string name;     // canonical name = flag without "--", e.g. "global-batch-size"
  std::string section;  // TOML table it belongs to: "model", "cluster", "layout", "training", ...
  std::string help;
  bool is_flag = false;  // a switch (--json); in TOML a boolean
  std::string type;           // what --help shows as the value: INT, NUM, NAME, FILE or a|b|c
  std::string default_value;  // what --help shows as the default ("1", "world/(tp*pp)", "preset")
  // The valid range of a number, checked in ONE place (get_int / get_double) for every option of
  // every command; NaN and infinity are always refused. The defaults suit sizes, counts, rates
  // and times: 0 .. 2^31-1 for an integer (so it fits an int) and 0 .. 1e18 for a real number.
  // An option that must be positive (a divisor) or may be larger or negative says so here.
  double min = 0;
  double max = 1e18;
  // The value is a path the command reads (--cost, --data, --resume): no output may replace it.
  bool reads_path = false;
};

// `d` marked as a path the command reads.
inline OptionDef input_path(OptionDef d) {
  d.reads_path = true;
  return d;
}

// The groups of options most commands share.
std::vector<OptionDef> model_options();      // --model --layers --hidden --heads --kv-heads --ffn-hidden --seq-len --vocab --family, MoE sizes
std::vector<OptionDef> cluster_options();    // --cluster --nodes --gpus-per-node --hosts-per-nvlink-domain, custom hardware
std::vector<OptionDef> layout_options();     // --tp --cp --pp --dp --ep --order
std::vector<OptionDef> execution_options();  // --global-batch-size --micro-batch-size --schedule ... --precision
std::vector<OptionDef> concat(std::vector<std::vector<OptionDef>> groups);

// The most a settings file may hold: far above any, so /dev/zero-like inputs end quickly.
inline constexpr uint64_t kMaxSettingsBytes = uint64_t(16) << 20;

// The text of a settings file a flag names (--config, --cost): a regular file of at most 16 MiB
// (read_input_file, core/input_file.h).
// Anything else (missing, a directory, a device such as /dev/zero that never ends, too large)
// is a problem naming `what`, the path and the flag, with `code`; the result is then nullopt.
std::optional<std::string> read_settings_file(const std::string& path, const std::string& what,
                                              const std::string& flag, const std::string& code, Problems& problems);

class OptionValues {
 public:
  explicit OptionValues(std::vector<OptionDef> defs = {}) : defs_(std::move(defs)) {}

  const std::vector<OptionDef>& defs() const { return defs_; }
  const OptionDef* find_def(const std::string& name) const;

  // Later sets of the same name win; the source says where the value came from ("--tp", "a.toml").
  void set(const std::string& name, const std::string& value, const std::string& source);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string source(const std::string& name) const;

  // Options other commands know: a config file may hold them (one file serves plan, lint, topo,
  // simulate and train); this command skips them and lists them in ignored().
  void set_known_elsewhere(std::vector<OptionDef> defs) { elsewhere_ = std::move(defs); }
  const std::vector<std::string>& ignored() const { return ignored_; }

  // Reads a TOML file; every key must name a known option. Keys already set are kept (flags win).
  void load_toml_file(const std::string& path, Problems& problems);
  void load_toml_text(const std::string& text, const std::string& origin, Problems& problems);

  // Typed getters: nullopt when unset; a problem (value, source, fix) when the text does not parse.
  std::optional<std::string> get_string(const std::string& name) const;
  std::optional<int64_t> get_int(const std::string& name, Problems& problems) const;
  std::optional<double> get_double(const std::string& name, Problems& problems) const;
  std::optional<bool> get_bool(const std::string& name, Problems& problems) const;

 private:
  struct Value {
    std::string text;
    std::string source;
  };
  std::vector<OptionDef> defs_;
  std::vector<OptionDef> elsewhere_;
  std::vector<std::string> ignored_;
  std::map<std::string, Value> values_;
};

}  // namespace trident
