#include "core/planner.hpp"

#include <agx/error.hpp>

#include "core/registry.hpp"

#include <vector>

namespace agx {

std::span<const Planner* const> all_planners() {
  static const std::vector<const Planner*> planners = [] {
    std::vector<const Planner*> v;
    for (const RegistryEntry& e : registry())
      if (e.planner != nullptr) v.push_back(&e.planner());
    return v;
  }();
  return planners;
}

const Planner& planner_for(Algorithm a) {
  const RegistryEntry& e = registry_entry(a);
  if (e.planner == nullptr)
    throw Error(MPI_ERR_ARG, "agx: no planner for algorithm '" + std::string(to_string(a)) + "'");
  return e.planner();
}

}  // namespace agx
