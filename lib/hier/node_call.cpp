// A shared_memory or hierarchical call run by the round engine (core/executor.hpp): the
// planner's schedule (core/planners/node_planner.cpp) on this node's segment (hier_context.hpp). This is
// the path of nonblocking and persistent calls: the engine's test() polls the node flags
// as it polls MPI requests and advances the node set-up, any growth of the segment and
// the reuse of its regions (node_set_up.cpp), so nothing waits inside start()
// (docs/hierarchy.md, "Set-up of a communicator"). Blocking calls run the same
// schedule (run_node_schedule) with the blocking calls' region and wait style; on one
// node their puts and gets may copy through the flag lines or by single copy instead
// (node_copies.hpp), on the same generations.
//
// Flags, per call generation `gen`: a put copies the own block chunk by chunk and raises
// progress = (gen << 32) | chunks after each; a get of a local block copies chunks as the
// owner's progress shows them; a get of another node's block waits for the signal of the
// leader that received it: its count of signals of received blocks (ready_signals) shows
// the signal that covers the block, which it raises at the end of the round that received
// it (its ready flag rises once all are signalled); finish() raises done, which the
// segment's next user of that region waits for.
//
// Blocks made of pieces (a fused call, lib/fused; hier.hpp's start_node_call): a put
// gathers the own block's pieces chunk by chunk into the segment, a get scatters each
// chunk into the block's pieces; with one rank per node the schedule's messages carry
// the pieces (Execution::use_block_pieces). The flags and chunks are the same, so ranks
// whose blocks are ranges and ranks whose blocks are pieces run one call together.

#include "hier/node_call.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/copy.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/local_rounds.hpp"
#include "core/planner.hpp"
#include "core/timeout.hpp"
#include "hier/hier_context.hpp"
#include "hier/node_copies.hpp"
#include "hier/block_pieces.hpp"
#include "hier/settings.hpp"
#include "hier/wait.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace agx::hier {
namespace {

class StagedSegment final : public NodeSegment {
 public:
  // No flag is touched yet: the node set-up may still be running (begin()).
  // `bytes` and `offsets`: the table of the blocks in the segment, filled here and kept by
  // the caller between calls (no allocation once they have grown): h's scratch for a
  // blocking call, the NodeCall's own for one of the round engine.
  // `pieces`, where not null: the blocks are these pieces (the call is in place), which
  // put() gathers from and gets scatter into (hier/block_pieces.hpp).
  // `blocking`: a blocking call (run_node_schedule), over before the next call starts:
  // its region comes from HierContext::region.
  // `ready_at`: the plan's (HierContext::NodePlan), where each other node's block shows up.
  StagedSegment(HierContext& h, const Schedule& schedule, const std::vector<ReadyAt>& ready_at,
                const Layout& layout, std::vector<std::size_t>& bytes, std::vector<std::size_t>& offsets,
                const BlockPieces* pieces = nullptr, bool blocking = false)
      : h_(h), gen_(h.next_gen()), chunk_(h.chunk_bytes()), pieces_(pieces), blocking_(blocking),
        bytes_(bytes), offsets_(offsets), ready_at_(ready_at) {
    if (!blocking) h.mark_engine(gen_);
    const Topology& t = h.topo;
    std::size_t total = 0;
    bytes_.resize(static_cast<std::size_t>(t.size));
    offsets_.resize(bytes_.size());
    for (int j = 0; j < t.nnodes; ++j)  // node-major, members by rank
      for (int r : t.members[static_cast<std::size_t>(j)]) {
        offsets_[static_cast<std::size_t>(r)] = total;
        bytes_[static_cast<std::size_t>(r)] = layout.bytes(r);
        total += layout.bytes(r);
      }
    claim_.gen = gen_;
    claim_.total = total;  // (same on every rank: all know the layout)
    seg_layout_ = Layout::varying(bytes_, offsets_);
    for (const Round& round : schedule.rounds)
      for (const Transfer& tr : round.recvs)
        if (tr.place == Place::segment) received_ += static_cast<std::size_t>(block_count(tr.blocks));
  }
  ~StagedSegment() override {
    if (!blocking_) h_.drop_claim(claim_);
  }
  StagedSegment(const StagedSegment&) = delete;
  StagedSegment& operator=(const StagedSegment&) = delete;

