// Creation, segment regions and teardown of a communicator's hierarchical state
// (hier_context.hpp). Everything here is collective except region() on the fast path.

#include "hier/hier_context.hpp"

#include "core/executor.hpp"
#include "core/mpi_check.hpp"
#include "core/planner.hpp"
#include "hier/settings.hpp"
#include "hier/wait.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <new>

namespace agx::hier {
namespace {

// A word every rank can read from its peers to prove that single copy works.
volatile std::uint64_t probe_word = 0;

bool probe_single_copy(const Slot& peer) {
  std::uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{reinterpret_cast<void*>(peer.address.load()), sizeof value};
  const ssize_t got = process_vm_readv(static_cast<pid_t>(peer.pid), &local, 1, &remote, 1, 0);
  return got == static_cast<ssize_t>(sizeof value) &&
         value == static_cast<std::uint64_t>(peer.pid) * 7919u + 13u;
}

}  // namespace

HierContext::HierContext(MPI_Comm comm) : topo(discover_topology(comm)) {
  int smallest = topo.local_size();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &smallest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  leaders = std::max(1, std::min(settings().leaders, smallest));
  if (topo.nnodes > 1) {
    const int color = topo.local < leaders ? topo.local : MPI_UNDEFINED;
    check_mpi(MPI_Comm_split(comm, color, topo.node, &leader_comm), "MPI_Comm_split");
  }

  const int n = topo.local_size();
  header_ = std::make_unique<SharedSegment>(topo.node_comm, sizeof(Slot) * static_cast<std::size_t>(n));
  slots_ = reinterpret_cast<Slot*>(header_->data());
  // The segment is zero-filled, which is a valid state of every slot; construct our own
  // slot formally (only its owner ever writes it).
  new (&slots_[topo.local]) Slot{};
  own_slot().pid = static_cast<std::int64_t>(getpid());
  probe_word = static_cast<std::uint64_t>(getpid()) * 7919u + 13u;
  own_slot().address.store(reinterpret_cast<std::uintptr_t>(&probe_word));
  check_mpi(MPI_Barrier(topo.node_comm), "MPI_Barrier");  // setup only, not per call
  int ok = n > 1 && settings().cma ? 1 : 0;
  if (ok) ok = probe_single_copy(slot((topo.local + 1) % n)) ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, topo.node_comm), "MPI_Allreduce");
  cma = ok != 0;
  own_slot().address.store(0);
}

HierContext::~HierContext() {
  data_.reset();
  header_.reset();
  free_comm(leader_comm);  // kept allocated after an abandoned round (core/executor.hpp)
  if (topo.node_comm != MPI_COMM_NULL) MPI_Comm_free(&topo.node_comm);
}

void HierContextDeleter::operator()(HierContext* h) const { delete h; }

void HierContext::wait_done(std::uint64_t gen) {
  if (gen <= synced_) return;
  const int n = topo.local_size();
  for (int i = 0; i < n; ++i) {
    const Slot& s = slots_[i];
    wait_until([&] { return s.done.load(std::memory_order_acquire) >= gen; });
  }
  mark_synced(gen);
}

std::byte* HierContext::region(std::uint64_t gen, std::size_t total) {
  if (data_bytes() < total) {
    // Every local rank must be done with the old segment before it goes away.
    wait_done(std::max(last_use_[0], last_use_[1]));
    data_.reset();
    constexpr std::size_t double_buffer_limit = std::size_t{64} << 20;
    const std::size_t want = total <= double_buffer_limit ? 2 * total : total;
    data_ = std::make_unique<SharedSegment>(topo.node_comm, std::max<std::size_t>(want, 64 * 1024));
    last_use_ = {0, 0};
    ++grows_;
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

const Schedule& HierContext::inter_schedule(Algorithm a) {
  auto& slot = inter_[static_cast<std::size_t>(a)];
  if (!slot) slot = planner_for(a).plan({topo.nnodes, topo.node});
  return *slot;
}

}  // namespace agx::hier
