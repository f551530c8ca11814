#pragma once
// A POSIX shared-memory segment mapped by every rank of a node.
//
// Creation is collective over the node communicator (not on the hot path): local
// rank 0 creates /agx-<pid>-<n>, sizes it and broadcasts the name; everybody maps it
// with MAP_POPULATE (no page faults later); after an allreduce that all mappings
// succeeded, rank 0 unlinks the name. From then on the memory lives exactly as long
// as some rank maps it: nothing is left in /dev/shm, even after a crash.
// Unmapping (the destructor) is local.

#include <mpi.h>

#include <cstddef>

namespace agx::hier {

class SharedSegment {
 public:
  /// Collective over `node_comm`. `bytes` must be the same on all its ranks.
  SharedSegment(MPI_Comm node_comm, std::size_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Rounds up to whole pages.
std::size_t page_round(std::size_t bytes);

}  // namespace agx::hier
