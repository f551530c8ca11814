#pragma once
// The byte-level entry points of libagx. The typed front end (allgather.hpp) turns
// element counts into bytes and calls these; tools and the interposer call them directly.

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/options.hpp>

#include <cstddef>
#include <span>

namespace agx {

/// Where every rank's block lives in the receive buffer, in bytes. Either uniform
/// (block i at i*block_bytes) or explicit per-block sizes and offsets (the v form).
/// Non-owning: the spans must outlive the call.
class Layout {
 public:
  static Layout uniform(int nranks, std::size_t block_bytes) {
    Layout l;
    l.nranks_ = nranks;
    l.uniform_bytes_ = block_bytes;
    return l;
  }
  static Layout varying(std::span<const std::size_t> block_bytes,
                        std::span<const std::size_t> offsets) {
    Layout l;
    l.nranks_ = static_cast<int>(block_bytes.size());
    l.bytes_ = block_bytes;
    l.offsets_ = offsets;
    return l;
  }

  int nranks() const { return nranks_; }
  bool is_uniform() const { return bytes_.empty() && nranks_ >= 0 && offsets_.empty(); }
  std::size_t bytes(int block) const {
    return is_uniform() ? uniform_bytes_ : bytes_[static_cast<std::size_t>(block)];
  }
  std::size_t offset(int block) const {
    return is_uniform() ? uniform_bytes_ * static_cast<std::size_t>(block)
                        : offsets_[static_cast<std::size_t>(block)];
  }

 private:
  int nranks_ = 0;
  std::size_t uniform_bytes_ = 0;
  std::span<const std::size_t> bytes_;
  std::span<const std::size_t> offsets_;
};

/// The caller's buffers. With `in_place` the own block is already at its place in
/// `recv` and `send` is ignored.
struct Buffers {
  const void* send = nullptr;
  void* recv = nullptr;
  bool in_place = false;
};

/// All-gathers bytes over an intra-communicator. Every rank passes the same layout
/// sizes; `send` holds layout.bytes(rank) bytes. Returns the algorithm that ran.
/// Throws agx::Error on bad input or a failed MPI call.
Algorithm allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options = {});

/// The algorithm and parameters `allgather_bytes` would run for this call (same choice,
/// same environment). Collective on a communicator's first use (it discovers the topology
/// and agrees on the tuning); afterwards local. Throws agx::Error for a forced algorithm
/// that cannot serve the call or bad parameters.
AlgorithmChoice choose_algorithm(MPI_Comm comm, const Layout& layout, const Options& options = {},
                           bool in_place = false);

}  // namespace agx
