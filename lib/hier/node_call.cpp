// A shared_memory or hierarchical call run by the round engine (core/executor.hpp): the
// planner's schedule (node_planner.cpp) on this node's segment (hier_context.hpp). This is
// the path of nonblocking and persistent calls: the engine's test() polls the node flags
// as it polls MPI requests, so nothing waits inside start() but the segment's reuse and
// growth (docs/hierarchy.md). Blocking calls keep node_stage.cpp's tuned variants
// (blocks in the flag lines, single copy), which share this segment and generations.
//
// Flags, per call generation `gen`: a put copies the own block chunk by chunk and raises
// progress = (gen << 32) | chunks after each; a get of a local block copies chunks as the
// owner's progress shows them; a get of another node's block waits for the ready flag of
// every leader, which a leader raises once its last round of receives into the segment
// is complete; finish() raises done, which the segment's next user of that region waits for.

#include "hier/node_call.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/planner.hpp"
#include "hier/hier_context.hpp"
#include "hier/node_stage.hpp"
#include "hier/settings.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace agx::hier {
namespace {

class StagedSegment final : public NodeSegment {
 public:
  StagedSegment(HierContext& h, const Schedule& schedule, const Layout& layout)
      : h_(h), gen_(h.next_gen()), chunk_(h.chunk_bytes()) {
    h.mark_engine(gen_);
    const Topology& t = h.topo;
    std::size_t total = 0;
    bytes_.resize(static_cast<std::size_t>(t.size));
    offsets_.resize(bytes_.size());
    for (int j = 0; j < t.nnodes; ++j)  // node-major, members by rank (as node_stage.cpp)
      for (int r : t.members[static_cast<std::size_t>(j)]) {
        offsets_[static_cast<std::size_t>(r)] = total;
        bytes_[static_cast<std::size_t>(r)] = layout.bytes(r);
        total += layout.bytes(r);
      }
    if (total > 0) base_ = h.region(gen_, total);  // (same on every rank: all know the layout)
    seg_layout_ = Layout::varying(bytes_, offsets_);
    seg_buffers_ = Buffers{nullptr, base_, true};
    for (const Round& round : schedule.rounds)
      for (const Transfer& tr : round.recvs)
        if (tr.place == Place::segment) {
          ++segment_rounds_;
          break;
        }
    if (segment_rounds_ == 0) raise_ready();
  }

  const Buffers& segment_buffers() const override { return seg_buffers_; }
  const Layout& segment_layout() const override { return seg_layout_; }

  void put(const NodeOp& op, const Buffers& mine, const Layout& layout) override {
    Slot& own = h_.own_slot();
    for (const BlockSpan& span : op.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        const std::size_t bytes = layout.bytes(b);
        const auto* src = (b == h_.topo.rank && !mine.in_place)
                              ? static_cast<const std::byte*>(mine.send)
                              : static_cast<const std::byte*>(mine.recv) + layout.offset(b);
        std::byte* dst = base_ + offsets_[static_cast<std::size_t>(b)];
        const std::size_t chunks = chunk_count(bytes, chunk_);
        if (chunks == 0) own.progress.store(progress_mark(gen_, 0), std::memory_order_release);
        for (std::size_t k = 0; k < chunks; ++k) {
          const std::size_t at = k * chunk_, len = std::min(chunk_, bytes - at);
          std::memcpy(dst + at, src + at, len);
          own.progress.store(progress_mark(gen_, k + 1), std::memory_order_release);
        }
        h_.notify();
      }
  }

  bool try_get(const NodeOp& op, GetCursor& c, const Buffers& mine, const Layout& layout) override {
    std::size_t index = 0;
    for (const BlockSpan& span : op.blocks) {
      if (c.block >= index + static_cast<std::size_t>(span.count)) {
        index += static_cast<std::size_t>(span.count);
        continue;
      }
      for (int b = span.first + static_cast<int>(c.block - index); b < span.first + span.count; ++b) {
        if (!copy_block(b, c.chunk, mine, layout)) return false;
        ++c.block;
        c.chunk = 0;
      }
      index = c.block;
    }
    return true;
  }

  bool holds(const Transfer& send) const override {
    const Topology& t = h_.topo;
    for (const BlockSpan& span : send.blocks)
      for (int b = span.first; b < span.first + span.count; ++b) {
        if (b == t.rank || t.node_of[static_cast<std::size_t>(b)] != t.node) continue;
        const std::uint64_t v = h_.slot(t.local_of[static_cast<std::size_t>(b)]).progress.load(std::memory_order_acquire);
        const std::size_t chunks = chunk_count(bytes_[static_cast<std::size_t>(b)], chunk_);
        if (v < progress_mark(gen_, chunks)) return false;  // (a later call's mark is larger)
      }
    return true;
  }

  void segment_round_done() override {
    if (++rounds_received_ == segment_rounds_) raise_ready();
  }

  void finish() override {
    h_.finish_done(gen_);
  }

  std::string waiting_for(const NodeOp& op, const GetCursor& c) const override {
    std::size_t index = 0;
    for (const BlockSpan& span : op.blocks) {
      if (c.block < index + static_cast<std::size_t>(span.count)) {
        const int b = span.first + static_cast<int>(c.block - index);
        const Topology& t = h_.topo;
        if (t.node_of[static_cast<std::size_t>(b)] == t.node) {
          const int j = t.local_of[static_cast<std::size_t>(b)];
          const std::uint64_t v = h_.slot(j).progress.load();
          return "block " + std::to_string(b) + " from " + h_.local_name(j) + " (call " +
                 std::to_string(gen_) + ", " + std::to_string(c.chunk) + " chunks copied; its flag reads call " +
                 std::to_string(v >> 32) + ", chunk " + std::to_string(v & 0xffffffffu) + ")";
        }
        return "block " + std::to_string(b) + " of node " +
               std::to_string(t.node_of[static_cast<std::size_t>(b)]) +
               " (the ready flags of this node's leaders for call " + std::to_string(gen_) + ")";
      }
      index += static_cast<std::size_t>(span.count);
    }
    return "nothing";
  }

