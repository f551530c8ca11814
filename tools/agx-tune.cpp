// agx-tune: measures this machine (or allocation) and writes a tuning file.
//
//   mpirun -np N agx-tune [--output FILE] [--crossovers] [--max-bytes B] [--compare] [--quick]
//
// Measures, with MPI point-to-point on agx's own path:
//   node.alpha_s / node.beta_s_per_byte        a schedule round inside every node with two
//                                              or more ranks, all at once: each rank sends
//                                              right, receives from the left (pairs on one
//                                              node); the built-in node level where every
//                                              node has one rank
//   network.alpha_s / network.beta_s_per_byte  the same round among the first ranks of all
//                                              (virtual) nodes (pairs on different nodes);
//                                              = node level on one node
//   copy_s_per_byte                            memcpy of 4 MiB by every rank at once, median
//   copy.rate BYTES S                          the same at 64 KiB, 256 KiB, 1, 4 and 16 MiB
//   node_sync_s                                half a shared-memory all-gather of 1 byte
//                                              inside every node with two or more ranks
// The machine line of the file says which level was measured on how many nodes.
// α is the median round time at 8 bytes; β the slope between 256 KiB and 4 MiB; the
// rendezvous step what a round of 4 × the level's eager limit (4000 B on the node, 64000 B
// on the network: just below Open MPI's vader and tcp limits) takes beyond that line
// (node.rendezvous_s, network.rendezvous_s). Measured
// with all ranks busy, so oversubscription and shared memory bandwidth are included.
// --quick: a fifth of the repetitions, β between 64 KiB and 1 MiB (seconds, for tests).
// --max-bytes takes a size as agx-bench does (bytes, or with K, M or G: 16M; default 4M).
// --crossovers times every algorithm at this N for sizes 1 B .. --max-bytes (×4), in five
// interleaved batches each, and records the fastest median per size class ("best" lines). --compare prints predicted
// against measured time for every algorithm and size, with the error.
// Rank 0 writes the file; AGX_TUNING_FILE=FILE makes agx use it. Options are read with
// CLI11; a value that cannot be read or an unknown option is a message and exit status 2.

#include <agx/agx.hpp>

#include "cli_values.hpp"
#include "codec/codec.hpp"
#include "core/copy.hpp"
#include "core/cost_model.hpp"
#include "core/tuning.hpp"
#include "hier/topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

int rank = 0, nranks = 1;
bool quick = false;  // --quick: fewer repetitions, smaller β sizes

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One round of a schedule, as the executor runs it: every rank of `comm` sends `bytes`
// to its right neighbour and receives as many from its left one, all at once.
// Median over repetitions, slowest rank. MPI_COMM_NULL: not a member (returns 0).
double shift_round(MPI_Comm comm, std::size_t bytes) {
  double m = 0;
  if (comm != MPI_COMM_NULL) {
    int n = 0, r = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    std::vector<char> out(std::max<std::size_t>(bytes, 1)), in(out.size());
    const int reps = (bytes >= (1 << 20) ? 10 : 50) / (quick ? 5 : 1), rounds = 8;
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      MPI_Barrier(comm);
      const double t0 = MPI_Wtime();
      for (int k = 0; k < rounds; ++k)  // back to back, as the rounds of a schedule
        MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_BYTE, (r + 1) % n, 0, in.data(),
                     static_cast<int>(bytes), MPI_BYTE, (r - 1 + n) % n, 0, comm, MPI_STATUS_IGNORE);
      t.push_back((MPI_Wtime() - t0) / rounds);
    }
    m = median(t);
  }
  MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// A round in which every rank of `comm` sends 8 bytes to every other rank (as `direct`).
double all_round(MPI_Comm comm) {
  double m = 0;
  if (comm != MPI_COMM_NULL) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    std::vector<char> out(8), in(8 * static_cast<std::size_t>(n));
    std::vector<MPI_Request> req;
    std::vector<double> t;
    for (int i = 0; i < (quick ? 10 : 50); ++i) {
      MPI_Barrier(comm);
      const double t0 = MPI_Wtime();
      for (int k = 0; k < 8; ++k) {
        req.clear();
        for (int p = 0; p < n; ++p) {
          req.emplace_back();
          MPI_Irecv(in.data() + 8 * p, 8, MPI_BYTE, p, 1, comm, &req.back());
          req.emplace_back();
          MPI_Isend(out.data(), 8, MPI_BYTE, p, 1, comm, &req.back());
        }
        MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
      }
      t.push_back((MPI_Wtime() - t0) / 8);
    }
    m = median(t);
  }
  MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// α: an 8-byte round; o: the extra time per further message of a round with one message
