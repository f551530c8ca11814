#pragma once
// Nonblocking and persistent all-gather (docs/nonblocking.md).
//
//   agx::Request r = gather.start(mine, all);   // posts round 0 and returns
//   ... compute ...
//   r.wait();                                   // or poll r.test()
//
//   agx::Plan p = gather.plan(mine, all);       // choose, plan, register once
//   for (...) { fill(mine); p.start(); ...; p.wait(); }
//
// Progress happens inside test()/wait() (and any agx call), or in a progress thread
// (set_progress_thread / AGX_PROGRESS_THREAD=1, needs MPI_THREAD_MULTIPLE).
// Starting is collective: every rank of the communicator starts its calls in the same
// order, as MPI requires for nonblocking collectives. Buffers must stay alive and
// untouched (send: unmodified; receive: unread) until the request or start completes.

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/error.hpp>
#include <agx/options.hpp>

#include <atomic>
#include <cstdint>
#include <memory>

namespace agx {

namespace detail {
class Operation;  // lib/core/nonblocking.hpp
struct OperationDeleter {
  void operator()(Operation* op) const noexcept;
};
using OperationPtr = std::unique_ptr<Operation, OperationDeleter>;

/// 0: not yet seen usable; 1: between MPI_Init and MPI_Finalize; 2: MPI_Finalize began.
inline std::atomic<int> mpi_usable_state{0};

inline int mark_mpi_finalized(MPI_Comm, int, void*, void*) {
  mpi_usable_state.store(2, std::memory_order_release);
  return MPI_SUCCESS;
}

[[gnu::noinline]] inline void check_mpi_usable_slow() {
  int finalized = 0, initialized = 0;
  PMPI_Finalized(&finalized);
  if (finalized)
    throw Error(MPI_ERR_OTHER, "agx: called after MPI_Finalize (no MPI call is allowed then)");
  PMPI_Initialized(&initialized);
  if (!initialized)
    throw Error(MPI_ERR_OTHER, "agx: called before MPI_Init (no MPI call is allowed then)");
  // MPI_Finalize deletes MPI_COMM_SELF's attributes first: this one marks it, so that a
  // usable MPI costs one atomic load per call from now on. (PMPI_: under the interposer
  // the key is agx's own.)
  static const bool hooked = [] {
    int key = MPI_KEYVAL_INVALID;
    return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, mark_mpi_finalized, &key, nullptr) ==
               MPI_SUCCESS &&
           PMPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr) == MPI_SUCCESS;
  }();
  int unseen = 0;  // (never back from 2: a call made inside MPI_Finalize asks MPI again)
  if (hooked) mpi_usable_state.compare_exchange_strong(unseen, 1, std::memory_order_acq_rel);
}

/// Throws agx::Error (MPI_ERR_OTHER) before MPI_Init and after MPI_Finalize, where any
/// MPI call is erroneous (Open MPI aborts the job). agx::Allgather<T>'s calls (fused and
/// encoded ones too), start_allgather_bytes, plan_allgather_bytes and Plan::start check
/// this first.
inline void check_mpi_usable() {
  if (mpi_usable_state.load(std::memory_order_acquire) == 1) [[likely]] return;
  check_mpi_usable_slow();
}
}  // namespace detail

/// One started all-gather. Move-only. An empty (default-constructed or moved-from)
/// request is complete: test() is true, wait() returns. The destructor of an unfinished
/// request waits for it (errors there are printed to stderr, never thrown); destroy
/// requests before MPI_Finalize.
class Request {
 public:
  Request() = default;
  explicit Request(detail::OperationPtr op);
  Request(Request&&) noexcept = default;
  /// Waits for the request held so far, then takes `other`'s.
  Request& operator=(Request&& other) noexcept;
  ~Request();

  /// Advances without blocking; true once the all-gather is complete (the receive
  /// buffer then holds every block). Throws agx::Error when a transfer failed.
  bool test();
  /// Blocks until complete. Throws agx::Error when a transfer failed.
  void wait();
  /// True while the call is started and not yet seen complete.
  bool active() const;
  /// The algorithm this call runs.
  Algorithm algorithm() const;
  /// The algorithm this call runs with its parameters (the radix: full_name() prints it).
  AlgorithmChoice choice() const;

 private:
  detail::OperationPtr op_;
};

/// A persistent all-gather: the algorithm, schedule, message cuts, datatypes and MPI
/// persistent requests are made once for fixed (communicator, layout, buffers); each
/// start() only moves data. Move-only; start/test/wait as often as needed, one start
/// in flight at a time. The destructor waits for a running start; destroy plans
/// before MPI_Finalize. An empty (default-constructed or moved-from) plan is complete;
/// its start() throws.
class Plan {
 public:
  Plan() = default;
  explicit Plan(detail::OperationPtr op);
  Plan(Plan&&) noexcept = default;
  /// Waits for a running start of the plan held so far, then takes `other`'s.
  Plan& operator=(Plan&& other) noexcept;
  ~Plan();

  /// Starts one all-gather of the buffers given at planning (their current content).
  /// Collective. Throws agx::Error (MPI_ERR_REQUEST) while a start is still running and
  /// on an empty plan, and MPI_ERR_OTHER after MPI_Finalize.
  void start();
  /// Advances without blocking; true once the last start is complete (or none ran).
  bool test();
  /// Blocks until the last start is complete.
  void wait();
  /// True while a start is running.
  bool active() const;
  /// The algorithm every start runs.
  Algorithm algorithm() const;
  /// The algorithm every start runs with its parameters (the radix).
  AlgorithmChoice choice() const;
  /// How many times start() has been called.
  std::uint64_t starts() const;

 private:
  detail::OperationPtr op_;
};

/// Starts an all-gather of bytes (same arguments and checks as allgather_bytes) and
/// returns at once, without waiting for the other ranks (AGX_CHECK=1 excepted). The
/// choice is a blocking call's; shared_memory and hierarchical run as schedules advanced
/// by test(), AGX_INTEGRITY's end-to-end check included. On a communicator agx has not
/// set up yet (no blocking call, plan or choose_algorithm on it so far) the call runs as
/// the MPI library's MPI_Iallgatherv (algorithm() is `automatic`); the communicator is
/// set up at its first blocking call (docs/nonblocking.md, "The first call on a new
/// communicator").
Request start_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                              const Options& options = {});

/// Plans a persistent all-gather over fixed buffers. Collective, and it may wait for the
/// other ranks (it makes the plan's requests and, on a new communicator, sets it up);
/// Plan::start() then never does. Same choice as start_allgather_bytes.
Plan plan_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options = {});

/// Starts (true) or stops (false) the progress thread, which advances every running
/// request and plan start in the background. Needs MPI initialized with
/// MPI_THREAD_MULTIPLE (checked with MPI_Query_thread; agx::Error otherwise). Stopped
/// automatically at MPI_Finalize. AGX_PROGRESS_THREAD=1 starts it at the first start.
void set_progress_thread(bool on);

/// Whether the progress thread runs.
bool progress_thread_running();

}  // namespace agx
