#include "core/select.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/choose.hpp"
#include "core/config.hpp"
#include "core/nonblocking.hpp"
#include "core/planner.hpp"
#include "core/registry.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

namespace agx {
namespace {

// Size classes are powers of two of the mean block: 0, 1, 2-3, 4-7, ...
int size_class(const Layout& layout) { return std::bit_width(mean_block(layout)); }

bool can_serve(Algorithm a, const Placement& p) {
  if (a == Algorithm::automatic) return false;
  if (a == Algorithm::shared_memory) return p.nodes() == 1;
  if (a == Algorithm::hierarchical) return p.nodes() > 1 && p.nodes() < p.nranks();
  return planner_for(a).unsupported_reason({p.nranks(), 0}).empty();
}

// The bytes that make selectors alike (Selector::Memo): placement, cost parameters,
// measured winners, node stage.
template <class T>
void append(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string fingerprint(const Placement& p, const Tuning& t, const NodeStageParams& stage) {
  std::string key;
  key.reserve(static_cast<std::size_t>(p.nranks()) * 8 + 256);
  for (int r = 0; r < p.nranks(); ++r) append(key, p.node_of(r)), append(key, p.group_of(r));
  append(key, static_cast<const void*>(p.routes()));  // a simulator's routes (null in libagx)
  append(key, t.params);  // doubles and sizes only: no padding
  append(key, t.group_nodes);
  for (const MeasuredBest& b : t.best)
    append(key, b.ranks), append(key, b.ranks_per_node), append(key, b.max_bytes),
        append(key, b.algorithm.id), append(key, b.algorithm.radix);
  append(key, stage.leaders);
  append(key, stage.direct_write), append(key, stage.single_copy);
  const AlgorithmChoice inter = stage.inter.value_or(AlgorithmChoice{Algorithm::automatic, -1});
  append(key, inter.id), append(key, inter.radix);
  return key;
}

}  // namespace

struct Selector::Memo {
  std::mutex mutex;
  // (exact block bytes, in place, engine) -> (choice, best point-to-point; id automatic:
  // unknown). The best point-to-point one does not depend on the engine: kept on the
  // entry without it.
  std::map<std::tuple<std::size_t, bool, bool>, std::pair<AlgorithmChoice, AlgorithmChoice>> entries;
};

namespace {

Selector::Memo* memo_for(const std::string& key) {
  static std::mutex mutex;
  // Never destroyed (selectors of contexts freed at exit may still point in); reachable
  // from here to the end, so no leak checker counts it lost.
  static auto* memos = new std::map<std::string, std::unique_ptr<Selector::Memo>>;
  std::lock_guard lock(mutex);
  auto it = memos->find(key);
  if (it != memos->end()) return it->second.get();
  if (memos->size() >= 64) return nullptr;  // many placements: no memo for the rest
  return memos->emplace(key, std::make_unique<Selector::Memo>()).first->second.get();
}

constexpr std::size_t memo_entries = 1024;  // per memo; beyond, calls compute

}  // namespace

Selector::Selector(Placement placement, Tuning tuning, NodeStageParams stage)
    : placement_(std::move(placement)), tuning_(std::move(tuning)), stage_(stage), engine_stage_(stage) {
  engine_stage_.single_copy = false;
  engine_stage_.direct_write = false;
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
  memo_ = memo_for(fingerprint(placement_, tuning_, stage_));
}

AlgorithmChoice Selector::measured(const Layout& layout) const {
  const AlgorithmChoice a =
      tuning_.measured(placement_.nranks(), ranks_per_node_, mean_block(layout));
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

std::optional<std::pair<AlgorithmChoice, double>> Selector::cheapest(
    const Layout& layout, bool in_place, bool (*keep)(const AlgorithmChoice&), bool engine) const {
  const NodeStageParams& stage = this->stage(engine);
  struct Candidate {
    AlgorithmChoice choice;
    double bound;  // a lower bound of its prediction
    std::size_t order;  // table order, for ties
  };
  // The bounds cost a few ranks' schedules beyond 256 ranks (sampled); below, every
  // rank's, as much as the prediction itself: none then (0), table order.
  const bool bounds = placement_.nranks() > 256;
  std::vector<Candidate> cands;
  for (const AlgorithmChoice& a : algorithm_variants())
    if (can_serve(a.id, placement_) && keep(a))
      cands.push_back({a, bounds ? predict_algorithm(a, layout, placement_, tuning_.params, in_place, stage, 0.0) : 0.0,
                       cands.size()});
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate& x, const Candidate& y) { return x.bound < y.bound; });
  std::optional<std::pair<AlgorithmChoice, double>> best;
  std::size_t best_order = 0;
  for (const Candidate& c : cands) {
    const double best_s = best ? best->second : std::numeric_limits<double>::infinity();
    if (c.bound > best_s) break;  // so are the bounds after it: none can win or tie
    const double s = predict_algorithm(c.choice, layout, placement_, tuning_.params, in_place, stage, best_s);
    if (!best || s < best_s || (s == best_s && c.order < best_order)) best = {c.choice, s}, best_order = c.order;
  }
  return best;
}

AlgorithmChoice Selector::choose(const Layout& layout, bool in_place, bool engine) {
  if (placement_.nranks() == 1) return {Algorithm::direct, 0};
  engine = engine && (stage_.single_copy || stage_.direct_write);  // (otherwise both price alike)
  const auto key = std::make_tuple(size_class(layout), in_place, layout.is_uniform(), engine);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  const bool memoized = memo_ != nullptr && layout.is_uniform() && layout.nranks() > 0;
  const std::tuple<std::size_t, bool, bool> exact{memoized ? layout.bytes(0) : 0, in_place, engine};
  if (memoized) {
    std::lock_guard lock(memo_->mutex);
    if (auto it = memo_->entries.find(exact); it != memo_->entries.end()) {
      cache_.emplace(key, it->second.first);
      return it->second.first;
    }
  }
  AlgorithmChoice best = measured(layout);
  if (best.id == Algorithm::automatic)
    if (const auto c = cheapest(layout, in_place, [](const AlgorithmChoice&) { return true; }, engine)) best = c->first;
  cache_.emplace(key, best);
  if (memoized) {
    std::lock_guard lock(memo_->mutex);
    if (memo_->entries.size() < memo_entries)
      memo_->entries.emplace(exact, std::make_pair(best, AlgorithmChoice{Algorithm::automatic, 0}));
  }
  return best;
}

AlgorithmChoice Selector::best_point_to_point(const Layout& layout, bool in_place) {
  const bool memoized = memo_ != nullptr && layout.is_uniform() && layout.nranks() > 0;
  const std::tuple<std::size_t, bool, bool> exact{memoized ? layout.bytes(0) : 0, in_place, false};
  if (memoized) {
    std::lock_guard lock(memo_->mutex);
    auto it = memo_->entries.find(exact);
    if (it != memo_->entries.end() && it->second.second.id != Algorithm::automatic)
      return it->second.second;
  }
  AlgorithmChoice best{Algorithm::ring, 0};
  if (const auto c = cheapest(layout, in_place, [](const AlgorithmChoice& a) { return !is_node_path(a.id); }))
    best = c->first;  // same on every rank
  if (memoized) {
    std::lock_guard lock(memo_->mutex);
    auto it = memo_->entries.find(exact);
    if (it != memo_->entries.end()) it->second.second = best;
  }
  return best;
}

std::string Selector::reason(const Layout& layout, bool in_place) const {
  if (placement_.nranks() == 1) return "one rank";
  if (measured(layout).id != Algorithm::automatic) return "measured fastest (" + tuning_.source + ")";
  (void)in_place;
  return "lowest predicted time (" + tuning_.source + ")";
}

namespace {

// The option, then AGX_ALGO: select_algorithm's checks that need no communicator.
AlgorithmChoice option_or_environment(const Options& options) {
  if (options.radix != 0 && options.algorithm == Algorithm::automatic)
    throw Error(MPI_ERR_ARG, "agx: Options::radix = " + std::to_string(options.radix) +
                                 " needs a forced algorithm that takes a radix (bruck)");
  AlgorithmChoice choice = resolve({options.algorithm, options.radix});
  if (choice.id == Algorithm::automatic && options.use_environment) {
    const Config& c = config();
    if (const InvalidSetting* bad = process_settings().invalid_of("AGX_ALGO"))
      throw Error(MPI_ERR_ARG, "agx: " + bad->message());
    if (c.forced) choice = *c.forced;
  }
  return choice;
}

void check_serves(const AlgorithmChoice& choice, int nranks) {
  const std::string why = planner_for(choice.id).unsupported_reason({nranks, 0, choice.radix});
  if (!why.empty())
    throw Error(MPI_ERR_ARG, "agx: algorithm '" + to_string(choice) + "' cannot serve this call: " + why);
}

}  // namespace

AlgorithmChoice forced_choice(const Options& options, int nranks) {
  const AlgorithmChoice choice = option_or_environment(options);
  const Algorithm a = choice.id;
  if (a != Algorithm::automatic && a != Algorithm::hierarchical && a != Algorithm::shared_memory)
    check_serves(choice, nranks);
  return choice;
}

AlgorithmChoice select_algorithm(Selector& selector, const Layout& layout, const Options& options,
                                 bool in_place, bool engine) {
  const AlgorithmChoice choice = option_or_environment(options);
  const Algorithm a = choice.id;
  const Placement& placement = selector.placement();
  if (a == Algorithm::automatic) return selector.choose(layout, in_place, engine);
  if (a == Algorithm::shared_memory && !can_serve(a, placement))
    throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve this call: its " +
                                 std::to_string(placement.nranks()) + " ranks span " +
                                 std::to_string(placement.nodes()) + " nodes (use 'hierarchical')");
  if (is_node_path(a)) return choice;  // lib/hier
  check_serves(choice, placement.nranks());
  return choice;
}

