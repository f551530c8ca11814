// Integrity checks and the flip seam (integrity.hpp).

#include "core/integrity.hpp"

#include <agx/error.hpp>

#include "core/crc32c.hpp"
#include "core/mpi_check.hpp"
#include "core/nonblocking.hpp"

#include <cstdio>

namespace agx {
namespace {

std::byte* recv_block(const Buffers& b, const Layout& l, int block) {
  return static_cast<std::byte*>(b.recv) + l.offset(block);
}

const void* own_block(const Buffers& b, const Layout& l, int rank) {
  return b.in_place ? static_cast<const void*>(recv_block(b, l, rank)) : b.send;
}

void flip(std::byte* p, int rank, int block, const std::string& where) {
  *p ^= std::byte{1};
  std::fprintf(stderr, "agx: AGX_TEST_FLIP: rank %d flipped bit 0 of block %d %s\n", rank, block,
               where.c_str());
  std::fflush(stderr);
}

bool flips_here(const Checks& c, int rank, std::size_t round) {
  return c.flip && c.flip->rank == rank && static_cast<std::size_t>(c.flip->round) == round;
}

}  // namespace

Checks Checks::of(Algorithm a) {
  const Config& c = config();
  Checks k;
  k.algorithm = to_string(a);
  k.integrity = c.integrity;
  k.flip = c.flip;
  return k;
}

std::string Checks::name() const {
  std::string s(algorithm);
  if (!stage.empty()) s += " (" + std::string(stage) + ")";
  return s;
}

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

bool RoundChecks::needed(const Checks& checks, int rank) {
  return checks.integrity || (checks.flip && checks.flip->rank == rank);
}

RoundChecks::RoundChecks(const Schedule& schedule, const Buffers& buffers, const Layout& layout,
                         const Checks& checks)
    : schedule_(schedule), buffers_(buffers), layout_(layout), checks_(checks) {
  if (!checks_.integrity) return;
  known_.resize(static_cast<std::size_t>(schedule.nranks));
  const std::size_t nrounds = schedule.rounds.size();
  send_at_.resize(nrounds);
  recv_at_.resize(nrounds);
  std::size_t at = 0;
  for (std::size_t r = 0; r < nrounds; ++r) {
    for (const Transfer& t : schedule.rounds[r].sends) {
      send_at_[r].push_back(at);
      at += static_cast<std::size_t>(block_count(t.blocks));
    }
    for (const Transfer& t : schedule.rounds[r].recvs) {
      recv_at_[r].push_back(at);
      at += static_cast<std::size_t>(block_count(t.blocks));
    }
  }
  wire_.resize(at);
}

std::span<BlockCheck> RoundChecks::message(std::size_t round, bool is_send, std::size_t i) {
  const Round& r = schedule_.rounds[round];
  const Transfer& t = is_send ? r.sends[i] : r.recvs[i];
  const std::size_t at = (is_send ? send_at_ : recv_at_)[round][i];
  return {wire_.data() + at, static_cast<std::size_t>(block_count(t.blocks))};
}

void RoundChecks::start() {
  failure_.clear();
  more_failures_ = 0;
  if (!checks_.integrity) return;
  const int me = schedule_.rank;
  known_[static_cast<std::size_t>(me)] =
      BlockCheck{crc32c(own_block(buffers_, layout_, me), layout_.bytes(me)), -1, -1};
}

void RoundChecks::pack(std::size_t round) {
  if (!checks_.integrity) return;
  const Round& r = schedule_.rounds[round];
  for (std::size_t i = 0; i < r.sends.size(); ++i) {
    BlockCheck* out = message(round, true, i).data();
    for (const BlockSpan& s : r.sends[i].blocks)
      for (int b = s.first; b < s.first + s.count; ++b) *out++ = known_[static_cast<std::size_t>(b)];
  }
}

void RoundChecks::end_round(std::size_t round) {
  const Round& r = schedule_.rounds[round];
  const int me = schedule_.rank;
  if (flips_here(checks_, me, round)) {
    bool done = false;
    for (const Transfer& t : r.recvs)
      for (const BlockSpan& s : t.blocks)
        for (int b = s.first; b < s.first + s.count && !done; ++b)
          if (layout_.bytes(b) > 0) {
            flip(recv_block(buffers_, layout_, b), me, b,
                 "(received from peer " + std::to_string(t.peer) + ") in round " +
                     std::to_string(round) + " of algorithm " + checks_.name());
            done = true;
          }
  }
  if (!checks_.integrity) return;
  for (std::size_t i = 0; i < r.recvs.size(); ++i) {
    const Transfer& t = r.recvs[i];
    const BlockCheck* in = message(round, false, i).data();
    for (const BlockSpan& s : t.blocks)
      for (int b = s.first; b < s.first + s.count; ++b) {
        BlockCheck c = *in++;
        std::uint32_t got = 0;
        const bool marked = c.found_by >= 0;
        if (!marked) {
          got = crc32c(recv_block(buffers_, layout_, b), layout_.bytes(b));
          if (got == c.crc) {
            known_[static_cast<std::size_t>(b)] = c;
            continue;
          }
        }
        if (!failure_.empty()) {
          ++more_failures_;
        } else {
          const std::string block = "agx (AGX_INTEGRITY): block " + std::to_string(b) +
                                    " (from rank " + std::to_string(b) + ")";
          const std::string hop = "received from peer " + std::to_string(t.peer) + " in round " +
                                  std::to_string(round) + " of algorithm " + checks_.name();
          failure_ = marked ? block + " arrived marked corrupted: rank " +
                                  std::to_string(c.found_by) + " found it corrupted in round " +
                                  std::to_string(c.found_round) + " (" + hop + ")"
                            : block + " corrupted: " + hop + ", crc expected " + hex32(c.crc) +
                                  " got " + hex32(got);
        }
        if (!marked) {
          c.found_by = me;
          c.found_round = static_cast<std::int32_t>(round);
        }
        known_[static_cast<std::size_t>(b)] = c;
      }
  }
}

void RoundChecks::finish() {
  if (failure_.empty()) return;
  std::string text = std::move(failure_);
  failure_.clear();
  if (more_failures_ > 0)
    text += " (and " + std::to_string(more_failures_) + " more corrupted block(s))";
  more_failures_ = 0;
  throw Error(MPI_ERR_OTHER, text);
}

bool EndToEnd::needed(const Checks& checks, int rank) { return RoundChecks::needed(checks, rank); }

EndToEnd::EndToEnd(MPI_Comm comm, int rank, const Buffers& buffers, const Layout& layout,
                   const Checks& checks)
    : comm_(comm), rank_(rank), buffers_(buffers), layout_(layout), checks_(checks) {
  if (checks_.integrity) own_crc_ = crc32c(own_block(buffers_, layout_, rank_), layout_.bytes(rank_));
}

EndToEnd::~EndToEnd() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    MPI_Request& r = requests_[i];
    if (r == MPI_REQUEST_NULL) continue;
    if (i < requests_.size() / 2) MPI_Cancel(&r);  // a receive (the first half)
    MPI_Request_free(&r);                          // a send of 4 bytes completes on its own
  }
}

