#pragma once
// The round engine: runs one rank's schedule on host memory, for blocking, nonblocking
// and persistent calls alike. It is a resumable state machine: start() posts round 0,
// test() advances without blocking, wait() blocks until done. Blocking calls use start()
// + wait(), nonblocking ones start() + test(), a plan (persistent.hpp) start() + test()
// on persistent requests made once (below).
//
// Two checks ride on it (docs/reliability.md). AGX_TIMEOUT (timeout.hpp): test() and
// wait() poll with MPI_Testsome, so that every completed message counts as progress and
// the pending receives of the round are known when a hang is reported; wait() spins,
// then yields between polls. Unset, wait() is MPI_Waitall as before. AGX_INTEGRITY and
// its test seam (integrity.hpp): a checksum message follows every transfer's data, and
// the blocks of a round are checked when the round ends.
//
// A staged schedule (device-level operations: lib/cuda's pinned mirror of device
// buffers) runs on this same engine: its device copies go to a DeviceCopies (below) as
// the schedule places them, the messages run on the mirror.
//
// Messages: on a context's private communicator a point-to-point schedule runs from its
// compiled descriptors (descriptors.hpp, cached on the context per call shape; buffers
// bound at start()), and the per-round vectors are the compiled schedule's, kept between
// calls: a repeated call of one shape allocates nothing. Elsewhere (node schedules, block
// pieces, other communicators, AGX_DESCRIPTOR_CACHE=0) each transfer is planned per call
// (message.hpp) with datatypes over MPI_BOTTOM made and freed per round.
//
// Persistent (make_persistent, a plan's engine: persistent.hpp): the same post loop runs
// once per round with MPI_Send_init/MPI_Recv_init instead of MPI_Isend/MPI_Irecv, and each
// round's requests, with what the engine knows of them, are kept (StoredRound). Every
// start() then MPI_Startall's a round's requests where it would post them, and the
// completion, size, integrity, timeout and abandon code is the one above; a start
// allocates nothing and creates no datatype. A round that forwards a block which came
// with the wrong size is posted per call instead (its sends one byte short, as always).
// An abandoned round frees its sends: the execution is failed() from then on.

#include <mpi.h>

#include <agx/bytes.hpp>

#include "core/descriptors.hpp"
#include "core/integrity.hpp"
#include "core/message.hpp"
#include "core/node_segment.hpp"
#include "core/schedule.hpp"
#include "core/timeout.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <vector>

namespace agx {

/// The MPI arguments of one message over `count` memory segments: the first segment
/// as MPI_BYTE, or an hindexed datatype over MPI_BOTTOM (created, committed and
/// appended to `types`, which the caller frees).
struct MessageArgs {
  void* base = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_BYTE;
};
MessageArgs message_args(const Segment* segments, std::size_t count,
                         std::vector<MPI_Datatype>& types);

/// How the engine runs a staged schedule's device-level operations (stage_on_device,
/// core/schedule.hpp): lib/cuda's staging, whose execution buffers are a pinned host
/// mirror of device buffers (Execution::use_device). The engine calls these where the
/// schedule has them; test() and wait() then poll with MPI_Testsome (as under
/// AGX_TIMEOUT), so that each receive is copied on as it completes. A node schedule
/// staged so (lib/cuda's staged node call) puts the own block once its to_host is over
/// and copies each block of its gets on as the get has it.
class DeviceCopies {
 public:
  virtual ~DeviceCopies() = default;
  /// A device-level copy of the own block (send buffer -> receive buffer, on the device;
  /// nothing in place). Never waits.
  virtual void copy_own() = 0;
  /// A to_host of the own block: issued chunk by chunk. Never waits.
  virtual void own_to_host() = 0;
  /// Own-block bytes [0, upto) must be on the mirror when this returns (a local wait for
  /// the to_host's chunks): called before a send that reads them is posted, and before
  /// the own block's checksum.
  virtual void own_needed(std::size_t upto) = 0;
  /// A receive of `t`, in a round whose to_device covers its blocks, completed: bytes
  /// [begin, end) of its data (its blocks' bytes, in transfer order) are on the mirror
  /// and go to the device now. Never waits.
  virtual void to_device(const Transfer& t, std::size_t begin, std::size_t end) = 0;
  /// A get of a node schedule, in a round whose to_device covers its blocks, has copied
  /// its blocks [first, last) (their indices in the get's order) onto the mirror: they go
  /// to the device now. Never waits.
  virtual void got(const NodeOp& get, std::size_t first, std::size_t last) = 0;
};

struct MessageCalls;  // how messages are made: posted at once, or persistent (executor.cpp)

class Execution {
 public:
  Execution(const Schedule& schedule, const Buffers& buffers, const Layout& layout, MPI_Comm comm,
            int tag, std::size_t max_message_bytes, const Checks& checks = {});
  /// A schedule with node-level operations runs them on `node` (which must outlive the
  /// execution): puts when a round is posted, gets polled by test() like requests,
  /// segment transfers at the segment's addresses. AGX_INTEGRITY's per-round checks do
  /// not apply to such schedules (their blocks do not all live in the caller's buffer).
  Execution(const Schedule& schedule, const Buffers& buffers, const Layout& layout, MPI_Comm comm,
            int tag, std::size_t max_message_bytes, NodeSegment& node, const Checks& checks = {});
  ~Execution();
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  /// Point-to-point schedules only, before start(): every block's memory is its pieces
  /// in `blocks` (which must outlive the execution), not its range of the layout; the
  /// buffers must be in place (the own block's pieces hold it already). Per-round
  /// integrity checks do not apply (lib/fused runs such calls only without them).
  void use_block_pieces(const BlockPieces& blocks);
  /// Staged schedules (stage_on_device) only, before start(): `device` (which must
  /// outlive the execution) runs the schedule's device-level operations, as
  /// DeviceCopies says; the execution's buffers are the mirror.
  void use_device(DeviceCopies& device) { device_ = &device; }
  /// Point-to-point schedules on host buffers only, once, before the first start(): makes
  /// every message a persistent request on the communicator (from `compiled` where not
  /// null; the buffers stay those given), so that start() can be called again after each
  /// completion and only starts them. Throws agx::Error (the requests made so far are
  /// freed with the execution).
  void make_persistent(std::shared_ptr<CompiledSchedule> compiled);
  /// A node schedule's execution, between runs (never started, or its last run complete):
  /// the next start() runs on these buffers, layout, tag and node segment. A blocking
  /// caller keeps one execution per schedule this way, so that a repeated call constructs
  /// and allocates nothing (lib/hier's run_node_schedule). After a failed run, drop it.
  void rebind(const Buffers& buffers, const Layout& layout, int tag, NodeSegment& node);
  /// A round was abandoned (a failed call or a stall): a persistent execution's freed
  /// sends cannot be started again.
  bool failed() const { return failed_; }