AlgorithmChoice select_algorithm(CommContext& ctx, const Layout& layout, const Options& options,
                                 bool in_place) {
  return select_algorithm(ctx.selector(), layout, options, in_place);
}

std::string describe_selection(CommContext& ctx, const std::vector<std::size_t>& sizes) {
  Selector& sel = ctx.selector();
  const CostParams& p = sel.tuning().params;
  std::ostringstream os;
  os << "tuning: " << sel.tuning().source << '\n';
  for (const auto& h : sel.tuning().header) os << "  " << h << '\n';
  char line[256];
  // The two levels: node (ranks on one node), network (ranks on different nodes).
  auto level = [&line](const char* name, const LevelCost& c) {
    std::string s;
    std::snprintf(line, sizeof line, "  %-8s alpha %.2f us, overhead %.2f us/msg, %.3f GB/s", name,
                  c.alpha_s * 1e6, c.overhead_s * 1e6, 1e-9 / c.beta_s_per_byte);
    s = line;
    if (c.eager_bytes > 0 && c.rendezvous_s > 0) {
      std::snprintf(line, sizeof line, ", rendezvous %.2f us above %zu B", c.rendezvous_s * 1e6, c.eager_bytes);
      s += line;
    }
    return s + '\n';
  };
  os << level("node:", p.node) << level("network:", p.network);
  std::snprintf(line, sizeof line,
                "  copy %.2f GB/s, node sync %.2f us, measured winners: %zu\n"
                "  groups: %s\n",
                1e-9 / p.copy_s_per_byte, p.node_sync_s * 1e6, sel.tuning().best.size(),
                sel.tuning().group_nodes > 0 && p.group_link_s_per_byte > 0
                    ? (std::to_string(sel.tuning().group_nodes) + " nodes each, " +
                       std::to_string(1e-9 / p.group_link_s_per_byte) + " GB/s between two groups").c_str()
                    : "none");
  os << line;
  if (!p.copy_rates.empty()) {
    os << "  copy by call size (bytes per rank: GB/s):";
    for (const CopyRate& c : p.copy_rates) {
      std::snprintf(line, sizeof line, " %zu: %.1f", c.bytes, 1e-9 / c.s_per_byte);
      os << line;
    }
    os << '\n';
  }
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