void EndToEnd::flip_seam() {
  const int n = layout_.nranks();
  if (flips_here(checks_, rank_, 0))
    for (int k = 1; k < n; ++k) {  // the first non-empty block after the own one
      const int b = (rank_ + k) % n;
      if (layout_.bytes(b) == 0) continue;
      flip(recv_block(buffers_, layout_, b), rank_, b,
           "in the shared-memory stage (round 0) of algorithm " + checks_.name());
      break;
    }
}

void EndToEnd::after() {
  flip_seam();
  if (!checks_.integrity) return;
  std::vector<std::uint32_t> crcs(static_cast<std::size_t>(layout_.nranks()));
  // PMPI_ on purpose: under the interposer, MPI_Iallgather would re-enter agx. Posted in
  // blocking-call order (the same on every rank); while it runs, this process's pending
  // nonblocking calls advance: a peer may wait in one of them (start(A) there, then this
  // call) for this rank's part of A, its CRC message included.
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(PMPI_Iallgather(&own_crc_, 4, MPI_BYTE, crcs.data(), 4, MPI_BYTE, comm_, &r),
            "MPI_Allgather (AGX_INTEGRITY)");
  if (timeout_seconds() > 0) clock_.emplace(timeout_seconds());
  try {
    progress_until([&] {
      int done = 0;
      check_mpi(PMPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Allgather (AGX_INTEGRITY)");
      if (!done) watch([] { return std::string("the other ranks' checksums (MPI_Allgather of the CRCs)"); });
      return done != 0;
    });
  } catch (...) {  // a stall (AGX_TIMEOUT_ACTION=error): a collective cannot be cancelled
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    throw;
  }
  check(crcs);
}

void EndToEnd::post(int tag) {
  flip_seam();
  if (!checks_.integrity) return;
  const int n = layout_.nranks();
  crcs_.assign(static_cast<std::size_t>(n), 0);
  crcs_[static_cast<std::size_t>(rank_)] = own_crc_;
  requests_.assign(2 * static_cast<std::size_t>(n - 1), MPI_REQUEST_NULL);
  std::size_t i = 0;
  for (int p = 0; p < n; ++p)
    if (p != rank_)
      check_mpi(MPI_Irecv(&crcs_[static_cast<std::size_t>(p)], 4, MPI_BYTE, p, tag, comm_,
                          &requests_[i++]),
                "MPI_Irecv (AGX_INTEGRITY)");
  for (int p = 0; p < n; ++p)
    if (p != rank_)
      check_mpi(MPI_Isend(&own_crc_, 4, MPI_BYTE, p, tag, comm_, &requests_[i++]),
                "MPI_Isend (AGX_INTEGRITY)");
  open_ = requests_.size();
  if (timeout_seconds() > 0) clock_.emplace(timeout_seconds());
}

bool EndToEnd::test() {
  if (!checks_.integrity) return true;
  if (open_ > 0) {
    thread_local std::vector<int> scratch;
    StallClock idle(0);  // (restarted by test_some only; clock_ is the one that counts)
    const std::size_t before = open_;
    open_ = test_some(requests_, scratch, open_, clock_ ? *clock_ : idle);
    if (open_ > 0) {
      if (open_ == before)
        watch([&] {
          std::string from;  // the receives (first half) still open
          for (std::size_t i = 0; i < requests_.size() / 2; ++i)
            if (requests_[i] != MPI_REQUEST_NULL) {
              const int p = static_cast<int>(i) < rank_ ? static_cast<int>(i) : static_cast<int>(i) + 1;
              from += (from.empty() ? "" : ", ") + rank_in(comm_, p);
            }
          return from.empty() ? std::string("its checksum messages to be sent") : "the checksum of " + from;
        });
      return false;
    }
  }
  requests_.clear();
  check(crcs_);
  return true;
}

void EndToEnd::report_stall(const std::string& waiting_for) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", clock_->seconds());
  report_hang(comm_, "agx: AGX_TIMEOUT: " + rank_in(comm_, rank_) + " made no progress for " +
                         secs + " s in algorithm " + std::string(checks_.algorithm) +
                         ", stage 'end-to-end check (AGX_INTEGRITY)': waiting for " + waiting_for);
}

void EndToEnd::check(const std::vector<std::uint32_t>& crcs) {
  const int n = layout_.nranks();
  std::string failure;
  int more = 0;
  for (int b = 0; b < n; ++b) {
    if (b == rank_) continue;
    const std::uint32_t want = crcs[static_cast<std::size_t>(b)];
    const std::uint32_t got = crc32c(recv_block(buffers_, layout_, b), layout_.bytes(b));
    if (got == want) continue;
    if (!failure.empty()) {
      ++more;
      continue;
    }
    failure = "agx (AGX_INTEGRITY): block " + std::to_string(b) + " (from rank " +
              std::to_string(b) + ") corrupted: in the shared-memory stage of algorithm " +
              checks_.name() + " (end-to-end check after the call), crc expected " + hex32(want) +
              " got " + hex32(got);
  }
  if (failure.empty()) return;
  if (more > 0) failure += " (and " + std::to_string(more) + " more corrupted block(s))";
  throw Error(MPI_ERR_OTHER, failure);
}

}  // namespace agx
