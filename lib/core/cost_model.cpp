#include "core/cost_model.hpp"

#include <agx/error.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <string>
#include <unordered_map>

namespace agx {

int Placement::nodes() const {
  return static_cast<int>(std::set<int>(node_of_.begin(), node_of_.end()).size());
}

Placement Placement::with_groups(std::vector<int> group_of_node) const {
  Placement p = *this;
  p.group_of_node_ = std::move(group_of_node);
  for (int node : node_of_)
    if (node < 0 || node >= static_cast<int>(p.group_of_node_.size()))
      throw Error(MPI_ERR_ARG, "agx: Placement::with_groups: node " + std::to_string(node) +
                                   " has no group");
  return p;
}

std::vector<int> sampled_ranks(int n) {
  std::vector<int> ranks;
  if (n <= 256) {
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    return ranks;
  }
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::set<int> s{0, 1, 2, n / 2, n / 2 + 1, n - 2, n - 1, p - 1, std::min(p, n - 1),
                  std::max(0, n - p - 1), n - p};
  return {s.begin(), s.end()};
}

namespace {

struct Load {  // one rank, one round, one level
  std::size_t msgs_out = 0, msgs_in = 0, bytes_out = 0, bytes_in = 0;
};

std::size_t transfer_bytes(const Transfer& t, const Layout& layout) {
  std::size_t bytes = 0;
  for (const BlockSpan& s : t.blocks)
    for (int b = s.first; b < s.first + s.count; ++b) bytes += layout.bytes(b);
  return bytes;
}

}  // namespace

double predict_seconds(const Planner& planner, const Layout& layout, const Placement& placement,
                       const CostParams& params, bool in_place, int radix) {
  const int n = layout.nranks();
  const bool groups = placement.has_groups() && params.group_link_s_per_byte > 0;
  std::vector<int> ranks = sampled_ranks(n);
  if (groups && static_cast<int>(ranks.size()) < n) {
    std::set<int> s(ranks.begin(), ranks.end());
    for (int r = 0; r < n; ++r)
      if (placement.group_of(r) == placement.group_of(0)) s.insert(r);
    ranks.assign(s.begin(), s.end());
  }
  std::vector<Schedule> plans;
  plans.reserve(ranks.size());
  std::size_t nrounds = 0;
  for (int r : ranks) {
    plans.push_back(planner.plan({n, r, radix}));
    nrounds = std::max(nrounds, plans.back().rounds.size());
  }
  const std::array<LevelCost, 2> cost{params.node, params.network};
  double total = 0;
  for (std::size_t k = 0; k < nrounds; ++k) {
    // Network bytes leaving each node this round (sampled ranks only beyond 256 ranks).
    std::unordered_map<int, std::size_t> nic_bytes;
    // Bytes from group a to group b this round (key a·n + b), when groups are modelled.
    std::unordered_map<long long, std::size_t> group_bytes;
    std::vector<std::array<Load, 2>> loads(plans.size());
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (k >= plans[i].rounds.size()) continue;
      const int r = ranks[i];
      for (const Transfer& t : plans[i].rounds[k].sends) {
        Load& l = loads[i][static_cast<int>(placement.level(r, t.peer))];
        const std::size_t bytes = transfer_bytes(t, layout);
        ++l.msgs_out;
        l.bytes_out += bytes;
        if (groups && placement.group_of(r) != placement.group_of(t.peer))
          group_bytes[static_cast<long long>(placement.group_of(r)) * n + placement.group_of(t.peer)] += bytes;
      }
      for (const Transfer& t : plans[i].rounds[k].recvs) {
        Load& l = loads[i][static_cast<int>(placement.level(r, t.peer))];
        ++l.msgs_in;
        l.bytes_in += transfer_bytes(t, layout);
      }
      nic_bytes[placement.node_of(r)] += loads[i][1].bytes_out;
    }
    double round_time = 0;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      double rank_time = 0;
      for (int lv = 0; lv < 2; ++lv) {
        const Load& l = loads[i][lv];
        std::size_t bytes = std::max(l.bytes_out, l.bytes_in);
        if (lv == 1) bytes = std::max(bytes, nic_bytes[placement.node_of(ranks[i])]);
        const std::size_t msgs = std::max(l.msgs_out, l.msgs_in);
        if (msgs == 0) continue;
        const double t = cost[lv].alpha_s + cost[lv].overhead_s * static_cast<double>(msgs - 1) +
                         cost[lv].beta_s_per_byte * static_cast<double>(bytes);
        rank_time = std::max(rank_time, t);
      }
      if (k == 0 && !in_place)  // the own-block copy overlaps round 0
        rank_time = std::max(rank_time, params.copy_s_per_byte *
                                            static_cast<double>(layout.bytes(ranks[i])));
      round_time = std::max(round_time, rank_time);
    }
    for (const auto& [pair, bytes] : group_bytes)
      round_time = std::max(round_time, params.network.alpha_s + params.group_link_s_per_byte *
                                                                     static_cast<double>(bytes));
    total += round_time;
  }
  if (nrounds == 0 && !in_place) {
    std::size_t own = 0;
    for (int r : ranks) own = std::max(own, layout.bytes(r));
    total = params.copy_s_per_byte * static_cast<double>(own);
  }
  return total;
}

