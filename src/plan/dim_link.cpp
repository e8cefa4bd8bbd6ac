#include "plan/dim_link.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace trident::plan {

namespace {

// How many of 0 .. count-1 are congruent to x modulo period (x < period).
int64_t congruent(int64_t count, int64_t x, int64_t period) { return x < count ? (count - 1 - x) / period + 1 : 0; }

// Most members of {rho + j s : j < n} in one domain of b GPUs (rho < b, 0 < s < b). Consecutive
// members never skip a domain, a domain's count depends only on the offset its first member
// enters at, and those offsets move by -b mod s per domain, so they repeat every s / gcd(b, s)
// domains: the first domain and that many full ones show every count the group has.
int64_t most_in_one_domain(int64_t rho, int64_t s, int64_t n, int64_t b) {
  const int64_t changes_to_walk = s / std::gcd(b, s) + 2;
  int64_t most = 0, run = 0, prev = -1, changes = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t domain = (rho + j * s) / b;
    if (domain != prev) {
      if (prev >= 0 && ++changes > changes_to_walk) break;
      run = 0;
      prev = domain;
    }
    most = std::max(most, ++run);
  }
  return most;
}

// Fewest members of {rho + j s : j < n} in one of the domains of b GPUs it touches (a walk of
// its n members: evaluated once per residue rho, at most b of them).
int64_t fewest_in_one_domain(int64_t rho, int64_t s, int64_t n, int64_t b) {
  int64_t fewest = n, run = 0, prev = -1;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t domain = (rho + j * s) / b;
    if (domain != prev && prev >= 0) {
      fewest = std::min(fewest, run);
      run = 0;
    }
    prev = domain;
    ++run;
  }
  return std::min(fewest, run);
}

// Groups {r + j s : j < n} starting at r = hi s n + lo (lo < s): r mod b repeats in hi with
// period b / gcd(s n, b), and lo takes fewer than b values once s < b.
DimLink stride_dim_link(const Mesh& mesh, Dim dim, const ClusterSpec& cluster, int64_t s) {
  DimLink out;
  const int64_t n = mesh.size(dim), world = mesh.world_size(), b = cluster.gpus_per_nvlink_domain();
  out.groups = world / n;
  int64_t first_crossing = -1;
  if (n > 1 && s >= b) {  // every member in its own domain
    out.groups_crossing_domains = out.groups;
    out.fewest_members_in_domain = 1;
    first_crossing = 0;
  } else if (n > 1) {
    const int64_t blocks = world / (s * n), period = b / std::gcd(s * n, b);
    std::vector<int64_t> most(static_cast<size_t>(b), 0);  // per residue, 0 until computed
    for (int64_t hi = 0; hi < std::min(blocks, period); ++hi) {
      const int64_t copies = congruent(blocks, hi, period);
      for (int64_t lo = 0; lo < s; ++lo) {
        const int64_t r = hi * s * n + lo, rho = r % b;
        if (most[size_t(rho)] == 0) most[size_t(rho)] = most_in_one_domain(rho, s, n, b);
        out.members_per_node = std::max(out.members_per_node, most[size_t(rho)]);
        if (rho + (n - 1) * s >= b) {
          out.groups_crossing_domains += copies;
          const int64_t fewest = fewest_in_one_domain(rho, s, n, b);
          out.fewest_members_in_domain =
              out.fewest_members_in_domain > 0 ? std::min(out.fewest_members_in_domain, fewest) : fewest;
          if (first_crossing < 0) first_crossing = r;  // hi and lo ascend: the lowest rank
        }
      }
    }
  }
  out.link = mesh.link_of_progression(std::max<int64_t>(first_crossing, 0), s, n, cluster);
  return out;
}

