#pragma once
// What the round engine (core/executor.hpp) needs to run a schedule's node-level
// operations (core/schedule.hpp): one call's view of its node's shared segment. lib/hier
// implements it (hier/node_call.cpp); lib/core only calls it, so core knows nothing of
// shared memory, flags or topology.

#include <agx/bytes.hpp>

#include "core/schedule.hpp"

#include <cstddef>

namespace agx {

/// Where a get stands: the position in the op's blocks and in the current block.
struct GetCursor {
  std::size_t block = 0;  ///< index into the op's blocks, in order
  std::size_t chunk = 0;  ///< chunks of that block already copied
};

class NodeSegment {
 public:
  virtual ~NodeSegment() = default;
  /// The segment as a buffer, each block at its place there (for Place::segment).
  virtual const Buffers& segment_buffers() const = 0;
  virtual const Layout& segment_layout() const = 0;
  /// Copies the op's blocks (this rank holds them in `mine`) into the segment, raising
  /// this rank's flag as it goes. Never waits.
  virtual void put(const NodeOp& op, const Buffers& mine, const Layout& layout) = 0;
  /// Copies into `mine` whatever of the op's blocks has reached the segment, from
  /// `cursor` on, without waiting; true once every block is copied.
  virtual bool try_get(const NodeOp& op, GetCursor& cursor, const Buffers& mine,
                       const Layout& layout) = 0;
  /// Whether the segment holds the blocks of a send from it: blocks of this node's ranks
  /// once their owners' flags show them (never waits); blocks of other nodes are there
  /// by then, received into the segment by this very rank in an earlier round (the
  /// validator checks that contract).
  virtual bool holds(const Transfer& send) const = 0;
  /// The receives into the segment of one of this rank's rounds are complete.
  virtual void segment_round_done() = 0;
  /// Every round of this rank is complete.
  virtual void finish() = 0;
  /// For AGX_TIMEOUT's report: what the get waits for; empty when it is complete.
  virtual std::string waiting_for(const NodeOp& op, const GetCursor& cursor) const = 0;
};

}  // namespace agx
