#pragma once
// agx-bench --fused K,K,... (docs/fused.md): per K and size of the sweep, K all-gathers of that many
// bytes per rank each, run three ways side by side: K separate agx calls, one agx::Group
// of the K calls, and K calls of the MPI library's own PMPI_Allgather. Each way is
// verified against the analytic pattern first, then timed like the sweep (passes x
// batches, slowest rank per iteration, median reported).

#include "options.hpp"

#include <mpi.h>

namespace bench {

/// Runs the fused mode; collective over comm. Returns the exit status (1: a wrong result).
int run_fused(MPI_Comm comm, const Settings& s);

}  // namespace bench
