#include "core/execution_spec.h"

namespace trident {

namespace {
template <typename E>
struct Names {
  E value;
  const char* name;
};
constexpr Names<ScheduleKind> kSchedules[] = {{ScheduleKind::GPipe, "gpipe"},
                                              {ScheduleKind::OneFOneB, "1f1b"},
                                              {ScheduleKind::Interleaved, "interleaved"},
                                              {ScheduleKind::ZeroBubbleH1, "zb-h1"}};
constexpr Names<Recompute> kRecomputes[] = {
    {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
constexpr Names<Precision> kPrecisions[] = {
    {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}, {Precision::FP32, "fp32"}};

template <typename E, size_t N>
std::string name_of(const Names<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "?";
}
template <typename E, size_t N>
bool parse(const Names<E> (&table)[N], const std::string& text, E& out) {
  for (const auto& n : table)
    if (text == n.name) {
      out = n.value;
      return true;
    }
  return false;
}
template <typename E, size_t N>
std::vector<std::string> names(const Names<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& n : table) out.push_back(n.name);
  return out;
}
}  // namespace

std::string to_string(ScheduleKind s) { return name_of(kSchedules, s); }
std::string to_string(Recompute r) { return name_of(kRecomputes, r); }
std::string to_string(Precision p) { return name_of(kPrecisions, p); }
bool parse_schedule(const std::string& t, ScheduleKind& out) { return parse(kSchedules, t, out); }
bool parse_recompute(const std::string& t, Recompute& out) { return parse(kRecomputes, t, out); }
bool parse_precision(const std::string& t, Precision& out) { return parse(kPrecisions, t, out); }
std::vector<std::string> schedule_names() { return names(kSchedules); }
std::vector<std::string> recompute_names() { return names(kRecomputes); }
std::vector<std::string> precision_names() { return names(kPrecisions); }

}  // namespace trident
