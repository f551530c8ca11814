// Creation, segment regions and teardown of a communicator's hierarchical state
// (hier_context.hpp). Everything here is collective except region() on the fast path.

#include "hier/hier_context.hpp"

#include <agx/error.hpp>

#include "core/executor.hpp"
#include "core/mpi_check.hpp"
#include "core/nonblocking.hpp"
#include "core/planner.hpp"
#include "hier/block_pieces.hpp"
#include "hier/node_copies.hpp"
#include "hier/probe.hpp"
#include "hier/settings.hpp"
#include "hier/wait.hpp"

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace agx::hier {
int leaders_for(const Topology& t) {
  int smallest = t.size;
  for (int j = 0; j < t.nnodes; ++j) smallest = std::min(smallest, t.node_size(j));
  return std::max(1, std::min(settings().leaders, smallest));
}

HierContext::HierContext(Topology topology, MPI_Comm c, MPI_Comm shared)
    : topo(std::move(topology)), leaders(leaders_for(topo)), comm(c), shared_(shared) {
  // Also where no call checked the settings first (agx-info, agx::choose_algorithm).
  if (const InvalidSetting* bad = process_settings().invalid_of("AGX_WAIT"))
    throw Error(MPI_ERR_ARG, "agx: " + bad->message());
}

MPI_Comm HierContext::node_comm() {
  if (topo.node_comm == MPI_COMM_NULL) {
    topo.node_comm = make_node_comm(topo, comm, shared_);
    if (shared_ != MPI_COMM_NULL) MPI_Comm_free(&shared_);
  }
  return topo.node_comm;
}

bool HierContext::crowded() const { return hier::crowded(topo); }  // cores from the set-up exchange

bool HierContext::core_per_rank() const {
  return settings().wait != Settings::Wait::sleep && !crowded();
}

void HierContext::choose_wait_style() {
  sleep_forced = settings().wait == Settings::Wait::sleep;
  oversubscribed = wait_may_sleep(settings().wait, crowded());  // as topology's node_may_sleep
}

void HierContext::prepare_node() {
  if (comms_ready_ && node_ready()) return;
  if (node_started_) {  // a call of the round engine began it: its steps, then the communicators
    if (!node_ready()) finish_set_up_blocking();
    if (!comms_ready_) {
      comms_ready_ = true;
      node_comm();
      if (topo.nnodes > 1) {
        const int color = topo.local < leaders ? topo.local : MPI_UNDEFINED;
        check_mpi(MPI_Comm_split(comm, color, topo.node, &leader_comm), "MPI_Comm_split");
      }
    }
    return;
  }
  node_started_ = true;
  comms_ready_ = true;
  const int n = topo.local_size();
  node_comm();
  if (topo.nnodes > 1) {  // local ranks 0..leaders-1 of every node, each on its own
    const int color = topo.local < leaders ? topo.local : MPI_UNDEFINED;
    check_mpi(MPI_Comm_split(comm, color, topo.node, &leader_comm), "MPI_Comm_split");
  }
  choose_wait_style();
  header_ = std::make_unique<SharedSegment>(
      topo.node_comm, sizeof(Slot) * static_cast<std::size_t>(n),
      [this](const char* what, double seconds) {
        stalled("creating the shared flag segment", what, seconds);
      });
  slots_ = reinterpret_cast<Slot*>(header_->data());
  // The segment is zero-filled, which is a valid state of every slot; construct our own
  // slot formally (only its owner ever writes it).
  new (&slots_[topo.local]) Slot{};
  own_slot().pid = static_cast<std::int64_t>(getpid());
  std::vector<std::byte> probe(2 * probe_bytes, std::byte{1});  // [published | scratch]
  const std::uint64_t mark = probe_value(own_slot().pid);
  std::memcpy(probe.data(), &mark, sizeof mark);
  own_slot().address.store(reinterpret_cast<std::uintptr_t>(probe.data()));
  check_mpi(MPI_Barrier(topo.node_comm), "MPI_Barrier");  // setup only, not per call
  double speed = 0;
  if (n > 1 && settings().cma)
    speed = probe_single_copy(slot((topo.local + 1) % n), probe.data() + probe_bytes, probe.data());
  // (also keeps every probe buffer alive until all its readers are done)
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &speed, 1, MPI_DOUBLE, MPI_MIN, topo.node_comm),
            "MPI_Allreduce");
  set_single_copy(speed);
  own_slot().address.store(0);
  node_ready_.store(true, std::memory_order_release);
}

