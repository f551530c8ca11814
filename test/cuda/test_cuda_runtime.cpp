// Real device memory through agx::Allgather<T> (and MPI_Allgather when the interposer
// is preloaded: --mpi). Needs a GPU: without one (no device, no driver) it prints why
// and exits 77, which Meson counts as a skip. Ranks sharing a node use GPU
// (node rank % devices). Checks, for float, __half and __nv_bfloat16: device, managed
// and pinned buffers; out of place, in place, the v form, a nonblocking start and a
// persistent plan (both run the device path inside start()); and a mixed call where
// rank 0 passes host memory while the others pass device memory. The path is whatever
// AGX_CUDA_PATH forces (or auto).

#include <agx/agx.hpp>

#include "cuda/memory.hpp"

#include <cuda_runtime.h>
#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define AGX_TEST_HALF 1
#endif
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;
int rank_ = 0, size_ = 1;
bool use_mpi = false;

void fail(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank_, what.c_str());
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

unsigned char byte_of(int r, std::size_t i) { return static_cast<unsigned char>((r * 29 + i * 3 + 5) & 0xff); }

enum class Kind { host, device, managed, pinned };
const char* name(Kind k) {
  return k == Kind::host ? "host" : k == Kind::device ? "device" : k == Kind::managed ? "managed" : "pinned";
}

void* alloc(Kind k, std::size_t bytes) {
  void* p = nullptr;
  bytes = bytes == 0 ? 1 : bytes;
  if (k == Kind::host) p = std::malloc(bytes);
  if (k == Kind::device) cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc");
  if (k == Kind::managed) cuda_ok(cudaMallocManaged(&p, bytes), "cudaMallocManaged");
  if (k == Kind::pinned) cuda_ok(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void release(Kind k, void* p) {
  if (k == Kind::host) std::free(p);
  if (k == Kind::device || k == Kind::managed) cudaFree(p);
  if (k == Kind::pinned) cudaFreeHost(p);
}

template <class T>
void run(Kind kind, std::size_t count, const char* type_name) {
  const std::size_t block = count * sizeof(T), total = block * static_cast<std::size_t>(size_);
  std::vector<unsigned char> host(total + 1, 0x5a);
  for (std::size_t i = 0; i < block; ++i) host[static_cast<std::size_t>(rank_) * block + i] = byte_of(rank_, i);
  // 0 out of place, 1 in place, 2 v form, 3 nonblocking start + wait, 4 persistent plan
  for (int form = 0; form < 5; ++form) {
    auto* send = static_cast<T*>(alloc(kind, block));
    auto* recv = static_cast<T*>(alloc(kind, total));
    std::vector<unsigned char> init(total + 1, 0x5a);
    std::memcpy(init.data() + static_cast<std::size_t>(rank_) * block, host.data() + static_cast<std::size_t>(rank_) * block, block);
    cuda_ok(cudaMemcpy(recv, init.data(), total, cudaMemcpyDefault), "cudaMemcpy");
    cuda_ok(cudaMemcpy(send, host.data() + static_cast<std::size_t>(rank_) * block, block, cudaMemcpyDefault), "cudaMemcpy");
    std::vector<int> counts(static_cast<std::size_t>(size_), static_cast<int>(count)), displs;
    for (int r = 0; r < size_; ++r) displs.push_back(r * static_cast<int>(count));
    if (use_mpi) {
      MPI_Datatype t = MPI_BYTE;
      const int c = static_cast<int>(block);
      std::vector<int> bc(static_cast<std::size_t>(size_), c), bd;
      for (int r = 0; r < size_; ++r) bd.push_back(r * c);
      if (form == 0) MPI_Allgather(send, c, t, recv, c, t, MPI_COMM_WORLD);
      if (form == 1) MPI_Allgather(MPI_IN_PLACE, 0, t, recv, c, t, MPI_COMM_WORLD);
      if (form == 2) MPI_Allgatherv(send, c, t, recv, bc.data(), bd.data(), t, MPI_COMM_WORLD);
      if (form >= 3) {
        MPI_Request req;
        MPI_Iallgather(send, c, t, recv, c, t, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
    } else {
      agx::Allgather<T> g(MPI_COMM_WORLD);
      const std::span<const T> s(send, count);
      const std::span<T> all(recv, count * static_cast<std::size_t>(size_));
      if (form == 0) g(s, all);
      if (form == 1) g.in_place(all);
      if (form == 2) g.v(s, all, counts, displs);
      if (form == 3) g.start(s, all).wait();
      if (form == 4) {
        agx::Plan p = g.plan(s, all);
        for (int i = 0; i < 2; ++i) p.start(), p.wait();
      }
    }
    std::vector<unsigned char> got(total + 1);
    cuda_ok(cudaMemcpy(got.data(), recv, total, cudaMemcpyDefault), "cudaMemcpy");
    for (int r = 0; r < size_; ++r)
      for (std::size_t i = 0; i < block; ++i)
        if (got[static_cast<std::size_t>(r) * block + i] != byte_of(r, i)) {
          fail(std::string(type_name) + " " + name(kind) + " form " + std::to_string(form) + " count " + std::to_string(count) + " block " + std::to_string(r));
          r = size_;
          break;
        }
    release(kind, send);
    release(kind, recv);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  for (int i = 1; i < argc; ++i) use_mpi = use_mpi || std::strcmp(argv[i], "--mpi") == 0;
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    if (rank_ == 0)
      std::printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    MPI_Finalize();
    return 77;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  cuda_ok(cudaSetDevice(node_rank % devices), "cudaSetDevice");

  // Detection of every kind.
  for (Kind k : {Kind::host, Kind::device, Kind::managed, Kind::pinned}) {
    void* p = alloc(k, 64);
    const auto got = agx::cuda::memory_kind(p);
    const auto want = k == Kind::host ? agx::cuda::MemoryKind::host : k == Kind::device ? agx::cuda::MemoryKind::device
                      : k == Kind::managed ? agx::cuda::MemoryKind::managed : agx::cuda::MemoryKind::pinned;
    if (got != want) fail(std::string("memory_kind of ") + name(k));
    release(k, p);
  }
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300001}}) {
    for (Kind k : {Kind::device, Kind::managed, Kind::pinned}) run<float>(k, count, "float");
#ifdef AGX_TEST_HALF
    if (!use_mpi) {
      run<__half>(Kind::device, count, "__half");
      run<__nv_bfloat16>(Kind::device, count, "__nv_bfloat16");
    }
#endif
    run<float>(rank_ == 0 ? Kind::host : Kind::device, count, "float mixed");
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0)
    std::printf("cuda runtime (%s, AGX_CUDA_PATH=%s): %d ranks, %d failures\n", use_mpi ? "MPI_Allgather" : "agx::Allgather",
                std::getenv("AGX_CUDA_PATH") ? std::getenv("AGX_CUDA_PATH") : "auto", size_, all);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
