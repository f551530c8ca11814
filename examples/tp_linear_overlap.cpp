// Tensor-parallel column-split linear layer, blocking and overlapped.
//   mpirun -np 4 build/examples/tp_linear_overlap [batch] [in] [out-per-rank] [chunks] [repeats]
//
// Y = X · W with W split by columns: rank i holds W_i (in × out_i) and computes the
// slice Y_i = X · W_i; an all-gather gives every rank the full activation, which the
// next layer reads. Blocking: compute all rows, then gather. Overlapped: the batch
// is cut into chunks; the gather of chunk k runs (agx::Plan, started per chunk) while
// chunk k+1 is computed, with test() between rows so that MPI makes progress.
// Both results are checked element by element against the serial product; the program
// prints both times, the communication alone, and the fraction of it hidden. Each of
// the four phases runs `repeats` times, interleaved, and the medians are reported (the
// slowest rank's time per run), so that a busy machine does not decide the result.

#include <agx/agx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Small integers: every sum is exact in double, so all results compare bit for bit.
double x_at(int r, int k) { return static_cast<double>((r * 7 + k * 3) % 11) - 5.0; }
double w_at(int k, int col) { return static_cast<double>((k * 5 + col * 13) % 9) - 4.0; }

struct Shape {
  int batch, in, out_per_rank, chunks, ranks, rank;
  int rows_per_chunk() const { return batch / chunks; }
};

// Y_i rows [r0, r1) of this rank into `slice` (row-major, out_per_rank columns).
// `poll` runs after every row (the overlapped version advances its gathers there).
template <class Poll>
void compute_rows(const Shape& s, int r0, int r1, double* slice, Poll poll) {
  for (int r = r0; r < r1; ++r) {
    for (int c = 0; c < s.out_per_rank; ++c) {
      const int col = s.rank * s.out_per_rank + c;
      double acc = 0;
      for (int k = 0; k < s.in; ++k) acc += x_at(r, k) * w_at(k, col);
      slice[static_cast<std::size_t>(r - r0) * s.out_per_rank + c] = acc;
    }
    poll();
  }
}

// The full activation element (row, col) from a gathered chunk buffer laid out
// [rank][rows of the chunk][out_per_rank].
double full_at(const Shape& s, const std::vector<double>& gathered, int row_in_chunk, int col) {
  const int owner = col / s.out_per_rank, c = col % s.out_per_rank;
  const std::size_t chunk_elems = static_cast<std::size_t>(s.rows_per_chunk()) * s.out_per_rank;
  return gathered[owner * chunk_elems + static_cast<std::size_t>(row_in_chunk) * s.out_per_rank + c];
}

