// CudaOps: DeviceOps on CUDA streams and events, one instance per process, used by
// the staging path. Streams are non-blocking streams of the device current at first
// use; every call first makes them wait for the caller's legacy default stream.
// Copies use cudaMemcpyDefault (unified addressing), so any mix of memory kinds works.

#include "cuda/backend.hpp"
#include "cuda/cuda_check.hpp"

#include <array>
#include <vector>

namespace agx::cuda {
namespace {

class CudaOps final : public DeviceOps {
 public:
  ~CudaOps() override = default;  // streams and events live until the process ends

  void begin_call() override {
    if (!ready_) {
      for (cudaStream_t& s : streams_)
        check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      check_cuda(cudaEventCreateWithFlags(&caller_, cudaEventDisableTiming), "cudaEventCreate");
      ready_ = true;
    }
    check_cuda(cudaEventRecord(caller_, cudaStreamLegacy), "cudaEventRecord");
    for (cudaStream_t s : streams_)
      check_cuda(cudaStreamWaitEvent(s, caller_, 0), "cudaStreamWaitEvent");
    used_ = 0;
  }

  void end_call() noexcept override { used_ = 0; }

  void copy_to_host_async(void* host, const void* device, std::size_t bytes, Stream s) override {
    copy(host, device, bytes, s);
  }
  void copy_to_device_async(void* device, const void* host, std::size_t bytes, Stream s) override {
    copy(device, host, bytes, s);
  }
  void copy_device_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    copy(dst, src, bytes, s);
  }

  Event record(Stream s) override {
    if (used_ == events_.size()) {
      cudaEvent_t e{};
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      events_.push_back(e);
    }
    check_cuda(cudaEventRecord(events_[used_], stream(s)), "cudaEventRecord");
    return static_cast<Event>(used_++);
  }

  bool query(Event e) override {
    const cudaError_t r = cudaEventQuery(events_[e]);
    if (r == cudaErrorNotReady) return false;
    check_cuda(r, "cudaEventQuery");
    return true;
  }

  void synchronize(Event e) override {
    check_cuda(cudaEventSynchronize(events_[e]), "cudaEventSynchronize");
  }

  void* allocate_pinned(std::size_t bytes) override {
    void* p = nullptr;
    check_cuda(cudaMallocHost(&p, bytes), "cudaMallocHost");
    return p;
  }
  void free_pinned(void* p) noexcept override { (void)cudaFreeHost(p); }

 private:
  cudaStream_t stream(Stream s) const { return streams_[static_cast<std::size_t>(s)]; }
  void copy(void* dst, const void* src, std::size_t bytes, Stream s) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream(s)), "cudaMemcpyAsync");
  }

  bool ready_ = false;
  std::array<cudaStream_t, stream_count> streams_{};
  cudaEvent_t caller_{};
  std::vector<cudaEvent_t> events_;
  std::size_t used_ = 0;
};

}  // namespace

namespace backend {

DeviceOps& device_ops() {
  static CudaOps* ops = new CudaOps();  // never destroyed: CUDA may be gone at exit
  return *ops;
}

PinnedPool& pinned_pool() {
  static PinnedPool* pool = new PinnedPool(device_ops());
  return *pool;
}

}  // namespace backend
}  // namespace agx::cuda
