#pragma once
// What the round engine (core/executor.hpp) needs to run a schedule's node-level
// operations (core/schedule.hpp): one call's view of its node's shared segment. lib/hier
// implements it (hier/node_call.cpp); lib/core only calls it, so core knows nothing of
// shared memory, flags or topology.

#include <agx/bytes.hpp>

#include "core/schedule.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

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
  /// Copies the op's blocks (this rank holds them in `mine`) into the segment. `signal`:
  /// the round signals them too (a signal of the same blocks), so this rank's flag rises
  /// as the copy goes, chunk by chunk. Never waits.
  virtual void put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) = 0;
  /// Copies the op's blocks (this rank holds them in `mine`) straight into every other
  /// local rank's receive buffer (direct write); `signal`: the round signals them, so the
  /// flag rises once every copy is made. Never waits. Only a segment made for direct
  /// write serves it; any other: MPI_ERR_INTERN.
  virtual void write(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal);
  /// Whether the round's write made the round's own-block copy as well, and the engine's
  /// blocking lane leaves it (local_rounds.hpp): a segment that writes the own block
  /// chunk by chunk to its peers may copy each chunk to its own receive buffer while the
  /// chunk is in cache (hier/direct_write.cpp). The same copy of the same round, the send
  /// buffer read once. Asked once per round, after its writes; false here.
  bool took_own_copy() { return false; }
  /// Leaves the op's blocks (the own block, in `mine`) where they lie for the node's
  /// other ranks to read (single copy); `signal`: the round signals them, so the flag
  /// publishes their place. Never waits. Only single-copy segments serve it; any other:
  /// MPI_ERR_INTERN.
  virtual void expose(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal);
  /// Copies into `mine`, straight from their owners' buffers, whatever of the op's blocks
  /// their owners have exposed, from `cursor` on, without waiting; true once every block
  /// is copied, and then this rank is done with its owners' buffers (it tells them).
  /// Only single-copy segments serve it; any other: MPI_ERR_INTERN.
  virtual bool try_read(const NodeOp& op, GetCursor& cursor, const Buffers& mine,
                        const Layout& layout);
  /// Whether every other local rank is done reading the op's blocks (this rank exposed
  /// them); never waits. Only single-copy segments serve it; any other: MPI_ERR_INTERN.
  virtual bool try_release(const NodeOp& op);
  /// A signal that no put or write of its round makes: the blocks are in the segment (put by this
  /// rank in an earlier round, or received into it by this rank): raise their flags.
  virtual void signal(const NodeOp& op) = 0;
  /// A wait that no get of its round covers: whether the flags of its blocks show them
  /// (never waits). A get checks the flags of what it copies itself, chunk by chunk.
  virtual bool try_wait(const NodeOp& op) = 0;
  /// Copies into `mine` whatever of the op's blocks has reached the segment, from
  /// `cursor` on, without waiting; true once every block is copied.
  virtual bool try_get(const NodeOp& op, GetCursor& cursor, const Buffers& mine,
                       const Layout& layout) = 0;
  /// Whether the segment holds the blocks of a send from it: blocks of this node's ranks
  /// once their owners' flags show them (never waits); blocks of other nodes are there
  /// by then, received into the segment by this very rank in an earlier round (the
  /// validator checks that contract).
  /// A local owner whose size of a block disagrees counts as holding it (disagree()):
  /// the engine then sends it one byte short, so that the receivers fail too.
  virtual bool holds(const Transfer& send) = 0;
  /// The receives into the segment of one of this rank's rounds are complete (before
  /// the round's signals); `truncated`: one of this call's receives so far brought another
  /// size than planned (the ranks disagree on the counts), so blocks read from the
  /// segment may be short.
  virtual void segment_round_done(bool truncated) = 0;
  /// Every round of this rank is complete.
  virtual void finish() = 0;
  /// After finish(), polled until true: whether the node is done with this rank's memory
  /// (a single copy's peers read the caller's own buffer: it stays the call's until they
  /// are through). Never waits.
  virtual bool finished() { return true; }
  /// For AGX_TIMEOUT's report: what the get (read, release) waits for; empty when it is
  /// complete.
  virtual std::string waiting_for(const NodeOp& op, const GetCursor& cursor) const = 0;
  /// After a try_get or finished() that returned false: the flag word it waits for and
  /// the value it read there (word null: none recorded). A blocking caller on one node
  /// may watch that word and poll the engine again only once it moves.
  struct Awaited {
    const std::atomic<std::uint64_t>* word = nullptr;
    std::uint64_t seen = 0;
  };
  Awaited awaited() const { return awaited_; }
  /// The first disagreement on the counts a get found (MPI_ERR_TRUNCATE: the owner wrote
  /// its block with another size), or null. The get skipped that block (its place in the
  /// receive buffer keeps what it held) and the schedule went on, so that no rank is left
  /// waiting for this one; the engine throws it once every round is done.
  std::exception_ptr disagreement() const { return disagreement_; }
  /// Whether there is one (no copy of it: a blocking call asks after every call).
  bool disagreed() const { return static_cast<bool>(disagreement_); }
  /// How many copies (or readers' flags) this call's gets and finished() have seen so
  /// far: AGX_TIMEOUT's clock restarts when it moves.
  std::uint64_t steps() const { return steps_; }
  /// For AGX_TIMEOUT's report, after the last round: what finished() waits for.
  virtual std::string finish_waiting_for() const { return ""; }

 protected:
  /// Records what a get (or finished()) waits for: returns false, for `return awaiting(...)`.
  bool awaiting(const std::atomic<std::uint64_t>& word, std::uint64_t seen) {
    awaited_ = {&word, seen};
    return false;
  }

  /// Records a disagreement (the current exception, or `e`); true: the get goes on as if
  /// the block were copied, for `return disagree(...)`.
  bool disagree(std::exception_ptr e) {
    if (!disagreement_) disagreement_ = std::move(e);
    return true;
  }

  void step() { ++steps_; }  ///< a get copied something (or a reader finished)

 private:
  Awaited awaited_;
  std::uint64_t steps_ = 0;
  std::exception_ptr disagreement_;
};

}  // namespace agx
