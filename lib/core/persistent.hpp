#pragma once
// The point-to-point part of a persistent all-gather (agx::Plan): a schedule's messages
// as MPI persistent requests on a duplicate of the communicator, made once, started per
// start (persistent.cpp has the details). lib/api's plan runs it for point-to-point
// algorithms on host buffers (api/dispatch.cpp).

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/descriptors.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/timeout.hpp"

#include <memory>
#include <optional>
#include <vector>

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
  bool test();

 private:
  void build(const Schedule& schedule);
  void init(std::size_t r, bool is_send, const Transfer& t, bool checksums, const MessageArgs& m);
  void release() noexcept;
  void start_round();
  void abandon_round() noexcept;
  void end_round();
  bool poll_round();
  [[noreturn]] void stalled();

  std::shared_ptr<CommContext> comm_state_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  Buffers buffers_;
  Layout layout_;
  int rank_;
  Checks checks_;
  double timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<MPI_Request>> rounds_;
  std::vector<std::vector<Execution::Posted>> posted_;  // per request of rounds_
  std::vector<MPI_Datatype> types_;  // without compiled_ only
  std::shared_ptr<CompiledSchedule> compiled_;  // its datatypes live while the requests do
  std::size_t round_ = 0;
  bool round_started_ = false;  ///< rounds_[round_] was started and is not yet complete
  bool failed_ = false;
  std::optional<RoundChecks> round_checks_;
  std::optional<StallClock> clock_;
  std::size_t open_ = 0;
  std::vector<int> done_indices_;
  std::vector<MPI_Status> statuses_;  // of MPI_Testall
};

}  // namespace agx::detail
