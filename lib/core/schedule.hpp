#pragma once
// A schedule: what one rank does, round by round, in terms of block indices.
// Algorithms produce schedules (plan); executors, the validator and the cost model
// consume them. No MPI here.
//
// Five kinds of operation, each marked with the level it runs on (Level, below;
// docs/algorithms.md, "Schedules"):
//   network or node   send / recv: a point-to-point message to or from a peer rank. Its
//                     level is the peers' placement: a planner of messages plans without
//                     one (every transfer `network`), whoever knows the placement marks
//                     them (place_levels: the cost model; the node planners mark their
//                     own), and the validator checks the marks against the placement
//   node              put: copy blocks into the node's shared segment; get: copy blocks
//                     out of it
//   node              signal: raise the rank's flags for blocks it placed in the segment
//                     (put, or received there); wait: until the flags of the ranks that
//                     signalled the blocks show them. A get, or a send from the segment,
//                     of a block another rank placed there follows a wait on it, and a
//                     wait follows the signal by an earlier round
//   node              write: copy blocks the rank holds straight into every other local
//                     rank's receive buffer (direct write: the call's receive buffers lie
//                     in memory the node maps, agx::allocate or MPI_Alloc_mem); a peer
//                     holds a written block once its wait for the writer's signal is over
//   node              copy: a local copy of blocks from the rank's send buffer into its
//                     receive buffer (the own block of an out-of-place call; nothing in
//                     place). Every planner's schedule has it: Planner::plan adds it to
//                     round 0 (add_own_copy), and the validator requires it
//   device            to_host / to_device: copies between a rank's device buffers and the
//                     pinned host mirror its messages run on (staging, docs/gpu.md);
//                     stage_on_device adds them to a host schedule (point-to-point or
//                     node: puts and gets then run on the mirror), and marks its own
//                     copy device-level (a copy on the device)
// A transfer may read from and write to the node's segment instead of the rank's own
// buffer (Place::segment): the leaders of a hierarchical all-gather exchange node
// aggregates in place in the segment.

#include <string>
#include <vector>

