#pragma once
// How a node schedule's operations move bytes inside one node: the round engine
// (core/executor.hpp) runs the shared_memory planner's rounds on one of these
// NodeSegments, picked per call by the call's block sizes (hier_allgather.cpp). Staged
// and flag-line copies run the same two rounds (put the own block, get every other
// block), with the same validation and price; single copy runs the planner's
// single-copy schedule (expose, read, release), validated and priced as such.
//
//   staged       (node_call.cpp) put copies the block into the node's segment chunk by
//                chunk, raising progress = (gen << 32) | chunks; a get copies each
//                chunk out as the owner's progress shows it. Bytes per rank: M in,
//                (N-1)·M out. Any block size, blocks as pieces, several nodes, and
//                calls in flight together (nonblocking, persistent).
//   flag lines   (InlineCopies) blocks of at most 4024 B travel inside their owner's
//                flag line: put writes the block behind seq = gen << 16 | bytes, a get
//                copies it once seq shows the call. The first cache miss per peer is the sequence word.
//   single copy  (SingleCopies, process_vm_readv) runs a schedule of its own, the
//                planner's single-copy variant (NodeShape::single_copy): expose publishes
//                the own block's address, read copies each peer's block straight from the
//                peer's buffer and then raises the done flag, release waits until every
//                peer's done flag shows the call. Bytes per rank: (N-1)·M, read once.
//
// The flag lines and single copy serve blocking calls on one node (a call is over on
// this rank before its next one starts, which is what lets two parities of flag line
// and one published address suffice); ranges of the caller's buffers only for single
// copy, pieces too for the flag lines (hier/block_pieces.hpp).

#include <agx/bytes.hpp>
#include <agx/error.hpp>

#include "core/message.hpp"
#include "core/node_segment.hpp"
#include "hier/hier_context.hpp"

#include <cstdint>
#include <exception>

namespace agx::hier {

/// Publishes the own block's size and place in the segment as this rank sees call `gen`
/// (slot.block_bytes/block_offset[gen & 1]), before the call's first flag mark: each word
/// holds the call's generation (its low 24 bits) above the value (its low 40 bits), so a
/// reader never takes a later call's words for this one's.
void publish_block(Slot& own, std::uint64_t gen, std::size_t bytes, std::uint64_t offset);

/// Publishes for call `gen` a block no reader expects (the ranks disagree on the counts and
/// this rank leaves the call): every reader of it fails with MPI_ERR_TRUNCATE
/// (block_disagreement) instead of waiting for a block that never comes.
void publish_no_block(Slot& own, std::uint64_t gen);

/// The MPI_ERR_TRUNCATE of a reader when local rank j published its block of call `gen`
/// with another size than `bytes` (block `block`) or at another place than `offset`: the
/// ranks gave different counts; null when they agree. Read after j's flag showed the
/// call; words a later call of j's has overwritten already are not checked.
std::exception_ptr block_disagreement(const HierContext& h, int j, std::uint64_t gen, int block,
                                      std::size_t bytes, std::uint64_t offset);

/// What the flag-line and single-copy copies share: one node, no segment (no message
/// touches it, no send waits for it), the call's generation.
class OneNodeCopies : public NodeSegment {
 public:
  explicit OneNodeCopies(HierContext& h) : h_(h), gen_(h.next_gen()) {}
  const Buffers& segment_buffers() const override { return none_; }
  const Layout& segment_layout() const override { return no_layout_; }
  bool holds(const Transfer&) override { return true; }
  void segment_round_done(bool) override {}
  /// The flag lines and the single copy raise a block's flag as they write or publish
  /// it, and a get checks it: they run schedules whose puts are signalled in their own
  /// round and whose waits come with their gets (the node planners'); any other signal or
  /// wait is an internal error (hier_allgather.cpp gives other schedules staged copies).
  void signal(const NodeOp&) override { unpaired("signal"); }
  bool try_wait(const NodeOp&) override { return unpaired("wait"); }
  [[noreturn]] static bool unpaired(const char* what);

 protected:
  /// A put not signalled in its round: unpaired("put without its signal").
  static void need_signal(bool signal) {
    if (!signal) unpaired("put without its signal");
  }

  HierContext& h_;
  std::uint64_t gen_;
  int misses_ = 0;  // polls that found a block not there yet (patience)

 private:
  Buffers none_{};
  Layout no_layout_;
};

class InlineCopies final : public OneNodeCopies {
 public:
  InlineCopies(HierContext& h, const BlockPieces* pieces) : OneNodeCopies(h), pieces_(pieces) {}
  void put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override;
  bool try_get(const NodeOp& op, GetCursor& c, const Buffers& mine, const Layout& layout) override;
  void finish() override;
  std::string waiting_for(const NodeOp& op, const GetCursor& c) const override;

 private:
  const BlockPieces* pieces_;
};

/// Runs the single-copy schedule (NodeShape::single_copy): expose publishes the own
/// block's address, read copies each peer's block with process_vm_readv and then raises
/// this rank's done flag, release polls every local rank's done flag. No put or get.
class SingleCopies final : public OneNodeCopies {
 public:
  using OneNodeCopies::OneNodeCopies;
  void put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override;
  bool try_get(const NodeOp& op, GetCursor& c, const Buffers& mine, const Layout& layout) override;
  void expose(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override;
  bool try_read(const NodeOp& op, GetCursor& c, const Buffers& mine, const Layout& layout) override;
  bool try_release(const NodeOp& op) override;
  void finish() override;
  std::string waiting_for(const NodeOp& op, const GetCursor& c) const override;

 private:
  void done_reading();  // raises this rank's done flag, once per call
  std::string release_waiting_for() const;
  int readers_done_ = 0;  // local ranks whose done flag shows this call (try_release)
  int done_ = 0;          // this rank's done flag raised
};

/// Calls f(block, chunks) for each block of `op` from cursor `c` on (chunks: the
/// block's chunks copied so far, which f advances), moving c on as f returns true;
/// false as soon as f does (the block is not all there yet).
template <class F>
bool for_blocks(const NodeOp& op, GetCursor& c, F f) {
  std::size_t index = 0;
  for (const BlockSpan& span : op.blocks) {
    const auto count = static_cast<std::size_t>(span.count);
    if (c.block >= index + count) {
      index += count;
      continue;
    }
    for (int b = span.first + static_cast<int>(c.block - index); b < span.first + span.count; ++b) {
      if (!f(b, c.chunk)) return false;
      ++c.block;
      c.chunk = 0;
    }
    index = c.block;
  }
  return true;
}

/// Whether local rank j wrote its flag line for call `gen` (a blocking call that took the
/// flag-line copies; also direct write's exchange): a reader on another path, whose
/// counts give it another path, then fails instead of waiting for a word j never writes.
bool other_path(const HierContext& h, int j, std::uint64_t gen);
/// The MPI_ERR_TRUNCATE of a reader whose block `block`'s owner j took another path.
Error another_path(const HierContext& h, int j, std::uint64_t gen, int block);
/// The place single copy publishes for its block (no place in the segment): a staged
/// reader of it, or a single-copy reader of a staged owner, sees a disagreement.
constexpr std::uint64_t single_copy_place = (std::uint64_t{1} << 40) - 1;

/// Polls of a get before it looks whether the owner took another path (other_path).
constexpr int patience = 16;

/// The block a get waits for (cursor `c` of `op`); -1 when the get is complete.
int waiting_block(const NodeOp& op, const GetCursor& c);

}  // namespace agx::hier
