// The one writer of `--metrics FILE`: one JSON object per line, one line per optimizer step,
// flushed as it is written so a crashed or stopped run keeps every finished step.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace trident::parallel {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Opens (truncates) `path`; false when it cannot be written.
  bool open(const std::string& path);
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  void write(const nlohmann::json& line);
  void close();

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace trident::parallel