  /// Queues the region's claim (start(), call order); a growth takes its tag of `ctx`.
  void queue(CommContext& ctx) { h_.queue_claim(claim_, [&] { return ctx.next_tag(); }); }
  /// Advances the set-up and the claim; true once the region is this call's.
  bool claim() {
    if (claimed_) return true;
    if (!h_.advance_claim(claim_)) return false;
    claimed_ = true;
    base_ = claim_.base;
    seg_buffers_ = Buffers{nullptr, base_, true};
    if (received_ == 0) raise_ready();
    return true;
  }
  std::string claim_waiting_for() { return h_.claim_waiting_for(claim_); }
  /// A blocking call's region, waited for as the blocking paths wait for theirs.
  void claim_blocking() {
    base_ = h_.region(gen_, claim_.total);
    claimed_ = true;
    seg_buffers_ = Buffers{nullptr, base_, true};
    // (without receives into the segment `ready` goes up with `done`, in finish())
  }
  std::uint64_t gen() const { return gen_; }

  const Buffers& segment_buffers() const override { return seg_buffers_; }
  const Layout& segment_layout() const override { return seg_layout_; }

  // Unsignalled (a signal in a later round), the chunks are copied without marks.
  void put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) override {
    Slot& own = h_.own_slot();
    for (const BlockSpan& span : op.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        const std::size_t bytes = layout.bytes(b);
        const auto* src = pieces_ != nullptr ? nullptr
                          : (b == h_.topo.rank && !mine.in_place)
                              ? static_cast<const std::byte*>(mine.send)
                              : static_cast<const std::byte*>(mine.recv) + layout.offset(b);
        std::byte* dst = base_ + offsets_[static_cast<std::size_t>(b)];
        const std::size_t chunks = chunk_count(bytes, chunk_);
        publish_block(own, gen_, bytes, offsets_[static_cast<std::size_t>(b)]);  // before any mark
        if (chunks == 0 && signal) own.progress.store(progress_mark(gen_, 0), std::memory_order_release);
        for (std::size_t k = 0; k < chunks; ++k) {
          const std::size_t at = k * chunk_, len = std::min(chunk_, bytes - at);
          if (pieces_ != nullptr) gather_pieces(dst + at, pieces_of(*pieces_, b), at, len);
          else copy_bytes(dst + at, src + at, len);
          if (signal) own.progress.store(progress_mark(gen_, k + 1), std::memory_order_release);
        }
        if (signal) h_.notify();
      }
  }

  // The own block (put unsignalled before): its whole progress mark. Blocks received
  // into the segment: the leader's count of such signals in this call rises with each
  // (readers wait for the one that covers their block: ready_at), and its ready flag once
  // all of them are signalled.
  void signal(const NodeOp& op) override {
    const Topology& t = h_.topo;
    bool received = false;
    for (const BlockSpan& span : op.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        if (t.node_of[static_cast<std::size_t>(b)] == t.node) {
          h_.own_slot().progress.store(progress_mark(gen_, chunk_count(bytes_[static_cast<std::size_t>(b)], chunk_)),
                                       std::memory_order_release);
          h_.notify();
        } else {
          received = true;
          ++signalled_;
        }
      }
    if (!received) return;
    if (claim_.total > 0) {  // (a call of no bytes claims no region: see remote_ready)
      h_.own_slot().ready_signals[gen_ & 1].store(progress_mark(gen_, ++signals_), std::memory_order_release);
      h_.notify();
    }
    if (signalled_ == received_) raise_ready();
  }

  bool try_wait(const NodeOp& op) override {
    const Topology& t = h_.topo;
    for (const BlockSpan& span : op.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        if (t.node_of[static_cast<std::size_t>(b)] != t.node) {
          if (!remote_ready(b)) return false;
          continue;
        }
        if (b == t.rank) continue;
        // As a get of it checks (copy_block): the owner on another path, or its size of
        // the block not this rank's (the ranks disagree on the counts), ends the wait
        // with the disagreement instead of a flag that never shows the planned size.
        const auto u = static_cast<std::size_t>(b);
        const int j = t.local_of[u];
        const std::atomic<std::uint64_t>& flag = h_.slot(j).progress;
        const std::uint64_t v = flag.load(std::memory_order_acquire);
        if (v < progress_mark(gen_, 0)) {
          if (++misses_ >= patience && other_path(h_, j, gen_))
            return disagree(std::make_exception_ptr(another_path(h_, j, gen_, b)));
          return awaiting(flag, v);
        }
        if (std::exception_ptr e = block_disagreement(h_, j, gen_, b, bytes_[u], offsets_[u]))
          return disagree(std::move(e));
        if (v < progress_mark(gen_, chunk_count(bytes_[u], chunk_))) return awaiting(flag, v);
      }
    return true;
  }

