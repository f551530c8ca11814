#pragma once
// Per-communicator state, cached as an MPI attribute on the user's communicator:
// a private communicator over the same ranks for agx's own messages (user traffic can
// never match them; made without copying any user attribute), the selection state
// (placement and tuning), cached schedules and their compiled message descriptors
// (descriptors.hpp), the tag sequence, and the state a layer above keeps per communicator
// (lib/hier's node state).
//
// lib/core only finds and owns contexts; lib/api/context.cpp sets them up (collective:
// one exchange over the communicator, docs/hierarchy.md "Set-up").
//
// Ownership: the attribute holds one shared reference; every pending operation
// (agx::Request, agx::Plan, the interposer's requests) holds another. Freeing the user's
// communicator drops the attribute's reference only, so a call started before
// MPI_Comm_free completes on the private communicator, as MPI allows; the state goes with
// the last reference (and at MPI_Finalize for communicators still alive then).

#include <mpi.h>

#include <agx/algorithm.hpp>

#include "core/algorithm_trials.hpp"
#include "core/descriptors.hpp"
#include "core/schedule.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace agx {

class Selector;  // core/select.hpp
struct SelectorDeleter {
  void operator()(Selector* s) const;
};

/// What a layer above lib/core keeps per communicator (lib/hier: its topology and
/// shared segments). Owned by the context, released before its private communicator.
class NodeState {
 public:
  virtual ~NodeState() = default;
  /// Whether this rank's node has a core per rank (waiters may spin before yielding).
  virtual bool core_per_rank() const { return false; }
};

/// The attribute delete callback (MPI calls it when the user's communicator is freed).
int delete_context(MPI_Comm user_comm, int keyval, void* attr, void* extra);

class CommContext : public std::enable_shared_from_this<CommContext> {
 public:
  /// Attaches a new context to `user_comm` (what lib/api/context.cpp set up): `comm` is
  /// the private communicator (owned from now on), `node` the node layer's state.
  static CommContext& attach(MPI_Comm user_comm, MPI_Comm comm, Selector* selector,
                             std::unique_ptr<NodeState> node);
  /// A context attached to no user communicator (its user freed it while a nonblocking
  /// set-up ran, api/context.hpp): only the calls that hold it keep it.
  static std::shared_ptr<CommContext> detached(MPI_Comm comm, Selector* selector,
                                               std::unique_ptr<NodeState> node);
  /// A reference that keeps this state alive after the user's communicator is freed.
  std::shared_ptr<CommContext> share() { return shared_from_this(); }
  /// The context of `user_comm` if it has one; never creates (local, no communication).
  static CommContext* find(MPI_Comm user_comm);
  /// The context whose private communicator is `comm`, null if none (local; a repeated
  /// lookup of one communicator takes no lock while no context was made or destroyed).
  /// Valid while the caller holds the context (it runs on its communicator).
  static CommContext* of_private(MPI_Comm comm);
  /// How many contexts have been deleted so far in this process: a pointer to a context
  /// found while this read `d` is still valid while it reads `d` (no communicator freed).
  static std::uint64_t deletions();

  ~CommContext();
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;

  MPI_Comm comm() const { return comm_; }
  int size() const { return size_; }
  int rank() const { return rank_; }

  /// The schedule of this rank for a concrete algorithm and its parameters, planned once.
  const Schedule& schedule(const AlgorithmChoice& a);
  /// The same staged for device buffers (stage_on_device), made once.
  const Schedule& staged_schedule(const AlgorithmChoice& a);

  /// The compiled descriptors of `schedule` for this call shape (descriptors.hpp): cached,
  /// or compiled now when `schedule` is one of this context's own (schedule()); null
  /// otherwise, or with AGX_DESCRIPTOR_CACHE=0.
  std::shared_ptr<CompiledSchedule> compiled(const Schedule& schedule, const Layout& layout,
                                             bool in_place, std::size_t max_message_bytes);
  DescriptorCache& descriptors() { return descriptors_; }

  /// A fresh tag for the next collective on this communicator (same on every rank,
  /// since collectives are called in the same order everywhere).
  int next_tag();

  /// The node layer's state of this communicator (lib/hier), made at set-up.
  NodeState* node_state() const { return node_.get(); }

  /// The automatic selection state: placement, tuning, node stage (made at set-up).
  Selector& selector() { return *selector_; }

  /// `auto` against its rival on this communicator's large one-node calls
  /// (algorithm_trials.hpp; api/dispatch.cpp times them).
  AlgorithmTrials& algorithm_trials() { return algorithm_trials_; }

  /// Whether the set-up exchange found that no call on this communicator can involve
  /// device memory (no rank sees a GPU, or AGX_CUDA=off; device settings agree): the
  /// device layer (lib/cuda) records it once, so a host call skips that layer with one
  /// load. False until recorded.
  bool host_only() const { return host_only_; }
  void set_host_only(bool host_only) { host_only_ = host_only; }

 private:
  CommContext(MPI_Comm comm, Selector* selector, std::unique_ptr<NodeState> node);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 0;
  int rank_ = 0;
  unsigned sequence_ = 0;
  bool host_only_ = false;
  AlgorithmTrials algorithm_trials_;
  std::map<AlgorithmChoice, Schedule> schedules_;
  std::map<AlgorithmChoice, Schedule> staged_;  // staged_schedule
  DescriptorCache descriptors_;  // after schedules_: its entries point at them
  std::unique_ptr<Selector, SelectorDeleter> selector_;
  std::unique_ptr<NodeState> node_;

  friend int delete_context(MPI_Comm, int, void*, void*);
};

}  // namespace agx
