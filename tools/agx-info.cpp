// agx-info: what agx sees of the machine and the job, as every rank reports it.
//
//   mpirun -np 4 agx-info [--call BYTES] [--sizes MIN:MAX] [--predictions FILE]
//   agx-info --algorithms | --algorithms-markdown | --check-variants NAME...
//
// Options are read with CLI11; a value that cannot be read is a message and exit status 2.
// Prints, per node (from its first rank): the nodes and their ranks (after any
// virtual-node setting), the machine as hwloc sees it (packages, NUMA domains,
// cores, caches), each local rank's binding and last core, the leaders, whether
// single copy works, and the state of the shared-memory segment. With --call, ten
// hierarchical all-gathers of BYTES per rank run first, so the segment shows in use and
// the copies that timing their first calls chose (docs/hierarchy.md).
// Then (rank 0): the MPI library and whether it is CUDA-aware, the tuning in use, and the
// predicted time of every algorithm for per-rank sizes MIN..MAX (×4; default 8 B..16 MiB)
// with auto's choice marked; both levels of the tuning (node: ranks on one node; network:
// ranks on different nodes). --predictions FILE also writes those predictions as CSV
// (bytes_per_rank,algorithm,predicted_us,auto: 1 for auto's choice), the cost model's
// side of scripts/cluster/calibrate.sh.
//
// Without MPI (the registry only, lib/core/registry.cpp): --algorithms prints every
// algorithm variant the test suites force and `auto` weighs, one per line ("bruck:k=4");
// --algorithms-markdown prints the table of docs/algorithms.md; --check-variants LIST --
// NODE exits 1 with a message unless LIST is exactly that list and NODE the variants that
// are not point-to-point (the test suites' lists in meson.build cannot drift).

#include <agx/agx.hpp>

#include "api/context.hpp"
#include "core/registry.hpp"
#include "cli_values.hpp"
#include "core/select.hpp"
#include "hier/hier.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