  bool try_get(const NodeOp& op, GetCursor& c, const Buffers& mine, const Layout& layout) override {
    return for_blocks(op, c, [&](int b, std::size_t& chunks) { return copy_block(b, chunks, mine, layout); });
  }

  bool holds(const Transfer& send) override {
    const Topology& t = h_.topo;
    for (const BlockSpan& span : send.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        if (b == t.rank || t.node_of[static_cast<std::size_t>(b)] != t.node) continue;
        const auto u = static_cast<std::size_t>(b);
        const int j = t.local_of[u];
        const std::uint64_t v = h_.slot(j).progress.load(std::memory_order_acquire);
        if (v < progress_mark(gen_, 0)) return false;  // (a later call's mark is larger)
        // The owner's size and place of this call, once its flag shows it.
        if (std::exception_ptr e = block_disagreement(h_, j, gen_, b, bytes_[u], offsets_[u])) {
          disagree(std::move(e));  // held: it goes one byte short
          continue;
        }
        if (v < progress_mark(gen_, chunk_count(bytes_[u], chunk_))) return false;
      }
    return true;
  }

  void segment_round_done(bool truncated) override {
    // A leader that received another size than planned says so before its signal of
    // the received blocks (ready_signals, then its ready flag, after this): its node's
    // readers of other nodes' blocks fail as it does (copy_block).
    if (truncated) h_.own_slot().disagreed[gen_ & 1].store(gen_, std::memory_order_relaxed);
  }

  void finish() override {
    if (blocking_) h_.finish_call(gen_);  // both flags (ready: a no-op after segment rounds)
    else h_.finish_done(gen_);
  }

  std::string waiting_for(const NodeOp& op, const GetCursor& c) const override {
    const int b = waiting_block(op, c);
    if (b < 0) return "";  // the get is complete
    const Topology& t = h_.topo;
    if (t.node_of[static_cast<std::size_t>(b)] == t.node) {
      const int j = t.local_of[static_cast<std::size_t>(b)];
      const std::uint64_t v = h_.slot(j).progress.load();
      return "block " + std::to_string(b) + " from " + h_.local_name(j) + " (call " +
             std::to_string(gen_) + ", " + std::to_string(c.chunk) + " chunks copied; its flag reads call " +
             std::to_string(v >> 32) + ", chunk " + std::to_string(v & 0xffffffffu) + ")";
    }
    const std::string of_node = "block " + std::to_string(b) + " of node " +
                                std::to_string(t.node_of[static_cast<std::size_t>(b)]);
    if (ready_at_.empty() || ready_at_[static_cast<std::size_t>(b)].leader < 0)
      return of_node + " (the ready flags of this node's leaders for call " + std::to_string(gen_) + ")";
    const ReadyAt& at = ready_at_[static_cast<std::size_t>(b)];
    const std::uint64_t v = h_.slot(at.leader).ready_signals[gen_ & 1].load();
    return of_node + " (signal " + std::to_string(at.signals) + " of call " + std::to_string(gen_) +
           " by " + h_.local_name(at.leader) + ", a leader of this node; its count reads call " +
           std::to_string(v >> 32) + ", signal " + std::to_string(v & 0xffffffffu) + ")";
  }

 private:
  void raise_ready() {
    h_.finish_ready(gen_);
  }