void HierContext::set_single_copy(double speed) {
  cma = speed > 0;
  cma_speed = speed;
}

HierContext::~HierContext() {
  data_.reset();
  header_.reset();
  free_comm(leader_comm);  // kept allocated after an abandoned round (core/executor.hpp)
  if (topo.node_comm != MPI_COMM_NULL) MPI_Comm_free(&topo.node_comm);
  if (shared_ != MPI_COMM_NULL) MPI_Comm_free(&shared_);
}

void HierContext::wait_done(std::uint64_t gen) {
  if (gen <= synced_) return;
  const int n = topo.local_size();
  for (int i = 0; i < n; ++i) {
    const Slot& s = slots_[i];
    // The earlier call may be a nonblocking one of this very process: advanced while
    // waiting, or nobody finishes reading it.
    wait_advancing(*this, [&] { return s.done.load(std::memory_order_acquire) >= gen; },
               [&](double seconds) {
                 stalled("reuse of the segment", "the done flag of " + local_name(i) +
                         " to reach call " + std::to_string(gen) + " (it reads call " +
                         std::to_string(s.done.load()) + "; call " + std::to_string(gen) +
                         " used this region before)", seconds);
               });
  }
  mark_synced(gen);
}

void HierContext::finish_call(std::uint64_t gen) {
  Slot& own = own_slot();
  if (engine_gen_ == 0) {
    // No call of the round engine ever ran here: the blocking calls finish in order, one
    // at a time (a second thread's blocking call on this communicator at the same time
    // would be erroneous), so the watermarks are the call itself, without the lock.
    ready_.mark = done_.mark = gen;
    own.ready.store(gen, std::memory_order_release);
    own.done.store(gen, std::memory_order_release);
    notify();
    return;
  }
  {
    std::lock_guard lock(finish_mutex_);
    finish_locked(ready_, own.ready, gen);
    finish_locked(done_, own.done, gen);
  }
  notify();  // (one fence and one look for sleepers for both flags)
}

void HierContext::finish(Watermark& w, std::atomic<std::uint64_t>& flag, std::uint64_t gen) {
  {
    std::lock_guard lock(finish_mutex_);
    finish_locked(w, flag, gen);
  }
  notify();
}

void HierContext::finish_locked(Watermark& w, std::atomic<std::uint64_t>& flag, std::uint64_t gen) {
  if (gen <= w.mark) return;
  // At the first call: however the calls in flight finish later, nothing is allocated.
  if (w.ahead.capacity() < calls_in_flight) w.ahead.reserve(calls_in_flight);
  if (gen == w.mark + 1 && w.ahead.empty()) {
    w.mark = gen;  // the common case: calls finish in order
  } else {
    w.ahead.insert(std::lower_bound(w.ahead.begin(), w.ahead.end(), gen), gen);
    while (!w.ahead.empty() && w.ahead.front() <= w.mark + 1) {
      w.mark = std::max(w.mark, w.ahead.front());
      w.ahead.erase(w.ahead.begin());
    }
  }
  flag.store(w.mark, std::memory_order_release);
}

std::string HierContext::local_name(int local) const {
  const int r = topo.members[static_cast<std::size_t>(topo.node)][static_cast<std::size_t>(local)];
  return "local rank " + std::to_string(local) + " (rank " + std::to_string(r) + ", world rank " +
         std::to_string(world_rank_of(comm, r)) + ")";
}

void HierContext::stalled(const char* stage, const std::string& what, double seconds) const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", seconds);
  report_hang(comm, "agx: AGX_TIMEOUT: " + rank_in(comm, topo.rank) + " made no progress for " +
                        secs + " s in algorithm " + std::string(to_string(running)) +
                        ", stage '" + stage + "': waiting for " + what);
}

// Two regions (double buffering: a call need not wait for the readers of the one before)
// up to 64 MiB per call, one region above. The segment grows when a call does not fit
// that way: growing only when it did not fit at all left calls of exactly half the
// segment in one region, a full wait for every reader on every call.
std::size_t HierContext::wanted_bytes(std::size_t total) {
  constexpr std::size_t double_buffer_limit = std::size_t{64} << 20;
  return total <= double_buffer_limit ? 2 * total : total;
}

