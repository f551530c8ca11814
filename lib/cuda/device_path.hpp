#pragma once
// The one hook the dispatch calls (api/dispatch.cpp): device buffers take a device path.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <mpi.h>

#include "cuda/settings.hpp"

#include <functional>
#include <cstdint>
#include <memory>
#include <vector>
#include <optional>

namespace agx {
class CommContext;
}

namespace agx::cuda {

/// What a device call ran: its path and the algorithm that moved the data (the
/// schedule on the wire or on the staging mirror; `direct` for IPC, where each rank
/// copies every peer's block itself). It may differ from the algorithm chosen for the
/// call: node algorithms never run under `aware` (they stage), and a staging call
/// larger than AGX_CUDA_STAGING_BYTES runs ring instead of a node algorithm.
struct DeviceRun {
  Path path = Path::staging;
  Algorithm algorithm = Algorithm::automatic;
};

/// One call's way through lib/cuda, decided and run without blocking. The constructor
/// looks at this rank's buffers and posts the agreement on memory kinds (one
/// nonblocking allreduce of three ints, only on communicators where some rank sees a
/// GPU); test() advances it and, once the ranks agree that some buffer is device
/// memory, starts the chosen device path and advances it (its handshakes are
/// nonblocking too: staging rounds, IPC's handle exchange and barrier). The first call
/// on a communicator also agrees, once, on whether any rank sees a GPU and on the
/// settings that must match (AGX_CUDA, AGX_CUDA_PATH, AGX_CUDA_CHUNK_BYTES),
/// progressing agx's other requests meanwhile. Without CUDA, or when no rank has a
/// GPU, it is decided at once ("host") without any MPI call after that first one.
///
/// Order: the calls of one communicator settle (decide, take their tag, start their
/// path) in the order they were made, on every rank: a call whose agreement is done
/// waits in test() for the earlier calls of its communicator to settle. So a caller
/// that runs the host path must start it when it is told to: `host_start`, called at
/// settlement, inside test() (nonblocking starts); without one, test() returns false
/// and the caller starts the host path at once (blocking calls).
class DeviceCall {
 public:
  using HostStart = std::function<void()>;
  DeviceCall(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout,
             HostStart host_start = {});
  ~DeviceCall();
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

  /// nullopt while the agreement is open or the device path runs; then true when the
  /// device path ran (the call is complete), false when the caller runs the host path
  /// (already started through `host_start` when there is one). Throws agx::Error.
  std::optional<bool> test();
  /// What ran, once test() returned true.
  std::optional<DeviceRun> ran() const;

  /// What a device call runs (internal, device_path.cpp).
  struct Run;

 private:
  void settle();
  void settle_host();

  CommContext& ctx_;
  AlgorithmChoice choice_;
  Buffers buffers_;
  Layout layout_;
  HostStart host_start_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int mine_[3] = {0, 0, 0};
  int agreed_[3] = {0, 0, 0};
  bool local_device_ = false;
  bool queued_ = false;  ///< waiting in its communicator's queue of unsettled calls
  int device_ = -1;  ///< the caller's current CUDA device (the path runs on it)
  std::unique_ptr<Run> run_;
  DeviceRun ran_;
  std::optional<bool> result_;
};

/// The blocking form: a DeviceCall tested until settled, every other running agx
/// request advancing meanwhile (so that requests started earlier cannot deadlock it).
/// True when the device path ran; false when the caller runs the host path.
bool run_if_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout);

/// The same, returning what ran (nullopt: the caller runs the host path).
std::optional<DeviceRun> run_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                                    const Layout& layout);

/// This rank's part of the communicator's device state, carried by the communicator's
/// set-up exchange (api/context.cpp): whether it sees a GPU, and the settings that must
/// match on every rank.
struct SetupWord {
  std::int64_t device = 0;    ///< 1: a GPU is visible (and CUDA is built)
  std::int64_t settings = 0;  ///< the AGX_CUDA* settings as one number
  std::int64_t staging = 0;   ///< AGX_CUDA_STAGING_BYTES
};
SetupWord own_setup_word();
/// Records the communicator's device state from every rank's word, at its set-up (no
/// collective: the set-up exchange carried them), so that no later call, blocking or
/// nonblocking, agrees on it: a start never waits for it.
void adopt_setup_words(CommContext& ctx, const std::vector<SetupWord>& all);

/// Whether every call on ctx's communicator takes the host path without an agreement:
/// no CUDA built, or no rank sees a GPU (AGX_CUDA=off counts as none). The same on every
/// rank; agreed once per communicator in its set-up exchange, local afterwards. The interposer's compressed nonblocking starts ask it
/// (pmpi/call.cpp, start_compressed), which must not wait for the other ranks.
bool host_only(CommContext& ctx);

/// The path of this process's last device call (for tools and tests).
std::optional<Path> last_path();
/// The path and algorithm of this process's last device call (for tools and tests).
std::optional<DeviceRun> last_run();

}  // namespace agx::cuda
