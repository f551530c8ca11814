#pragma once
// agx-bench --mixed: a step of all-gathers of different sizes, as a training step makes
// them (tools/bench/mixed.cpp, docs/benchmarks.md "Mixed sizes").

#include "options.hpp"

#include <mpi.h>

namespace bench {

/// Runs the mixed-size mode; returns the exit status (1 when a result was wrong).
int run_mixed(MPI_Comm comm, const Settings& s);

}  // namespace bench
