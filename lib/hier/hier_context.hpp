#pragma once
// The hierarchical state of one communicator, owned by its CommContext (and so freed
// with the communicator): topology, leader communicator, the node's flag header and
// data segment, and the call generation.
//
// Header: one 128-byte slot per local rank, written only by that rank:
//
//   slot[i].progress   (gen << 32) | chunks of its block copied into the segment
//                      (single copy: | 1 once its block address is published)
//   slot[i].done       last gen in which it finished reading (segment or peers)
//   slot[i].grow       last gen for which it is about to grow the data segment (the
//                      growth is collective over the node: the ranks agree on it first)
//   slot[i].ready      leaders: last gen whose inter-node stage is in the segment
//   slot[i].ready_signals[gen & 1]  leaders: (gen << 32) | how many of its signals of
//                      blocks it received into the segment it has raised in call gen (a
//                      reader of another node's block waits for the signal that covers
//                      it: HierContext::NodePlan::ready_at). By gen parity, as the
//                      segment's halves: calls g and g+1 may run at once, g+2 reuses
//                      g's word only after every local rank is done with g. A call of
//                      no bytes (it claims no region) neither raises nor waits for it
//   slot[i].address    single copy: where its block lives in its own address space
//   slot[i].pid        its process id (for process_vm_readv)
//   slot[i].probed, probe_speed   set-up of the round engine only: its single-copy
//                      probe is done, at that speed (hier_context.cpp)
//   slot[i].block_bytes[gen & 1], block_offset[gen & 1]   its block's size and place
//                      in the segment as it sees the call, written before its first
//                      progress mark: a reader whose counts disagree (an erroneous
//                      program) fails with MPI_ERR_TRUNCATE instead of reading bytes
//                      that were never written there
//   slot[i].disagreed[gen & 1]  leaders: gen, where a receive into the segment brought
//                      another size than planned, written before its signal
//                      (ready_signals, then `ready`): the node's readers of other
//                      nodes' blocks fail with MPI_ERR_TRUNCATE too
//   slot[i].inline_data[gen & 1]   small calls (every block <= 4024 B, one node): the
//                      block itself right behind its sequence number and size
//                      (seq = gen << 16 | bytes), so a reader takes one dependent
//                      cache miss per peer, not two
//
// Data segment: 2 halves. A call whose total T fits in a half uses half (gen & 1), so
// back-to-back small calls never wait for readers of the previous call; a larger call
// uses the whole segment and first waits until every local rank's `done` covers the
// last call that used it. A call with T > size grows the segment (collective over the
// node, decided identically everywhere since every rank knows T).

#include <mpi.h>

#include <agx/algorithm.hpp>

#include "core/comm_context.hpp"  // NodeState
#include "core/executor.hpp"
#include "core/idle_pool.hpp"
#include "core/nonblocking.hpp"
#include "core/schedule.hpp"
#include "hier/copy_choice.hpp"
#include "hier/wait_choice.hpp"
#include "hier/shm_segment.hpp"
#include "hier/topology.hpp"
#include "hier/wait.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agx::hier {

struct NodeCall;  // a call of the round engine (node_call.cpp; hier.hpp)

/// Where a block of another node shows up in this node's segment: the signal of it by
/// the leader (local index) that receives it, counted among that leader's signals of
/// received blocks in a call (1 = its first). Read off the leaders' own schedules.
struct ReadyAt {
  int leader = -1;  ///< -1: a block of this node
  std::uint32_t signals = 0;
};

/// A block small enough to travel inside the flag's own cache line.
struct alignas(64) InlineBlock {
  static constexpr std::size_t capacity = 4024;  // 63 cache lines with the sequence
  static constexpr unsigned size_bits = 16;     // capacity < 2^16
  std::atomic<std::uint64_t> seq{0};  ///< gen << size_bits | size of the block `bytes` holds
  std::byte bytes[capacity];
};