int check(const Shape& s, const std::vector<std::vector<double>>& gathered, const char* what) {
  int bad = 0;
  for (int k = 0; k < s.chunks; ++k)
    for (int r = 0; r < s.rows_per_chunk(); ++r)
      for (int col = 0; col < s.out_per_rank * s.ranks; ++col) {
        double ref = 0;
        const int row = k * s.rows_per_chunk() + r;
        for (int i = 0; i < s.in; ++i) ref += x_at(row, i) * w_at(i, col);
        if (full_at(s, gathered[static_cast<std::size_t>(k)], r, col) != ref && bad++ == 0)
          std::fprintf(stderr, "rank %d: %s wrong at row %d col %d\n", s.rank, what, row, col);
      }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Shape s{argc > 1 ? std::atoi(argv[1]) : 256, argc > 2 ? std::atoi(argv[2]) : 256,
          argc > 3 ? std::atoi(argv[3]) : 256, argc > 4 ? std::atoi(argv[4]) : 8, 0, 0};
  const int repeats = std::max(1, argc > 5 ? std::atoi(argv[5]) : 5);
  MPI_Comm_size(MPI_COMM_WORLD, &s.ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  s.batch -= s.batch % s.chunks;
  const std::size_t slice_elems = static_cast<std::size_t>(s.rows_per_chunk()) * s.out_per_rank;
  std::vector<std::vector<double>> slice(s.chunks, std::vector<double>(slice_elems));
  std::vector<std::vector<double>> blocking(s.chunks), overlapped(s.chunks);
  for (int k = 0; k < s.chunks; ++k) {
    blocking[k].assign(slice_elems * s.ranks, 0.0);
    overlapped[k].assign(slice_elems * s.ranks, 0.0);
  }
  int bad = 0;
  try {
    agx::Allgather<double> gather(MPI_COMM_WORLD);
    // Plans made once: each start only moves data.
    std::vector<agx::Plan> plans;
    for (int k = 0; k < s.chunks; ++k) plans.push_back(gather.plan(slice[k], overlapped[k]));

    auto timed = [&](auto body) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      body();
      double t = MPI_Wtime() - t0, slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return slowest;
    };
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const auto no_poll = [] {};
    std::vector<double> compute_times, comm_times, blocking_times, overlapped_times;
    for (int rep = 0; rep < repeats; ++rep) {
      compute_times.push_back(timed([&] {
        for (int k = 0; k < s.chunks; ++k)
          compute_rows(s, k * s.rows_per_chunk(), (k + 1) * s.rows_per_chunk(), slice[k].data(),
                       no_poll);
      }));
      comm_times.push_back(timed([&] {
        for (int k = 0; k < s.chunks; ++k) gather(slice[k], blocking[k]);
      }));
      blocking_times.push_back(timed([&] {
        for (int k = 0; k < s.chunks; ++k) {
          compute_rows(s, k * s.rows_per_chunk(), (k + 1) * s.rows_per_chunk(), slice[k].data(),
                       no_poll);
          gather(slice[k], blocking[k]);
        }
      }));
      overlapped_times.push_back(timed([&] {
        for (int k = 0; k < s.chunks; ++k) {
          auto poll = [&] {  // advance the gathers still running
            for (int j = std::max(0, k - 2); j < k; ++j) plans[j].test();
          };
          if (k >= 2) plans[k - 2].wait();  // at most two gathers in flight
          compute_rows(s, k * s.rows_per_chunk(), (k + 1) * s.rows_per_chunk(), slice[k].data(),
                       poll);
          plans[k].start();  // gather chunk k while chunk k+1 is computed
        }
        for (auto& p : plans) p.wait();
      }));
    }
    const double t_compute = median(compute_times), t_comm = median(comm_times);
    const double t_blocking = median(blocking_times), t_overlapped = median(overlapped_times);
    bad += check(s, blocking, "blocking");
    bad += check(s, overlapped, "overlapped");
    // Two readings: against the blocking run, and against compute + communication timed
    // apart (stricter: the blocking run can be slower than the sum of its parts).
    const double hidden = t_comm > 0 ? std::clamp((t_blocking - t_overlapped) / t_comm, 0.0, 1.0) : 0;
    const double hidden_strict =
        t_comm > 0 ? std::clamp((t_compute + t_comm - t_overlapped) / t_comm, 0.0, 1.0) : 0;
    if (s.rank == 0)
      std::printf("tp_linear N=%d batch=%d in=%d out=%d chunks=%d algorithm=%s (median of %d)\n"
                  "  compute %.3f ms, communication %.3f ms\n"
                  "  blocking %.3f ms, overlapped %.3f ms, communication hidden %.0f%%"
                  " (%.0f%% against compute + communication)\n",
                  s.ranks, s.batch, s.in, s.out_per_rank * s.ranks, s.chunks,
                  std::string(agx::to_string(plans[0].algorithm())).c_str(), repeats,
                  t_compute * 1e3,
                  t_comm * 1e3, t_blocking * 1e3, t_overlapped * 1e3, hidden * 100,
                  hidden_strict * 100);
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", s.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, e.error_class());
  }
  int total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (s.rank == 0) std::printf("  results %s\n", total == 0 ? "correct" : "WRONG");
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
