#include "core/descriptors.hpp"

#include "core/mpi_check.hpp"

#include <algorithm>

namespace agx {

CompiledSchedule::CompiledSchedule(const Schedule& schedule, const Layout& layout, bool in_place,
                                   std::size_t max_message_bytes)
    : schedule_(&schedule),
      in_place_(in_place),
      max_message_bytes_(max_message_bytes),
      nranks_(layout.nranks()),
      uniform_(layout.is_uniform()) {
  if (uniform_) {
    uniform_bytes_ = nranks_ > 0 ? layout.bytes(0) : 0;
    layout_ = Layout::uniform(nranks_, uniform_bytes_);
  } else {
    for (int b = 0; b < nranks_; ++b) {
      bytes_.push_back(layout.bytes(b));
      offsets_.push_back(layout.offset(b));
    }
    layout_ = Layout::varying(bytes_, offsets_);
  }
  try {
    for (std::size_t r = 0; r < schedule.rounds.size() && usable_; ++r) {
      const Round& round = schedule.rounds[r];
      round_first_.push_back(transfer_begin_.size());
      recvs_.push_back(round.recvs.size());
      for (const Transfer& t : round.recvs) compile_transfer(t, r == 0, max_message_bytes);
      for (const Transfer& t : round.sends) compile_transfer(t, r == 0, max_message_bytes);
    }
  } catch (...) {
    for (MPI_Datatype& t : types_) MPI_Type_free(&t);
    throw;
  }
  transfer_begin_.push_back(messages_.size());
  runs_ = {};
}

CompiledSchedule::~CompiledSchedule() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  for (MPI_Datatype& t : types_) MPI_Type_free(&t);
}

bool CompiledSchedule::matches(const Schedule& schedule, const Layout& layout, bool in_place,
                               std::size_t max_message_bytes) const {
  if (&schedule != schedule_ || in_place != in_place_ || max_message_bytes != max_message_bytes_ ||
      layout.nranks() != nranks_ || layout.is_uniform() != uniform_)
    return false;
  if (uniform_) return nranks_ == 0 || layout.bytes(0) == uniform_bytes_;
  for (int b = 0; b < nranks_; ++b) {
    const auto u = static_cast<std::size_t>(b);
    if (layout.bytes(b) != bytes_[u] || layout.offset(b) != offsets_[u]) return false;
  }
  return true;
}

std::span<const MessageDesc> CompiledSchedule::at(std::size_t r, std::size_t index) const {
  const std::size_t t = round_first_[r] + index;
  return {messages_.data() + transfer_begin_[t], transfer_begin_[t + 1] - transfer_begin_[t]};
}

// The transfer's memory as runs (adjacent ones merged, zero bytes dropped), cut into
// pieces of at most max_bytes exactly as plan_message cuts them (message.hpp), so that a
// compiled side and a per-call side pair piece for piece. Round 0 of an out-of-place call
// reads the own block from the send buffer; from round 1 it is in the receive buffer
// (Execution::start copies it there while round 0 runs), so later rounds describe it
// there, contiguous with its neighbours.
void CompiledSchedule::compile_transfer(const Transfer& t, bool round0, std::size_t max_bytes) {
  transfer_begin_.push_back(messages_.size());
  if (t.place != Place::buffer) {
    usable_ = false;
    return;
  }
  runs_.clear();
  std::size_t piece_first = 0;  // first run of the current piece
  std::size_t room = 0;         // bytes left in the current piece
  for (const BlockSpan& span : t.blocks) {
    for (int b = span.first; b < span.first + span.count; ++b) {
      const bool from_send = round0 && !in_place_ && b == schedule_->rank;
      std::size_t offset = from_send ? 0 : layout_.offset(b);
      std::size_t bytes = layout_.bytes(b);
      while (bytes > 0) {
        if (room == 0) {
          if (runs_.size() > piece_first) describe_piece(piece_first, runs_.size());
          piece_first = runs_.size();
          room = max_bytes;
        }
        const std::size_t take = std::min(bytes, room);
        Run* last = runs_.size() > piece_first ? &runs_.back() : nullptr;
        if (last != nullptr && last->from_send == from_send && last->offset + last->bytes == offset)
          last->bytes += take;
        else
          runs_.push_back({from_send, offset, take});
        offset += take;
        bytes -= take;
        room -= take;
      }
    }
  }
  if (runs_.size() > piece_first) describe_piece(piece_first, runs_.size());
}

void CompiledSchedule::describe_piece(std::size_t first_run, std::size_t end_run) {
  const Run& first = runs_[first_run];
  MessageDesc m{first.from_send, first.offset, static_cast<int>(first.bytes), MPI_BYTE,
                first.bytes};
  if (end_run - first_run > 1) {
    // several runs: an hindexed type, displacements from the first run's first byte
    const auto n = end_run - first_run;
    std::vector<int> lengths(n);
    std::vector<MPI_Aint> displacements(n);
    m.bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Run& run = runs_[first_run + i];
      if (run.from_send != first.from_send) usable_ = false;  // never in a valid schedule
      lengths[i] = static_cast<int>(run.bytes);
      displacements[i] =
          static_cast<MPI_Aint>(run.offset) - static_cast<MPI_Aint>(first.offset);
      m.bytes += run.bytes;
    }
    MPI_Datatype type = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_create_hindexed(static_cast<int>(n), lengths.data(), displacements.data(),
                                       MPI_BYTE, &type),
              "MPI_Type_create_hindexed");
    types_.push_back(type);  // freed with this, even if commit fails
    check_mpi(MPI_Type_commit(&types_.back()), "MPI_Type_commit");
    m.count = 1;
    m.type = types_.back();
  }
  messages_.push_back(m);
}

DescriptorCache::DescriptorCache(std::size_t capacity) : capacity_(capacity) {
  entries_.reserve(capacity);
}

std::shared_ptr<CompiledSchedule> DescriptorCache::find(const Schedule& schedule,
                                                        const Layout& layout, bool in_place,
                                                        std::size_t max_message_bytes) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i]->matches(schedule, layout, in_place, max_message_bytes)) continue;
    if (i > 0)
      std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i),
                  entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    return entries_.front();
  }
  return nullptr;
}

std::shared_ptr<CompiledSchedule> DescriptorCache::compile(const Schedule& schedule,
                                                           const Layout& layout, bool in_place,
                                                           std::size_t max_message_bytes) {
  if (capacity_ == 0) return nullptr;
  auto c = std::make_shared<CompiledSchedule>(schedule, layout, in_place, max_message_bytes);
  std::lock_guard lock(mutex_);
  ++compilations_;
  if (entries_.size() >= capacity_) entries_.pop_back();  // a pending call keeps its own
  entries_.insert(entries_.begin(), c);
  return c;
}

std::size_t DescriptorCache::size() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t DescriptorCache::compilations() {
  std::lock_guard lock(mutex_);
  return compilations_;
}

}  // namespace agx
