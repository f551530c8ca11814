#include "core/executor.hpp"

#include "core/mpi_check.hpp"

#include <cstring>
#include <mutex>
#include <set>

namespace agx {
namespace {

std::mutex abandoned_mutex;
std::set<MPI_Comm> abandoned;  // communicators with an abandoned round (free_comm)

}  // namespace

void mark_abandoned(MPI_Comm comm) noexcept {
  try {
    std::lock_guard lock(abandoned_mutex);
    abandoned.insert(comm);
  } catch (...) {  // out of memory: the communicator is freed as usual
  }
}

void free_comm(MPI_Comm& comm) noexcept {
  if (comm == MPI_COMM_NULL) return;
  {
    std::lock_guard lock(abandoned_mutex);
    if (abandoned.erase(comm) > 0) {
      comm = MPI_COMM_NULL;  // kept allocated on purpose until MPI_Finalize
      return;
    }
  }
  MPI_Comm_free(&comm);
}

Execution::Execution(const Schedule& schedule, const Buffers& buffers, const Layout& layout,
                     MPI_Comm comm, int tag, std::size_t max_message_bytes)
    : schedule_(schedule),
      buffers_(buffers),
      layout_(layout),
      comm_(comm),
      tag_(tag),
      max_message_bytes_(max_message_bytes) {}

Execution::~Execution() { abandon(); }

// After a failed MPI call the round's other requests may still be in flight, pointing
// into the caller's buffers. Receives are cancelled and completed (one already matched
// completes with its data, which its sender has posted); sends are freed, so that MPI
// completes them in the background (MPI libraries need not cancel sends, and Open MPI
// does not). The datatypes of the round are freed. Nothing is left that could write
// into the caller's memory once the exception reaches them. A peer's message of this
// round may still arrive: the communicator is marked so that it is never freed
// (free_comm). Never throws.
void Execution::abandon() noexcept {
  if (started_ && round_ < schedule_.rounds.size()) mark_abandoned(comm_);
  round_ = schedule_.rounds.size();  // nothing more is posted
  if (requests_.empty() && types_.empty()) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    MPI_Request& r = requests_[i];
    if (r == MPI_REQUEST_NULL) continue;
    if (i < receives_) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&r);
    }
  }
  requests_.clear();
  receives_ = 0;
  for (MPI_Datatype& t : types_) MPI_Type_free(&t);
  types_.clear();
}

void Execution::start() {
  round_ = 0;
  started_ = true;
  try {
    if (!schedule_.rounds.empty()) post_round();
  } catch (...) {
    abandon();
    throw;
  }
  // The own block travels from the send buffer, so this copy overlaps round 0.
  const std::size_t own = layout_.bytes(schedule_.rank);
  if (!buffers_.in_place && own > 0)
    std::memcpy(static_cast<std::byte*>(buffers_.recv) + layout_.offset(schedule_.rank),
                buffers_.send, own);
}

bool Execution::test() {
  try {
    while (round_ < schedule_.rounds.size()) {
      int done = 0;
      check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                            MPI_STATUSES_IGNORE),
                "MPI_Testall");
      if (!done) return false;
      end_round();
    }
  } catch (...) {
    abandon();
    throw;
  }
  return true;
}

void Execution::wait() {
  try {
    while (round_ < schedule_.rounds.size()) {
      check_mpi(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(),
                            MPI_STATUSES_IGNORE),
                "MPI_Waitall");
      end_round();
    }
  } catch (...) {
    abandon();
    throw;
  }
}

void Execution::end_round() {
  requests_.clear();
  receives_ = 0;
  for (MPI_Datatype& t : types_) MPI_Type_free(&t);
  types_.clear();
  if (++round_ < schedule_.rounds.size()) post_round();
}

void Execution::post_round() {
  const Round& round = schedule_.rounds[round_];
  // Receives first, so that eager sends find a posted buffer.
  for (int pass = 0; pass < 2; ++pass) {
    const bool is_send = pass == 1;
    for (const Transfer& t : is_send ? round.sends : round.recvs) {
      plan_message(t, schedule_.rank, buffers_, layout_, max_message_bytes_, message_);
      for (std::size_t i = 0; i < message_.pieces(); ++i) {
        const std::size_t b = message_.piece_begin[i], e = message_.piece_begin[i + 1];
        post(is_send, t.peer, message_.segments.data() + b, e - b);
      }
    }
  }
}

MessageArgs message_args(const Segment* segments, std::size_t count,
                         std::vector<MPI_Datatype>& types) {
  MessageArgs m{segments[0].ptr, static_cast<int>(segments[0].bytes), MPI_BYTE};
  if (count == 1) return m;
  // several memory pieces in one message: describe them with a datatype
  std::vector<int> lengths(count);
  std::vector<MPI_Aint> addresses(count);
  for (std::size_t i = 0; i < count; ++i) {
    lengths[i] = static_cast<int>(segments[i].bytes);
    check_mpi(MPI_Get_address(segments[i].ptr, &addresses[i]), "MPI_Get_address");
  }
  MPI_Datatype type = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_create_hindexed(static_cast<int>(count), lengths.data(), addresses.data(),
                                     MPI_BYTE, &type),
            "MPI_Type_create_hindexed");
  types.push_back(type);  // freed by the caller, even if commit fails
  check_mpi(MPI_Type_commit(&types.back()), "MPI_Type_commit");
  return {MPI_BOTTOM, 1, types.back()};
}

void Execution::post(bool is_send, int peer, const Segment* segments, std::size_t count) {
  MPI_Request request = MPI_REQUEST_NULL;
  const MessageArgs m = message_args(segments, count, types_);
  if (is_send)
    check_mpi(MPI_Isend(m.base, m.count, m.type, peer, tag_, comm_, &request), "MPI_Isend");
  else
    check_mpi(MPI_Irecv(m.base, m.count, m.type, peer, tag_, comm_, &request), "MPI_Irecv");
  requests_.push_back(request);
  if (!is_send) ++receives_;
}

void execute(const Schedule& schedule, const Buffers& buffers, const Layout& layout, MPI_Comm comm,
             int tag, std::size_t max_message_bytes) {
  Execution e(schedule, buffers, layout, comm, tag, max_message_bytes);
  e.start();
  e.wait();
}

}  // namespace agx
