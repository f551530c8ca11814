#pragma once
// Compiled message descriptors (docs/algorithms.md, "Message descriptors"): one rank's
// schedule for one layout, cut into MPI messages once, with an hindexed datatype for
// each message over several memory runs. Buffers are bound per call: a descriptor says
// which buffer (receive, or the send buffer for the own block in round 0 of an
// out-of-place call) and the offset of the message's first byte there; a datatype's
// displacements are relative to that byte, so the same committed type serves every call
// whatever its buffers' addresses. Each communicator's context keeps a few of them
// (DescriptorCache, comm_context.hpp), least recently used out; an Execution holds the
// one it runs (a shared reference), so eviction or MPI_Comm_free never pulls it from
// under a pending call. The datatypes go with the last reference.
//
// Also here: the per-round vectors of an Execution (ExecutionScratch). A compiled
// schedule lends its set to one execution at a time, so that a repeated call of one shape
// reuses their memory and allocates nothing.

#include <mpi.h>

#include <agx/bytes.hpp>

#include "core/schedule.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace agx {

/// One MPI message of a transfer, its buffer bound at call time.
struct MessageDesc {
  bool from_send = false;        ///< in the send buffer (else the receive buffer)
  std::size_t offset = 0;        ///< its first byte, from the start of that buffer
  int count = 0;                 ///< the MPI count: bytes with MPI_BYTE, 1 with a derived type
  MPI_Datatype type = MPI_BYTE;  ///< MPI_BYTE, or hindexed relative to the first byte
  std::size_t bytes = 0;         ///< payload (what a receive must bring)
};

/// What one posted request is (for AGX_TIMEOUT's report).
struct PostedRequest {
  bool is_send;
  bool checksums;  ///< the transfer's checksum message, not its data
  const Transfer* transfer;
};

/// The vectors an Execution fills per round (executor.hpp), kept between calls.
struct ExecutionScratch {
  std::vector<MPI_Request> requests;
  std::vector<std::size_t> expected;
  std::vector<MPI_Status> statuses;
  std::vector<const Transfer*> recv_transfers;
  std::vector<PostedRequest> posted;
  std::vector<int> done_indices;
  std::vector<MPI_Status> done_statuses;
  std::vector<std::size_t> recv_begin;
};

class CompiledSchedule {
 public:
  /// Compiles `schedule` for (layout, in_place, max_message_bytes): the schedule must
  /// outlive this, the layout is copied. Transfers into the node segment get no messages
  /// (such schedules are not compiled, executor.cpp). Throws agx::Error.
  CompiledSchedule(const Schedule& schedule, const Layout& layout, bool in_place,
                   std::size_t max_message_bytes);
  ~CompiledSchedule();  ///< frees the datatypes (unless MPI is finalized)
  CompiledSchedule(const CompiledSchedule&) = delete;
  CompiledSchedule& operator=(const CompiledSchedule&) = delete;

  bool matches(const Schedule& schedule, const Layout& layout, bool in_place,
               std::size_t max_message_bytes) const;
  /// Whether every message could be described (false: a message mixing the send and the
  /// receive buffer, which a valid schedule never has; the caller plans per call).
  bool usable() const { return usable_; }

  /// The messages of receive k (or send k) of round r.
  std::span<const MessageDesc> recv(std::size_t r, std::size_t k) const { return at(r, k); }
  std::span<const MessageDesc> send(std::size_t r, std::size_t k) const {
    return at(r, recvs_[r] + k);
  }
  /// How many derived datatypes this holds.
  std::size_t datatypes() const { return types_.size(); }

  /// The scratch vectors, or null while another execution has them.
  ExecutionScratch* take_scratch() {
    return scratch_busy_.exchange(true, std::memory_order_acquire) ? nullptr : &scratch_;
  }
  void give_back(ExecutionScratch*) { scratch_busy_.store(false, std::memory_order_release); }

 private:
  std::span<const MessageDesc> at(std::size_t r, std::size_t index) const;
  void compile_transfer(const Transfer& t, bool round0, std::size_t max_bytes);
  void describe_piece(std::size_t first_run, std::size_t end_run);

  const Schedule* schedule_;
  bool in_place_;
  std::size_t max_message_bytes_;
  int nranks_;
  bool uniform_;
  std::size_t uniform_bytes_ = 0;
  std::vector<std::size_t> bytes_, offsets_;  // a varying layout
  Layout layout_;  // over bytes_/offsets_ (or uniform)
  bool usable_ = true;

  std::vector<MessageDesc> messages_;
  std::vector<std::size_t> transfer_begin_;  // per transfer (rounds in order, recvs then sends), plus the end
  std::vector<std::size_t> round_first_;     // first transfer of each round
  std::vector<std::size_t> recvs_;           // receives of each round
  std::vector<MPI_Datatype> types_;

  struct Run {
    bool from_send;
    std::size_t offset, bytes;
  };
  std::vector<Run> runs_;  // compile-time scratch

  std::atomic<bool> scratch_busy_{false};
  ExecutionScratch scratch_;
};

/// A communicator's compiled schedules: at most `capacity` (AGX_DESCRIPTOR_CACHE,
/// docs/environment.md), the least recently used dropped first; 0 compiles nothing.
class DescriptorCache {
 public:
  explicit DescriptorCache(std::size_t capacity);
  DescriptorCache(const DescriptorCache&) = delete;
  DescriptorCache& operator=(const DescriptorCache&) = delete;

  /// The cached compiled form of the key, made the most recently used (no allocation);
  /// null when there is none. It may be unusable (CompiledSchedule::usable).
  std::shared_ptr<CompiledSchedule> find(const Schedule& schedule, const Layout& layout,
                                         bool in_place, std::size_t max_message_bytes);
  /// Compiles the key and caches it (the least recently used entry out when full).
  /// Null with capacity 0. An unusable form is cached all the same (not compiled again).
  /// Throws agx::Error.
  std::shared_ptr<CompiledSchedule> compile(const Schedule& schedule, const Layout& layout,
                                            bool in_place, std::size_t max_message_bytes);
  std::size_t size();
  std::size_t capacity() const { return capacity_; }
  /// How many compilations this cache has made (tests).
  std::size_t compilations();

 private:
  std::mutex mutex_;
  std::size_t capacity_;
  std::vector<std::shared_ptr<CompiledSchedule>> entries_;  // most recently used first
  std::size_t compilations_ = 0;
};

}  // namespace agx