  /// Posts the first round, then makes its local copies (the own block, out of place).
  void start();
  /// Advances as far as possible without blocking; true once every round is done.
  bool test();
  /// Blocks until every round is done.
  void wait();
  // A failing MPI call makes start/test/wait throw agx::Error after abandon().

  /// What one posted request is (for AGX_TIMEOUT's report).
  using Posted = PostedRequest;

 private:
  /// One round of a persistent execution: its requests and what the engine keeps per
  /// request, swapped with the execution's vectors while the round runs.
  struct StoredRound {
    std::vector<MPI_Request> requests;
    std::size_t receives = 0;
    std::vector<std::size_t> expected;
    std::vector<const Transfer*> recv_transfers;
    std::vector<Posted> posted;
  };

  void post_round();
  void copy_round();  // the round's copy operations
  void post_transfers(const Round& round, bool checksums);
  void start_stored();  // MPI_Startall of stored_[round_], swapped in
  void swap_round(StoredRound& s) noexcept;
  void clear_round() noexcept;  // after a round: its vectors emptied (a stored one put back)
  void release_stored() noexcept;
  void end_round();
  bool polling() const { return timeout_ > 0 || device_ != nullptr; }
  bool poll();  // AGX_TIMEOUT or device copies: one MPI_Testsome; true when every round is done
  bool gets_done();  // polls the round's gets; true when all are complete
  void start_local();        // the message-free lane (executor.cpp): start()
  void begin_local_round();  // puts of round_ on (rounds of puts only pass); finish() after the last
  bool test_local();         // test()
  bool post_deferred();  // posts segment sends whose blocks arrived; true when none is left
  void post_transfer(bool is_send, const Transfer& t, std::size_t k, bool checksums);
  [[noreturn]] void stalled();
  void post(bool is_send, int peer, const Segment* segments, std::size_t count,
            const Transfer& transfer, bool checksums);
  void post_compiled(bool is_send, const Transfer& transfer, const MessageDesc& m);
  void posted(MPI_Request request, bool is_send, const Transfer& transfer, std::size_t bytes,
              bool checksums);
  void before_send(std::size_t bytes);
  void put_round(const Round& round);     // node: the round's puts (and the signals they make)
  void signal_round(const Round& round);  // node: the round's other signals, at its end
  void issue_to_host(std::size_t round);  // device copies: the round's to_host operations
  bool to_device(const std::vector<BlockSpan>& blocks) const;  // whether the round's to_device covers them
  void abandon() noexcept;
  void use_compiled();      // start(): the cached descriptors and scratch, where they apply
  void swap_scratch();      // this execution's vectors <-> the compiled schedule's
  void release_scratch() noexcept;