  // Whether another node's block b is in the segment for this call: its leader's signal
  // of it has risen (or its ready flag shows the whole call). Without a table (no plan
  // of it), once every leader's ready flag shows the call.
  bool remote_ready(int b) {
    if (ready_at_.empty() || ready_at_[static_cast<std::size_t>(b)].leader < 0) {
      for (int l = 0; l < h_.leaders; ++l)
        if (const std::uint64_t v = h_.slot(l).ready.load(std::memory_order_acquire); v < gen_)
          return awaiting(h_.slot(l).ready, v);
      return true;
    }
    // A call of no bytes has nothing to wait for (and its signals' word is not its own:
    // it claims no region, so an earlier call of its parity may still be reading it).
    if (claim_.total == 0) return true;
    const ReadyAt& at = ready_at_[static_cast<std::size_t>(b)];
    const Slot& leader = h_.slot(at.leader);
    const std::atomic<std::uint64_t>& word = leader.ready_signals[gen_ & 1];
    const std::uint64_t v = word.load(std::memory_order_acquire);
    if ((v >> 32) == gen_ && (v & 0xffffffffu) >= at.signals) return true;
    if (leader.ready.load(std::memory_order_acquire) >= gen_) return true;
    return awaiting(word, v);
  }

  // Copies what is there of block b from chunk `done` on; true once all of it is copied.
  bool copy_block(int b, std::size_t& done, const Buffers& mine, const Layout& layout) {
    const Topology& t = h_.topo;
    const std::size_t bytes = layout.bytes(b);
    const std::size_t chunks = chunk_count(bytes, chunk_);
    std::size_t available = chunks;
    if (t.node_of[static_cast<std::size_t>(b)] == t.node) {
      const int j = t.local_of[static_cast<std::size_t>(b)];
      const std::atomic<std::uint64_t>& flag = h_.slot(j).progress;
      const std::uint64_t v = flag.load(std::memory_order_acquire);
      if (v < progress_mark(gen_, 0)) {
        if (++misses_ >= patience && other_path(h_, j, gen_)) {
          done = chunks;
          return disagree(std::make_exception_ptr(another_path(h_, j, gen_, b)));
        }
        return awaiting(flag, v);
      }
      if ((v >> 32) == gen_) available = std::min<std::size_t>(chunks, v & 0xffffffffu);
      // The owner's size and place of this call, published before its first mark of it
      // (words a later call has overwritten since are not checked: publish_block).
      if (done == 0) {
        if (std::exception_ptr e = block_disagreement(h_, j, gen_, b, bytes, offsets_[static_cast<std::size_t>(b)])) {
          done = chunks;  // nothing of it is copied
          return disagree(std::move(e));
        }
      }
      if (available < chunks) awaiting(flag, v);  // (copies what is there first)
    } else {
      if (!remote_ready(b)) return false;
      for (int l = 0; l < h_.leaders; ++l)
        if (h_.slot(l).disagreed[gen_ & 1].load(std::memory_order_relaxed) == gen_) {
          done = chunks;
          return disagree(std::make_exception_ptr(Error(
              MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: " + h_.local_name(l) +
                                    ", a leader of this node, received other nodes' blocks of "
                                    "another size than planned in call " + std::to_string(gen_))));
        }
    }
    std::byte* dst = pieces_ != nullptr ? nullptr : static_cast<std::byte*>(mine.recv) + layout.offset(b);
    const std::byte* src = base_ + offsets_[static_cast<std::size_t>(b)];
    for (; done < available; ++done) {
      const std::size_t at = done * chunk_, len = std::min(chunk_, bytes - at);
      if (pieces_ != nullptr) scatter_pieces(pieces_of(*pieces_, b), at, src + at, len);
      else copy_bytes(dst + at, src + at, len);
      step();
    }
    return done == chunks;
  }

  HierContext& h_;
  std::uint64_t gen_;
  std::size_t chunk_;
  const BlockPieces* pieces_;  // null: the blocks are ranges of the caller's buffers
  bool blocking_;
  std::vector<std::size_t>& bytes_;  // the blocks in the segment (the caller's table)
  std::vector<std::size_t>& offsets_;
  Layout seg_layout_;
  Buffers seg_buffers_{};
  std::byte* base_ = nullptr;
  std::size_t received_ = 0, signalled_ = 0;  // blocks received into the segment, signalled
  std::uint32_t signals_ = 0;                  // signals of such blocks raised (ready_signals)
  const std::vector<ReadyAt>& ready_at_;
  int misses_ = 0;  // polls that found a local block not put yet (patience, node_copies.hpp)
  HierContext::RegionClaim claim_;
  bool claimed_ = false;
};

}  // namespace

