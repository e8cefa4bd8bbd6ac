// The one writer of `--metrics FILE`: one JSON object per line, one line per optimizer step,
// flushed as it is written so a crashed or stopped run keeps every finished step. It writes
// through core/output_path.h's checked stream: a write error (a full disk) throws InputError.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/output_path.h"

namespace trident::parallel {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Opens (truncates) `path`; false when it cannot be written.
  bool open(const std::string& path);
  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return path_; }
  void write(const nlohmann::json& line);
  void close();

 private:
  OutputStream file_;
  std::string path_;
};

}  // namespace trident::parallel
