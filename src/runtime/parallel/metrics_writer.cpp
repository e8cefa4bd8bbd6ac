#include "runtime/parallel/metrics_writer.h"

namespace trident::parallel {

MetricsWriter::~MetricsWriter() { close(); }

bool MetricsWriter::open(const std::string& path) {
  close();
  path_ = path;
  file_ = std::fopen(path.c_str(), "w");
  return file_ != nullptr;
}

void MetricsWriter::write(const nlohmann::json& line) {
  if (!file_) return;
  std::fprintf(file_, "%s\n", line.dump().c_str());
  std::fflush(file_);
}

void MetricsWriter::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace trident::parallel
