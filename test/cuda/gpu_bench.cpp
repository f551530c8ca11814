// agx-gpu-bench: times one device path (AGX_CUDA_PATH) against the device-to-device
// copy bound, on device buffers, for a few sizes per rank. Every rank times, at the
// same moment, a cudaMemcpy D2D of the (N-1) blocks it must receive (ranks sharing a
// GPU share its bandwidth, as they do in the all-gather); the slowest rank counts.
// The bound's copy is synchronized before its clock stops (a D2D cudaMemcpy returns
// before it has run). Sizes 4 KiB to 256 MiB per rank (AGX_BENCH_MAX_BYTES lowers the
// top). Prints one line per size: path, bytes per rank, agx us, bound us, ratio. Checks
// every result and every CUDA call. Needs a GPU (exit 77 without one).

#include <agx/agx.hpp>

#include "cuda/device_path.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double slowest(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "agx-gpu-bench: %s: %s\n", what, cudaGetErrorString(e));
  MPI_Abort(MPI_COMM_WORLD, 2);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 1, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (me == 0) std::printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  ok(cudaSetDevice(node_rank % devices), "cudaSetDevice");
  int bad = 0;
  std::size_t top = std::size_t{1} << 28;
  if (const char* m = std::getenv("AGX_BENCH_MAX_BYTES")) top = std::strtoull(m, nullptr, 10);
  for (std::size_t block = 4096; block <= top; block *= 16) {
    const std::size_t total = block * static_cast<std::size_t>(n);
    std::byte *send = nullptr, *recv = nullptr, *scratch = nullptr;
    ok(cudaMalloc(&send, block), "cudaMalloc");
    ok(cudaMalloc(&recv, total), "cudaMalloc");
    ok(cudaMalloc(&scratch, total), "cudaMalloc");
    std::vector<unsigned char> h(block, static_cast<unsigned char>(me + 1));
    ok(cudaMemcpy(send, h.data(), block, cudaMemcpyHostToDevice), "cudaMemcpy");
    agx::Allgather<std::byte> g(MPI_COMM_WORLD);
    const int reps = block >= (std::size_t{1} << 24) ? 5 : 20;
    std::vector<double> agx_s, bound_s;
    for (int r = 0; r < reps + 2; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      g(std::span<const std::byte>(send, block), std::span<std::byte>(recv, total));
      const double ta = slowest(MPI_Wtime() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      ok(cudaMemcpy(scratch, recv, total - block, cudaMemcpyDeviceToDevice), "cudaMemcpy");
      ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const double tb = slowest(MPI_Wtime() - t0);
      if (r >= 2) agx_s.push_back(ta), bound_s.push_back(tb);
    }
    std::vector<unsigned char> got(total);
    ok(cudaMemcpy(got.data(), recv, total, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (std::size_t i = 0; i < total; ++i) bad += got[i] != static_cast<unsigned char>(i / block + 1);
    const auto p = agx::cuda::last_path();
    if (me == 0)
      std::printf("%-8s %10zu B  agx %10.1f us  bound %10.1f us  ratio %6.2f\n",
                  p ? std::string(agx::cuda::to_string(*p)).c_str() : "host", block,
                  median(agx_s) * 1e6, median(bound_s) * 1e6, median(agx_s) / median(bound_s));
    ok(cudaFree(send), "cudaFree");
    ok(cudaFree(recv), "cudaFree");
    ok(cudaFree(scratch), "cudaFree");
  }
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0 && all != 0) std::printf("WRONG: %d bad bytes\n", all);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