// to every rank; β: the slope of the round time between 256 KiB and 4 MiB (--quick:
// 64 KiB and 1 MiB). Collective over MPI_COMM_WORLD; ranks outside `comm` pass
// MPI_COMM_NULL. `eager`: where the MPI library's eager limit is placed on this level,
// just below Open MPI's defaults (vader 4 KiB: 4000 B; tcp 64 KiB: 64000 B); the
// rendezvous step is measured at 4 × that.
agx::LevelCost fit_level(MPI_Comm comm, std::size_t eager) {
  agx::LevelCost c;
  c.alpha_s = shift_round(comm, 8);
  int n = 0;
  if (comm != MPI_COMM_NULL) MPI_Comm_size(comm, &n);
  MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const double t_all = all_round(comm);  // n messages each way, one of them to itself
  c.overhead_s = n > 2 ? std::max(0.0, (t_all - c.alpha_s) / (n - 2)) : 0.0;
  const std::size_t small = quick ? 64 << 10 : 256 << 10, big = quick ? 1 << 20 : 4 << 20;
  const double t_small = shift_round(comm, small), t_big = shift_round(comm, big);
  c.beta_s_per_byte = std::max(0.0, (t_big - t_small) / static_cast<double>(big - small));
  // The rendezvous step: what a round of 4 × the eager limit takes beyond the α-β line
  // (none under 0.5 µs).
  const std::size_t mid = 4 * eager;
  const double t_mid = shift_round(comm, mid);
  const double step = t_mid - (c.alpha_s + c.beta_s_per_byte * static_cast<double>(mid));
  if (step > 0.5e-6) c.rendezvous_s = step, c.eager_bytes = eager;
  return c;
}

// Every rank copies `bytes` at the same time (as in an all-gather), the same buffers
// each time (as repeated calls do), with agx's own copy; median, slowest rank.
double copy_cost(std::size_t bytes, int iters) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    agx::copy_bytes(b.data(), a.data(), bytes);  // agx's copy (core/copy.hpp: no 4K-aliasing case)
    t.push_back(MPI_Wtime() - t0);
    a[static_cast<std::size_t>(i)] = b[bytes - 1 - static_cast<std::size_t>(i)];  // keep both alive
  }
  double m = median(t);
  MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m / static_cast<double>(bytes);
}

