#pragma once
// The blocking call once its algorithm is chosen: what allgather_bytes runs after the
// checks and the selection, for callers that made both already (the interposer's
// repeated calls, pmpi/fast_call.cpp).

#include <agx/bytes.hpp>

#include "core/comm_context.hpp"
#include "core/executor.hpp"

namespace agx {

/// Runs `a` (a choice of select_algorithm for this call) on checked buffers and layout;
/// returns the algorithm that ran (device buffers may run another, lib/cuda).
Algorithm run_selected(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                  const Layout& layout);

/// Waits for the execution of a blocking call. While nonblocking calls of this process
/// run (core/nonblocking.hpp), advances them too: a peer, or a flag watermark of this
/// very rank, may wait for one of them (start(A); blocking call; wait(A)).
void wait_blocking(Execution& e);

}  // namespace agx
