#pragma once
// What the interposer tells the user: per-process counters (also exported as
// agx_pmpi_* C functions for tests and tools), AGX_VERBOSE lines, once-only
// warnings, and the AGX_SUMMARY table printed at MPI_Finalize.

#include <mpi.h>

#include <agx/algorithm.hpp>

#include <cstddef>
#include <string>

namespace agx::pmpi {

/// The radix of a call that ran an algorithm with a radix without saying which
/// (reported as "bruck:k=?").
constexpr int unknown_radix = -1;

/// What ran, with its parameters: `chosen` or `rival` where `ran` is one of theirs (the
/// chooser's pair differ in algorithm: a node path against a point-to-point one); else an
/// algorithm the call's path put in their place (direct write runs as shared_memory,
/// device buffers may run another), whose radix, where it takes one, is not known.
AlgorithmChoice what_ran(Algorithm ran, const AlgorithmChoice& chosen,
                         const AlgorithmChoice& rival = {});

/// Counts one call that agx ran, with the algorithm and radix that ran (AGX_SUMMARY has
/// a row for each): `bytes` gathered on this rank, `seconds` spent.
void record_call(const AlgorithmChoice& a, std::size_t bytes, double seconds);

/// The counters' row of `a` (for a caller that counts one choice again and again:
/// record_row then skips finding it).
std::size_t counter_row(const AlgorithmChoice& a);
/// record_call for the row counter_row gave.
void record_row(std::size_t row, std::size_t bytes, double seconds);

/// Counts one call handed to the MPI library.
void record_passthrough();

/// Counts one call that ran as an encoded all-gather (AGX_COMPRESS; also counted by
/// record_call under the algorithm that carried the encoded blocks).
void record_encoded();

/// AGX_VERBOSE: on the communicator's rank 0, names the algorithm with its parameters
/// ("bruck:k=4", agx::full_name) the first time it runs for this communicator and size
/// class (power-of-two bucket of the bytes gathered per rank). Nothing for `automatic`
/// (an algorithm not chosen yet).
void announce(MPI_Comm comm, const char* function, const AlgorithmChoice& a,
              std::size_t total_bytes);

/// An AGX_VERBOSE line made at a start whose algorithm is chosen later (a set-up still
/// in flight, an encoded call): all of it but the algorithm, so that announce_ran can say
/// it at the completion without touching the communicator, which the user may have
/// freed by then. Empty (says nothing) unless AGX_VERBOSE is set and this is the
/// communicator's rank 0.
struct Announcement {
  std::string prefix;
  int comm_id = 0;
  int size_class = 0;
};
Announcement prepare_announcement(MPI_Comm comm, const char* function, std::size_t total_bytes);
/// Says `line` with the algorithm that ran, the first time for its communicator, size
/// class and algorithm (as announce).
void announce_ran(const Announcement& line, const AlgorithmChoice& a);

/// AGX_VERBOSE: on the communicator's rank 0, says once per communicator why its
/// calls go to the MPI library.
void announce_passthrough(MPI_Comm comm, const char* function, const char* why);

/// Prints "agx: warning: <message>" to stderr the first time `key` is seen in this
/// process on a rank that is rank 0 of `comm` (one line per job for MPI_COMM_WORLD).
void warn_once(MPI_Comm comm, const std::string& key, const std::string& message);

/// AGX_SUMMARY: sums the counters over MPI_COMM_WORLD and prints the table on its
/// rank 0. Collective over MPI_COMM_WORLD; call it before PMPI_Finalize.
void print_summary();

/// MPI_Alloc_mem calls this process served from agx's arena (and their bytes), and
/// those it handed to the MPI library (alloc_mem.cpp); AGX_SUMMARY prints their sums.
struct AllocCounts {
  unsigned long long served = 0, bytes = 0, passed = 0;
};
AllocCounts alloc_counts();

}  // namespace agx::pmpi

extern "C" {
/// Calls that went through agx in this process: all of them for a null or empty
/// name; for a name, those that ran the algorithm ("ring"; "bruck": every radix); for a
/// name with its radix ("bruck:k=4", as AGX_ALGO and AGX_SUMMARY write it), those that
/// ran that radix. 0 for a name that does not parse.
unsigned long long agx_pmpi_calls(const char* algorithm);
/// Calls this process handed to the MPI library (AGX_DISABLE, inter-communicators, ...).
unsigned long long agx_pmpi_passthrough_calls(void);
/// Calls this process ran as an encoded (compressed) all-gather under AGX_COMPRESS.
unsigned long long agx_pmpi_encoded_calls(void);
}
