// The node set-up of the round engine's calls, and their claims on the data segment
// (hier_context.hpp): state machines whose only MPI operations are nonblocking
// point-to-point messages among the node's ranks on the communicator, advanced by the
// calls' test() (docs/hierarchy.md, "Set-up").
//
//   header   SegmentMaker over p2p_exchange: local rank 0 makes the flag segment and
//            posts its record at once (begin_node_set_up, inside start()); the others
//            map it when the record arrives; the node agrees on the outcome
//   probe    own slot constructed, pid and probe buffer published in it; a rank probes
//            its neighbour once that one's address shows, then raises `probed` with
//            its speed
//   gather   every slot's `probed` raised: the node's slowest speed decides single
//            copy, the own probe buffer goes (its reader is done)
//
// A claim waits for the set-up and for every claim queued before it; a growth waits
// for the done flags of the old segment's readers, then makes the new one with its own
// SegmentMaker; a region waits for the done flags of its last users: each a test.

#include "hier/hier_context.hpp"

#include "core/nonblocking.hpp"
#include "core/timeout.hpp"
#include "hier/node_exchange.hpp"
#include "hier/probe.hpp"
#include "hier/settings.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace agx::hier {
namespace {

/// Advances a segment's maker by one test, counting a step of the claims when its state
/// moved: the segment once it is made (the maker then goes), null while it is not.
std::unique_ptr<SharedSegment> advance(std::unique_ptr<SegmentMaker>& maker,
                                       std::atomic<std::uint64_t>& steps) {
  const std::uint64_t before = maker->steps();
  const bool made = maker->test();
  if (maker->steps() != before) ++steps;
  if (!made) return nullptr;
  std::unique_ptr<SharedSegment> segment = maker->take();
  maker.reset();
  return segment;
}

/// AGX_TIMEOUT's watch over a wait on the claims: restarted while their step count
/// moves, stalled once it stands still for the timeout (never without AGX_TIMEOUT).
class StepWatch {
 public:
  explicit StepWatch(const HierContext& h) : h_(h), seen_(h.claim_steps()) {
    if (const double limit = timeout_seconds(); limit > 0) clock_.emplace(limit);
  }
  bool stalled() {
    if (!clock_) return false;
    if (h_.claim_steps() == seen_) return clock_->stalled();
    seen_ = h_.claim_steps();
    clock_->restart();
    return false;
  }
  double seconds() const { return clock_->seconds(); }

 private:
  const HierContext& h_;
  std::uint64_t seen_;
  std::optional<StallClock> clock_;
};

}  // namespace

void HierContext::begin_node_set_up(int tag) {
  std::lock_guard lock(setup_mutex_);
  node_started_ = true;
  choose_wait_style();
  setup_ = std::make_unique<NodeSetUp>();
  setup_->header = std::make_unique<SegmentMaker>(
      p2p_exchange(comm, topo.members[static_cast<std::size_t>(topo.node)], topo.local, tag),
      sizeof(Slot) * static_cast<std::size_t>(topo.local_size()));
  advance_set_up();  // local rank 0 makes the segment and posts its record; nobody waits
}

bool HierContext::advance_set_up() {
  if (node_ready()) return true;
  NodeSetUp& s = *setup_;
  const int n = topo.local_size();
  if (s.step == NodeSetUp::Step::header) {
    std::unique_ptr<SharedSegment> made = advance(s.header, claim_steps_);
    if (!made) return false;
    header_ = std::move(made);
    slots_ = reinterpret_cast<Slot*>(header_->data());
    new (&slots_[topo.local]) Slot{};  // zero-filled already; only its owner writes it
    own_slot().pid = static_cast<std::int64_t>(getpid());
    s.probe.assign(2 * probe_bytes, std::byte{1});
    const std::uint64_t mark = probe_value(own_slot().pid);
    std::memcpy(s.probe.data(), &mark, sizeof mark);
    own_slot().address.store(reinterpret_cast<std::uintptr_t>(s.probe.data()),
                             std::memory_order_release);
    s.step = NodeSetUp::Step::probe;
    ++claim_steps_;
  }
  if (s.step == NodeSetUp::Step::probe) {
    double speed = 0;
    if (n > 1 && settings().cma) {
      const Slot& peer = slot((topo.local + 1) % n);
      if (peer.address.load(std::memory_order_acquire) == 0) return false;  // not published yet
      speed = probe_single_copy(peer, s.probe.data() + probe_bytes, s.probe.data());
    }
    own_slot().probe_speed = speed;
    own_slot().probed.store(1, std::memory_order_release);
    notify();
    s.step = NodeSetUp::Step::gather;
    ++claim_steps_;
  }
  double slowest = 1e300;
  for (int i = 0; i < n; ++i) {
    const Slot& peer = slot(i);
    if (peer.probed.load(std::memory_order_acquire) == 0) return false;
    slowest = std::min(slowest, peer.probe_speed);
  }
  set_single_copy(n > 1 ? slowest : 0.0);
  own_slot().address.store(0);
  s.probe = {};
  setup_.reset();
  ++claim_steps_;
  node_ready_.store(true, std::memory_order_release);
  return true;
}

