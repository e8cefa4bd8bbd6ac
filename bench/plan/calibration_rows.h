// Calibration rows: published runs (data/calibration/*.csv) as RunSpecs with their measured
// iteration time. One CSV per source; columns by name, so a file may add or leave out the
// optional ones (precision, zero, attention, overlap, grad_bits, stack, kv_heads, ffn_hidden,
// family, order, cp, hosts_per_nvlink_domain); a missing one takes the runtime's default.
#pragma once

#include <string>
#include <vector>

#include "core/run_spec.h"

namespace trident::calibration {

struct Row {
  std::string source;  // the CSV's file name without folder and extension
  std::string name;
  RunSpec run;
  double published_s = 0;
  std::string published_mfu;  // as written, may be empty
  bool fitted = false;        // column `fitted` = 1: the built-in cost table was fitted to this row
};

// Reads one CSV; throws InputError naming the file, line and column on a bad row.
std::vector<Row> read_rows(const std::string& path);
// Every *.csv in a folder, sorted by name.
std::vector<Row> read_folder(const std::string& folder);
// The rows of each path in turn: a folder's CSVs (read_folder) or one CSV (read_rows).
std::vector<Row> read_rows_of(const std::vector<std::string>& paths);

}  // namespace trident::calibration
