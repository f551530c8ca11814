#pragma once
// SeamOps: a DeviceOps that stands in for a GPU in tests. "Device memory" is separate
// host memory that only the seam touches; every copy is queued on its stream and runs
// later, one at a time and at random moments (seeded), in stream order, exactly when
// CUDA would at the latest: when an event after it is synchronized. So a pipeline that
// reads the staging mirror before waiting for its copy, forgets a copy, or returns
// before its copies ran, sees stale bytes and fails the byte-exact check; a copy in
// the wrong direction (e.g. "to host" from host memory) throws.
//
// Faults, to prove that the check catches a broken device layer:
//   drop_copy         the first host->device copy is silently skipped
//   early_completion  events report completion before their copies ran (the copies are
//                     never run during the call)

#include "cuda/device_ops.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace agx::test {

enum class Fault { none, drop_copy, early_completion };

class SeamOps final : public cuda::DeviceOps {
 public:
  SeamOps(unsigned seed, Fault fault) : rng_(seed), fault_(fault) {}
  ~SeamOps() override = default;

  /// "Device" memory of `bytes` bytes, filled with `fill`.
  std::byte* device_alloc(std::size_t bytes, std::byte fill) {
    regions_.push_back(std::make_unique<std::byte[]>(bytes + 1));
    sizes_.push_back(bytes + 1);
    std::memset(regions_.back().get(), static_cast<int>(fill), bytes + 1);
    return regions_.back().get();
  }
  void device_free_all() { regions_.clear(), sizes_.clear(); }

  /// Copies still queued (must be 0 after every call).
  std::size_t pending() const {
    std::size_t n = 0;
    for (const auto& q : queues_) n += q.size();
    return n;
  }
  std::size_t pinned_allocations() const { return pinned_allocations_; }

  void begin_call() override { events_.clear(); }
  void end_call() noexcept override { events_.clear(); }

  void copy_to_host_async(void* host, const void* device, std::size_t bytes,
                          cuda::Stream s) override {
    expect(is_device(device) && !is_device(host), "copy_to_host_async direction");
    enqueue(host, device, bytes, s, false);
  }
  void copy_to_device_async(void* device, const void* host, std::size_t bytes,
                            cuda::Stream s) override {
    expect(is_device(device) && !is_device(host), "copy_to_device_async direction");
    const bool drop = fault_ == Fault::drop_copy && !dropped_one_;
    dropped_one_ = dropped_one_ || drop;
    enqueue(device, host, bytes, s, drop);
  }
  void copy_device_async(void* dst, const void* src, std::size_t bytes, cuda::Stream s) override {
    expect(is_device(dst) && is_device(src), "copy_device_async direction");
    enqueue(dst, src, bytes, s, false);
  }

  cuda::Event record(cuda::Stream s) override {
    const auto i = static_cast<std::size_t>(s);
    events_.push_back({i, enqueued_[i]});
    maybe_progress();
    return static_cast<cuda::Event>(events_.size() - 1);
  }
  bool query(cuda::Event e) override {
    maybe_progress();
    if (fault_ == Fault::early_completion) return true;
    const Ev& ev = events_.at(e);
    return executed_[ev.stream] >= ev.position;
  }
  void synchronize(cuda::Event e) override {
    if (fault_ == Fault::early_completion) return;
    const Ev& ev = events_.at(e);
    while (executed_[ev.stream] < ev.position) run_one(ev.stream);
  }

  void* allocate_pinned(std::size_t bytes) override {
    ++pinned_allocations_;
    auto* p = new std::byte[bytes];
    std::memset(p, 0xEE, bytes);
    return p;
  }
  void free_pinned(void* p) noexcept override { delete[] static_cast<std::byte*>(p); }

 private:
  struct Op {
    void* dst;
    const void* src;
    std::size_t bytes;
    bool dropped;
  };
  struct Ev {
    std::size_t stream;
    std::size_t position;
  };

  static void expect(bool ok, const char* what) {
    if (!ok) throw std::logic_error(std::string("seam: wrong memory kinds in ") + what);
  }
  bool is_device(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    for (std::size_t i = 0; i < regions_.size(); ++i)
      if (b >= regions_[i].get() && b < regions_[i].get() + sizes_[i]) return true;
    return false;
  }
  void enqueue(void* dst, const void* src, std::size_t bytes, cuda::Stream s, bool drop) {
    const auto i = static_cast<std::size_t>(s);
    queues_[i].push_back({dst, src, bytes, drop});
    ++enqueued_[i];
    maybe_progress();
  }
  void run_one(std::size_t stream) {
    const Op op = queues_[stream].front();
    queues_[stream].pop_front();
    if (!op.dropped && op.bytes > 0) std::memcpy(op.dst, op.src, op.bytes);
    ++executed_[stream];
  }
  /// Sometimes runs the oldest copy of a random stream (never under early_completion,
  /// whose copies stay queued).
  void maybe_progress() {
    if (fault_ == Fault::early_completion) return;
    if (std::uniform_int_distribution<int>(0, 3)(rng_) != 0) return;
    const auto s = std::uniform_int_distribution<std::size_t>(0, queues_.size() - 1)(rng_);
    if (!queues_[s].empty()) run_one(s);
  }

  std::mt19937 rng_;
  Fault fault_;
  bool dropped_one_ = false;
  std::array<std::deque<Op>, cuda::stream_count> queues_;
  std::array<std::size_t, cuda::stream_count> enqueued_{}, executed_{};
  std::vector<Ev> events_;
  std::vector<std::unique_ptr<std::byte[]>> regions_;
  std::vector<std::size_t> sizes_;
  std::size_t pinned_allocations_ = 0;
};

}  // namespace agx::test