double predict_shared_memory(const Layout& layout, const CostParams& params, bool in_place) {
  std::size_t total = 0, own_max = 0;
  for (int b = 0; b < layout.nranks(); ++b) {
    total += layout.bytes(b);
    own_max = std::max(own_max, layout.bytes(b));
  }
  // Copy-in of the own block, then copy-out of everything (the own block too, out of
  // place); two flag synchronizations (published, and done reading).
  const std::size_t out = in_place ? total - std::min(total, own_max) : total;
  return 2 * params.node_sync_s + params.copy_s_per_byte * static_cast<double>(own_max + out);
}

double predict_hierarchical(const Layout& layout, const Placement& placement,
                            const CostParams& params, bool in_place) {
  const int nodes = placement.nodes();
  // Node aggregates: the bytes of all blocks of each node, laid out node after node.
  std::vector<std::size_t> agg(static_cast<std::size_t>(nodes), 0), offsets(agg.size(), 0);
  std::unordered_map<int, int> index_of;
  for (int r = 0; r < layout.nranks(); ++r) {
    auto [it, fresh] = index_of.try_emplace(placement.node_of(r), static_cast<int>(index_of.size()));
    agg[static_cast<std::size_t>(it->second)] += layout.bytes(r);
  }
  for (std::size_t j = 1; j < agg.size(); ++j) offsets[j] = offsets[j - 1] + agg[j - 1];
  double inter = 0;
  if (nodes > 1) {
    std::vector<int> leaders(static_cast<std::size_t>(nodes));
    for (int j = 0; j < nodes; ++j) leaders[static_cast<std::size_t>(j)] = j;
    Placement between(leaders);
    if (placement.has_groups()) {
      std::vector<int> group_of_leader(static_cast<std::size_t>(nodes));
      for (int r = 0; r < layout.nranks(); ++r)
        group_of_leader[static_cast<std::size_t>(index_of.at(placement.node_of(r)))] = placement.group_of(r);
      between = between.with_groups(std::move(group_of_leader));
    }
    const Layout aggregates = Layout::varying(agg, offsets);
    inter = std::numeric_limits<double>::infinity();
    for (const Planner* p : all_planners())
      inter = std::min(inter, predict_seconds(*p, aggregates, between, params, true));
  }
  return predict_shared_memory(layout, params, in_place) + inter;
}

double predict_algorithm(const AlgorithmChoice& a, const Layout& layout, const Placement& placement,
                         const CostParams& params, bool in_place) {
  if (a.id == Algorithm::shared_memory)
    return placement.nodes() == 1 ? predict_shared_memory(layout, params, in_place)
                                  : std::numeric_limits<double>::infinity();
  if (a.id == Algorithm::hierarchical) return predict_hierarchical(layout, placement, params, in_place);
  return predict_seconds(planner_for(a.id), layout, placement, params, in_place, a.radix);
}

}  // namespace agx