// DCP groups when cp and dp are not adjacent in the order: member i of group q has
// data index j = j0 + i step with j0 = q a, and rank t s_tp + p s_pp + (j mod F) s_fast +
// (j div F) s_slow (F the faster data dimension's size). Relative to (j0 div F) s_slow the
// members depend only on j0 mod F, so a group's class is (j0 mod F, its offset mod b): the tp and
// pp coordinates shift it by residues with period b / gcd(stride, b), and q with period
// F b / gcd(a, F b). Members ascend with i, so equal domains are runs.
class DerivedGroups {
 public:
  DerivedGroups(const Mesh& mesh, Dim dim, int64_t b) : mesh_(mesh), b_(b) {
    const Layout& l = mesh.layout();
    for (Dim d : l.dims_fastest_first())
      if (d == Dim::CP || d == Dim::DP) {
        (seen_data_ ? slow_ : fast_) = d;
        seen_data_ = true;
      }
    F_ = mesh.size(fast_);
    n_ = mesh.size(dim);
    Q_ = l.cp * l.dp / n_;
    a_ = 0, step_ = 1;  // DCP: one group per (tp, pp) pair, every data rank (the expert groups are progressions)
    q_period_ = a_ == 0 ? 1 : F_ * b_ / std::gcd(a_, F_ * b_);
    memo_.assign(size_t(F_ * b_), -1);
  }
  int64_t q_period() const { return q_period_; }
  int64_t complement() const { return Q_; }
  int64_t period(Dim d) const { return b_ / std::gcd(mesh_.stride(d), b_); }
  // The offset of group q's members, mod b, without the tp and pp shift, and its class column.
  int64_t fast0(int64_t q) const { return (q * a_) % F_; }
  int64_t shift(int64_t q) const { return ((q * a_) / F_ % b_) * (mesh_.stride(slow_) % b_) % b_; }
  int64_t translation(int64_t t, int64_t p) const {
    return (t % b_ * (mesh_.stride(Dim::TP) % b_) + p % b_ * (mesh_.stride(Dim::PP) % b_)) % b_;
  }
  // Most members in one domain, negated when the group leaves its domain (never 0).
  int64_t evaluate(int64_t fast0, int64_t rho) {
    int64_t& m = memo_[size_t(fast0 * b_ + rho)];
    if (m >= 0) return m;
    auto offset = [&](int64_t i) {
      const int64_t j = fast0 + i * step_;
      return rho + (j % F_) * mesh_.stride(fast_) + (j / F_) * mesh_.stride(slow_);
    };
    // The gaps between members repeat every T = F / gcd(step, F) members (they depend on j mod F
    // alone), so the offsets mod b repeat every P periods, P = b / gcd(advance per period, b). A
    // run of one domain holds at most b members (they ascend): every run is a copy of one that
    // starts in the first two repeats, walked in full within 2 P T + b members.
    const int64_t T = F_ / std::gcd(step_, F_);
    const int64_t P = b_ / std::gcd((offset(T) - offset(0)) % b_, b_);
    const int64_t walk = std::min(n_, 2 * P * T + b_ + 2);
    int64_t most = 0, run = 0, prev = -1;
    for (int64_t i = 0; i < walk; ++i) {
      const int64_t domain = offset(i) / b_;
      run = domain == prev ? run + 1 : 1;
      prev = domain;
      most = std::max(most, run);
    }
    // Ascending members leave the first one's domain exactly when the last one is outside it.
    m = offset(n_ - 1) / b_ != offset(0) / b_ ? most + kCrosses : most;
    return m;
  }
  static bool crosses(int64_t v) { return v >= kCrosses; }
  static int64_t most(int64_t v) { return v >= kCrosses ? v - kCrosses : v; }
  bool crosses(int64_t t, int64_t q, int64_t p) { return crosses(evaluate(fast0(q), (translation(t, p) + shift(q)) % b_)); }

 private:
  static constexpr int64_t kCrosses = int64_t(1) << 40;
  const Mesh& mesh_;
  int64_t b_;
  bool seen_data_ = false;
  Dim fast_ = Dim::CP, slow_ = Dim::DP;
  int64_t F_ = 1, n_ = 1, Q_ = 1, a_ = 0, step_ = 1, q_period_ = 1;
  std::vector<int64_t> memo_;  // per class, -1 until evaluated
};