std::size_t HierContext::grown_bytes(std::size_t total) {
  return page_round(std::max<std::size_t>(wanted_bytes(total), 64 * 1024));
}

bool HierContext::fits(std::size_t total) const { return data_bytes() >= wanted_bytes(total); }

std::byte* HierContext::region(std::uint64_t gen, std::size_t total) {
  drain_claims();
  const std::size_t want = wanted_bytes(total);
  if (data_bytes() < want) {
    agree_to_grow(gen);
    // Every local rank must be done with the old segment before it goes away.
    wait_done(std::max(last_use_[0], last_use_[1]));
    data_.reset();
    const std::size_t size = grown_bytes(total);
    data_ = std::make_unique<SharedSegment>(
        topo.node_comm, size, [this, gen, size](const char* what, double seconds) {
          stalled("growing the shared segment",
                  std::string(what) + " to join call " + std::to_string(gen) + " (" +
                      std::to_string(size) + " bytes; a rank that skipped the call, died, "
                      "or gave other counts)",
                  seconds);
        });
    last_use_ = {0, 0};
    ++grows_;
    planned_bytes_ = data_bytes();
  }
  const std::size_t half = data_bytes() / 2;
  if (total <= half) {
    const std::size_t h = gen & 1;
    wait_done(last_use_[h]);
    last_use_[h] = gen;
    return data_->data() + h * half;
  }
  wait_done(std::max(last_use_[0], last_use_[1]));
  last_use_ = {gen, gen};
  return data_->data();
}

// Growing is collective over the node (SharedSegment), decided from the call's total,
// which every rank knows alike, unless the program is erroneous and the ranks' counts
// differ: then a rank whose counts need no growth (its blocks fit the flag lines, or its
// call fits the segment) never joins, and the growth would wait for it forever. So each
// rank first announces the growth in its slot and waits until every local rank has
// announced it too, or shows this call on another path: its flag line or its progress
// mark of this call, written without an announcement. Then this rank publishes a block
// no reader expects (those waiting for its block fail with MPI_ERR_TRUNCATE, as those
// waiting for its flag line do once its progress shows the call) and fails too.
void HierContext::agree_to_grow(std::uint64_t gen) {
  Slot& own = own_slot();
  own.grow.store(gen, std::memory_order_release);
  notify();
  const int n = topo.local_size();
  for (int j = 0; j < n; ++j) {
    if (j == topo.local) continue;
    const Slot& s = slots_[j];
    bool other = false;
    wait_advancing(
        *this,
        [&] {
          if (s.grow.load(std::memory_order_acquire) >= gen) return true;
          other = s.progress.load(std::memory_order_acquire) >= progress_mark(gen, 0) ||
                  other_path(*this, j, gen);  // its flag line shows the call
          return other;
        },
        [&](double seconds) {
          stalled("growing the shared segment",
                  local_name(j) + " to join the growth for call " + std::to_string(gen) +
                      " (a rank that skipped the call, or died)",
                  seconds);
        });
    if (!other) continue;
    publish_no_block(own, gen);
    own.progress.store(progress_mark(gen, 0), std::memory_order_release);
    finish_call(gen);  // (read nothing) so that later calls' done and ready marks move on
    notify();
    throw Error(MPI_ERR_TRUNCATE, "agx: the ranks disagree on the counts: call " + std::to_string(gen) +
                                      " needs a larger shared segment here, and " + local_name(j) +
                                      " took another path (its counts give it another)");
  }
}

const Schedule& HierContext::inter_schedule(const AlgorithmChoice& a) {
  auto it = inter_.find(a);
  if (it == inter_.end())
    it = inter_.emplace(a, planner_for(a.id).plan({topo.nnodes, topo.node, a.radix})).first;
  return it->second;
}

WaitPick HierContext::wait_style_for(std::size_t mean_block) {
  WaitPick pick;  // (not oversubscribed: never sleeps; AGX_WAIT=sleep: always)
  if (!oversubscribed || sleep_forced) pick.way = sleep_forced ? 1 : 0;
  else pick = choose_wait(*this, mean_block);
  sleep_now_ = pick.way == 1;
  return pick;
}

std::size_t HierContext::chunk_bytes() const {
  const Settings& s = settings();
  return oversubscribed && !s.chunk_set ? std::size_t{1} << 30 : s.chunk_bytes;
}

}  // namespace agx::hier