  const Schedule& schedule_;
  Buffers buffers_;
  Layout layout_;
  MPI_Comm comm_;
  int tag_;
  std::size_t max_message_bytes_;
  std::size_t round_ = 0;
  bool started_ = false;
  std::vector<MPI_Request> requests_;  // the round's receives first, then its sends
  std::size_t receives_ = 0;           // how many of requests_ are receives
  std::vector<std::size_t> expected_;  // bytes each receive of the round must bring
  std::vector<MPI_Status> statuses_;
  /// After the round's requests completed (`rc` of the completion call): records
  /// MPI_ERR_TRUNCATE when a receive was truncated or brought fewer bytes than it
  /// expects (a sender gave a smaller count: the receiver would otherwise keep stale
  /// bytes and report success); throws any other failure.
  void check_received(int rc, const char* call);
  std::exception_ptr truncated_;  // the first truncation, thrown after the last round
  std::vector<const Transfer*> recv_transfers_;  // of each receive of the round (null: checksums)
  std::vector<unsigned char> suspect_;  // blocks that came with the wrong size (empty: none)
  void mark_suspect(std::size_t receive);
  /// A completed receive's size against what it expects (records MPI_ERR_TRUNCATE).
  void check_size(std::size_t receive, const MPI_Status& status);
  void record_wrong_size(std::size_t receive, int source, int got);
  std::vector<MPI_Status> done_statuses_;  // AGX_TIMEOUT: of the requests test_some completed
  bool carries_suspect(const Transfer& t) const;
  void suspect_blocks(const Transfer& t);  // its blocks go one byte short from now on
  void suspect_if_disagreed(const Transfer& t);  // a segment send after a node's disagreement
  bool node_moved();  // AGX_TIMEOUT: the node's gets copied something since the last look
  std::uint64_t node_steps_ = 0;
  std::vector<MPI_Datatype> types_;
  MessagePlan message_;
  Checks checks_;
  std::optional<RoundChecks> round_checks_;  // AGX_INTEGRITY or AGX_TEST_FLIP on this rank
  // AGX_TIMEOUT (stall reports) or device copies (polling):
  double timeout_ = 0;
  std::optional<StallClock> clock_;
  std::vector<Posted> posted_;
  std::vector<int> done_indices_;
  std::size_t open_ = 0;  // requests of the round not yet complete
  std::shared_ptr<CompiledSchedule> compiled_;  // null: messages planned per call
  ExecutionScratch* scratch_ = nullptr;         // compiled_'s vectors, swapped in
  // Node-level operations (null node_: a point-to-point schedule):
  NodeSegment* node_ = nullptr;
  bool message_free_ = false;  // a node schedule without messages (one node)
  bool local_ = false;         // this start runs on the message-free lane
  const BlockPieces* pieces_ = nullptr;  // use_block_pieces
  DeviceCopies* device_ = nullptr;       // use_device
  std::vector<char> alone_;              // node: per node op, a flag without a copy of its round
  std::vector<std::size_t> node_at_;     // node: round k's first entry of alone_
  std::vector<std::size_t> recv_begin_;  // device copies: where each receive starts in its transfer
  std::size_t piece_at_ = 0;    // device copies: where the next piece starts in its transfer's data
  std::size_t own_before_ = 0;  // device copies: transfer bytes before the own block (none: npos)
  std::vector<GetCursor> cursors_;  // per get of the round
  bool segment_recvs_ = false;      // the round receives into the segment
  std::vector<const Transfer*> deferred_;  // segment sends waiting for their blocks
  bool statuses_checked_ = false;  // the round's completed requests were checked
  const MessageCalls* calls_;       // MPI_Isend/MPI_Irecv, or the _init calls
  // Persistent (make_persistent; empty stored_: not persistent):
  std::vector<StoredRound> stored_;
  std::vector<MPI_Datatype> stored_types_;  // live as long as the requests
  StoredRound* loaded_ = nullptr;           // the stored round now in the vectors above
  bool failed_ = false;
};

/// Frees a communicator agx made, unless a round was abandoned on it (an Execution
/// that failed, or a plan's failed start: mark_abandoned). A message of that round may
/// still arrive on it, so it stays allocated and MPI never gives its context to a new
/// communicator, whose receives could otherwise match that message (MPICH reuses the
/// context of a freed communicator at once, with such a message still queued).
/// Sets `comm` to MPI_COMM_NULL either way.
void free_comm(MPI_Comm& comm) noexcept;
void mark_abandoned(MPI_Comm comm) noexcept;

/// Runs `schedule` to completion (blocking).
void execute(const Schedule& schedule, const Buffers& buffers, const Layout& layout, MPI_Comm comm,
             int tag, std::size_t max_message_bytes, const Checks& checks = {});

}  // namespace agx
