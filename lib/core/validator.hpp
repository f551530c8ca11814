#pragma once
// The validator: a symbolic run of all N ranks' schedules in one process, no MPI.

#include "core/planner.hpp"
#include "core/schedule.hpp"

#include <string>
#include <vector>

namespace agx {

/// Checks that, round by round, every receive matches a send from its peer in the
/// same round (same blocks, same order), nobody sends a block it does not hold,
/// nobody receives a block it already holds, and every rank ends with all blocks.
/// Returns an empty string when the schedules are correct, else the first problem.
std::string validate(const std::vector<Schedule>& per_rank);

/// Plans `planner` for every rank of `nranks` and validates the result.
std::string validate(const Planner& planner, int nranks);

}  // namespace agx
