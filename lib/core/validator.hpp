#pragma once
// The validator: a symbolic run of all N ranks' schedules in one process, no MPI.

#include <agx/bytes.hpp>

#include "core/planner.hpp"
#include "core/schedule.hpp"

#include <string>
#include <vector>

namespace agx {

/// Checks that, round by round, every receive matches a send from its peer in the
/// same round (same blocks, same order, same place), nobody sends a block it does not
/// hold, nobody receives a block it already holds, and every rank ends with all blocks,
/// its own block copied into its receive buffer exactly once (a copy of another block
/// is refused: the send buffer holds only the own one).
/// Node-level operations run on one symbolic segment per node (`node_of[rank]`; empty:
/// all ranks on one node): a put needs the block in the rank's hands and must be the
/// only put or segment receive of that block on its node; a get, or a send from the
/// segment, needs the block in the segment since an earlier round. A write (direct
/// write) needs the block in the rank's hands and must be its node's only put or write
/// of it; each other rank of the node holds it once its wait for it is over. Since every wait
/// then only waits for a strictly earlier round, schedules that pass cannot deadlock.
/// With a placement, every transfer must be marked with the level its peers' nodes give
/// it (core/schedule.hpp: node on one node, network between nodes) and every node
/// operation node-level; without one, marks are not checked (planners of messages plan
/// without a placement).
/// Returns an empty string when the schedules are correct, else the first problem.
std::string validate(const std::vector<Schedule>& per_rank, const std::vector<int>& node_of = {});

/// Plans `planner` for every rank of `nranks` and validates the result.
std::string validate(const Planner& planner, int nranks);

}  // namespace agx

namespace agx {

/// Checks the byte level of correct schedules under a layout: for every transfer the
/// sender and the receiver cut the same number of MPI messages of the same sizes, no
/// message exceeds max_message_bytes, and zero-byte transfers send nothing.
std::string validate_messages(const std::vector<Schedule>& per_rank, const Layout& layout,
                              std::size_t max_message_bytes);

}  // namespace agx
