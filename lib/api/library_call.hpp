#pragma once
// A nonblocking call on a communicator that agx has not set up yet (docs/nonblocking.md,
// "The first call on a new communicator"). The set-up (context.hpp) is a collective
// that waits for every rank (MPI_Comm_create has no nonblocking form, and
// MPI_Comm_idup would copy the user's attributes), so a start() must not run it: MPI lets
// a rank start an all-gather and then block in a send to a rank that has not started
// it yet. Such a start runs as the MPI library's own MPI_Iallgatherv on the user's
// communicator instead, in bytes, advanced by test()/wait() like any agx request; the
// communicator is set up at its first blocking call. Every rank takes the same path: a
// communicator's context is made by a collective call, on every rank at once.
//
// Device buffers (lib/cuda's memory kinds) are staged through host memory here, so that
// no device pointer reaches an MPI library that may not be CUDA-aware: the own block is
// copied to the host at start(), the blocks are copied to the device once they are in.

#include <mpi.h>

#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include "core/nonblocking.hpp"

namespace agx {

/// Checks the call as start_allgather_bytes does (layout, buffers, options: the same
/// agx::Error classes) and starts it as MPI_Iallgatherv on `comm`. Its algorithm() is
/// `automatic` (the MPI library's). Local: waits for no other rank.
detail::OperationPtr start_library_call(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                                        const Options& options);

}  // namespace agx