namespace {

// Where each other node's block shows up in this node's segment (ReadyAt), read off the
// schedules of this node's leaders: their signals of received blocks, in the order the
// engine raises them (a round's such signals at its end, in the order of its node
// operations). Empty on one node and with one rank per node (no leaders' segment).
std::vector<ReadyAt> ready_table(const HierContext& h, Algorithm a, const NodeShape& shape) {
  const Topology& t = h.topo;
  std::vector<ReadyAt> table;
  if (t.nnodes == 1 || t.nnodes == t.size) return table;
  table.resize(static_cast<std::size_t>(t.size));
  const auto& members = t.members[static_cast<std::size_t>(t.node)];
  for (int l = 0; l < h.leaders; ++l) {
    Schedule s = plan_node_algorithm(a, shape, members[static_cast<std::size_t>(l)]);
    if (config().split_flags) s = split_flags(s);
    std::uint32_t signals = 0;
    for (const Round& round : s.rounds)
      for (const NodeOp& op : round.node) {
        if (op.kind != NodeOp::Kind::signal) continue;
        bool counted = false;
        for (const BlockSpan& span : op.blocks)
          for (int b = span.first; b < span.first + span.count; ++b) {
            if (t.node_of[static_cast<std::size_t>(b)] == t.node) continue;
            if (!counted) ++signals, counted = true;
            table[static_cast<std::size_t>(b)] = ReadyAt{l, signals};
          }
      }
  }
  return table;
}

}  // namespace

// The schedule of one call shape, planned once per communicator.
HierContext::NodePlan& node_plan(HierContext& h, Algorithm a, std::size_t total) {
  const Topology& t = h.topo;
  if (t.nnodes == 1 && h.last_plan != nullptr && h.last_plan_key.first == a &&
      h.last_plan_key.second == AlgorithmChoice{})  // one node: the total plays no part
    return *h.last_plan;
  std::optional<AlgorithmChoice> inter;
  if (t.nnodes > 1) inter = inter_algorithm(t.nnodes, total);
  const auto key = std::make_pair(a, inter.value_or(AlgorithmChoice{}));
  if (h.last_plan != nullptr && h.last_plan_key == key) return *h.last_plan;
  auto it = h.node_schedules.find(key);
  if (it == h.node_schedules.end()) {  // (the placement is copied only to plan)
    NodeShape shape;
    shape.node_of = t.node_of;
    shape.leaders = h.leaders;
    shape.total_bytes = total;
    shape.inter = inter;
    Schedule schedule = plan_node_algorithm(a, shape, t.rank);
    if (config().split_flags) schedule = split_flags(schedule);  // (test seam)
    it = h.node_schedules.try_emplace(key).first;
    it->second.flags_with_copies = flags_with_copies(schedule);
    it->second.schedule = std::move(schedule);
    it->second.ready_at = ready_table(h, a, shape);
    // One node: its single-copy variant too, which the copy trials may take on any later
    // call (planned here, so that no call of a repeated shape plans, nor allocates).
    if (t.nnodes == 1) single_copy_plan(h);
  }
  h.last_plan = &it->second;
  h.last_plan_key = key;
  return it->second;
}

HierContext::NodePlan& single_copy_plan(HierContext& h) {
  HierContext::NodePlan& plan = h.single_copy;
  if (plan.schedule.rounds.empty()) {
    NodeShape shape;
    shape.node_of = h.topo.node_of;
    shape.single_copy = true;
    plan.schedule = plan_node_algorithm(Algorithm::shared_memory, shape, h.topo.rank);
    plan.flags_with_copies = flags_with_copies(plan.schedule);
  }
  return plan;
}

