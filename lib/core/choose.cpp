// The one chooser (choose.hpp): the algorithm, then the path, the first-call rule,
// direct write and the device settlement, from the call's facts.

#include "core/choose.hpp"

#include "core/algorithm_trials.hpp"
#include "core/config.hpp"
#include "core/select.hpp"

namespace agx {

bool is_node_path(Algorithm a) {
  return a != Algorithm::automatic && !algorithm_info(a).point_to_point;
}

std::size_t mean_block(const Layout& layout) {
  if (layout.nranks() == 0) return 0;
  if (layout.is_uniform()) return layout.bytes(0);
  std::size_t total = 0;
  for (int b = 0; b < layout.nranks(); ++b) total += layout.bytes(b);
  return total / static_cast<std::size_t>(layout.nranks());
}

bool is_automatic(const Options& options) {
  return options.algorithm == Algorithm::automatic &&
         !(options.use_environment && config().forced.has_value());
}

CallChoice choose(Selector& selector, const Layout& layout, const Options& options,
                  const CallFacts& facts) {
  CallChoice c;
  // Nonblocking and persistent calls run a node path on the round engine, staged (never
  // by single copy): priced so.
  const bool engine = facts.kind == CallKind::nonblocking || facts.kind == CallKind::persistent;
  c.algorithm = select_algorithm(selector, layout, options, facts.in_place, engine);
  c.device = facts.device;
  if (layout.nranks() == 1) {
    c.path = CallPath::own_copy;
    return c;
  }
  const bool automatic = is_automatic(options);
  // shared_memory tries direct write inside its node path; on one node every other
  // automatic choice is a point-to-point one.
  c.try_direct_write = facts.kind == CallKind::blocking && automatic && facts.direct_write_size &&
                       selector.placement().nodes() == 1 &&
                       c.algorithm.id != Algorithm::shared_memory;
  c.path = is_node_path(c.algorithm.id) ? CallPath::node : CallPath::point_to_point;
  const bool first_call = automatic && facts.kind != CallKind::persistent && !facts.node_begun;
  if (c.path == CallPath::node && (first_call || facts.messages_only)) {
    c.algorithm = selector.best_point_to_point(layout, facts.in_place);
    c.path = CallPath::point_to_point;
    c.deferred = true;
  }
  // 6. The rival (see the header): large blocking automatic calls on one node.
  if (automatic && (facts.kind == CallKind::blocking || facts.kind == CallKind::query) && !c.deferred &&
      !facts.device &&
      !facts.messages_only && selector.placement().nodes() == 1 &&
      mean_block(layout) >= AlgorithmTrials::min_bytes &&
      selector.measured(layout).id == Algorithm::automatic) {
    if (c.path == CallPath::node) {
      c.rival.algorithm = selector.best_point_to_point(layout, facts.in_place);
      c.rival.path = CallPath::point_to_point;
      c.rival.try_direct_write = facts.direct_write_size;
    } else {
      c.rival.algorithm = AlgorithmChoice{Algorithm::shared_memory, 0};
      c.rival.path = CallPath::node;
    }
  }
  return c;
}

CallChoice rival_choice(const CallChoice& c) {
  CallChoice r = c;
  r.algorithm = c.rival.algorithm;
  r.path = c.rival.path;
  r.try_direct_write = c.rival.try_direct_write;
  r.rival = {};
  return r;
}

}  // namespace agx
