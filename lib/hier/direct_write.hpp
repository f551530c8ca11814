#pragma once
// Direct write: a blocking all-gather on one node in which each rank copies its own
// block straight into every peer's receive buffer: N·M bytes written per rank (out of
// place; (N-1)·M in place), the copy bound, and nothing read twice. Two ways per peer:
//   mapped   the peer's receive buffer lies in memory from agx::allocate (or
//            MPI_Alloc_mem under the interposer): memcpy through the peer's memory file
//   kernel   any other host buffer (the heap): process_vm_writev into the peer's process,
//            where the node path's copy choice takes the kernel's copies for the call's
//            size (copy_choice.hpp: timed against staging on the first calls, as single
//            copy's reads are below this path's size). A push reads the writer's own send
//            buffer, in its cache, where single copy's read pulls the owner's lines
//            across: on the Intel Xeon machine at 2 ranks 0.74-0.96x Open MPI's time from
//            256 KiB to 16 MiB against 0.90-1.03x by reading (docs/results.md, History)
//
//   agreement (call gen)   every local rank publishes in its flag line where its receive
//                          buffer lies (region name, offset, extent, counts, its address
//                          in its process) and reads everyone's; all shared, or the rest
//                          pushed by the kernel: the schedule below runs; otherwise every
//                          rank returns false (all saw the same lines and picked the same
//                          way) and the call takes its usual path
//   the schedule           shared_memory by direct write (core/planners/node_planner.cpp,
//                          NodeShape::direct_write: proven by the validator, priced by the
//                          cost model), run by the round engine's blocking lane
//                          (core/local_rounds.hpp) on DirectWrites, this file's node copies:
//     round 0  write       map each peer's region (cached), memcpy the own block to its
//                          place in every peer's receive buffer (or push it there by the
//                          kernel)
//              signal      the status, in the flag line of call gen + 1: 0 written, 1 a
//                          peer could not be mapped or pushed to (every rank then runs the
//                          usual path, staged, which rewrites every block), 2 the counts disagree
//                          (MPI_ERR_TRUNCATE everywhere)
//              copy        the own block into the own receive buffer (out of place;
//                          made by the write, 512 KiB at a time right after each piece
//                          went to the peers, so the send buffer is read once:
//                          NodeSegment::took_own_copy)
//     round 1  wait        every peer's status: seeing them all means every block has
//                          arrived
//
// The agreement is the path's precondition (whether every receive buffer can be mapped
// is known only at the call), the rest is a schedule like any other. Both flag rounds are
// inline lines (hier_context.hpp, InlineBlock), so the flags and generations are those
// of the other node paths. Settings: AGX_DIRECT_WRITE=0 turns it
// off; AGX_DIRECT_WRITE_MIN_BYTES (default 262144) is the smallest mean block it serves;
// AGX_CMA=0 turns the kernel's copies off (pushes and single copy's reads alike),
// AGX_CMA_MIN_BYTES=b takes them from b without trials.

#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include "hier/copy_choice.hpp"

#include <cstdint>
#include <optional>

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
/// `copies` (the node path's, null elsewhere): where some receive buffer lies outside
/// agx's regions, set to the copy choice's pick for this call (choose_large_copies, made
/// here once the lines are read, whether or not the call runs here): way 1 pushes into
/// those buffers by the kernel, way 0 leaves the call to the caller's staged copies,
/// which record the trial when it is one (record_trial); way 0 too when a push failed.
bool direct_write(HierContext& h, const Buffers& buffers, const Layout& layout,
                  bool send_on_host = true, std::optional<LargeCopies>* copies = nullptr);

/// Whether direct write may serve a call of `layout` by its shape: enabled, two ranks or
/// more, a mean block of at least AGX_DIRECT_WRITE_MIN_BYTES, and no end-to-end check
/// asked for the node path (AGX_INTEGRITY, AGX_TEST_FLIP: the usual paths check end to
/// end). The chooser's fact (core/choose.hpp, CallFacts::direct_write_size).
bool direct_write_fits(const Layout& layout);

/// A blocking call the chooser marked `try_direct_write` (an automatic choice on one
/// node other than shared_memory, which tries it inside its own path): direct_write on
/// ctx's node, pushing into heap buffers only where the node path's copy trials have
/// decided for the kernel's copies (decided_large_copies); true when the call ran (as
/// shared_memory). Collective over the node.
/// `send_on_host`: as direct_write's.
bool run_direct_write(CommContext& ctx, const Buffers& buffers, const Layout& layout,
                      bool send_on_host);

/// Whether a call whose mean block is `mean_block` bytes is of a size direct write
/// serves (enabled, at least AGX_DIRECT_WRITE_MIN_BYTES).
bool direct_write_size(std::size_t mean_block);

/// The smallest receive buffer a call can write directly: two blocks of the least mean
/// size direct write serves (0 with AGX_DIRECT_WRITE_MIN_BYTES=0); SIZE_MAX where
/// direct write is off. MPI_Alloc_mem serves smaller requests from the MPI library.
std::size_t direct_write_min_buffer();

/// Calls that ran by direct write in this process (tests, agx_pmpi_direct_write_calls).
std::uint64_t direct_write_calls();

}  // namespace agx::hier
