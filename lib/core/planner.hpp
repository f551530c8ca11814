#pragma once
// The one algorithm interface. A planner declares what it can serve and plans a
// schedule; it never calls MPI. The planners are listed in the registry (registry.hpp).

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

/// Every planner of the registry, in registry order.
std::span<const Planner* const> all_planners();

/// The planner of an algorithm; throws agx::Error (MPI_ERR_ARG) for one without a
/// planner (`automatic`, and the paths lib/hier runs).
const Planner& planner_for(Algorithm a);

}  // namespace agx