 private:
  void raise_ready() {
    h_.finish_ready(gen_);
  }

  // Copies what is there of block b from chunk `done` on; true once all of it is copied.
  bool copy_block(int b, std::size_t& done, const Buffers& mine, const Layout& layout) {
    const Topology& t = h_.topo;
    const std::size_t bytes = layout.bytes(b);
    const std::size_t chunks = chunk_count(bytes, chunk_);
    std::size_t available = chunks;
    if (t.node_of[static_cast<std::size_t>(b)] == t.node) {
      const std::uint64_t v = h_.slot(t.local_of[static_cast<std::size_t>(b)]).progress.load(std::memory_order_acquire);
      if (v < progress_mark(gen_, 0)) return false;
      if ((v >> 32) == gen_) available = std::min<std::size_t>(chunks, v & 0xffffffffu);
    } else {
      for (int l = 0; l < h_.leaders; ++l)
        if (h_.slot(l).ready.load(std::memory_order_acquire) < gen_) return false;
    }
    std::byte* dst = static_cast<std::byte*>(mine.recv) + layout.offset(b);
    const std::byte* src = base_ + offsets_[static_cast<std::size_t>(b)];
    for (; done < available; ++done) {
      const std::size_t at = done * chunk_, len = std::min(chunk_, bytes - at);
      std::memcpy(dst + at, src + at, len);
    }
    return done == chunks;
  }

  HierContext& h_;
  std::uint64_t gen_;
  std::size_t chunk_;
  std::vector<std::size_t> bytes_, offsets_;  // the blocks in the segment
  Layout seg_layout_;
  Buffers seg_buffers_{};
  std::byte* base_ = nullptr;
  std::size_t segment_rounds_ = 0, rounds_received_ = 0;
};

}  // namespace

// The schedule of one call shape, planned once per communicator.
const Schedule& node_schedule(CommContext& ctx, Algorithm a, std::size_t total) {
  HierContext& h = hier_context(ctx);
  const Topology& t = h.topo;
  NodeShape shape;
  shape.node_of = t.node_of;
  shape.leaders = h.leaders;
  shape.total_bytes = total;
  if (t.nnodes > 1) shape.inter = inter_algorithm(t.nnodes, total);
  const auto key = std::make_pair(a, shape.inter.value_or(AlgorithmChoice{}));
  auto it = h.node_schedules.find(key);
  if (it == h.node_schedules.end())
    it = h.node_schedules.emplace(key, plan_node_algorithm(a, shape, t.rank)).first;
  return it->second;
}

struct NodeCall {
  std::shared_ptr<CommContext> ctx;  // keeps the segment alive past MPI_Comm_free
  const Schedule* schedule = nullptr;
  std::optional<StagedSegment> segment;
  std::optional<Execution> execution;
};

void NodeCallDeleter::operator()(NodeCall* c) const noexcept { delete c; }

bool node_call_ready(CommContext& ctx, const Layout& layout) {
  const HierContext* h = &hier_context(ctx);
  if (!h->node_prepared()) return false;
  std::size_t total = 0;
  for (int r = 0; r < layout.nranks(); ++r) total += layout.bytes(r);
  return total == 0 || h->fits(total);
}

bool defer_node_set_up(CommContext& ctx, bool mark) {
  HierContext& h = hier_context(ctx);
  if (h.node_prepared() || h.node_set_up_deferred) return false;
  h.node_set_up_deferred = mark;
  return true;
}

NodeCallPtr start_node_call(CommContext& ctx, Algorithm a, const Buffers& buffers,
                            const Layout& layout) {
  HierContext& h = hier_context(ctx);
  h.prepare_node();  // collective the first time (a forced node path; auto waits for it)
  if (a == Algorithm::shared_memory && h.topo.nnodes > 1)
    throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve this call: its " +
                                 std::to_string(h.topo.size) + " ranks span " +
                                 std::to_string(h.topo.nnodes) + " nodes (use 'hierarchical')");
  std::size_t total = 0;
  for (int r = 0; r < layout.nranks(); ++r) total += layout.bytes(r);
  NodeCallPtr call(new NodeCall);
  call->ctx = ctx.share();
  const Checks whole = Checks::of(a);
  if (whole.integrity || whole.flip) {  // the same decision on every rank (not needed(rank))
    // AGX_INTEGRITY's end-to-end check (or its test seam) is collective: the call runs
    // whole, here, on the blocking path (docs/nonblocking.md).
    run(ctx, a, buffers, layout);
    return call;
  }
  call->schedule = &node_schedule(ctx, a, total);
  h.running = a;
  call->segment.emplace(h, *call->schedule, layout);
  Checks checks;
  checks.algorithm = to_string(a);
  checks.stage = "node schedule (nonblocking)";
  call->execution.emplace(*call->schedule, buffers, layout, ctx.comm(), ctx.next_tag(),
                          config().max_message_bytes, *call->segment, checks);
  call->execution->start();
  return call;
}

bool test_node_call(NodeCall& call) { return !call.execution || call.execution->test(); }

}  // namespace agx::hier
