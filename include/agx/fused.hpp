#pragma once
// Fused all-gathers (docs/fused.md): several all-gathers on one communicator, of any
// element types, sizes and v layouts, in place or not, run as ONE all-gather over the
// concatenated layout, so that they pay one start-up instead of one per call.
//
//   agx::Group g(comm);
//   g.add(std::span<const float>(w), std::span<float>(all_w));   // out of place
//   g.add_in_place(std::span<int>(stats));                        // in place
//   g.add_v(std::span<const double>(mine), std::span<double>(all), counts, displs);
//   g.run();                 // blocking; or: agx::FusedRequest r = g.start(); r.wait();
//
// Rank i's block of the fused call is the concatenation of its blocks of every member,
// in the order they were added. Every rank adds the same members in the same order
// (same element sizes, counts and v counts), as it would make the separate calls.
// Members are checked exactly as the single calls of agx::Allgather<T> check them.

#include <mpi.h>

#include <agx/allgather.hpp>
#include <agx/bytes.hpp>
#include <agx/error.hpp>
#include <agx/options.hpp>
#include <agx/request.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace agx {

/// One member of a fused group in bytes: its buffers, and per rank its block's bytes
/// and offset in the member's receive buffer.
struct FusedPart {
  Buffers buffers;
  std::vector<std::size_t> bytes, offsets;
};

/// How a fused call moved its bytes (docs/fused.md): `direct` (the members' buffers hold
/// each rank's pieces back to back: the fused layout addresses them as they are),
/// `segmented` (each fused block is sent as the list of its pieces, one derived datatype
/// per message: no staging copy either), `staged` (through one staging buffer: a copy
/// in and a copy out; only the per-round integrity checks, AGX_INTEGRITY and
/// AGX_TEST_FLIP, need it: the node paths gather and scatter the pieces themselves).
enum class FusedWay { direct, segmented, staged };

namespace detail {
struct FusedState;  // lib/fused/fused.cpp
struct FusedStateDeleter {
  void operator()(FusedState* s) const noexcept;
};
}  // namespace detail

/// A started fused group. Move-only; an empty request is complete. The destructor of
/// an unfinished request waits for it (errors there are printed, never thrown).
class FusedRequest {
 public:
  FusedRequest() = default;
  explicit FusedRequest(std::unique_ptr<detail::FusedState, detail::FusedStateDeleter> s);
  FusedRequest(FusedRequest&&) noexcept = default;
  FusedRequest& operator=(FusedRequest&& other) noexcept;
  ~FusedRequest();

  /// Advances without blocking; true once every member's receive buffer is complete.
  bool test();
  /// Blocks until every member's receive buffer is complete.
  void wait();
  bool active() const;
  /// Of the call that moves the most bytes (FusedResult).
  Algorithm algorithm() const;
  FusedWay way() const;
  /// How many all-gathers the group runs as (FusedResult::calls).
  std::size_t calls() const;

 private:
  std::unique_ptr<detail::FusedState, detail::FusedStateDeleter> state_;
};

/// What a fused call did. A group runs as one all-gather, or, where the cost model
/// prices that cheaper, as several: some members fused, others alone (docs/fused.md,
/// "Fuse or not"). `algorithm` and `way` are those of the call that moved the most bytes
/// (on the members' own buffers, or through a staging buffer); a member alone runs direct.
struct FusedResult {
  Algorithm algorithm = Algorithm::automatic;
  FusedWay way = FusedWay::direct;
  std::size_t bytes = 0;  ///< bytes every rank received, all members together
  std::size_t calls = 0;  ///< all-gathers run: 1 fused as one, size() every member alone
  bool staged() const { return way == FusedWay::staged; }
};

/// "direct", "segmented" or "staged".
const char* to_string(FusedWay w);

/// All-gathers the parts over their concatenated layout (blocking): as one call, or
/// split where the cost model prices that cheaper; a forced algorithm (Options or
/// AGX_ALGO) always runs one call.
FusedResult fused_allgather_bytes(MPI_Comm comm, std::span<const FusedPart> parts,
                                  const Options& options = {});
/// Nonblocking form; the parts' buffers must stay alive and untouched until it completes.
FusedRequest start_fused_allgather_bytes(MPI_Comm comm, std::span<const FusedPart> parts,
                                         const Options& options = {});

/// Collects all-gathers and runs them as one. The buffers of every member must stay
/// alive until run() returns (or the request of start() completes).
class Group {
 public:
  explicit Group(MPI_Comm comm, Options options = {}) : comm_(comm), options_(options) {}

  template <class T>
  Group& add(std::span<const T> send, std::span<T> recv) {
    return take(Allgather<T>(comm_, options_).out_of_place(send, recv));
  }
  template <class T>
  Group& add_in_place(std::span<T> recv) {
    return take(Allgather<T>(comm_, options_).in_place_call(recv));
  }
  template <class T, IntegralRange C, IntegralRange D>
  Group& add_v(std::span<const T> send, std::span<T> recv, const C& counts, const D& displs) {
    return take(Allgather<T>(comm_, options_).v_call(send, recv, counts, displs));
  }
  template <class T, IntegralRange C, IntegralRange D>
  Group& add_v_in_place(std::span<T> recv, const C& counts, const D& displs) {
    return take(Allgather<T>(comm_, options_).v_in_place_call(recv, counts, displs));
  }

  /// Runs every member as one all-gather (collective); the group keeps its members,
  /// so the same group can run again (with the buffers' current content).
  FusedResult run() const { return fused_allgather_bytes(comm_, parts_, options_); }
  /// Nonblocking run().
  FusedRequest start() const { return start_fused_allgather_bytes(comm_, parts_, options_); }

  std::size_t size() const { return parts_.size(); }
  /// The members in bytes, as checked when added.
  std::span<const FusedPart> parts() const { return parts_; }
  void clear() { parts_.clear(); }
  MPI_Comm comm() const { return comm_; }

 private:
  template <class Call>
  Group& take(const Call& c) {
    FusedPart p;
    p.buffers = c.buffers;
    const Layout l = c.layout();
    for (int i = 0; i < l.nranks(); ++i) {
      p.bytes.push_back(l.bytes(i));
      p.offsets.push_back(l.offset(i));
    }
    parts_.push_back(std::move(p));
    return *this;
  }

  MPI_Comm comm_;
  Options options_;
  std::vector<FusedPart> parts_;
};

}  // namespace agx
