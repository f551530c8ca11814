// CUDA side of the IPC path (ipc.cpp has the protocol). One non-blocking stream and one
// interprocess event per process. Peers' allocations are mapped once and cached by
// (peer process, allocation base) with the handle compared: a peer that freed and
// reallocated its buffer (a caching allocator) brings a new handle, and the old mapping
// is closed before the new one is opened. The cache is bounded (ipc_cache_entries,
// least recently used first, never one the running call uses) and every mapping is
// closed at MPI_Finalize (an MPI_COMM_SELF attribute's delete callback).
// The allocation base comes from the driver's cuMemGetAddressRange, reached through
// cudaGetDriverEntryPointByVersion, so libagx does not link libcuda.

#include "cuda/backend.hpp"
#include "cuda/cuda_check.hpp"

#include <cstring>
#include <map>
#include <mpi.h>
#include <unistd.h>
#include <utility>
#include <string>

namespace agx::cuda::backend {
namespace {

using GetAddressRange = int (*)(unsigned long long* base, std::size_t* size,
                                unsigned long long ptr);

struct Mapping {
  std::string handle;
  std::byte* ptr = nullptr;
  std::uint64_t used = 0;  ///< the call that used it last
};

struct IpcState {
  cudaStream_t stream{};
  cudaEvent_t ready{};
  cudaEvent_t caller{};
  cudaIpcEventHandle_t ready_handle{};
  GetAddressRange address_range = nullptr;
  std::map<std::pair<std::int64_t, std::uint64_t>, Mapping> memories;  // (owner, base)
  std::map<std::string, cudaEvent_t> events;
  std::uint64_t call = 0;
};

void close_mapping(Mapping& m) noexcept {
  if (m.ptr != nullptr) (void)cudaIpcCloseMemHandle(m.ptr);
  (void)cudaGetLastError();
  m.ptr = nullptr;
}

IpcState* created = nullptr;

int close_all(MPI_Comm, int, void*, void*) {
  if (created != nullptr) {
    (void)cudaStreamSynchronize(created->stream);
    for (auto& [key, m] : created->memories) close_mapping(m);
    created->memories.clear();
  }
  return MPI_SUCCESS;
}

/// Makes room for one more mapping: closes the least recently used one not in use by
/// the running call, when the cache is full.
void evict(IpcState& s) {
  if (s.memories.size() < ipc_cache_entries) return;
  auto oldest = s.memories.end();
  for (auto it = s.memories.begin(); it != s.memories.end(); ++it)
    if (it->second.used != s.call && (oldest == s.memories.end() || it->second.used < oldest->second.used))
      oldest = it;
  if (oldest == s.memories.end()) return;  // every mapping serves this call: grow
  close_mapping(oldest->second);
  s.memories.erase(oldest);
}

IpcState& state() {
  static IpcState* s = [] {
    auto* st = new IpcState();
    check_cuda(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming | cudaEventInterprocess),
               "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&st->caller, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaIpcGetEventHandle(&st->ready_handle, st->ready), "cudaIpcGetEventHandle");
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      st->address_range = reinterpret_cast<GetAddressRange>(fn);
    (void)cudaGetLastError();
    created = st;
    int keyval = MPI_KEYVAL_INVALID;  // closes every mapping at MPI_Finalize
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, close_all, &keyval, nullptr) == MPI_SUCCESS)
      MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
    return st;
  }();
  return *s;
}

std::string key(const unsigned char (&bytes)[64]) {
  return std::string(reinterpret_cast<const char*>(bytes), 64);
}

}  // namespace

void ipc_copy_own(const void* send, void* recv_own, std::size_t bytes) {
  IpcState& s = state();
  check_cuda(cudaEventRecord(s.caller, cudaStreamLegacy), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(s.stream, s.caller, 0), "cudaStreamWaitEvent");
  if (send != nullptr && bytes > 0)
    check_cuda(cudaMemcpyAsync(recv_own, send, bytes, cudaMemcpyDefault, s.stream), "cudaMemcpyAsync");
}

bool ipc_expose(void* recv, std::size_t own_offset, IpcExport& out) {
  IpcState& s = state();
  ++s.call;
  out.owner = static_cast<std::int64_t>(getpid());
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  out.device = device;
  check_cuda(cudaEventRecord(s.ready, s.stream), "cudaEventRecord");
  std::memcpy(out.event, &s.ready_handle, sizeof out.event);

  unsigned long long base = 0;
  std::size_t size = 0;
  if (s.address_range == nullptr ||
      s.address_range(&base, &size, reinterpret_cast<unsigned long long>(recv)) != 0)
    return false;
  cudaIpcMemHandle_t h{};
  if (cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::memcpy(out.memory, &h, sizeof out.memory);
  // The own block's place: a peer's displacements may differ from this rank's.
  out.offset = reinterpret_cast<unsigned long long>(recv) + own_offset - base;
  out.base = base;
  return true;
}

IpcPeer ipc_open(const IpcExport& peer) {
  IpcState& s = state();
  IpcPeer p;
  const std::string mk = key(peer.memory);
  const auto where = std::make_pair(peer.owner, peer.base);
  auto m = s.memories.find(where);
  if (m != s.memories.end() && m->second.handle != mk) {  // freed and reallocated there
    close_mapping(m->second);
    s.memories.erase(m);
    m = s.memories.end();
  }
  if (m == s.memories.end()) {
    evict(s);
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, peer.memory, sizeof h);
    void* ptr = nullptr;
    if (cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      (void)cudaGetLastError();
      return p;
    }
    m = s.memories.emplace(where, Mapping{mk, static_cast<std::byte*>(ptr), 0}).first;
  }
  m->second.used = s.call;
  const std::string ek = key(peer.event);
  auto e = s.events.find(ek);
  if (e == s.events.end()) {
    cudaIpcEventHandle_t h{};
    std::memcpy(&h, peer.event, sizeof h);
    cudaEvent_t ev{};
    if (cudaIpcOpenEventHandle(&ev, h) != cudaSuccess) {
      (void)cudaGetLastError();
      return p;
    }
    e = s.events.emplace(ek, ev).first;
  }
  p.base = m->second.ptr + peer.offset;
  p.event = e->second;
  return p;
}

void ipc_copy(std::byte* dst, const std::byte* src, std::size_t bytes, const IpcPeer& peer) {
  IpcState& s = state();
  check_cuda(cudaStreamWaitEvent(s.stream, static_cast<cudaEvent_t>(peer.event), 0),
             "cudaStreamWaitEvent");
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.stream),
             "cudaMemcpyAsync");
}

void ipc_finish() {
  check_cuda(cudaStreamSynchronize(state().stream), "cudaStreamSynchronize");
}

}  // namespace agx::cuda::backend