// The registry modes; -1 when argv asks for none of them.
int registry_mode(int argc, char** argv) {
  if (argc < 2) return -1;
  const std::string mode = argv[1];
  std::vector<std::string> variants;
  for (const agx::AlgorithmChoice& c : agx::algorithm_variants()) variants.push_back(agx::to_string(c));
  if (mode == "--algorithms") {
    for (const auto& v : variants) std::printf("%s\n", v.c_str());
    return 0;
  }
  if (mode == "--algorithms-markdown") {
    std::fputs(agx::registry_markdown().c_str(), stdout);
    return 0;
  }
  if (mode == "--check-variants") {  // VARIANT... -- NODE_LEVEL_VARIANT...
    std::vector<std::string> node;
    for (const agx::AlgorithmChoice& c : agx::algorithm_variants())
      if (!agx::algorithm_info(c.id).point_to_point) node.push_back(agx::to_string(c));
    std::vector<std::string> given(argv + 2, argv + argc), given_node;
    if (const auto dash = std::find(given.begin(), given.end(), "--"); dash != given.end()) {
      given_node.assign(dash + 1, given.end());
      given.erase(dash, given.end());
    }
    if (given == variants && given_node == node) return 0;
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += " " + x;
      return s;
    };
    std::fprintf(stderr,
                 "agx-info: the lists of algorithms differ from the registry (lib/core/registry.cpp)\n"
                 "  registry: %s --%s\n  lists:    %s --%s\n"
                 "the top-level meson.build reads them from the first line of each entry of\n"
                 "include/agx/algorithms.def: id, \"file\", default radix, (radices), nothing else\n",
                 join(variants).c_str(), join(node).c_str(), join(given).c_str(), join(given_node).c_str());
    return 1;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int rc = registry_mode(argc, argv); rc >= 0) return rc;
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::size_t call_bytes = 0, min_bytes = 8, max_bytes = std::size_t{16} << 20;
  std::string predictions_csv;
  CLI::App app{"agx-info"};
  app.add_option("--predictions", predictions_csv);
  app.add_option_function<std::string>("--call", [&](const std::string& v) {
    call_bytes = agx_tools::number<std::size_t>("--call", v);
  });
  app.add_option_function<std::string>("--sizes", [&](const std::string& v) {
    const std::vector<std::string> range = agx_tools::split(v, ':');
    if (range.empty() || range.size() > 2 || v.front() == ':' || v.back() == ':')
      throw CLI::ValidationError("--sizes", "takes MIN or MIN:MAX, not '" + v + "'");
    min_bytes = std::max<std::size_t>(1, agx_tools::number<std::size_t>("--sizes", range[0]));
    if (range.size() == 2) max_bytes = agx_tools::number<std::size_t>("--sizes", range[1]);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) std::fputs("usage: mpirun -np N agx-info [--call BYTES] [--sizes MIN:MAX] [--predictions FILE]\n", stdout);
    MPI_Finalize();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (rank == 0) std::fprintf(stderr, "agx-info: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  int rc = 0;
  try {
    if (call_bytes > 0) {
      std::vector<std::byte> send(call_bytes), recv(call_bytes * static_cast<std::size_t>(n));
      // Ten calls of the node path (its copy and wait trials), then twenty automatic ones
      // (from 1 MiB on one node: auto against its rival, core/algorithm_trials.hpp, whose
      // node path's first calls come first).
      for (const agx::Algorithm a : {agx::Algorithm::hierarchical, agx::Algorithm::automatic})
        for (int i = 0; i < (a == agx::Algorithm::automatic ? 20 : 10); ++i)
          agx::allgather_bytes(MPI_COMM_WORLD, {send.data(), recv.data(), false},
                               agx::Layout::uniform(n, call_bytes), agx::Options{a});
    }
    std::string text = agx::hier::describe(agx::context(MPI_COMM_WORLD));
    // Only the first rank of each node reports; rank 0 prints everything in rank order.
    if (text.find("(local 0 of") == std::string::npos) text.clear();
    const int len = static_cast<int>(text.size());
    std::vector<int> lens(static_cast<std::size_t>(n)), displs(lens.size());
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int i = 0; i < n; ++i) { displs[static_cast<std::size_t>(i)] = total; total += lens[static_cast<std::size_t>(i)]; }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) std::fputs(all.c_str(), stdout);
    std::vector<std::size_t> sizes;
    for (std::size_t b = min_bytes; b <= max_bytes; b *= 4) sizes.push_back(b);
    const std::string selection = agx::describe_selection(agx::context(MPI_COMM_WORLD), sizes);
    if (rank == 0 && !predictions_csv.empty()) {
      std::ofstream csv(predictions_csv);
      csv << "bytes_per_rank,algorithm,predicted_us,auto\n";
      agx::Selector& sel = agx::context(MPI_COMM_WORLD).selector();
      for (std::size_t bytes : sizes) {
        const agx::Layout layout = agx::Layout::uniform(n, bytes);
        const agx::AlgorithmChoice chosen = sel.choose(layout, false);
        for (const auto& [a, sec] : sel.predictions(layout, false))
          csv << bytes << ',' << agx::to_string(a) << ',' << sec * 1e6 << ',' << (a == chosen ? 1 : 0) << '\n';
      }
      if (!csv.flush()) throw agx::Error(MPI_ERR_FILE, "agx-info: cannot write " + predictions_csv);
    }
    if (rank == 0) {
      char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int liblen = 0;
      MPI_Get_library_version(lib, &liblen);
      std::string first(lib, static_cast<std::size_t>(liblen));
      first = first.substr(0, first.find_first_of(std::string("\r\n\0", 3)));
#if defined(MPIX_CUDA_AWARE_SUPPORT)
      const char* cuda = MPIX_Query_cuda_support() ? "yes" : "no (built with CUDA support, none at run time)";
#else
      const char* cuda = "no (the library declares no CUDA support)";
#endif
      std::printf("mpi: %s\ncuda-aware: %s\ncodecs: %s\n%s", first.c_str(), cuda,
                  agx::codecs_built().c_str(), selection.c_str());
    }
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "agx-info (rank %d): %s\n", rank, e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
