#pragma once
// The interposer's repeated-call path. Programs call MPI_Allgather with the same
// arguments over and over (a time step, a training step). Once a full call (call.cpp)
// has checked one shape — communicator, counts, predefined types, in place or not — and
// chosen its algorithm, a later MPI_Allgather of the same shape on the same thread
// checks only what can change between calls (the buffers: null, overlapping, running
// past the address space) and runs the chosen algorithm: no datatype queries, no
// vectors, no selection. Anything else (MPI_Allgatherv, derived datatypes, a buffer
// check that fails, a freed communicator) takes the full path, which also words the
// errors. docs/interposer.md, "Per-call cost".

#include <mpi.h>

#include <agx/algorithm.hpp>

#include "core/choose.hpp"

#include <cstddef>

namespace agx::pmpi {

struct PreparedCall;

/// Runs the call if it repeats the last recorded shape of this thread; returns false
/// (nothing done) otherwise. `rc` gets the MPI code when it ran.
bool run_repeated(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, int& rc) noexcept;

/// After a successful full MPI_Allgather: records its shape when the repeated path can
/// serve it (predefined contiguous types, the user's buffers used directly).
void record_shape(const PreparedCall& p, const CallChoice& choice) noexcept;

/// Forgets the recorded shape (MPI_Finalize).
void forget_shape() noexcept;

}  // namespace agx::pmpi