namespace agx {

/// Blocks [first, first + count) — never wraps; a wrapping run is two spans.
struct BlockSpan {
  int first = 0;
  int count = 0;
  bool operator==(const BlockSpan&) const = default;
};

/// Where a transfer's blocks live: the rank's receive buffer, or its node's segment.
enum class Place : unsigned char { buffer, segment };

/// The level an operation runs on; the cost model prices each level with its own α/β
/// (its values index them: core/cost_model.hpp).
enum class Level : unsigned char {
  node,     ///< inside one node: the segment's puts and gets, messages between its ranks
  network,  ///< between nodes
  device,   ///< between a device buffer and its host mirror, or on the device
};

/// The level's name, as describe() and the validator write it.
const char* level_name(Level l);

/// One message: to or from `peer`, carrying `blocks` in this order.
struct Transfer {
  int peer = 0;
  std::vector<BlockSpan> blocks;
  Place place = Place::buffer;
  Level level = Level::network;  ///< node when the peer shares this rank's node
};

/// A node-level operation on the node's shared segment (no MPI). The engine runs a
/// signal of the blocks a put of the same round copies with the put (the flag rises
/// chunk by chunk as the copy goes), any other signal when the round's other
/// operations are complete; a wait with the gets of the same blocks in its round (each
/// chunk is copied as its flag shows it), any other wait as a poll that the round ends
/// after.
struct NodeOp {
  enum class Kind : unsigned char {
    put,     ///< blocks the rank holds -> the segment (each block is put once per node)
    get,     ///< blocks waited for (in this round or before) -> the rank's buffer
    signal,  ///< raise the flags of blocks this rank placed in the segment by this round's end
    wait,    ///< until the flags of blocks signalled in an earlier round show them
    /// blocks the rank holds -> every other local rank's receive buffer (direct write;
    /// each block is written once per node, and signalled like a put); a waiting rank
    /// holds a written block once its wait for it is over
    write,
    /// blocks the rank holds, left where they are (its send buffer) for the node's other
    /// ranks to read (single copy; signalled like a put: the flag publishes where they
    /// lie); the rank's buffer stays the call's until its release
    expose,
    /// blocks exposed by their owners and waited for -> the rank's buffer, copied
    /// straight from the owners' buffers (single copy: process_vm_readv); once the read
    /// is over the rank tells every owner it is done with their buffers (one read per
    /// schedule)
    read,
    /// blocks the rank exposed: until every other local rank has read them (their
    /// reads are over), so that the caller's buffer is its own again when the call ends
    release,
  };
  Kind kind = Kind::put;
  std::vector<BlockSpan> blocks;
  /// node: the segment and the ranks' host memory; device: expose, signal, wait, read
  /// and release of a rank whose buffers are device memory (CUDA IPC: the single-copy
  /// schedule between device buffers, NodeShape::device_ipc); describe() writes `~device`
  Level level = Level::node;
};

/// A local copy: blocks from the rank's send buffer into their places in its receive
/// buffer, with no other rank taking part (the own block of an out-of-place call; in
/// place there is nothing to copy).
struct Copy {
  std::vector<BlockSpan> blocks;
  Level level = Level::node;  ///< the rank's own memory
};

/// A copy between the rank's device buffers and the pinned host mirror that the round
/// engine runs the messages on (staging: docs/gpu.md). Issued when its round is posted
/// and run on the device's copy engines while the rounds go on: a to_host of the own
/// block is what a send of it waits for (chunk by chunk) and a put of it waits for
/// (whole), a to_device copies each received message of its round as that message
/// completes and each block of its gets as the get has copied it; the call is over once
/// every device copy has completed.
struct DeviceCopy {
  enum class Kind : unsigned char {
    to_host,    ///< blocks the rank holds on the device -> the mirror (the own block)
    to_device,  ///< blocks delivered to the mirror in this round (receives, gets) -> the device buffer
  };
  Kind kind = Kind::to_host;
  std::vector<BlockSpan> blocks;
  Level level = Level::device;  ///< always
};

/// Everything in a round is posted at once and completes together. Sends may only
/// carry blocks the rank (or, from the segment, its node) held before the round (the
/// own block is held from the start: it is read from the send buffer); receives and
/// gets deliver at its end; a get reads what was in the segment before the round.
/// Copies are made once the round's messages are posted, so they overlap them.
struct Round {
  std::vector<Transfer> sends;
  std::vector<Transfer> recvs;
  std::vector<NodeOp> node;
  std::vector<Copy> copies;
  std::vector<DeviceCopy> device;  ///< empty unless staged (stage_on_device)
};

/// The plan of one rank. Before round 0 the rank holds its own block `rank`.
struct Schedule {
  int nranks = 0;
  int rank = 0;
  std::vector<Round> rounds;
};

/// What a planner is asked for.
struct Problem {
  int nranks = 1;
  int rank = 0;
  int radix = 0;  ///< k of radix-k planners (bruck); 0: the planner's default
};

/// Appends blocks [first, first + count) modulo n to `spans` as one or two spans.
void append_wrapped(std::vector<BlockSpan>& spans, int first, int count, int n);

/// Adds a send and/or receive to `round`; zero-block transfers are skipped.
void add_send(Round& round, int peer, std::vector<BlockSpan> blocks, Place place = Place::buffer);
void add_recv(Round& round, int peer, std::vector<BlockSpan> blocks, Place place = Place::buffer);
/// Adds a node operation to `round`; zero-block operations are skipped.
void add_node_op(Round& round, NodeOp::Kind kind, std::vector<BlockSpan> blocks);

/// Adds the copy of the own block `s.rank` to round 0 (a schedule of no rounds, one rank
/// alone, gets a round with only that copy), unless some round copies it already (a
/// planner that returns another planner's plan). Planner::plan calls it for every planner.
void add_own_copy(Schedule& s);

/// Marks every transfer of `s` with its level under a placement (`node_of[rank]`, one
/// entry per rank of `s`): node between ranks of one node, network between nodes.
void place_levels(Schedule& s, const std::vector<int>& node_of);

/// The schedule of a rank whose buffers are device memory, staged through a host
/// mirror: `host` with a to_host of the own block in round 0, a to_device in each round
/// of the blocks that reach the mirror there (its receives into the buffer, its gets),
/// and its own copy made on the device (device-level). A node schedule's puts then read
/// the own block from the mirror once its to_host is over, its gets copy into the
/// mirror. Schedules of messages, puts, gets and flags only: a write, an expose or a
/// read (direct write, single copy) has no staged form (the validator rejects it).
Schedule stage_on_device(const Schedule& host);

/// Whether `op` has its partner in `round`, on exactly its blocks: a put (write, expose)
/// and the signal it makes, a get (read) and the wait it covers (NodeOp). A wait for
/// written blocks has no get: the writes deliver them. A release waits by itself: always
/// paired.
bool paired(const Round& round, const NodeOp& op);

/// Whether every flag of `s` goes with a copy of its round: each put signalled in its
/// round and each signal a put's, each get waited for in its round and each wait a
/// get's (what the node planners plan; lib/hier's flag lines and single copy serve
/// only such schedules, since they raise and check a flag with the copy).
bool flags_with_copies(const Schedule& s);

/// The same all-gather with every flag an operation of its own: round k of `s` becomes
/// rounds 4k (its messages, puts, writes, exposes, copies, and the waits its sends from
/// the segment need), 4k+1 (its signals), 4k+2 (its other waits and its releases) and 4k+3
/// (its gets and reads). Valid when
/// `s` is, on every rank alike (AGX_TEST_SPLIT_FLAGS: the engine's signals and waits
/// without a copy of their round, on a real segment).
Schedule split_flags(const Schedule& s);

/// A node operation's name, as describe() and the validator write it.
const char* node_op_name(NodeOp::Kind k);

/// Whether `s` has device-level operations (a staged schedule).
bool is_staged(const Schedule& s);

/// Whether any round of `s` has node-level operations or segment transfers.
bool uses_segment(const Schedule& s);

/// Total number of blocks in a list of spans.
int block_count(const std::vector<BlockSpan>& spans);

/// Human-readable dump, one line per round (for tests and agx-info).
std::string describe(const Schedule& s);

}  // namespace agx
