#include "report/sim_timeline.h"

namespace trident {

using sim::SpanKind;

Timeline to_timeline(const sim::SimResult& r, const std::string& title, const std::string& subtitle,
                     std::vector<std::string> row_names) {
  Timeline tl;
  tl.title = title;
  tl.subtitle = subtitle;
  if (row_names.size() != r.stages.size()) {
    row_names.clear();
    for (size_t s = 0; s < r.stages.size(); ++s) row_names.push_back("stage " + std::to_string(s));
  }
  tl.rows = std::move(row_names);
  tl.blocks.reserve(r.spans.size());
  for (const sim::Span& sp : r.spans) {
    TimelineBlock b;
    b.row = sp.stage;
    b.lane = sp.on_dp_stream ? 1 : 0;
    b.kind = to_string(sp.kind);
    b.start_s = sp.start_s;
    b.end_s = sp.end_s;
    b.micro_batch = sp.micro_batch;
    b.chunk = sp.chunk;
    const bool compute = sp.kind == SpanKind::Forward || sp.kind == SpanKind::Backward ||
                         sp.kind == SpanKind::BackwardInput || sp.kind == SpanKind::BackwardWeight;
    if (compute) b.label = std::to_string(sp.micro_batch);
    else if (sp.kind == SpanKind::Send || sp.kind == SpanKind::RecvWait)
      b.label = std::to_string(sp.micro_batch) + (sp.kind == SpanKind::Send ? "->" : "<-") + std::to_string(sp.peer);
    tl.blocks.push_back(std::move(b));
  }
  return tl;
}

}  // namespace trident
