#pragma once
// The one algorithm interface and its registry. A planner declares what it can
// serve and plans a schedule; it never calls MPI.

#include <agx/algorithm.hpp>

#include "core/schedule.hpp"

#include <span>
#include <string>

namespace agx {

class Planner {
 public:
  virtual ~Planner() = default;
  virtual Algorithm id() const = 0;
  /// Empty when this algorithm can serve `p`; otherwise the reason it cannot.
  virtual std::string unsupported_reason(const Problem& p) const {
    (void)p;
    return {};
  }
  /// The schedule of rank p.rank among p.nranks. Pure: same input, same output.
  virtual Schedule plan(const Problem& p) const = 0;
};

/// Every concrete algorithm (not `automatic`), in table order.
std::span<const Planner* const> all_planners();

/// The planner of a concrete algorithm; throws agx::Error for `automatic`.
const Planner& planner_for(Algorithm a);

// One accessor per algorithm file.
const Planner& direct_planner();
const Planner& ring_planner();
const Planner& neighbor_exchange_planner();
const Planner& recursive_doubling_planner();
const Planner& bruck_planner();
const Planner& distance_halving_planner();

}  // namespace agx
