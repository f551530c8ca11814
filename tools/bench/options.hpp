#pragma once
// agx-bench's command line: which sizes, candidates, forms and places to sweep, and
// where the results go. `agx-bench --help` prints the same list.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

/// How block sizes vary across ranks. `regular` is MPI_Allgather / Allgather<T>::operator();
/// the others run the v form (MPI_Allgatherv / Allgather<T>::v) with the same total of
/// N x bytes-per-rank, spread unevenly (see pattern.hpp).
enum class Form { regular, one_large, many_zero, ramp };

std::string_view form_name(Form f);

/// How one timed call is measured (docs/benchmarks.md, "Timing methods").
///   barrier  MPI_Barrier; t0; call; t1 — the slowest rank's t1 - t0
///   window   every rank starts at the same instant of clocks corrected against rank 0
///            (ReproMPI) — the largest end minus that common start; missed starts invalid
///   osu      t0; call; t1; MPI_Barrier — t1 - t0 averaged over the ranks (OSU's "Avg Latency")
enum class Method { barrier, window, osu };

std::string_view method_name(Method m);

/// The drop-in candidate (MPI_Allgather through the normal symbol, i.e. through
/// libagx_pmpi.so when it is preloaded): auto = present when the interposer is loaded.
enum class Dropin { automatic, on, off, require };

/// Where receive buffers come from: heap (std::vector), shared (agx::allocate: blocking agx
/// calls on one node write straight into the peers' buffers, docs/hierarchy.md), mpi
/// (MPI_Alloc_mem: the MPI library's own, or agx's shared memory under libagx_pmpi.so).
enum class Alloc { heap, shared, mpi };

std::string_view alloc_name(Alloc a);

struct Settings {
  std::vector<std::size_t> sizes;   ///< per-rank bytes of the sweep, ascending
  std::vector<std::string> algos;   ///< agx algorithms ("bruck:k=4"); auto + agx::algorithm_variants() by default
  bool mpi = true;                  ///< the MPI library's own MPI_Allgather(v)
  bool copy_bound = true;           ///< memcpy of the bytes each rank must write
  Dropin dropin = Dropin::automatic;  ///< MPI_Allgather(v) through the interposer ("mpi-agx")
  std::vector<Method> methods{Method::barrier};
  double window_factor = 4;         ///< window method: window = factor x estimated call time
  int sync_rounds = 10;             ///< window method: ping-pongs per rank for the clock offsets
  std::vector<bool> in_place{false};
  bool nonblocking = false;         ///< --nonblocking: every call started, then waited for
  std::vector<Form> forms{Form::regular};
  int passes = 5;                   ///< interleaved batches per candidate and size
  double batch_seconds = 0.02;      ///< target length of one batch
  int max_iters = 1000;             ///< iterations per batch at most
  int warmup = 16;                  ///< untimed calls per candidate and size before its first batch
  std::string csv, json;            ///< output files (empty: none)
  std::string table = "wide";       ///< wide | long | none
  int progress = -1;                ///< 1 on, 0 off, -1 when stderr is a terminal
  std::string memory = "host";      ///< host only (device buffers: agx-gpu-bench, test/cuda)
  Alloc alloc = Alloc::heap;        ///< --alloc: where receive buffers come from
  std::string command_line;
  std::string corrupt;              ///< self-test: this candidate's result gets one flipped byte
  int fused = 0;                    ///< --fused K: the fused mode (tools/bench/fused.hpp); the first K
  std::vector<int> fused_ks;        ///< --fused K,K,...: every K, one table each
  bool encoded = false;             ///< --encoded: the encoded mode (tools/bench/encoded.hpp)
  std::vector<std::string> data{"low_entropy", "weights", "sparse", "random"};  ///< --data
  std::vector<std::size_t> mixed;   ///< --mixed: the step's totals (all ranks' bytes per call)
  int steps = 25;                   ///< --mixed: steps per candidate and pass
};

/// The default step of --mixed: the totals of a training step's 12 all-gathers.
std::vector<std::size_t> default_mixed_step();

/// Thrown by parse() for --help (code 0) and for bad arguments (code 2, message printed).
struct UsageExit {
  int code;
};

/// Parses the command line (identically on every rank); rank 0 prints help and errors.
Settings parse(int argc, char** argv, int rank);

}  // namespace bench