namespace {

void run_rounds(HierContext& h, Execution& e) {
  e.start();
  // The execution reports a stall itself (AGX_TIMEOUT); this wait paces the polls (spin,
  // then yield or, on an oversubscribed node, sleep on the node's futex).
  wait_advancing(h, [&] { return e.test(); }, [](double) {});
}

// The plan's execution goes back to it only after a clean run: a failed one (or a failed
// rebind) is dropped, and the next call makes a new one.
void run_blocking(HierContext& h, CommContext& ctx, Algorithm a, HierContext::NodePlan& plan,
                  const Buffers& buffers, const Layout& layout, NodeSegment& node) {
  std::unique_ptr<Execution> e = std::move(plan.blocking);
  const int tag = ctx.next_tag();
  if (e) {
    e->rebind(buffers, layout, tag, node);
  } else {
    Checks checks;
    checks.algorithm = to_string(a);
    checks.stage = "node schedule";
    e = std::make_unique<Execution>(plan.schedule, buffers, layout, ctx.comm(), tag,
                                    config().max_message_bytes, node, checks);
  }
  h.rounds_done_with_error = false;
  try {
    run_rounds(h, *e);
  } catch (const Error& error) {
    // Every round done, the error thrown at the end (the ranks disagree on the counts):
    // hier::run's end-to-end check may still run (no rank waits for this one's).
    h.rounds_done_with_error = !e->failed() && error.error_class() == MPI_ERR_TRUNCATE;
    throw;
  }
  plan.blocking = std::move(e);
}

// A blocking call on one node: the engine's blocking lane for schedules without messages
// (core/local_rounds.hpp) on `node`'s own type, unless AGX_TIMEOUT's clock wants the
// polled lane (run_blocking), whose stall reports name the round and what each get
// waits for. Takes the call's tag as run_blocking does, so that the ranks' tags stay in
// step whichever lane or copies a call took.
template <class Segment>
void run_one_node(HierContext& h, CommContext& ctx, Algorithm a, HierContext::NodePlan& plan,
                  const Buffers& buffers, const Layout& layout, Segment& node) {
  if (timeout_seconds() > 0) {
    run_blocking(h, ctx, a, plan, buffers, layout, node);
    return;
  }
  (void)ctx.next_tag();
  h.rounds_done_with_error = false;
  if (run_local_rounds(plan.schedule, plan.flags_with_copies, node, buffers, layout,
                       [&h](auto&& ready) { wait_advancing(h, ready, [](double) {}); })) {
    // Every round done: hier::run's end-to-end check may still run (no rank waits for
    // this one's).
    h.rounds_done_with_error = true;
    std::rethrow_exception(node.disagreement());
  }
}

}  // namespace

void run_node_schedule(CommContext& ctx, Algorithm a, HierContext::NodePlan& plan,
                       const Buffers& buffers, const Layout& layout, const BlockPieces* pieces,
                       NodeCopies copies) {
  HierContext& h = hier_context(ctx);
  const Schedule& schedule = plan.schedule;
  const bool one_node = h.topo.nnodes == 1;
  if (copies == NodeCopies::flag_lines) {
    InlineCopies node(h, pieces);
    run_one_node(h, ctx, a, plan, buffers, layout, node);
    return;
  }
  if (copies == NodeCopies::single_copy) {
    SingleCopies node(h);
    run_one_node(h, ctx, a, plan, buffers, layout, node);
    return;
  }
  StagedSegment segment(h, schedule, plan.ready_at, layout, h.blocking_bytes, h.blocking_offsets, pieces, true);
  try {
    segment.claim_blocking();
  } catch (const Error&) {
    ctx.next_tag();  // the call's tag, as a peer that got its region takes it (run_blocking)
    throw;
  }
  if (one_node) run_one_node(h, ctx, a, plan, buffers, layout, segment);
  else run_blocking(h, ctx, a, plan, buffers, layout, segment);
  h.mark_started(segment.gen() - 1);  // every local rank has put its block of this call
}

