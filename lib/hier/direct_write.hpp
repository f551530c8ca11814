#pragma once
// Direct write: a blocking all-gather on one node whose every receive buffer lies in
// memory from agx::allocate (or MPI_Alloc_mem under the interposer). Each rank copies its
// own block straight into every peer's receive buffer, mapped through the peer's memory
// file: N·M bytes written per rank (out of place; (N-1)·M in place), the copy bound, and
// nothing read twice.
//
//   round 1 (call gen)     every local rank publishes in its flag line where its receive
//                          buffer lies (region name, offset, extent, counts) and reads
//                          everyone's; all shared: go on; otherwise every rank returns
//                          false (all saw the same lines) and the call takes its usual path
//   write                  map each peer's region (cached), memcpy the own block to its
//                          place in every peer's receive buffer (and the own one)
//   round 2 (call gen + 1) status: 0 written, 1 a peer could not be mapped (every rank
//                          then runs the usual path, which rewrites every block), 2 the
//                          counts disagree (MPI_ERR_TRUNCATE everywhere); seeing every
//                          rank's round 2 means every block has arrived
//
// Both rounds are inline exchanges (hier_context.hpp, InlineBlock), so the flags and
// generations are those of the other node paths. Settings: AGX_DIRECT_WRITE=0 turns it
// off; AGX_DIRECT_WRITE_MIN_BYTES (default 262144) is the smallest mean block it serves.

#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include <cstdint>

namespace agx {
class CommContext;
}

namespace agx::hier {

class HierContext;

/// The blocking shared_memory path's first try (hier_allgather.cpp), collective over the
/// node: true when the call ran here. False without any flag round when the call is not
/// one it serves by its shape (more than one node, one rank, below the size, disabled).
/// `send_on_host`: this rank's send block is host memory (lib/hier never sees device
/// memory: device buffers reach it as lib/cuda's host mirrors; the entry points ask lib/cuda).
bool direct_write(HierContext& h, const Buffers& buffers, const Layout& layout,
                  bool send_on_host = true);

/// A blocking call with `options` (lib/core's allgather_bytes, the interposer): when they
/// ask for the automatic choice (no AGX_ALGO) and the communicator lies on one node,
/// direct_write on its node; true when the call ran (as shared_memory). The same answer on
/// every rank: it depends on the settings, the layout and round 1 only.
/// `on_device(p)`: whether p is device memory (lib/cuda's query, asked only for a call of
/// the path's shape).
bool direct_write_auto(CommContext& ctx, const Options& options, const Buffers& buffers,
                       const Layout& layout, bool (*on_device)(const void*));

/// Whether a call whose mean block is `mean_block` bytes is of a size direct write
/// serves (enabled, at least AGX_DIRECT_WRITE_MIN_BYTES): when false, direct_write and
/// direct_write_auto return false at once, so a caller that knows the size may skip them.
bool direct_write_size(std::size_t mean_block);

/// Calls that ran by direct write in this process (tests, agx_pmpi_direct_write_calls).
std::uint64_t direct_write_calls();

}  // namespace agx::hier
