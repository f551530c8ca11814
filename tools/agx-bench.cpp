// agx-bench: agx's algorithms against the MPI library's own MPI_Allgather(v), side by
// side and interleaved in one run, over a sweep of per-rank sizes.
//
//   mpirun -np 4 agx-bench [--min-bytes 1] [--max-bytes 64M] [--factor 2]
//                          [--algos auto,ring,...] [--place out|in|both] [--v]
//                          [--method barrier|window|osu|all] [--dropin auto|on|off|require]
//                          [--csv FILE] [--json FILE] [--table wide|long|none]
//   (agx-bench --help lists every option; docs/benchmarks.md explains the output)
//
// For each form (regular, or the v form with an imbalance pattern), place (out of
// place, in place) and size, every candidate — the MPI library (PMPI_Allgather(v), so an
// interposer never stands in for it), the drop-in path (MPI_Allgather(v), through agx's
// interposer when libagx_pmpi.so is preloaded), each agx algorithm including auto, and a
// local memory copy of the bytes each rank must write (the copy bound) — is verified
// against an analytic pattern, then timed in interleaved batches under each timing
// method (tools/bench/runner.hpp, timing.hpp). A wrong result is reported as WRONG and
// never timed. Reported per size and method: median and spread of the per-call times,
// algbw and busbw (busbw = algbw (N-1)/N), ratio to the MPI library. The CSV and JSON
// carry the machine, MPI library, N, ranks per node and agx version.
//
// Helpers: tools/bench/options (command line), problem (layouts, buffers, check),
// runner (calls, verification, interleaving), timing (the three methods), dropin (the
// interposer's counters), report (metadata, table, CSV, JSON, progress line).

#include <agx/bytes.hpp>

#include "bench/encoded.hpp"
#include "bench/fused.hpp"
#include "bench/mixed.hpp"
#include "bench/options.hpp"
#include "bench/problem.hpp"
#include "bench/report.hpp"
#include "bench/runner.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

int run(int argc, char** argv) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const bench::Settings s = bench::parse(argc, argv, rank);
  if (s.fused > 0 || s.encoded || !s.mixed.empty()) {
    const int status = s.encoded          ? bench::run_encoded(comm, s)
                       : !s.mixed.empty() ? bench::run_mixed(comm, s)
                                          : bench::run_fused(comm, s);
    MPI_Comm_free(&comm);
    return status;
  }
  const bench::Meta meta = bench::collect_meta(comm, s);
  const bench::Interposer ip;
  const bool root = rank == 0;
  if (s.dropin == bench::Dropin::require) {
    int loaded = ip.loaded() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &loaded, 1, MPI_INT, MPI_LAND, comm);
    if (!loaded) {
      if (root)
        std::fprintf(stderr, "agx-bench: --dropin require: libagx_pmpi.so is not loaded on every rank "
                             "(preload it: mpirun -x LD_PRELOAD=/path/to/libagx_pmpi.so ...)\n");
      MPI_Comm_free(&comm);
      return 2;
    }
  }
  // agx's first blocking call on a communicator runs point-to-point and leaves the node's
  // segment to the second (docs/hierarchy.md, "Set-up of a communicator"): two untimed
  // calls first, so that every verified and timed call runs (and reports) auto's choice;
  // through the C++ API and through MPI_Allgather (the interposer holds its own state).
  {
    std::vector<char> all(static_cast<std::size_t>(nranks));
    char mine = 0;
    for (int k = 0; k < 2; ++k) {
      agx::allgather_bytes(comm, agx::Buffers{&mine, all.data(), false},
                           agx::Layout::uniform(nranks, 1));
      MPI_Allgather(&mine, 1, MPI_BYTE, all.data(), 1, MPI_BYTE, comm);
    }
  }
  const auto cands = bench::make_candidates(s, ip);
  // Ranks outnumber cores: the window method's waits yield (timing.hpp).
  const bench::RunEnv env{ip, meta.cores > 0 && meta.ranks_per_node_max > meta.cores};

  const bench::Table table(root ? s.table : "none", cands);
  std::unique_ptr<bench::CsvFile> csv;
  int open_ok = 1;
  if (root && !s.csv.empty()) {
    csv = std::make_unique<bench::CsvFile>(s.csv, meta);
    if (!csv->ok()) {
      std::fprintf(stderr, "agx-bench: cannot write %s\n", s.csv.c_str());
      open_ok = 0;
    }
  }
  MPI_Bcast(&open_ok, 1, MPI_INT, 0, comm);
  if (!open_ok) return 1;
  table.meta(meta, s, ip.loaded());

  const std::size_t points = s.forms.size() * s.in_place.size() * s.sizes.size();
  std::FILE* progress_to = nullptr;
  if (s.progress == 1 || (s.progress < 0 && isatty(STDERR_FILENO))) progress_to = stderr;
  else if (s.progress < 0 && isatty(STDOUT_FILENO)) progress_to = stdout;
  bench::Progress progress(root ? progress_to : nullptr, points);
  std::vector<bench::Row> all_rows;
  std::size_t point = 0, bad = 0;
  for (const bench::Form form : s.forms)
    for (const bool in_place : s.in_place) {
      table.section(form, in_place);
      for (const std::size_t bytes : s.sizes) {
        const bench::Problem p(form, in_place, bytes, nranks);
        const auto outs = bench::run_point(comm, s, env, p, cands, [&](std::size_t c, bench::Method m, int pass) {
          std::string label = cands[c].name;
          if (s.methods.size() > 1) label.append("/").append(bench::method_name(m));
          progress.show(point, p, label, pass, s.passes);
        });
        ++point;
        if (!root) continue;
        const auto rows = bench::make_rows(p, nranks, cands, outs);
        for (const auto& r : rows) bad += r.status == "WRONG" || r.status == "error";
        progress.done();
        table.point(rows);
        if (csv) csv->rows(meta, rows);
        all_rows.insert(all_rows.end(), rows.begin(), rows.end());
      }
    }
  progress.done();
  int status = 0;
  if (root) {
    if (!s.json.empty() && !bench::write_json(s.json, meta, all_rows)) {
      std::fprintf(stderr, "agx-bench: cannot write %s\n", s.json.c_str());
      status = 1;
    }
    if (bad > 0) {
      std::fprintf(stderr, "agx-bench: %zu result(s) WRONG or failed (see the verified column)\n", bad);
      status = 1;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, comm);
  MPI_Comm_free(&comm);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    status = run(argc, argv);
  } catch (const bench::UsageExit& e) {
    status = e.code;
  }
  MPI_Finalize();
  return status;
}