struct alignas(64) Slot {
  std::atomic<std::uint64_t> progress{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> grow{0};
  std::atomic<std::uint64_t> ready{0};
  std::atomic<std::uint64_t> ready_signals[2] = {};
  std::atomic<std::uint64_t> address{0};
  std::int64_t pid = 0;
  std::atomic<std::uint64_t> probed{0};
  double probe_speed = 0;
  std::atomic<std::uint64_t> block_bytes[2] = {};
  std::atomic<std::uint64_t> block_offset[2] = {};
  std::atomic<std::uint64_t> disagreed[2] = {};  ///< leaders: [gen & 1] = gen whose receives had another size
  /// Staged against single copy (copy_choice.hpp), per size class: this rank's best trial
  /// times (ns; staged, single copy) and the generation of its last trial call.
  std::atomic<std::uint64_t> trial_ns[copy_classes][2] = {};
  std::atomic<std::uint64_t> trial_gen[copy_classes] = {};
  /// Yield against sleep (wait_choice.hpp), likewise: median times (ns; yield, sleep), gen.
  std::atomic<std::uint64_t> wait_trial_ns[wait_classes][2] = {};
  std::atomic<std::uint64_t> wait_trial_gen[wait_classes] = {};
  alignas(64) NodeSignal signal;  ///< local rank 0's slot only: the node's wake-up word (wait.hpp)
  InlineBlock inline_data[2];
};

class HierContext final : public NodeState {
 public:
  /// No communication: the topology (from the communicator's set-up exchange) and the
  /// number of leaders. `comm` is the communicator's private duplicate; `shared` null, or
  /// under AGX_NODE_DETECT=mpi its shared-memory communicator (owned from now on; the
  /// node communicator is made of it).
  HierContext(Topology topology, MPI_Comm comm, MPI_Comm shared);
  /// Blocking calls: collective over the communicator, once (its first node-path call,
  /// which every rank makes): the node and leader communicators, the flag segment and
  /// the single-copy probe, which only the shared-memory paths need (a communicator whose
  /// calls take point-to-point paths never pays for them). Call before any slot or `cma`
  /// use. Where a call of the round engine began the set-up (begin_node_set_up), drives
  /// that to its end (advancing the process's nonblocking calls meanwhile) and then makes
  /// only the two communicators.
  void prepare_node();
  /// The node communicator (collective over the communicator the first time).
  MPI_Comm node_comm();
  /// Whether the node set-up has begun (blocking or not): the same on every rank at the
  /// same call, since only calls that every rank makes alike begin it.
  bool node_started() const { return node_started_; }
  /// Whether the flag segment and the probe are done on this rank (timing: local only).
  bool node_ready() const { return node_ready_.load(std::memory_order_acquire); }

  /// Calls of the round engine: begins the node set-up without waiting on any peer (the
  /// flag segment is made by SegmentMaker over point-to-point messages with `tag`, the
  /// probe synchronizes through the flag slots); advanced by advance_claim(). Only when
  /// !node_started().
  void begin_node_set_up(int tag);

  /// A call of the round engine waiting for its data region: queued at start() in call
  /// order, served in that order by advance_claim() (so the region, and any growth of
  /// the segment, come out the same on every rank).
  struct RegionClaim {
    std::uint64_t gen = 0;
    std::size_t total = 0;    ///< its bytes in the segment
    std::size_t grow_to = 0;  ///< the segment's new size before this call; 0: it fits
    int tag = 0;              ///< the growth's messages
    std::unique_ptr<SegmentMaker> maker;
    std::byte* base = nullptr;  ///< the region, once served
    bool queued = false;
  };
  /// Queues `c` (its gen and total set). Where the segment must grow first, c.tag is
  /// `next_tag()` (the communicator's tag sequence, as on every rank for this call),
  /// set before another thread may serve the claim.
  void queue_claim(RegionClaim& c, const std::function<int()>& next_tag);
  /// Advances the node set-up and `c`'s turn, never blocking: true once c.base is
  /// served. Takes this context's set-up lock by try_lock (false while another thread
  /// holds it).
  bool advance_claim(RegionClaim& c);
  /// Removes `c` from the queue (a call abandoned before it was served).
  void drop_claim(RegionClaim& c) noexcept;
  /// Counts every step of the set-up and the claims (AGX_TIMEOUT: progress seen).
  std::uint64_t claim_steps() const { return claim_steps_.load(std::memory_order_relaxed); }
  /// What `c` waits for (AGX_TIMEOUT reports).
  std::string claim_waiting_for(const RegionClaim& c);
  ~HierContext() override;
  HierContext(const HierContext&) = delete;
  HierContext& operator=(const HierContext&) = delete;

