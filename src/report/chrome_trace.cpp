#include "report/chrome_trace.h"

#include "core/output_path.h"

namespace trident {

nlohmann::json chrome_trace_json(const Timeline& tl) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", tl.title}}}});
  for (size_t r = 0; r < tl.rows.size(); ++r)
    for (int lane = 0; lane < 2; ++lane) {
      const int tid = int(r) * 2 + lane;
      const std::string name = lane == 0 ? tl.rows[r] : tl.rows[r] + " (dp stream)";
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", {{"name", name}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    }
  for (const auto& b : tl.blocks) {
    json args = {{"duration_ms", (b.end_s - b.start_s) * 1e3}};
    if (b.micro_batch >= 0) args["micro_batch"] = b.micro_batch;
    if (b.chunk >= 0) args["chunk"] = b.chunk;
    const std::string name = b.label.empty() ? b.kind : b.kind + " " + b.label;
    events.push_back({{"name", name},
                      {"cat", b.kind},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", int(b.row) * 2 + b.lane},
                      {"ts", b.start_s * 1e6},
                      {"dur", (b.end_s - b.start_s) * 1e6},
                      {"args", args}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"title", tl.title}, {"summary", tl.subtitle}}}};
}

bool write_chrome_trace(const Timeline& tl, const std::string& path, std::string& error) {
  // The one atomic writer: refuses special files, never leaves half a file.
  try {
    write_text_atomically(path, chrome_trace_json(tl).dump() + "\n");
  } catch (const InputError& e) {
    error = e.problems().empty() ? "failed writing " + path : e.problems().front().what;
    return false;
  }
  return true;
}

}  // namespace trident