std::string HierContext::set_up_waiting_for() const {
  if (!setup_) return "nothing";
  const NodeSetUp& s = *setup_;
  if (s.step == NodeSetUp::Step::header)
    return std::string("the node's flag segment: ") + s.header->waiting_for();
  if (s.step == NodeSetUp::Step::probe)
    return "the single-copy probe: " + local_name((topo.local + 1) % topo.local_size()) +
           " to publish its probe buffer";
  for (int i = 0; i < topo.local_size(); ++i)
    if (slot(i).probed.load() == 0) return "the single-copy probe of " + local_name(i);
  return "nothing";
}

// A blocking call after a call of the round engine began the set-up: the same steps,
// waited for here; the process's nonblocking calls advance meanwhile (a peer may be
// inside one of them, its set-up advancing only by its test()).
void HierContext::finish_set_up_blocking() {
  StepWatch watch(*this);
  while (true) {
    {
      std::lock_guard lock(setup_mutex_);
      if (advance_set_up()) return;
    }
    if (detail::progress_pending()) detail::progress_all();
    sched_yield();
    if (watch.stalled()) {
      std::lock_guard lock(setup_mutex_);
      stalled("node set-up", set_up_waiting_for(), watch.seconds());
    }
  }
}

bool HierContext::done_through(std::uint64_t gen) {
  if (gen <= synced_) return true;
  for (int i = 0; i < topo.local_size(); ++i)
    if (slot(i).done.load(std::memory_order_acquire) < gen) return false;
  mark_synced(gen);
  return true;
}

void HierContext::queue_claim(RegionClaim& c, const std::function<int()>& next_tag) {
  std::lock_guard lock(setup_mutex_);
  planned_bytes_ = std::max(planned_bytes_, data_bytes());
  claims_.reserve(calls_in_flight);  // at the first claim: later ones allocate nothing
  claims_.push_back(&c);
  queued_.store(claims_.size(), std::memory_order_release);
  c.queued = true;
  if (c.total == 0 || planned_bytes_ >= wanted_bytes(c.total)) return;
  c.grow_to = grown_bytes(c.total);
  c.tag = next_tag();
  planned_bytes_ = c.grow_to;
}

void HierContext::drop_claim(RegionClaim& c) noexcept {
  std::lock_guard lock(setup_mutex_);
  if (!c.queued) return;
  claims_.erase(std::find(claims_.begin(), claims_.end(), &c));
  queued_.store(claims_.size(), std::memory_order_release);
  c.queued = false;
}

bool HierContext::advance_claim(RegionClaim& c) {
  std::unique_lock lock(setup_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (!advance_set_up()) return false;
  if (!c.queued) return true;
  if (claims_.front() != &c) return false;  // an earlier call first
  if (c.grow_to > 0) {
    if (!c.maker) {
      // Every local rank must be done with the old segment before it goes away.
      if (!done_through(std::max(last_use_[0], last_use_[1]))) return false;
      data_.reset();
      c.maker = std::make_unique<SegmentMaker>(
          p2p_exchange(comm, topo.members[static_cast<std::size_t>(topo.node)], topo.local, c.tag),
          c.grow_to);
      ++claim_steps_;
    }
    std::unique_ptr<SharedSegment> made = advance(c.maker, claim_steps_);
    if (!made) return false;
    data_ = std::move(made);
    last_use_ = {0, 0};
    ++grows_;
    c.grow_to = 0;
  }
  if (c.total > 0) {
    const std::size_t half = data_bytes() / 2;
    if (c.total <= half) {
      const std::size_t h = c.gen & 1;
      if (!done_through(last_use_[h])) return false;
      last_use_[h] = c.gen;
      c.base = data_->data() + h * half;
    } else {
      if (!done_through(std::max(last_use_[0], last_use_[1]))) return false;
      last_use_ = {c.gen, c.gen};
      c.base = data_->data();
    }
  }
  claims_.erase(claims_.begin());
  queued_.store(claims_.size(), std::memory_order_release);
  c.queued = false;
  ++claim_steps_;
  return true;
}

std::string HierContext::claim_waiting_for(const RegionClaim& c) {
  std::lock_guard lock(setup_mutex_);
  if (!node_ready()) return set_up_waiting_for();
  if (!c.queued) return "nothing";
  if (claims_.front() != &c)
    return "an earlier call of this communicator to take its region of the segment";
  if (c.maker) return std::string("the grown segment: ") + c.maker->waiting_for();
  for (int i = 0; i < topo.local_size(); ++i)
    if (slot(i).done.load() < std::max(last_use_[0], last_use_[1]))
      return "the done flag of " + local_name(i) + " (reuse of the segment, call " +
             std::to_string(c.gen) + ")";
  return "the segment's earlier readers";
}

// A blocking call's region(): the engine's calls queued before it take theirs first
// (every rank serves the claims in call order, so the segment's growths agree).
void HierContext::drain_claims() {
  // (the count, not the lock: this runs in every blocking call that uses the segment)
  const auto empty = [&] { return queued_.load(std::memory_order_acquire) == 0; };
  if (empty()) return;
  StepWatch watch(*this);
  while (!empty()) {
    detail::progress_all();
    sched_yield();
    if (watch.stalled())
      stalled("reuse of the segment", "the earlier nonblocking calls of this communicator to "
                                      "take their regions of the segment", watch.seconds());
  }
}

}  // namespace agx::hier
