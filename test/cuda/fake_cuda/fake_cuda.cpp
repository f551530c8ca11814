// fake_cuda: a stand-in for the CUDA runtime and driver entry points agx and test/cuda
// use, preloaded (LD_PRELOAD) in front of libcudart on a machine without a GPU. Device
// memory is host memory in POSIX shared memory (so that CUDA IPC works between ranks);
// what docs/gpu.md says it proves and does not prove. Configured by the environment:
//   FAKE_CUDA_DEVICES=N        devices reported (default 1; 0: "no device")
//   FAKE_CUDA_FAIL=call        that runtime call fails (cudaErrorLaunchFailure) ...
//   FAKE_CUDA_FAIL_RANK=r      ... only on this rank (OMPI_COMM_WORLD_RANK / PMI_RANK)
//   FAKE_CUDA_FAIL_AFTER=k     ... after k successful calls of it (default 0)
// Device-to-device copies (cudaMemcpy and cudaMemcpyAsync alike) are deferred: they
// happen when their stream is synchronized (stream, event, or a later synchronous copy
// on the legacy stream), as a real GPU may run them later, so a missing wait reads stale
// bytes. Host<->device copies on a stream are deferred the same way.
// Counters for tests (fake_cuda_counters, found with dlsym): contexts created per
// device, IPC mappings open, opened and closed.

#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace {

struct Allocation {
  std::size_t bytes;
  cudaMemoryType type;
  bool ipc;          // can be exported (cudaMalloc, not cudaMallocAsync/Managed)
  std::uint64_t id;  // shared memory name part
  int device;
};

struct Copy {
  void* dst;
  const void* src;
  std::size_t bytes;
};

struct FakeStream {
  std::deque<Copy> queue;
  std::uint64_t done = 0, queued = 0;  // copies executed / enqueued so far
};

struct FakeEvent {
  FakeStream* stream = nullptr;
  std::uint64_t upto = 0;
  bool interprocess = false;
};

struct State {
  std::mutex mutex;
  std::map<std::uintptr_t, Allocation> allocations;  // by base address
  std::map<std::uintptr_t, std::size_t> mapped;      // opened peer mappings: base -> bytes
  FakeStream legacy;
  std::uint64_t next_id = 1;
  int devices = 1;
  std::string fail_call;
  long fail_after = 0;
  bool fail_here = false;
  long contexts[16] = {};
  long ipc_opened = 0, ipc_closed = 0;
  long pinned_bytes = 0, pinned_peak = 0;  // cudaMallocHost memory held, and its maximum
  std::map<std::uintptr_t, std::size_t> pinned;  // cudaMallocHost: address -> bytes
};

State& state() {
  static State* s = [] {
    auto* st = new State();
    if (const char* d = std::getenv("FAKE_CUDA_DEVICES")) st->devices = std::atoi(d);
    if (const char* f = std::getenv("FAKE_CUDA_FAIL")) st->fail_call = f;
    if (const char* a = std::getenv("FAKE_CUDA_FAIL_AFTER")) st->fail_after = std::atol(a);
    st->fail_here = true;
    if (const char* r = std::getenv("FAKE_CUDA_FAIL_RANK")) {
      const char* me = std::getenv("OMPI_COMM_WORLD_RANK");
      if (me == nullptr) me = std::getenv("PMI_RANK");
      st->fail_here = me != nullptr && std::atoi(me) == std::atoi(r);
    }
    return st;
  }();
  return *s;
}

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

cudaError_t result(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

/// A runtime call that needs the current device's primary context (real CUDA creates it).
cudaError_t enter(const char* call) {
  State& s = state();
  if (s.devices <= 0) return result(cudaErrorNoDevice);
  if (current_device >= 0 && current_device < 16) ++s.contexts[current_device];
  if (s.fail_here && s.fail_call == call) {
    if (s.fail_after <= 0) return result(cudaErrorLaunchFailure);
    --s.fail_after;
  }
  return cudaSuccess;
}

const Allocation* find(const void* p, std::uintptr_t* base = nullptr) {
  State& s = state();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = s.allocations.upper_bound(a);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes) return nullptr;
  if (base != nullptr) *base = it->first;
  return &it->second;
}

bool on_device(const void* p) {
  const Allocation* a = find(p);
  return a != nullptr && a->type != cudaMemoryTypeHost;
}

