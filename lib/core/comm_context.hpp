#pragma once
// Per-communicator state, cached as an MPI attribute on the user's communicator:
// a private communicator over the same ranks for agx's own messages (user traffic can
// never match them; made with MPI_Comm_split, so no user attribute is copied),
// cached schedules, and the tag sequence.
//
// Ownership: the attribute holds one shared reference; every pending operation
// (agx::Request, agx::Plan, the interposer's requests) holds another. Freeing the user's
// communicator drops the attribute's reference only, so a call started before
// MPI_Comm_free completes on the private communicator, as MPI allows; the state goes with
// the last reference (and at MPI_Finalize for communicators still alive then).

#include <mpi.h>

#include <agx/algorithm.hpp>

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

namespace hier {
class HierContext;  // lib/hier: topology and shared segments of a communicator
struct HierContextDeleter {
  void operator()(HierContext* h) const;
};
}  // namespace hier

/// The attribute delete callback (MPI calls it when the user's communicator is freed).
int delete_context(MPI_Comm user_comm, int keyval, void* attr, void* extra);

class CommContext : public std::enable_shared_from_this<CommContext> {
 public:
  /// The context of an intra-communicator, created on first use (collective then:
  /// it splits the communicator). Throws agx::Error for null or inter-communicators.
  static CommContext& of(MPI_Comm user_comm);
  /// A reference that keeps this state alive after the user's communicator is freed.
  std::shared_ptr<CommContext> share() { return shared_from_this(); }
  /// The context of `user_comm` if it has one; never creates (local, no communication).
  static CommContext* find(MPI_Comm user_comm);
  /// How many contexts have been deleted so far in this process: a pointer to a context
  /// found while this read `d` is still valid while it reads `d` (no communicator freed).
  static std::uint64_t deletions();

  /// Whether every collective set-up a nonblocking start may need is done: the
  /// private communicator and the automatic selection state (with the topology).
  /// The same on every rank: contexts are made only inside collective calls.
  bool ready_for_nonblocking() const { return selector_ != nullptr; }

  ~CommContext();
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;

  MPI_Comm comm() const { return comm_; }
  int size() const { return size_; }
  int rank() const { return rank_; }

  /// The schedule of this rank for a concrete algorithm and its parameters, planned once.
  const Schedule& schedule(const AlgorithmChoice& a);

  /// A fresh tag for the next collective on this communicator (same on every rank,
  /// since collectives are called in the same order everywhere).
  int next_tag();

  /// lib/hier's state of this communicator; null until the first hierarchical call.
  hier::HierContext* hier() const { return hier_.get(); }
  void set_hier(hier::HierContext* h) { hier_.reset(h); }

  /// The automatic selection state, created on first use (collective then).
  Selector& selector();


 private:
  explicit CommContext(MPI_Comm user_comm);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 0;
  int rank_ = 0;
  unsigned sequence_ = 0;
  std::map<AlgorithmChoice, Schedule> schedules_;
  std::unique_ptr<hier::HierContext, hier::HierContextDeleter> hier_;
  std::unique_ptr<Selector, SelectorDeleter> selector_;

  friend int delete_context(MPI_Comm, int, void*, void*);
};

}  // namespace agx