// Median slowest-rank time of one algorithm at `bytes` per rank on `comm`, out of place.
// Collective over MPI_COMM_WORLD; ranks outside `comm` pass MPI_COMM_NULL (the samples
// of all members of all such communicators are merged, slowest first).
// The slowest rank's time of each of `iters` calls of algorithm `a` (after one warm-up).
std::vector<double> time_calls(agx::AlgorithmChoice a, std::size_t bytes, int iters, MPI_Comm comm = MPI_COMM_WORLD) {
  std::vector<double> t(static_cast<std::size_t>(iters), 0.0);
  if (comm != MPI_COMM_NULL) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    std::vector<unsigned char> send(bytes, static_cast<unsigned char>(rank)), recv(bytes * static_cast<std::size_t>(n));
    agx::Allgather<unsigned char> gather(comm, {a.id, true, a.radix});
    gather(send, recv);  // warm-up (also creates per-communicator state)
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(comm);
      const double t0 = MPI_Wtime();
      gather(send, recv);
      t[static_cast<std::size_t>(i)] = MPI_Wtime() - t0;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

double time_algorithm(agx::AlgorithmChoice a, std::size_t bytes, int iters, MPI_Comm comm = MPI_COMM_WORLD) {
  return median(time_calls(a, bytes, iters, comm));
}

// The candidates `auto` considers (lib/core/select.cpp): hierarchical only across nodes.
bool can_run(agx::Algorithm a, const agx::Placement& placement) {
  if (a == agx::Algorithm::shared_memory) return placement.nodes() == 1;
  if (a == agx::Algorithm::hierarchical)
    return placement.nodes() > 1 && placement.nodes() < placement.nranks();
  return true;
}

std::string now_iso() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  std::string output = "agx-tuning.txt";
  bool crossovers = false, compare = false;
  std::size_t max_bytes = std::size_t{4} << 20;
  std::string command = "agx-tune";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  CLI::App app{"agx-tune"};
  app.add_option("--output", output);
  app.add_flag("--crossovers", crossovers);
  app.add_flag("--compare", compare);
  app.add_flag("--quick", quick);
  app.add_option_function<std::string>("--max-bytes", [&](const std::string& v) {
    max_bytes = agx_tools::parse_bytes("--max-bytes", v);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (rank == 0)
      std::fputs("usage: mpirun -np N agx-tune [--output FILE] [--crossovers] [--max-bytes B] [--compare] [--quick]\n", stdout);
    MPI_Finalize();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (rank == 0) std::fprintf(stderr, "agx-tune: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }

  agx::hier::Topology topo = agx::hier::discover_topology(MPI_COMM_WORLD);
  const agx::Placement placement(topo.node_of);
  int ranks_per_node = 0;
  for (const auto& m : topo.members) ranks_per_node = std::max(ranks_per_node, static_cast<int>(m.size()));

  // Node level: the ranks of every node with two or more shift at once (pairs on one
  // node). Network level: the first rank of every node shifts with the other nodes'
  // first ranks (pairs on different nodes, one message per NIC).
  int pairs_nodes = 0;  // nodes with two or more ranks
  for (const auto& m : topo.members) pairs_nodes += m.size() >= 2 ? 1 : 0;
  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, topo.local == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);

  agx::Tuning t;
  std::string node_level = "default (no node has two ranks)", network_level = "= node (one node)";
  if (pairs_nodes > 0) {
    t.params.node = fit_level(topo.local_size() >= 2 ? topo.node_comm : MPI_COMM_NULL, 4000);
    node_level = "measured on " + std::to_string(pairs_nodes) + " node(s)";
  }
  if (topo.nnodes >= 2) {
    t.params.network = fit_level(leaders, 64000);
    network_level = "measured among " + std::to_string(topo.nnodes) + " nodes";
  } else {
    t.params.network = t.params.node;
  }
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string libline(lib, static_cast<std::size_t>(len));
  libline = libline.substr(0, libline.find_first_of(std::string("\r\n\0", 3)));
  t.header = {"machine " + std::string(host) + " ranks " + std::to_string(nranks) + " nodes " +
                  std::to_string(topo.nnodes) + " ranks_per_node " + std::to_string(ranks_per_node) +
                  "; node level " + node_level + ", network level " + network_level,
              "mpi " + libline, "date " + now_iso(), "command " + command};
  // The copy rate at 4 MiB, and by call size (copy.rate points: caches make small copies faster).
  t.params.copy_s_per_byte = copy_cost(4 << 20, 20);
  t.params.copy_rates.clear();
  for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20,
                            std::size_t{4} << 20, std::size_t{16} << 20}) {
    const int iters = std::max(quick ? 4 : 10, static_cast<int>((quick ? 2 : 10) * ((std::size_t{16} << 20) / bytes) / 16));
    t.params.copy_rates.push_back({bytes, bytes == (std::size_t{4} << 20) ? t.params.copy_s_per_byte
                                                                          : copy_cost(bytes, iters)});
  }
  if (pairs_nodes > 0) {  // on every node with two or more ranks at once
    const double sync = time_algorithm({agx::Algorithm::shared_memory}, 1, quick ? 50 : 200,
                                       topo.local_size() >= 2 ? topo.node_comm : MPI_COMM_NULL);
    t.params.node_sync_s = sync / 2;  // two synchronizations per call
  }

  // The compressor speeds of the automatic compression rule (docs/fused.md): the
  // slowest rank's, as the library would agree on them.
  for (agx::codec::Packer p : {agx::codec::Packer::lz4, agx::codec::Packer::zstd}) {
    double mine = agx::codec::packer_available(p) ? agx::codec::local_pack_speed(p) : 0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    (p == agx::codec::Packer::lz4 ? t.compress_lz4_bytes_per_s : t.compress_zstd_bytes_per_s) = slowest;
  }

  std::vector<std::size_t> sizes;
  for (std::size_t b = 1; b <= max_bytes; b *= 4) sizes.push_back(b);
  if (crossovers || compare) {
    if (rank == 0 && compare)
      std::printf("%10s %20s %12s %12s %8s\n", "bytes", "algorithm", "measured_us", "predicted_us", "error");
    for (std::size_t bytes : sizes) {
      agx::AlgorithmChoice best;
      double best_t = std::numeric_limits<double>::max();
      const int iters = bytes >= (1 << 20) ? 10 : 50;
      std::vector<agx::AlgorithmChoice> candidates;  // what auto weighs
      for (const agx::AlgorithmChoice& e : agx::algorithm_variants())
        if (can_run(e.id, placement)) candidates.push_back(e);
      // Interleaved: five batches per algorithm, the algorithms in turn, so that a slow
      // spell of the machine falls on all of them; the median of all of an algorithm's calls.
      const int batches = iters >= 10 ? 5 : 1;
      std::vector<std::vector<double>> calls(candidates.size());
      for (int b = 0; b < batches; ++b)
        for (std::size_t c = 0; c < candidates.size(); ++c) {
          const std::vector<double> t = time_calls(candidates[c], bytes, iters / batches);
          calls[c].insert(calls[c].end(), t.begin(), t.end());
        }
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        const agx::AlgorithmChoice& e = candidates[c];
        const double m = median(calls[c]);
        if (m < best_t) { best_t = m; best = e; }
        if (rank == 0 && compare) {
          const double p = agx::predict_algorithm(e, agx::Layout::uniform(nranks, bytes), placement, t.params, false);
          std::printf("%10zu %20s %12.2f %12.2f %7.0f%%\n", bytes, agx::to_string(e).c_str(), m * 1e6,
                      p * 1e6, (p - m) / m * 100);
        }
      }
      if (crossovers) t.best.push_back({nranks, ranks_per_node, bytes, best});
    }
  }
  if (rank == 0) {
    std::ofstream(output) << agx::format_tuning(t);
    std::printf("agx-tune: wrote %s\n%s", output.c_str(), agx::format_tuning(t).c_str());
  }
  MPI_Comm_free(&topo.node_comm);
  MPI_Finalize();
  return 0;
}
