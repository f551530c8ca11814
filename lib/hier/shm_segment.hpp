#pragma once
// A shared-memory segment mapped by every rank of a node.
//
// Creation is collective over the node communicator (not on the hot path). Local rank
// 0 makes an anonymous memory file (memfd_create: it has no name, in /dev/shm or
// anywhere) and sizes it; the others learn its process id, descriptor and size
// (MPI_Ibcast) and open it through /proc/<pid>/fd/<fd>; everybody maps it with
// MAP_POPULATE (no page faults later) and the node agrees that all mappings succeeded
// (MPI_Iallreduce); then local rank 0 closes the descriptor. The memory lives exactly
// as long as some rank maps it, whatever process dies when: nothing is ever left
// behind. Where /proc/<pid>/fd cannot be opened (a restricted container), the same
// steps run with a POSIX name (/agx-<pid>-<n>) that local rank 0 unlinks right after
// the agreement: there a rank killed between creation and agreement leaves that name
// behind (/dev/shm/agx-<pid of local rank 0>-<n>, to be removed by hand).
//
// SegmentMaker runs these steps as a state machine whose only MPI operations are the
// two exchanges of a NodeExchange (node_exchange.hpp), advanced by test(): the
// blocking constructor drives it over the node communicator's collectives, the round
// engine's calls advance it from their own test() with point-to-point messages.
//
// Both exchanges honour AGX_TIMEOUT: a wait that makes no progress for the timeout
// calls `stalled` (which reports and does not return). Local rank 0's size is the
// segment's size; a rank whose call needs another size (the ranks gave different
// counts) makes every rank fail with MPI_ERR_TRUNCATE. Unmapping (the destructor) is
// local.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace agx::hier {

/// Called when a creation step waited AGX_TIMEOUT seconds: `waiting_for` names it.
using SegmentStall = std::function<void(const char* waiting_for, double seconds)>;

class NodeExchange;

class SharedSegment {
 public:
  /// Collective over `node_comm`. `bytes` should be the same on all its ranks.
  SharedSegment(MPI_Comm node_comm, std::size_t bytes, const SegmentStall& stalled = {});
  /// Adopts a mapping of `bytes` (SegmentMaker).
  SharedSegment(std::byte* data, std::size_t bytes) : data_(data), bytes_(bytes) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The creation of a SharedSegment as steps that never block (see above).
class SegmentMaker {
 public:
  /// Starts nothing yet; `exchange` carries the node's two exchanges (owned).
  SegmentMaker(std::unique_ptr<NodeExchange> exchange, std::size_t bytes);
  ~SegmentMaker();
  SegmentMaker(const SegmentMaker&) = delete;
  SegmentMaker& operator=(const SegmentMaker&) = delete;

  /// Advances; true once the segment is made on this rank (then take() it). Throws
  /// agx::Error as the blocking constructor does. Each call that changed the state
  /// counts one step.
  bool test();
  /// Runs to the end, waiting for each exchange (the blocking constructor's way).
  void wait();
  std::unique_ptr<SharedSegment> take();
  /// What the step in flight waits for (AGX_TIMEOUT reports).
  const char* waiting_for() const;
  std::uint64_t steps() const { return steps_; }

 private:
  enum class Step { begin, announced, agreed, made };
  bool advance(bool block);
  void begin();
  void map();
  bool finish();

  std::unique_ptr<NodeExchange> x_;
  std::size_t bytes_;
  unsigned number_;
  int local_;
  Step step_ = Step::begin;
  int attempt_ = 0;
  struct State;
  std::unique_ptr<State> s_;
  std::byte* data_ = nullptr;
  std::uint64_t steps_ = 0;
};

/// Rounds up to whole pages.
std::size_t page_round(std::size_t bytes);

}  // namespace agx::hier
