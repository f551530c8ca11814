// Stream semantics and allocator kinds on a GPU (docs/gpu.md), through agx::Allgather:
//   pending  a kernel still running on the legacy default stream writes the send buffer
//            when the call is made: agx must wait for it (every path)
//   async    send and receive buffers from cudaMallocAsync (a memory pool: no legacy
//            IPC handle): AGX_CUDA_PATH=ipc must fall back to staging, data right
// --no-kernel skips "pending" (fake_cuda launches no kernels). Exit 77 without a GPU.

#include <agx/agx.hpp>

#include "cuda/device_path.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int rank_ = 0, size_ = 1, failures = 0;

void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what, cudaGetErrorString(e));
  MPI_Abort(MPI_COMM_WORLD, 2);
}

void fail(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank_, what.c_str());
}

__device__ unsigned char pattern(int r, std::size_t i) {
  return static_cast<unsigned char>((r * 11 + i * 5 + 3) & 0xff);
}
unsigned char host_pattern(int r, std::size_t i) {
  return static_cast<unsigned char>((r * 11 + i * 5 + 3) & 0xff);
}

/// Spins for about `cycles` GPU clocks, then writes this rank's pattern.
__global__ void late_fill(unsigned char* p, std::size_t n, int r, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = pattern(r, i);
}

void check(const unsigned char* recv, std::size_t block, const std::string& what) {
  const std::size_t total = block * static_cast<std::size_t>(size_);
  std::vector<unsigned char> got(total);
  ok(cudaMemcpy(got.data(), recv, total, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (int r = 0; r < size_; ++r)
    for (std::size_t i = 0; i < block; ++i)
      if (got[static_cast<std::size_t>(r) * block + i] != host_pattern(r, i)) {
        fail(what + ": block " + std::to_string(r) + " byte " + std::to_string(i));
        return;
      }
}

void pending_kernel(std::size_t block) {
  unsigned char *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, block * static_cast<std::size_t>(size_)), "cudaMalloc");
  ok(cudaMemset(send, 0, block), "cudaMemset");
  ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  late_fill<<<1, 256>>>(send, block, rank_, 200000000LL);  // ~0.1 s on a 2 GHz clock
  ok(cudaGetLastError(), "kernel launch");
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  g(std::span<const unsigned char>(send, block),
    std::span<unsigned char>(recv, block * static_cast<std::size_t>(size_)));
  check(recv, block, "pending kernel, " + std::to_string(block) + " B");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

void async_buffers(std::size_t block) {
  unsigned char *send = nullptr, *recv = nullptr;
  ok(cudaMallocAsync(reinterpret_cast<void**>(&send), block, cudaStreamLegacy), "cudaMallocAsync");
  ok(cudaMallocAsync(reinterpret_cast<void**>(&recv), block * static_cast<std::size_t>(size_),
                     cudaStreamLegacy),
     "cudaMallocAsync");
  std::vector<unsigned char> h(block);
  for (std::size_t i = 0; i < block; ++i) h[i] = host_pattern(rank_, i);
  ok(cudaMemcpy(send, h.data(), block, cudaMemcpyHostToDevice), "cudaMemcpy");
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  g(std::span<const unsigned char>(send, block),
    std::span<unsigned char>(recv, block * static_cast<std::size_t>(size_)));
  check(recv, block, "cudaMallocAsync buffers, " + std::to_string(block) + " B");
  const auto path = agx::cuda::last_path();
  if (size_ > 1 && (!path || *path == agx::cuda::Path::ipc))
    fail("cudaMallocAsync buffers cannot take the IPC path");
  ok(cudaFreeAsync(send, cudaStreamLegacy), "cudaFreeAsync");
  ok(cudaFreeAsync(recv, cudaStreamLegacy), "cudaFreeAsync");
  ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  bool kernels = true;
  for (int i = 1; i < argc; ++i) kernels = kernels && std::strcmp(argv[i], "--no-kernel") != 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (rank_ == 0) std::printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  ok(cudaSetDevice(node_rank % devices), "cudaSetDevice");
  for (std::size_t block : {std::size_t{4096}, std::size_t{3} << 20}) {
    if (kernels) pending_kernel(block);
    async_buffers(block);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0) std::printf("gpu streams: %d ranks, %d failures\n", size_, all);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