  Topology topo;
  int leaders = 1;                       ///< leaders per node (local ranks 0..leaders-1)
  MPI_Comm leader_comm = MPI_COMM_NULL;  ///< local rank l of every node; rank = node index
  bool cma = false;                      ///< process_vm_readv works between all local ranks
  double cma_speed = 0;                  ///< its speed relative to memcpy (node's slowest)
  /// Staged or single copy per size class, by timing the first calls (copy_choice.hpp).
  std::array<CopyTrials, copy_classes> copy_trials{};
  /// Yield or sleep per size class on an oversubscribed node, likewise (wait_choice.hpp).
  std::array<TimedTrials, wait_classes> wait_trials{};

  MPI_Comm comm = MPI_COMM_NULL;         ///< the communicator's private duplicate
  Algorithm running = Algorithm::shared_memory;  ///< the call in progress (for reports)
  bool node_set_up_deferred = false;  ///< a first auto call ran point-to-point (hier.hpp)

  /// AGX_TIMEOUT: reports that this rank waited `seconds` in `stage` for `what` (a flag of
  /// a local rank, see local_name) and fails as AGX_TIMEOUT_ACTION says; never returns.
  [[noreturn]] void stalled(const char* stage, const std::string& what, double seconds) const;
  /// "local rank 2 (rank 5, world rank 5)".
  std::string local_name(int local) const;

  Slot& slot(int local) { return slots_[local]; }
  const Slot& slot(int local) const { return slots_[local]; }
  Slot& own_slot() { return slots_[topo.local]; }
  /// More ranks on this node than cores to run them (AGX_WAIT=auto), or AGX_WAIT=sleep.
  bool oversubscribed = false;
  bool sleep_forced = false;  ///< AGX_WAIT=sleep
  /// Copy-in/copy-out chunk of staged calls: AGX_SHM_CHUNK_BYTES, or where the node is
  /// oversubscribed and that is unset, whole blocks (one flag store and at most one
  /// sleep per block: chunk flags wake every sleeper, and a woken reader preempts the
  /// writer it waits for when there is no core for both). The same on every local rank.
  std::size_t chunk_bytes() const;
  /// Where waiters sleep: the node's signal when oversubscribed, else null (spin/yield).
  NodeSignal* sleep_signal() const { return oversubscribed && sleep_now_ ? &slots_[0].signal : nullptr; }
  /// Before a blocking call whose mean block is `mean_block` bytes: with AGX_WAIT=auto on
  /// an oversubscribed node, waiters yield or sleep as the size class's trials decided
  /// (wait_choice.hpp; a trial call: time it, record_wait_trial); AGX_WAIT=sleep: sleep.
  WaitPick wait_style_for(std::size_t mean_block);
  /// After every flag store of this rank: wakes sleeping local ranks.
  void notify() {
    if (topo.node_may_sleep) hier::notify(slots_[0].signal);
  }

  /// Data region for a call of `total` bytes; waits for earlier readers, grows when needed.
  std::byte* region(std::uint64_t gen, std::size_t total);
  std::size_t data_bytes() const { return data_ ? data_->size() : 0; }
  /// Whether region() serves a call of `total` bytes without growing the segment (which
  /// is collective).
  bool fits(std::size_t total) const;

  /// The inter-node schedule of this rank among the leaders, planned once per algorithm
  /// and parameters.
  const Schedule& inter_schedule(const AlgorithmChoice& a);
  int next_leader_tag() { return static_cast<int>(leader_tag_++ % 32768u); }

