#pragma once
// Integrity (AGX_INTEGRITY=1, docs/reliability.md): a CRC32C per block, computed once by
// the block's owner, travels with the block and is checked wherever the block arrives.
//
// Point-to-point schedules (executor.cpp, persistent.cpp): the checksums make a
// second, tiny all-gather that follows the same schedule in the same rounds. For every
// transfer the sender appends one more message after the transfer's data pieces, on the
// same tag: the BlockCheck entries of the transfer's blocks, in transfer order. The
// receiver posts its receives in the same order, so MPI's non-overtaking rule pairs the
// messages exactly as it pairs the data pieces already (sender and receiver cut both
// from the same schedule and layout). At the end of each round the receiver computes
// the CRC32C of every block it received in that round and compares it with the owner's
// value that came with it, so corruption is found at the hop where it happened:
//
//   block 2 (from rank 2) corrupted: received from peer 0 in round 1 of algorithm ring,
//   crc expected 0x1c2d3e4f got 0x9a8b7c6d
//
// The rank that finds it marks the block's entry (found_by, found_round) and goes on to
// the end of the schedule, forwarding the mark, so no peer is left waiting; at the end
// it throws agx::Error(MPI_ERR_OTHER). A rank that receives a marked block, directly or
// further down, throws too, naming the rank and round where it was found. Ranks that
// never receive the bad block finish normally.
//
// lib/hier's shared-memory and hierarchical paths (EndToEnd): the owner's CRC is taken
// before the call, all CRCs are exchanged on the communicator's private duplicate after
// it, and every rank checks every block it holds; the hop is reported as "the
// shared-memory stage" (copies through the segment and, across nodes, the leaders'
// exchange). A blocking call all-gathers the CRCs (PMPI_Iallgather, advancing the
// process's pending calls while it waits, as any blocking wait of agx does); a nonblocking or
// persistent one sends its CRC to every other rank as point-to-point messages on a tag
// of its own, posted once its rounds are done and completed by test() (post(), test()),
// so that nothing waits inside start() and calls in flight together never meet.
//
// The test seam AGX_TEST_FLIP=<rank>:<round> flips bit 0 of the first byte of the first
// non-empty block that rank receives in that round, before the check (lib/hier: round 0,
// after the call). It acts whether or not AGX_INTEGRITY is on — without it the corrupted
// result goes unnoticed, which the tests show — and reports every flip on stderr. It
// exists for tests only.

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/config.hpp"
#include "core/schedule.hpp"
#include "core/timeout.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace agx {

/// What a schedule run checks besides moving data, and how it names itself.
struct Checks {
  std::string_view algorithm = "point-to-point";  ///< named in diagnoses and errors
  std::string_view stage;                         ///< more words, e.g. which stage of a path
  bool integrity = false;                         ///< AGX_INTEGRITY
  std::optional<FlipSeam> flip;                   ///< AGX_TEST_FLIP
  /// The checks of a call of `a` as the settings ask for them.
  static Checks of(Algorithm a);
  /// "ring" or "hierarchical (inter-node stage ...)".
  std::string name() const;
};

/// One block's entry in the checksum messages.
struct BlockCheck {
  std::uint32_t crc = 0;           ///< CRC32C computed by the block's owner
  std::int32_t found_by = -1;      ///< rank that found the block corrupted; -1: none yet
  std::int32_t found_round = -1;   ///< the round in which it did
};

/// The integrity checks and the flip seam of one rank's schedule run.
class RoundChecks {
 public:
  /// Whether a run with `checks` on `rank` needs a RoundChecks at all.
  static bool needed(const Checks& checks, int rank);

  RoundChecks(const Schedule& schedule, const Buffers& buffers, const Layout& layout,
              const Checks& checks);

  /// Whether checksum messages travel with the transfers (AGX_INTEGRITY).
  bool carries_checksums() const { return checks_.integrity; }
  /// The checksum message of transfer `i` of round `round` (its sends or its receives).
  std::span<BlockCheck> message(std::size_t round, bool is_send, std::size_t i);

  /// A start: the own block's CRC, no failure.
  void start();
  /// Before round `round` is posted: its outgoing checksum messages.
  void pack(std::size_t round);
  /// After round `round` completed: the flip seam, then the received blocks are checked.
  void end_round(std::size_t round);
  /// At the end of the schedule: throws agx::Error(MPI_ERR_OTHER) if a check failed.
  void finish();

 private:
  const Schedule& schedule_;
  Buffers buffers_;
  Layout layout_;
  Checks checks_;
  std::vector<BlockCheck> known_;  ///< per block, once held
  std::vector<BlockCheck> wire_;   ///< every checksum message of every round
  std::vector<std::vector<std::size_t>> send_at_, recv_at_;  ///< [round][transfer] into wire_
  std::string failure_;
  int more_failures_ = 0;
};

/// lib/hier's end-to-end check around one call (see above).
class EndToEnd {
 public:
  static bool needed(const Checks& checks, int rank);
  /// Before the call: the own block's CRC. `comm` is the communicator's private duplicate.
  EndToEnd(MPI_Comm comm, int rank, const Buffers& buffers, const Layout& layout,
           const Checks& checks);
  /// Withdraws the messages of a post() that test() did not complete (a failed call).
  ~EndToEnd();
  EndToEnd(const EndToEnd&) = delete;
  EndToEnd& operator=(const EndToEnd&) = delete;

  /// After a blocking call: the flip seam, the CRCs all-gathered (collective over `comm`
  /// when AGX_INTEGRITY is on; pending nonblocking calls advance meanwhile), every block
  /// checked; throws agx::Error(MPI_ERR_OTHER). Under AGX_TIMEOUT a wait for the CRCs
  /// that sees no progress for the timeout is reported as every other wait is
  /// (timeout.hpp), stage "end-to-end check (AGX_INTEGRITY)".
  void after();

  /// After a nonblocking call's rounds: the flip seam, then (AGX_INTEGRITY) this rank's
  /// CRC sent to every other rank and theirs received, on `tag` over `comm`. Waits for
  /// nobody; test() completes it.
  void post(int tag);
  /// Advances what post() started: true once every CRC is in and every block was
  /// checked. Throws what after() throws, with the same message; under AGX_TIMEOUT, a
  /// CRC that does not come for the timeout is reported with the ranks it waits for.
  bool test();

 private:
  void flip_seam();
  void check(const std::vector<std::uint32_t>& crcs);
  /// AGX_TIMEOUT: once `clock_` has seen no progress for the timeout, reports the stall
  /// of the CRC wait, naming what `waiting_for()` says (asked only then).
  template <class Text>
  void watch(Text waiting_for) {
    if (clock_ && clock_->stalled()) report_stall(waiting_for());
  }
  [[noreturn]] void report_stall(const std::string& waiting_for);

  MPI_Comm comm_;
  int rank_;
  Buffers buffers_;
  Layout layout_;
  Checks checks_;
  std::uint32_t own_crc_ = 0;
  std::vector<std::uint32_t> crcs_;    ///< post(): every rank's CRC, as it arrives
  std::vector<MPI_Request> requests_;  ///< post(): the receives, then the sends
  std::optional<StallClock> clock_;    ///< AGX_TIMEOUT: since the CRC wait last moved
  std::size_t open_ = 0;               ///< post(): requests not yet complete
};

/// "0x1c2d3e4f".
std::string hex32(std::uint32_t v);

}  // namespace agx