// Phases: start() begins the node set-up if this is the communicator's first node call,
// queues the region's claim and takes the call's tags, all in call order and without
// waiting; test() advances the claim (set-up, growth, reuse), then the schedule's
// rounds, then AGX_INTEGRITY's end-to-end check (its CRC messages, on a tag of the call).
// Nothing waits on a peer inside start().
// A call is reused (HierContext::NodeCallPool, core/idle_pool.hpp): a start takes an idle call of its node
// schedule, whose execution it rebinds and whose segment table it refills, so that a
// repeated start of one shape allocates nothing; what belongs to one start only (the
// segment's claim, the checks, the clock, the reference to the communicator) is made
// per start and dropped when the call goes back.
struct NodeCall {
  std::shared_ptr<CommContext> ctx;  // keeps the segment alive past MPI_Comm_free
  HierContext::NodePlan* plan = nullptr;  // whose schedule it runs, whose pool it goes back to
  Algorithm algorithm = Algorithm::shared_memory;
  Buffers buffers{};
  Layout layout;  // a view, as Execution keeps it
  const BlockPieces* pieces = nullptr;  // blocks made of pieces (start_node_call)
  DeviceCopies* device = nullptr;       // a staged call's device copies (start_node_call)
  int tag = 0;
  std::vector<std::size_t> seg_bytes, seg_offsets;  // the segment's table (StagedSegment)
  std::optional<StagedSegment> segment;
  std::optional<Execution> execution;  // kept between starts, rebound (not with pieces)
  bool execution_pieces = false;       // it carries block pieces: made anew per start
  bool rounds_started = false;         // this start's rounds are posted
  std::optional<StallClock> clock;  // AGX_TIMEOUT while the claim waits
  std::uint64_t seen = 0;
  std::optional<EndToEnd> check;  // AGX_INTEGRITY / AGX_TEST_FLIP (integrity.hpp)
  bool check_at_end = false;      // a staged call's: made once the rounds are done
  int check_tag = 0;              // its CRC messages' tag (AGX_INTEGRITY)
  bool checking = false;          // the rounds are done, the check is posted
  bool complete = false;          // test_node_call said so, without an error: reusable
  std::exception_ptr disagreement;  // the rounds' MPI_ERR_TRUNCATE, thrown after the check
};

HierContext::NodePlan::~NodePlan() {
  calls.drain([](NodeCall* c) { delete c; });
}

// A call that completed cleanly goes back to its schedule's pool (unless that is full);
// any other (failed, abandoned: its execution may still have requests out) is deleted.
void NodeCallDeleter::operator()(NodeCall* c) const noexcept {
  if (c->plan == nullptr || !c->complete || !c->execution || c->execution->failed()) {
    delete c;
    return;
  }
  // The communicator's state goes last: the pool is part of it, and this may have been
  // the last reference (MPI_Comm_free while the call ran).
  const std::shared_ptr<CommContext> owner = std::move(c->ctx);
  c->segment.reset();  // (its claim was served: nothing is queued)
  c->check.reset();
  c->clock.reset();
  if (!c->plan->calls.keep(c)) delete c;
}

namespace {

// An idle call of `plan`, or a new one.
NodeCallPtr take_call(HierContext::NodePlan& plan) {
  if (NodeCall* c = plan.calls.take()) return NodeCallPtr(c);
  NodeCallPtr call(new NodeCall);
  call->plan = &plan;
  return call;
}

}  // namespace

bool node_call_ready(CommContext& ctx, const Layout&) {
  // The node set-up has begun (by a blocking or a nonblocking call): a node call
  // finishes it, and any growth, from test() (the same answer on every rank).
  return hier_context(ctx).node_started();
}

bool node_begun(CommContext& ctx) {
  const HierContext& h = hier_context(ctx);
  return h.node_started() || h.node_set_up_deferred;
}

void defer_node_set_up(CommContext& ctx) { hier_context(ctx).node_set_up_deferred = true; }

// The plan's schedule staged for device buffers (stage_on_device), made once.
HierContext::NodePlan& staged_plan(HierContext::NodePlan& plan) {
  if (!plan.staged) {
    plan.staged = std::make_unique<HierContext::NodePlan>();
    plan.staged->schedule = stage_on_device(plan.schedule);
    plan.staged->flags_with_copies = plan.flags_with_copies;
    plan.staged->ready_at = plan.ready_at;
  }
  return *plan.staged;
}