FakeStream* stream_of(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &state().legacy;
  return reinterpret_cast<FakeStream*>(s);
}

void flush(FakeStream* st, std::uint64_t upto) {
  while (st->done < upto && !st->queue.empty()) {
    const Copy c = st->queue.front();
    st->queue.pop_front();
    std::memmove(c.dst, c.src, c.bytes);
    ++st->done;
  }
}
void flush_all(FakeStream* st) { flush(st, st->queued); }

void enqueue(FakeStream* st, void* dst, const void* src, std::size_t bytes) {
  st->queue.push_back({dst, src, bytes});
  ++st->queued;
}

std::string shm_name(int pid, std::uint64_t id) {
  return "/fake_cuda." + std::to_string(pid) + "." + std::to_string(id);
}

struct MemHandle {  // inside cudaIpcMemHandle_t (64 bytes)
  std::uint32_t magic, pid;
  std::uint64_t id, bytes;
};

cudaError_t allocate(void** p, std::size_t bytes, cudaMemoryType type, bool ipc) {
  State& s = state();
  const std::size_t n = bytes == 0 ? 1 : bytes;
  void* mem = nullptr;
  std::uint64_t id = 0;
  if (type == cudaMemoryTypeHost) {
    mem = std::malloc(n);
  } else {
    id = s.next_id++;
    const std::string name = shm_name(static_cast<int>(getpid()), id);
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0) return result(cudaErrorMemoryAllocation);
    mem = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mem == MAP_FAILED) return result(cudaErrorMemoryAllocation);
  }
  if (mem == nullptr) return result(cudaErrorMemoryAllocation);
  s.allocations[reinterpret_cast<std::uintptr_t>(mem)] = {n, type, ipc, id, current_device};
  *p = mem;
  return cudaSuccess;
}

cudaError_t release(void* p, bool host) {
  State& s = state();
  if (p == nullptr) return cudaSuccess;
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == s.allocations.end() || (it->second.type == cudaMemoryTypeHost) != host)
    return result(cudaErrorInvalidValue);
  flush_all(&s.legacy);  // cudaFree synchronizes the device
  if (host) {
    std::free(p);
  } else {
    munmap(p, it->second.bytes);
    shm_unlink(shm_name(static_cast<int>(getpid()), it->second.id).c_str());
  }
  s.allocations.erase(it);
  return cudaSuccess;
}

