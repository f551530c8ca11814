#include "core/select.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/planner.hpp"
#include "core/registry.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <string>

namespace agx {
namespace {

std::size_t mean_block_bytes(const Layout& layout) {
  std::size_t total = 0;
  for (int b = 0; b < layout.nranks(); ++b) total += layout.bytes(b);
  return layout.nranks() == 0 ? 0 : total / static_cast<std::size_t>(layout.nranks());
}

// Size classes are powers of two of the mean block: 0, 1, 2-3, 4-7, ...
int size_class(const Layout& layout) { return std::bit_width(mean_block_bytes(layout)); }

bool can_serve(Algorithm a, const Placement& p) {
  if (a == Algorithm::automatic) return false;
  if (a == Algorithm::shared_memory) return p.nodes() == 1;
  if (a == Algorithm::hierarchical) return p.nodes() > 1 && p.nodes() < p.nranks();
  return planner_for(a).unsupported_reason({p.nranks(), 0}).empty();
}

}  // namespace

Selector::Selector(Placement placement, Tuning tuning, NodeStageParams stage)
    : placement_(std::move(placement)), tuning_(std::move(tuning)), stage_(stage) {
  std::map<int, int> on_node;  // node -> its ranks
  for (int r = 0; r < placement_.nranks(); ++r)
    ranks_per_node_ = std::max(ranks_per_node_, ++on_node[placement_.node_of(r)]);
  if (tuning_.source == "built-in defaults") tuning_.params = CostParams{};
  if (tuning_.group_nodes > 0) {  // the tuning file's groups of consecutive nodes
    std::vector<int> group_of_node(static_cast<std::size_t>(placement_.nodes()));
    for (std::size_t j = 0; j < group_of_node.size(); ++j)
      group_of_node[j] = static_cast<int>(j) / tuning_.group_nodes;
    placement_ = placement_.with_groups(std::move(group_of_node));
  }
}

AlgorithmChoice Selector::measured(const Layout& layout) const {
  const AlgorithmChoice a =
      tuning_.measured(placement_.nranks(), ranks_per_node_, mean_block_bytes(layout));
  return a.id != Algorithm::automatic && can_serve(a.id, placement_) ? a : AlgorithmChoice{};
}

std::vector<std::pair<AlgorithmChoice, double>> Selector::predictions(const Layout& layout,
                                                                      bool in_place) const {
  std::vector<std::pair<AlgorithmChoice, double>> out;
  for (const AlgorithmChoice& a : algorithm_variants())
    if (can_serve(a.id, placement_))
      out.emplace_back(a, predict_algorithm(a, layout, placement_, tuning_.params, in_place, stage_));
  return out;
}

AlgorithmChoice Selector::choose(const Layout& layout, bool in_place) {
  if (placement_.nranks() == 1) return {Algorithm::direct, 0};
  const auto key = std::make_tuple(size_class(layout), in_place, layout.is_uniform());
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  AlgorithmChoice best = measured(layout);
  if (best.id == Algorithm::automatic) {
    double best_s = std::numeric_limits<double>::infinity();
    for (const auto& [a, s] : predictions(layout, in_place))
      if (s < best_s) best_s = s, best = a;  // ties: table order (first wins)
  }
  cache_.emplace(key, best);
  return best;
}

std::string Selector::reason(const Layout& layout, bool in_place) const {
  if (placement_.nranks() == 1) return "one rank";
  if (measured(layout).id != Algorithm::automatic) return "measured fastest (" + tuning_.source + ")";
  (void)in_place;
  return "lowest predicted time (" + tuning_.source + ")";
}

AlgorithmChoice select_algorithm(CommContext& ctx, const Layout& layout, const Options& options,
                                 bool in_place) {
  if (options.radix != 0 && options.algorithm == Algorithm::automatic)
    throw Error(MPI_ERR_ARG, "agx: Options::radix = " + std::to_string(options.radix) +
                                 " needs a forced algorithm that takes a radix (bruck)");
  AlgorithmChoice choice = resolve({options.algorithm, options.radix});
  if (choice.id == Algorithm::automatic && options.use_environment) {
    const Config& c = config();
    if (!c.invalid_algo.empty())
      throw Error(MPI_ERR_ARG, "agx: AGX_ALGO='" + c.invalid_algo + "': " + c.invalid_algo_reason);
    if (c.forced) choice = *c.forced;
  }
  const Algorithm a = choice.id;
  if (a == Algorithm::automatic) return ctx.selector().choose(layout, in_place);
  if (a == Algorithm::shared_memory && !can_serve(a, ctx.selector().placement()))
    throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve this call: its " +
                                 std::to_string(ctx.size()) + " ranks span " +
                                 std::to_string(ctx.selector().placement().nodes()) +
                                 " nodes (use 'hierarchical')");
  if (a == Algorithm::hierarchical || a == Algorithm::shared_memory) return choice;  // lib/hier
  const std::string why = planner_for(a).unsupported_reason({ctx.size(), 0, choice.radix});
  if (!why.empty())
    throw Error(MPI_ERR_ARG, "agx: algorithm '" + to_string(choice) + "' cannot serve this call: " + why);
  return choice;
}

std::string describe_selection(CommContext& ctx, const std::vector<std::size_t>& sizes) {
  Selector& sel = ctx.selector();
  const CostParams& p = sel.tuning().params;
  std::ostringstream os;
  os << "tuning: " << sel.tuning().source << '\n';
  for (const auto& h : sel.tuning().header) os << "  " << h << '\n';
  char line[256];
  std::snprintf(line, sizeof line,
                "  node:    alpha %.2f us, overhead %.2f us/msg, %.2f GB/s\n"
                "  network: alpha %.2f us, overhead %.2f us/msg, %.2f GB/s\n"
                "  copy %.2f GB/s, node sync %.2f us, measured winners: %zu\n"
                "  groups: %s\n",
                p.node.alpha_s * 1e6, p.node.overhead_s * 1e6, 1e-9 / p.node.beta_s_per_byte,
                p.network.alpha_s * 1e6, p.network.overhead_s * 1e6, 1e-9 / p.network.beta_s_per_byte,
                1e-9 / p.copy_s_per_byte, p.node_sync_s * 1e6, sel.tuning().best.size(),
                sel.tuning().group_nodes > 0 && p.group_link_s_per_byte > 0
                    ? (std::to_string(sel.tuning().group_nodes) + " nodes each, " +
                       std::to_string(1e-9 / p.group_link_s_per_byte) + " GB/s between two groups").c_str()
                    : "none");
  os << line;
  os << "placement: " << ctx.size() << " ranks on " << sel.placement().nodes() << " node(s), up to "
     << sel.ranks_per_node() << " per node\n";
  os << "predicted us per call (slowest rank), * = auto's choice:\n";
  for (std::size_t bytes : sizes) {
    const Layout layout = Layout::uniform(ctx.size(), bytes);
    const AlgorithmChoice chosen = sel.choose(layout, false);
    std::snprintf(line, sizeof line, "%10zu B", bytes);
    os << line;
    for (const auto& [a, s] : sel.predictions(layout, false)) {
      std::snprintf(line, sizeof line, "  %s%s %.1f", a == chosen ? "*" : "",
                    to_string(a).c_str(), s * 1e6);
      os << line;
    }
    os << "  [" << sel.reason(layout, false) << "]";
    os << '\n';
  }
  return os.str();
}

}  // namespace agx
