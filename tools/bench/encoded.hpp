#pragma once
// agx-bench --encoded (docs/fused.md): per data kind (--data) and size of the sweep
// (bytes per rank), the plain agx call, the encoded all-gather in each encoding (sparse,
// lz4, zstd, automatic) and the MPI library's own PMPI_Allgather, side by side, with the
// bytes each encoding put on the wire and the compressor speed the automatic rule uses.
// Every way is verified against MPI's result first, then timed like --fused.

#include "options.hpp"

#include <mpi.h>

namespace bench {

/// Runs the encoded mode; collective over comm. Returns the exit status (1: a wrong result).
int run_encoded(MPI_Comm comm, const Settings& s);

}  // namespace bench
