#include "core/planner.hpp"

#include <agx/error.hpp>

#include <array>

namespace agx {

std::span<const Planner* const> all_planners() {
  static const std::array<const Planner*, 6> planners{
      &direct_planner(), &ring_planner(), &neighbor_exchange_planner(),
      &recursive_doubling_planner(), &bruck_planner(),
      &distance_halving_planner()};
  return planners;
}

const Planner& planner_for(Algorithm a) {
  for (const Planner* p : all_planners())
    if (p->id() == a) return *p;
  throw Error(MPI_ERR_ARG, "agx: no planner for algorithm '" + std::string(to_string(a)) + "'");
}

}  // namespace agx