// Driver API entry points handed out by cudaGetDriverEntryPoint*: no context needed.
CUresult fake_cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attributes, void** data,
                                     CUdeviceptr ptr) {
  std::lock_guard lock(state().mutex);
  const Allocation* a = find(reinterpret_cast<const void*>(ptr));
  for (unsigned i = 0; i < n; ++i) {
    switch (attributes[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data[i]) =
            a == nullptr ? 0u
            : a->type == cudaMemoryTypeHost ? unsigned{CU_MEMORYTYPE_HOST}
                                            : unsigned{CU_MEMORYTYPE_DEVICE};
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<int*>(data[i]) = a != nullptr && a->type == cudaMemoryTypeManaged;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = a == nullptr ? -2 : a->device;
        break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuMemGetAddressRange(CUdeviceptr* base, std::size_t* size, CUdeviceptr ptr) {
  std::lock_guard lock(state().mutex);
  std::uintptr_t b = 0;
  const Allocation* a = find(reinterpret_cast<const void*>(ptr), &b);
  if (a == nullptr || a->type == cudaMemoryTypeHost) return CUDA_ERROR_INVALID_VALUE;
  *base = b;
  *size = a->bytes;
  return CUDA_SUCCESS;
}

cudaError_t entry_point(const char* symbol, void** fn, cudaDriverEntryPointQueryResult* found) {
  *fn = nullptr;
  if (std::strcmp(symbol, "cuPointerGetAttributes") == 0)
    *fn = reinterpret_cast<void*>(&fake_cuPointerGetAttributes);
  if (std::strcmp(symbol, "cuMemGetAddressRange") == 0)
    *fn = reinterpret_cast<void*>(&fake_cuMemGetAddressRange);
  if (found != nullptr)
    *found = *fn != nullptr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // namespace

extern "C" {

/// Test counters: contexts[device] (runtime calls that need a context), IPC mappings,
/// pinned host memory (cudaMallocHost) held now and at most.
struct FakeCudaCounters {
  long contexts[16];
  long ipc_open, ipc_opened, ipc_closed;
  long pinned_bytes, pinned_peak;
};
FakeCudaCounters fake_cuda_counters() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  FakeCudaCounters c{};
  std::memcpy(c.contexts, s.contexts, sizeof c.contexts);
  c.ipc_open = static_cast<long>(s.mapped.size());
  c.ipc_opened = s.ipc_opened;
  c.ipc_closed = s.ipc_closed;
  c.pinned_bytes = s.pinned_bytes;
  c.pinned_peak = s.pinned_peak;
  return c;
}

cudaError_t cudaGetDeviceCount(int* n) {
  const int d = state().devices;
  *n = d > 0 ? d : 0;
  return d > 0 ? cudaSuccess : result(cudaErrorNoDevice);
}
cudaError_t cudaGetDevice(int* d) {
  *d = current_device;
  return state().devices > 0 ? cudaSuccess : result(cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= state().devices) return result(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (fake_cuda)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (fake_cuda)";
    case cudaErrorLaunchFailure: return "unspecified launch failure (fake_cuda, injected)";
    case cudaErrorNotReady: return "device not ready (fake_cuda)";
    default: return "error (fake_cuda)";
  }
}
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long,
                                    cudaDriverEntryPointQueryResult* found) {
  return entry_point(symbol, fn, found);
}
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult* found) {
  return entry_point(symbol, fn, found);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (cudaError_t e = enter("cudaPointerGetAttributes")) return e;
  std::lock_guard lock(state().mutex);
  *a = {};
  const Allocation* al = find(p);
  a->type = al == nullptr ? cudaMemoryTypeUnregistered : al->type;
  a->device = al == nullptr ? -2 : al->device;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  if (cudaError_t e = enter("cudaMalloc")) return e;
  std::lock_guard lock(state().mutex);
  return allocate(p, bytes, cudaMemoryTypeDevice, true);
}
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) {
  if (cudaError_t e = enter("cudaMallocAsync")) return e;
  std::lock_guard lock(state().mutex);
  return allocate(p, bytes, cudaMemoryTypeDevice, false);  // pool memory: no legacy IPC
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
  std::lock_guard lock(state().mutex);
  return release(p, false);
}
cudaError_t cudaMallocManaged(void** p, std::size_t bytes, unsigned int) {
  if (cudaError_t e = enter("cudaMallocManaged")) return e;
  std::lock_guard lock(state().mutex);
  return allocate(p, bytes, cudaMemoryTypeManaged, false);
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  if (cudaError_t e = enter("cudaMallocHost")) return e;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const cudaError_t e = allocate(p, bytes, cudaMemoryTypeHost, false);
  if (e == cudaSuccess) {
    s.pinned[reinterpret_cast<std::uintptr_t>(*p)] = bytes;
    s.pinned_bytes += static_cast<long>(bytes);
    if (s.pinned_bytes > s.pinned_peak) s.pinned_peak = s.pinned_bytes;
  }
  return e;
}
cudaError_t cudaFree(void* p) {
  std::lock_guard lock(state().mutex);
  return release(p, false);
}
cudaError_t cudaFreeHost(void* p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (auto it = s.pinned.find(reinterpret_cast<std::uintptr_t>(p)); it != s.pinned.end()) {
    s.pinned_bytes -= static_cast<long>(it->second);
    s.pinned.erase(it);
  }
  return release(p, true);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  if (cudaError_t e = enter("cudaStreamCreate")) return e;
  *s = reinterpret_cast<cudaStream_t>(new FakeStream());
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::lock_guard lock(state().mutex);
  flush_all(stream_of(s));
  delete reinterpret_cast<FakeStream*>(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (cudaError_t e = enter("cudaStreamSynchronize")) return e;
  std::lock_guard lock(state().mutex);
  flush_all(stream_of(s));
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = enter("cudaDeviceSynchronize")) return e;
  std::lock_guard lock(state().mutex);
  flush_all(&state().legacy);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (cudaError_t r = enter("cudaEventCreate")) return r;
  auto* ev = new FakeEvent();
  ev->interprocess = (flags & cudaEventInterprocess) != 0;
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (cudaError_t r = enter("cudaEventRecord")) return r;
  std::lock_guard lock(state().mutex);
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  ev->stream = stream_of(s);
  ev->upto = ev->stream->queued;
  // Another process cannot make this one run its queue: an interprocess event's work
  // is done when it is recorded.
  if (ev->interprocess) flush(ev->stream, ev->upto);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned int) {
  if (cudaError_t r = enter("cudaStreamWaitEvent")) return r;
  std::lock_guard lock(state().mutex);
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (ev->stream != nullptr) flush(ev->stream, ev->upto);  // the waiter runs after it
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (cudaError_t r = enter("cudaEventSynchronize")) return r;
  std::lock_guard lock(state().mutex);
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (ev->stream != nullptr) flush(ev->stream, ev->upto);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (cudaError_t r = enter("cudaEventQuery")) return r;
  std::lock_guard lock(state().mutex);
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (ev->stream == nullptr || ev->stream->done >= ev->upto) return cudaSuccess;
  flush(ev->stream, ev->upto);  // the work runs now; this query still says "not yet"
  return cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                            cudaStream_t s) {
  if (cudaError_t e = enter("cudaMemcpyAsync")) return e;
  std::lock_guard lock(state().mutex);
  enqueue(stream_of(s), dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  if (cudaError_t e = enter("cudaMemcpy")) return e;
  std::lock_guard lock(state().mutex);
  FakeStream* legacy = &state().legacy;
  enqueue(legacy, dst, src, bytes);
  // Device to device returns before the copy has run (CUDA: "no host-side
  // synchronization"); anything that touches host memory waits for it.
  if (!(on_device(dst) && on_device(src))) flush_all(legacy);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, std::size_t bytes) {
  if (cudaError_t e = enter("cudaMemset")) return e;
  std::lock_guard lock(state().mutex);
  flush_all(&state().legacy);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* h, void* p) {
  if (cudaError_t e = enter("cudaIpcGetMemHandle")) return e;
  std::lock_guard lock(state().mutex);
  std::uintptr_t base = 0;
  const Allocation* a = find(p, &base);
  if (a == nullptr || !a->ipc) return result(cudaErrorInvalidValue);
  const MemHandle m{0xfacecafe, static_cast<std::uint32_t>(getpid()), a->id, a->bytes};
  std::memset(h, 0, sizeof *h);
  std::memcpy(h, &m, sizeof m);
  return cudaSuccess;
}
cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t h, unsigned int) {
  if (cudaError_t e = enter("cudaIpcOpenMemHandle")) return e;
  State& s = state();
  std::lock_guard lock(s.mutex);
  MemHandle m{};
  std::memcpy(&m, &h, sizeof m);
  if (m.magic != 0xfacecafe) return result(cudaErrorInvalidResourceHandle);
  const int fd = shm_open(shm_name(static_cast<int>(m.pid), m.id).c_str(), O_RDWR, 0600);
  if (fd < 0) return result(cudaErrorInvalidResourceHandle);  // freed by its owner
  void* mem = mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return result(cudaErrorMapBufferObjectFailed);
  s.mapped[reinterpret_cast<std::uintptr_t>(mem)] = m.bytes;
  // The mapping is device memory of this process too.
  s.allocations[reinterpret_cast<std::uintptr_t>(mem)] = {m.bytes, cudaMemoryTypeDevice, false, 0,
                                                          current_device};
  ++s.ipc_opened;
  *p = mem;
  return cudaSuccess;
}
cudaError_t cudaIpcCloseMemHandle(void* p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.mapped.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == s.mapped.end()) return result(cudaErrorInvalidValue);
  flush_all(&s.legacy);
  munmap(p, it->second);
  s.allocations.erase(it->first);
  s.mapped.erase(it);
  ++s.ipc_closed;
  return cudaSuccess;
}
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* h, cudaEvent_t) {
  if (cudaError_t e = enter("cudaIpcGetEventHandle")) return e;
  std::memset(h, 0, sizeof *h);
  const std::uint32_t pid = static_cast<std::uint32_t>(getpid());
  std::memcpy(h, &pid, sizeof pid);
  return cudaSuccess;
}
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* e, cudaIpcEventHandle_t) {
  if (cudaError_t r = enter("cudaIpcOpenEventHandle")) return r;
  *e = reinterpret_cast<cudaEvent_t>(new FakeEvent());  // recorded work is already done
  return cudaSuccess;
}

}  // extern "C"