  /// Records that every local rank has finished reading call `gen` and all before it
  /// (then waiting for their `done` flags up to `gen` costs nothing: no cache misses).
  void mark_synced(std::uint64_t gen) { synced_ = gen > synced_ ? gen : synced_; }
  /// Every local rank has started call `gen + 1`, so (blocking calls being over when the
  /// next starts) has finished reading `gen` and before, unless a call of the round
  /// engine, which may still be reading, came in between (every rank knows which calls
  /// those were: collectives are called alike everywhere).
  void mark_started(std::uint64_t gen) {
    if (engine_gen_ == 0) mark_synced(gen);  // else wait_done looks at the done flags
  }
  /// Records that call `gen` runs on the round engine (node_call.cpp).
  void mark_engine(std::uint64_t gen) { engine_gen_ = gen; }
  /// This rank's ready / done flag: call `gen` has finished its receives into the
  /// segment / its reading. Calls of the round engine may finish out of order, so each
  /// flag shows the largest G such that every call up to G has finished (a watermark).
  void finish_ready(std::uint64_t gen) { finish(ready_, own_slot().ready, gen); }
  void finish_done(std::uint64_t gen) { finish(done_, own_slot().done, gen); }
  /// The end of a blocking call `gen`: both flags. Every call takes a generation of
  /// both watermarks, so a call that receives nothing into the segment (one node, or a
  /// rank that is not a leader) must finish `ready` too: left open, it held the
  /// watermark below every later call, whose generations then piled up ahead of it.
  void finish_call(std::uint64_t gen);
  /// NodeState: no more local ranks than the cores their masks cover together (the
  /// set-up exchange's count; unknown counts as enough), and AGX_WAIT is not `sleep`.
  bool core_per_rank() const override;
  /// Finished calls above each watermark's gap (0 unless calls are in flight; agx-info).
  std::size_t ready_ahead() const { return ready_.ahead.size(); }
  std::size_t done_ahead() const { return done_.ahead.size(); }

  std::uint64_t next_gen() { return ++gen_; }
  std::uint64_t gen() const { return gen_; }
  std::uint64_t grows() const { return grows_; }
  std::uint64_t single_copy_calls = 0, staged_calls = 0, inline_calls = 0;

  /// The idle nonblocking and persistent calls of one node schedule (node_call.cpp): a
  /// start takes one (its execution rebound, its segment's tables kept), a call that
  /// completed cleanly goes back when its request or plan start is done with it, so a
  /// repeated start of one shape constructs and allocates nothing. A list, not one slot:
  /// calls of one shape may be in flight together (each takes its own). At most
  /// `limit` are kept; a failed call is never kept. An idle call holds no reference to
  /// the communicator (no cycle) and no claim on the segment.
  using NodeCallPool = IdlePool<NodeCall>;
  /// Schedules of the round engine's node calls (node_call.cpp), per (algorithm, inter).
  /// A node schedule (node_call.cpp's node_schedule), the blocking calls' execution of
  /// it, rebound per call (run_node_schedule: a repeated call constructs nothing), and
  /// the idle nonblocking and persistent calls of it (destroyed before the schedule).
  struct NodePlan {
    NodePlan() = default;
    ~NodePlan();  // deletes the idle calls (node_call.cpp, where a NodeCall is whole)
    NodePlan(const NodePlan&) = delete;
    NodePlan& operator=(const NodePlan&) = delete;
    Schedule schedule;
    bool flags_with_copies = true;  ///< of the schedule (core/schedule.hpp): flag lines may run it
    /// Per block, across nodes: the leader's signal that puts it in the segment (empty on
    /// one node or with one rank per node).
    std::vector<ReadyAt> ready_at;
    std::unique_ptr<Execution> blocking;
    NodeCallPool calls;
    /// The schedule staged for device buffers (stage_on_device), with its own calls;
    /// made on the first such call (node_call.cpp, staged_plan).
    std::unique_ptr<NodePlan> staged;
  };
  std::map<std::pair<Algorithm, AlgorithmChoice>, NodePlan> node_schedules;
  NodePlan* last_plan = nullptr;  ///< the last one looked up, and its key
  /// The last blocking node call threw after every round was done (run_node_schedule:
  /// the ranks disagree on the counts); hier::run's end-to-end check then still runs.
  bool rounds_done_with_error = false;
  std::pair<Algorithm, AlgorithmChoice> last_plan_key{};
  /// shared_memory by single copy (NodeShape::single_copy), planned on the first call
  /// that reads by single copy (node_call.cpp, single_copy_plan); an empty schedule before.
  NodePlan single_copy;
  /// shared_memory by direct write (NodeShape::direct_write), planned on the first call
  /// that writes (direct_write.cpp); empty before.
  Schedule direct_write_schedule;
  // Per-call scratch (no allocation on the hot path after the first call).
  std::vector<std::size_t> seg_offset, node_bytes, node_offset;
  /// A blocking node schedule's blocks in the segment (node_call.cpp; one call at a time).
  std::vector<std::size_t> blocking_bytes, blocking_offsets;