// The lowest group index whose group leaves its domain (-1 if none). The index is a mixed-radix
// number over the order's dimensions fastest first, the data ones replaced by q: periods bound
// the search, since a group's class only depends on its coordinates modulo them.
int64_t first_crossing_index(const Mesh& mesh, DerivedGroups& g) {
  struct Digit {
    Dim dim;  // TP, PP, or CP standing for q
    int64_t size, period;
  };
  std::vector<Digit> digits;  // fastest first
  bool data_seen = false;
  for (Dim d : mesh.layout().dims_fastest_first()) {
    if (d == Dim::CP || d == Dim::DP) {
      if (!data_seen) digits.push_back({Dim::CP, g.complement(), g.q_period()});
      data_seen = true;
    } else {
      digits.push_back({d, mesh.size(d), g.period(d)});
    }
  }
  int64_t c[3];
  auto coord = [&](Dim d) {
    for (int k = 0; k < 3; ++k)
      if (digits[size_t(k)].dim == d) return c[k];
    return int64_t(0);
  };
  for (c[2] = 0; c[2] < std::min(digits[2].size, digits[2].period); ++c[2])
    for (c[1] = 0; c[1] < std::min(digits[1].size, digits[1].period); ++c[1])
      for (c[0] = 0; c[0] < std::min(digits[0].size, digits[0].period); ++c[0])
        if (g.crosses(coord(Dim::TP), coord(Dim::CP), coord(Dim::PP)))
          return c[0] + digits[0].size * (c[1] + digits[1].size * c[2]);
  return -1;
}

DimLink derived_dim_link(const Mesh& mesh, Dim dim, const ClusterSpec& cluster) {
  DimLink out;
  out.groups = mesh.group_count(dim);
  const int64_t b = cluster.gpus_per_nvlink_domain();
  DerivedGroups g(mesh, dim, b);
  // Groups per tp/pp shift residue.
  std::vector<int64_t> shifts(static_cast<size_t>(b), 0);
  const int64_t tp = mesh.size(Dim::TP), pp = mesh.size(Dim::PP), pt = g.period(Dim::TP), pq = g.period(Dim::PP);
  for (int64_t t = 0; t < std::min(tp, pt); ++t)
    for (int64_t p = 0; p < std::min(pp, pq); ++p)
      shifts[size_t(g.translation(t, p))] += congruent(tp, t, pt) * congruent(pp, p, pq);
  for (int64_t q = 0; q < std::min(g.complement(), g.q_period()); ++q) {
    const int64_t copies = congruent(g.complement(), q, g.q_period());
    for (int64_t rho = 0; rho < b; ++rho) {
      if (shifts[size_t(rho)] == 0) continue;
      const int64_t v = g.evaluate(g.fast0(q), (rho + g.shift(q)) % b);
      out.members_per_node = std::max(out.members_per_node, DerivedGroups::most(v));
      if (DerivedGroups::crosses(v)) out.groups_crossing_domains += copies * shifts[size_t(rho)];
    }
  }
  const int64_t first = out.groups_crossing_domains > 0 ? first_crossing_index(mesh, g) : 0;
  out.link = mesh.link_of_group(dim, std::max<int64_t>(first, 0), cluster);
  return out;
}

}  // namespace

DimLink dim_link(const Mesh& mesh, Dim dim, const ClusterSpec& cluster) {
  const int64_t stride = mesh.group_stride(dim);
  return stride == 0 ? derived_dim_link(mesh, dim, cluster) : stride_dim_link(mesh, dim, cluster, stride);
}

Links mesh_links(const Mesh& mesh, const ClusterSpec& cluster) {
  Links l;
  l.tp = dim_link(mesh, Dim::TP, cluster);
  l.pp = dim_link(mesh, Dim::PP, cluster);
  l.dp = dim_link(mesh, Dim::DP, cluster);
  l.cp = mesh.size(Dim::CP) > 1 ? dim_link(mesh, Dim::CP, cluster) : DimLink{};
  l.dcp = mesh.size(Dim::CP) > 1 ? dim_link(mesh, Dim::DCP, cluster) : l.dp;
  // The expert grid's groups (progressions): ep and etp when above 1, edp always (with etp < tp
  // it takes tp ranks too, so it is no dense group even at ep 1).
  if (mesh.size(Dim::EP) > 1) l.ep = dim_link(mesh, Dim::EP, cluster);
  if (mesh.size(Dim::ETP) > 1) l.etp = dim_link(mesh, Dim::ETP, cluster);
  l.edp = dim_link(mesh, Dim::EDP, cluster);
  // The first and last stage of pipeline 0 (rank 0 and pp - 1 strides on), without listing it.
  l.embedding = mesh.link_of({0, (mesh.size(Dim::PP) - 1) * mesh.stride(Dim::PP)}, cluster);
  return l;
}

}  // namespace trident::plan