NodeCallPtr start_node_call(CommContext& ctx, Algorithm a, const Buffers& buffers,
                            const Layout& layout, const BlockPieces* pieces, DeviceCopies* device) {
  HierContext& h = hier_context(ctx);
  if (a == Algorithm::shared_memory && h.topo.nnodes > 1)
    throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve this call: its " +
                                 std::to_string(h.topo.size) + " ranks span " +
                                 std::to_string(h.topo.nnodes) + " nodes (use 'hierarchical')");
  std::size_t total = 0;
  for (int r = 0; r < layout.nranks(); ++r) total += layout.bytes(r);
  if (!h.node_started()) h.begin_node_set_up(ctx.next_tag());
  HierContext::NodePlan& plan = node_plan(h, a, total);
  NodeCallPtr call = take_call(device != nullptr ? staged_plan(plan) : plan);
  call->ctx = ctx.share();
  call->algorithm = a;
  call->buffers = buffers;
  call->layout = layout;
  call->pieces = pieces;
  call->device = device;
  call->rounds_started = false;
  call->checking = false;
  call->complete = false;
  call->disagreement = nullptr;
  h.running = a;
  call->segment.emplace(h, call->plan->schedule, call->plan->ready_at, layout, call->seg_bytes, call->seg_offsets, pieces);
  call->segment->queue(ctx);
  call->tag = ctx.next_tag();
  // The end-to-end check of the blocking path, as a last phase of test(): the owner's
  // CRC now, the exchange once the rounds are done. Its tag is taken in call order (the
  // setting is the same on every rank), so calls in flight together never meet.
  const Checks checks = Checks::of(a);
  call->check_tag = checks.integrity ? ctx.next_tag() : 0;
  call->check_at_end = device != nullptr && EndToEnd::needed(checks, ctx.rank());
  if (!call->check_at_end && EndToEnd::needed(checks, ctx.rank()))
    call->check.emplace(ctx.comm(), ctx.rank(), buffers, layout, checks);
  if (timeout_seconds() > 0) {
    call->clock.emplace(timeout_seconds());
    call->seen = h.claim_steps();
  }
  test_node_call(*call);  // where nothing is to wait for, the first round is posted now
  return call;
}

namespace {

// The end-to-end check's phase: done once the check is; then the rounds' disagreement on
// the counts, if any, unless the check failed first.
bool test_check(NodeCall& call) {
  if (!call.check->test()) return false;
  if (call.disagreement) std::rethrow_exception(std::exchange(call.disagreement, nullptr));
  return true;
}

}  // namespace

bool test_node_call(NodeCall& call) {
  if (call.checking) return call.complete = test_check(call);
  if (!call.rounds_started) {
    HierContext& h = hier_context(*call.ctx);
    if (!call.segment->claim()) {
      if (call.clock) {
        if (h.claim_steps() != call.seen) {
          call.seen = h.claim_steps();
          call.clock->restart();
        } else if (call.clock->stalled()) {
          h.stalled("node set-up (nonblocking)", call.segment->claim_waiting_for(),
                    call.clock->seconds());
        }
      }
      return false;
    }
    // One rank per node: the schedule is point-to-point on the caller's blocks, whose
    // messages then carry the blocks' pieces (other schedules move pieces in put/get).
    const bool use_pieces = call.pieces != nullptr && h.topo.nnodes == h.topo.size;
    if (call.execution && !use_pieces && !call.execution_pieces) {  // a reused call
      call.execution->rebind(call.buffers, call.layout, call.tag, *call.segment);
    } else {
      Checks checks;
      checks.algorithm = to_string(call.algorithm);
      checks.stage = call.device != nullptr ? "node schedule (staged, device buffers)" : "node schedule (nonblocking)";
      call.execution.reset();
      call.execution.emplace(call.plan->schedule, call.buffers, call.layout, call.ctx->comm(),
                             call.tag, config().max_message_bytes, *call.segment, checks);
      if (use_pieces) call.execution->use_block_pieces(*call.pieces);
      call.execution_pieces = use_pieces;
    }
    if (call.device != nullptr) call.execution->use_device(*call.device);
    call.rounds_started = true;
    call.execution->start();
  }
  try {
    if (!call.execution->test()) return false;
  } catch (const Error& e) {
    // Disagreeing counts end the rounds with every rank's part done: the check still
    // runs, so that no rank waits for this one's checksums.
    if (call.execution->failed() || e.error_class() != MPI_ERR_TRUNCATE || (!call.check && !call.check_at_end))
      throw;
    call.disagreement = std::current_exception();
  }
  if (call.check_at_end) {  // the own block is on the mirror now (a staged call)
    call.check_at_end = false;
    call.check.emplace(call.ctx->comm(), call.ctx->rank(), call.buffers, call.layout, Checks::of(call.algorithm));
  }
  if (!call.check) return call.complete = true;
  call.check->post(call.check_tag);
  call.checking = true;
  return call.complete = test_check(call);
}

}  // namespace agx::hier
