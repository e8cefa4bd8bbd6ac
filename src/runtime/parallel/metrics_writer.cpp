#include "runtime/parallel/metrics_writer.h"

namespace trident::parallel {

MetricsWriter::~MetricsWriter() = default;

bool MetricsWriter::open(const std::string& path) {
  close();
  path_ = path;
  try {
    file_ = OutputStream(path);  // regular files only (core/output_path.h)
  } catch (const InputError&) {
    return false;
  }
  return true;
}

void MetricsWriter::write(const nlohmann::json& line) { file_.write_line(line.dump()); }  // throws on a full disk

void MetricsWriter::close() { file_.close(); }

}  // namespace trident::parallel
