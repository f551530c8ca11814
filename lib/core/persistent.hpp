#pragma once
// The point-to-point part of a persistent all-gather (agx::Plan): the round engine
// (executor.hpp) on a duplicate of the communicator, its messages made once as MPI
// persistent requests (persistent.cpp has the details). lib/api's plan runs it for
// point-to-point algorithms on host buffers (api/dispatch.cpp).

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/executor.hpp"

#include <memory>
#include <optional>

namespace agx {
class CommContext;
}

namespace agx::detail {

class PersistentRounds {
 public:
  /// Plans `a` on ctx and makes every request (collective: duplicates ctx's communicator).
  /// `layout` must outlive this (the plan's own copy).
  PersistentRounds(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                   const Layout& layout);
  ~PersistentRounds();
  PersistentRounds(const PersistentRounds&) = delete;
  PersistentRounds& operator=(const PersistentRounds&) = delete;

  /// Throws MPI_ERR_REQUEST once an earlier start failed (its sends were freed).
  void check_usable() const;
  /// Copies the own block into place and starts round 0.
  void start();
  /// Advances without blocking; true when every round is complete.
  bool test() { return execution_->test(); }

 private:
  std::shared_ptr<CommContext> comm_state_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::optional<Execution> execution_;  // persistent (Execution::make_persistent)
};

}  // namespace agx::detail
