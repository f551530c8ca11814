// agx-bench: agx's algorithms against the MPI library's own MPI_Allgather, side by
// side and interleaved in one run, per message size.
//
//   mpirun -np 4 agx-bench [--min-bytes B] [--max-bytes B] [--factor F]
//                          [--algos auto,ring,...] [--in-place] [--passes P]
//                          [--batch-seconds S] [--csv FILE]
//
// For each size, every candidate (the MPI library, each agx algorithm, and a local
// memcpy of the bytes each rank must write — the copy bound) runs `passes` batches,
// candidates interleaved batch by batch so that machine noise hits all alike. Each
// iteration is timed as MPI_Barrier; t0; call; t1 and the slowest rank counts. The
// table shows the median µs and the ratio to the MPI library (below 1: agx is faster).
// Every candidate's result is verified once per size; a wrong result prints WRONG.

#include <agx/agx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::size_t min_bytes = 8, max_bytes = std::size_t{4} << 20, factor = 4;
  std::vector<std::string> algos;
  bool in_place = false;
  int passes = 5;
  double batch_seconds = 0.02;
  std::string csv;
};

struct Candidate {
  std::string name;             // "mpi", "copy-bound", or an agx algorithm name
  agx::Algorithm algo{};        // for agx candidates
  std::vector<double> samples;  // per-iteration slowest-rank seconds
  bool wrong = false;
};

int rank = 0, nranks = 1;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (const auto& e : agx::algorithm_table) s.algos.emplace_back(e.name);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { if (rank == 0) std::fprintf(stderr, "%s needs a value\n", a.c_str()); MPI_Abort(MPI_COMM_WORLD, 2); }
      return argv[++i];
    };
    if (a == "--min-bytes") s.min_bytes = std::stoull(next());
    else if (a == "--max-bytes") s.max_bytes = std::stoull(next());
    else if (a == "--factor") s.factor = std::max<std::size_t>(2, std::stoull(next()));
    else if (a == "--algos") s.algos = split(next());
    else if (a == "--in-place") s.in_place = true;
    else if (a == "--passes") s.passes = std::max(1, std::stoi(next()));
    else if (a == "--batch-seconds") s.batch_seconds = std::stod(next());
    else if (a == "--csv") s.csv = next();
    else {
      if (rank == 0) std::fprintf(stderr, "agx-bench: unknown option %s (see the comment at the top of tools/agx-bench.cpp)\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  return s;
}

// Buffers for one size: send block, receive buffer, and the expected result.
struct Buffers {
  std::vector<unsigned char> send, recv, expected;
  explicit Buffers(std::size_t bytes) : send(bytes), recv(bytes * nranks), expected(bytes * nranks) {
    for (int r = 0; r < nranks; ++r)
      for (std::size_t i = 0; i < bytes; ++i)
        expected[r * bytes + i] = static_cast<unsigned char>((r * 131 + i * 7 + 1) & 0xFF);
    std::memcpy(send.data(), expected.data() + rank * bytes, bytes);
  }
};

// One call of a candidate.
void call(Candidate& c, Buffers& b, std::size_t bytes, bool in_place) {
  if (c.name == "mpi") {
    const void* send = in_place ? MPI_IN_PLACE : b.send.data();
    MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, b.recv.data(), static_cast<int>(bytes),
                  MPI_BYTE, MPI_COMM_WORLD);
  } else if (c.name == "copy-bound") {  // what each rank must write at least
    const std::size_t n = in_place ? bytes * (nranks - 1) : bytes * nranks;
    std::memcpy(b.recv.data(), b.expected.data(), n);
  } else {
    agx::Allgather<unsigned char> gather(MPI_COMM_WORLD, {c.algo});
    if (in_place) gather.in_place(b.recv);
    else gather(b.send, b.recv);
  }
}

bool verify(Candidate& c, Buffers& b, std::size_t bytes, bool in_place) {
  std::fill(b.recv.begin(), b.recv.end(), 0);
  if (in_place) std::memcpy(b.recv.data() + rank * bytes, b.send.data(), bytes);
  call(c, b, bytes, in_place);
  int ok = c.name == "copy-bound" || b.recv == b.expected;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return ok != 0;
}

// Times `iters` calls; appends the slowest rank's time of each.
void batch(Candidate& c, Buffers& b, std::size_t bytes, bool in_place, int iters) {
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call(c, b, bytes, in_place);
    t[i] = MPI_Wtime() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  c.samples.insert(c.samples.end(), t.begin(), t.end());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const Settings s = parse(argc, argv);

  std::vector<Candidate> base{{"mpi", {}, {}, false}};
  for (const auto& name : s.algos) {
    const auto a = agx::parse_algorithm(name);
    if (!a) { if (rank == 0) std::fprintf(stderr, "agx-bench: unknown algorithm %s\n", name.c_str()); MPI_Abort(MPI_COMM_WORLD, 2); }
    base.push_back({name, *a, {}, false});
  }
  base.push_back({"copy-bound", {}, {}, false});

  std::FILE* csv = nullptr;
  if (rank == 0 && !s.csv.empty()) {
    csv = std::fopen(s.csv.c_str(), "w");
    if (csv) std::fprintf(csv, "ranks,bytes_per_rank,in_place,candidate,median_us,min_us,max_us,ratio_to_mpi,algbw_GBps,busbw_GBps,verified\n");
  }
  if (rank == 0) {
    std::printf("# agx-bench: %d ranks, %s, median us of the slowest rank (ratio to MPI_Allgather)\n",
                nranks, s.in_place ? "in place" : "out of place");
    std::printf("%10s", "bytes");
    for (const auto& c : base) std::printf(" %20s", c.name.c_str());
    std::printf("\n");
  }
  for (std::size_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) {
    Buffers b(bytes);
    std::vector<Candidate> cands = base;
    for (auto& c : cands) c.wrong = !verify(c, b, bytes, s.in_place);  // also warms up
    // Iterations per batch from the MPI library's time, decided on rank 0 for everyone.
    double probe = MPI_Wtime();
    for (int i = 0; i < 3; ++i) call(cands[0], b, bytes, s.in_place);
    probe = (MPI_Wtime() - probe) / 3;
    MPI_Bcast(&probe, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const int iters = static_cast<int>(std::clamp(s.batch_seconds / std::max(probe, 1e-7), 3.0, 2000.0));
    for (int p = 0; p < s.passes; ++p)
      for (auto& c : cands) batch(c, b, bytes, s.in_place, iters);
    if (rank != 0) continue;
    const double mpi_us = median(cands[0].samples) * 1e6;
    std::printf("%10zu", bytes);
    for (const auto& c : cands) {
      const double us = median(c.samples) * 1e6;
      char cell[64];
      if (c.wrong) std::snprintf(cell, sizeof cell, "WRONG");
      else if (&c == &cands[0]) std::snprintf(cell, sizeof cell, "%.2f", us);
      else std::snprintf(cell, sizeof cell, "%.2f (%.2fx)", us, us / mpi_us);
      std::printf(" %20s", cell);
      if (csv) {
        const auto [lo, hi] = std::minmax_element(c.samples.begin(), c.samples.end());
        const double algbw = static_cast<double>(bytes) * nranks / (us * 1e-6) / 1e9;
        std::fprintf(csv, "%d,%zu,%d,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%s\n", nranks, bytes,
                     s.in_place ? 1 : 0, c.name.c_str(), us, *lo * 1e6, *hi * 1e6, us / mpi_us,
                     algbw, algbw * (nranks - 1) / nranks, c.wrong ? "WRONG" : "ok");
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (csv) std::fclose(csv);
  MPI_Finalize();
  return 0;
}