 private:
  /// Before a blocking call's growth (region()): every local rank announces it for `gen`;
  /// one that shows call `gen` without it (its counts give it no growth) fails the call
  /// with MPI_ERR_TRUNCATE here, and there through this rank's published block.
  void agree_to_grow(std::uint64_t gen);
  void wait_done(std::uint64_t gen);
  bool done_through(std::uint64_t gen);
  static std::size_t wanted_bytes(std::size_t total);  ///< a call's need in the segment
  static std::size_t grown_bytes(std::size_t total);   ///< the size a growth for it makes  ///< wait_done's test, without waiting
  /// More local ranks than the cores their masks cover together (unknown: not crowded).
  bool crowded() const;
  void choose_wait_style();
  void set_single_copy(double speed);  ///< cma and cma_speed from the node's slowest
  struct NodeSetUp {  // the round engine's set-up in flight (node_set_up.cpp)
    enum class Step { header, probe, gather };
    Step step = Step::header;
    std::unique_ptr<SegmentMaker> header;
    std::vector<std::byte> probe;  // [published | scratch]
  };
  bool advance_set_up();  ///< under setup_mutex_; true once node_ready()
  void finish_set_up_blocking();
  void drain_claims();  ///< blocking region(): earlier engine calls take their regions first
  std::string set_up_waiting_for() const;
  /// Calls of the round engine in flight together on one communicator for which the
  /// claim queue and the watermarks hold room from the first call on (more still work;
  /// they grow the queue then).
  static constexpr std::size_t calls_in_flight = 16;
  struct Watermark {
    std::uint64_t mark = 0;
    std::vector<std::uint64_t> ahead;  // finished calls above mark + 1, sorted (engine calls)
  };
  void finish(Watermark& w, std::atomic<std::uint64_t>& flag, std::uint64_t gen);
  /// Under finish_mutex_: the watermark and its flag (the caller notifies the node).
  void finish_locked(Watermark& w, std::atomic<std::uint64_t>& flag, std::uint64_t gen);
  Watermark ready_, done_;
  std::mutex finish_mutex_;  // calls on one communicator may be advanced by two threads
  std::uint64_t engine_gen_ = 0;

  bool node_started_ = false;
  std::atomic<bool> node_ready_{false};
  bool comms_ready_ = false;  ///< node and leader communicators made
  std::mutex setup_mutex_;    ///< the set-up and the claims (two threads may advance calls)
  std::unique_ptr<NodeSetUp> setup_;
  // In call order. A vector, not a deque: a deque allocates a new block every 64 calls
  // as the queue moves along, a vector keeps its capacity (a handful of entries at most).
  std::vector<RegionClaim*> claims_;
  std::atomic<std::size_t> queued_{0};  ///< claims_.size(), read without the lock
  std::size_t planned_bytes_ = 0;  ///< the data segment's size once every claim is served
  std::atomic<std::uint64_t> claim_steps_{0};
  MPI_Comm shared_ = MPI_COMM_NULL;  ///< until node_comm() makes the node communicator of it
  std::unique_ptr<SharedSegment> header_, data_;
  Slot* slots_ = nullptr;
  std::uint64_t gen_ = 0;
  std::uint64_t synced_ = 0;
  std::array<std::uint64_t, 2> last_use_{};
  bool sleep_now_ = true;  ///< wait_style_for
  std::uint64_t grows_ = 0;
  unsigned leader_tag_ = 0;
  std::map<AlgorithmChoice, Schedule> inter_;
};

/// Leaders per node for a topology: AGX_HIER_LEADERS capped at the smallest node (the
/// number the cost model prices and the node stage runs).
int leaders_for(const Topology& t);

/// Waits as wait_until on `h`'s node, also advancing the process's running nonblocking
/// calls (core/nonblocking.hpp): this rank's own flag watermarks, or a peer, may wait for
/// one of them (start(A); blocking call; wait(A) on one rank, start(A); wait(A) on
/// another). While any runs, waiters yield instead of sleeping, so that MPI progresses.
/// Spins `oversubscribed_spin` checks first on an oversubscribed node, else `default_spin`.
template <class Pred, class Stalled>
void wait_advancing(const HierContext& h, Pred ready, Stalled stalled) {
  const bool pending = detail::progress_pending();
  wait_until(pending ? nullptr : h.sleep_signal(),
             [&] {
               if (ready()) return true;
               if (pending) detail::progress_all();
               return ready();
             },
             stalled, h.oversubscribed ? oversubscribed_spin : default_spin);
}

}  // namespace agx::hier
