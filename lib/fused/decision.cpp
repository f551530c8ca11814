#include "fused/decision.hpp"

#include "core/choose.hpp"
#include "core/cost_model.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <numeric>

namespace agx {

namespace {

/// Prices calls of a group's members (see the header), each set once.
class Pricer {
 public:
  Pricer(Selector& sel, const std::vector<std::vector<std::size_t>>& bytes, const FusionSettings& s)
      : sel_(sel), bytes_(bytes), settings_(s) {}

  FusionCall price(const std::vector<std::size_t>& members) {
    if (auto it = priced_.find(members); it != priced_.end()) return it->second;
    FusionCall c = members.size() == 1 ? alone(members.front()) : fused(members);
    c.members = members;
    priced_.emplace(members, c);
    return c;
  }

 private:
  /// The fused layout of `members`: per rank the sum of their blocks, rank-major.
  void layout_of(const std::vector<std::size_t>& members) {
    const std::size_t n = bytes_[members.front()].size();
    block_.assign(n, 0);
    offset_.assign(n, 0);
    std::size_t at = 0;
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t m : members) block_[r] += bytes_[m][r];
      offset_[r] = at;
      at += block_[r];
    }
  }

  FusionCall alone(std::size_t m) {
    // Members of equal sizes are priced once (groups of many equal members are common).
    if (auto it = alone_.find(bytes_[m]); it != alone_.end()) return it->second;
    layout_of({m});
    const Layout layout = Layout::varying(block_, offset_);
    FusionCall c;
    // The one chooser, as a query: without the node set up (hier::node_call_ready) a
    // member alone would run messages only.
    CallFacts facts;
    facts.kind = CallKind::query;
    facts.messages_only = !settings_.node_paths;
    c.algorithm = agx::choose(sel_, layout, Options{Algorithm::automatic, false}, facts).algorithm;
    c.predicted_s = predict_algorithm(c.algorithm, layout, sel_.placement(), sel_.tuning().params,
                                      false, sel_.stage());
    alone_.emplace(bytes_[m], c);
    return c;
  }

  FusionCall fused(const std::vector<std::size_t>& members) {
    layout_of(members);
    const Layout layout = Layout::varying(block_, offset_);
    const std::size_t own = *std::max_element(block_.begin(), block_.end());
    const std::size_t least = *std::min_element(block_.begin(), block_.end());
    const std::size_t total = std::accumulate(block_.begin(), block_.end(), std::size_t{0});
    const double copy = copy_s_per_byte_at(sel_.tuning().params, total);
    // With one rank per node a node path's schedule is point-to-point messages.
    const bool one_per_node = sel_.placement().nodes() == sel_.placement().nranks();
    FusionCall c;
    c.predicted_s = std::numeric_limits<double>::infinity();
    // Where the tuning file measured a winner for the fused call's size class, the fused
    // call runs it, as `auto` would run it for a call of that layout; the model prices it.
    // (The model alone picked `hierarchical` for 256 KiB-1 MiB per rank on the 1 Gb/s
    // cluster, where the measured winners were distance_halving and ring.)
    AlgorithmChoice measured = sel_.measured(layout);
    if (is_node_path(measured.id) && !settings_.node_paths) measured = {};
    const auto predictions = sel_.predictions(layout, true);
    if (std::none_of(predictions.begin(), predictions.end(),
                     [&](const auto& p) { return p.first == measured; }))
      measured = {};
    for (const auto& [a, s] : predictions) {
      if (measured.id != Algorithm::automatic && a != measured) continue;
      const bool node = is_node_path(a.id);
      if (node && !settings_.node_paths) continue;
      const bool staged = !settings_.segments;
      const bool messages = !node || one_per_node;
      // The own pieces into place (every way). Staged: every piece out of the staging
      // buffer. Segmented, in messages: the MPI library packs and unpacks messages of
      // several pieces (no single copy), about the bytes a rank receives once more on
      // each side. Segmented on a node stage: nothing more (its copies into and out of
      // the segment, which `s` prices, gather and scatter the pieces).
      const std::size_t extra = staged ? total : messages ? 2 * (total - least) : 0;
      const double t = s + copy * static_cast<double>(own + extra);
      if (t < c.predicted_s) c.predicted_s = t, c.algorithm = a, c.staged = staged;
    }
    return c;
  }

  Selector& sel_;
  const std::vector<std::vector<std::size_t>>& bytes_;
  const FusionSettings& settings_;
  std::map<std::vector<std::size_t>, FusionCall> priced_;  // by members
  std::map<std::vector<std::size_t>, FusionCall> alone_;   // by block sizes
  std::vector<std::size_t> block_, offset_;
};

using Partition = std::vector<std::vector<std::size_t>>;

void add_fused(Partition& p, std::vector<std::size_t> members) {
  if (members.empty()) return;
  std::sort(members.begin(), members.end());
  p.push_back(std::move(members));
}

void add_alone(Partition& p, const std::vector<std::size_t>& members) {
  for (std::size_t m : members) p.push_back({m});
}

}  // namespace

FusionDecision decide_fusion(Selector& selector,
                             const std::vector<std::vector<std::size_t>>& member_bytes,
                             const FusionSettings& settings) {
  FusionDecision d;
  const std::size_t k = member_bytes.size();
  if (k == 0) return d;
  std::vector<std::size_t> all(k);
  std::iota(all.begin(), all.end(), std::size_t{0});

  std::vector<Partition> candidates;
  candidates.push_back({all});
  if (k > 1) {
    Partition separate;
    add_alone(separate, all);
    candidates.push_back(std::move(separate));
    // Members by size; a boundary wherever the size class (power of two) changes.
    std::vector<std::size_t> size(k, 0);
    for (std::size_t m = 0; m < k; ++m)
      size[m] = std::accumulate(member_bytes[m].begin(), member_bytes[m].end(), std::size_t{0});
    std::vector<std::size_t> order = all;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return size[a] < size[b]; });
    for (std::size_t p = 1; p < k; ++p) {
      if (std::bit_width(size[order[p - 1]]) == std::bit_width(size[order[p]])) continue;
      const std::vector<std::size_t> small(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(p));
      const std::vector<std::size_t> large(order.begin() + static_cast<std::ptrdiff_t>(p), order.end());
      Partition both, small_fused, large_fused;
      add_fused(both, small);
      add_fused(both, large);
      add_fused(small_fused, small);
      add_alone(small_fused, large);
      add_alone(large_fused, small);
      add_fused(large_fused, large);
      candidates.push_back(std::move(both));
      candidates.push_back(std::move(small_fused));
      candidates.push_back(std::move(large_fused));
    }
  }

  Pricer pricer(selector, member_bytes, settings);
  d.predicted_s = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    std::vector<FusionCall> calls;
    double t = 0;
    for (const auto& members : candidates[i]) {
      calls.push_back(pricer.price(members));
      t += calls.back().predicted_s;
    }
    if (i == 0) d.one_call_s = t;
    if (i == 1 || k == 1) d.separate_s = t;
    if (t < d.predicted_s) {
      d.predicted_s = t;
      d.calls = std::move(calls);
    }
  }
  std::sort(d.calls.begin(), d.calls.end(),
            [](const FusionCall& a, const FusionCall& b) { return a.members.front() < b.members.front(); });
  return d;
}

}  // namespace agx
