// Block layouts of the sweep's forms, and the analytic data pattern that checks them.

#include "problem.hpp"

#include <agx/allocate.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

namespace bench {
namespace {

// Byte i of rank r's block: 1..251, never 0, so that an unwritten (zeroed) byte fails.
// Filled incrementally: value = (r*131 + i*7) mod 251 + 1.
void fill_pattern(std::uint8_t* out, std::size_t n, int r) {
  unsigned v = static_cast<unsigned>(r) * 131u % 251u;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::uint8_t>(v + 1);
    v += 7;
    if (v >= 251) v -= 251;
  }
}

bool matches_pattern(const std::uint8_t* in, std::size_t n, int r) {
  unsigned v = static_cast<unsigned>(r) * 131u % 251u;
  for (std::size_t i = 0; i < n; ++i) {
    if (in[i] != static_cast<std::uint8_t>(v + 1)) return false;
    v += 7;
    if (v >= 251) v -= 251;
  }
  return true;
}

std::vector<std::size_t> block_sizes(Form f, std::size_t total, int nranks) {
  const auto n = static_cast<std::size_t>(nranks);
  std::vector<std::size_t> c(n, 0);
  switch (f) {
    case Form::regular:
      std::fill(c.begin(), c.end(), total / n);
      break;
    case Form::one_large: {
      const std::size_t big = n / 2;
      const std::size_t small = n > 1 ? total / (2 * (n - 1)) : 0;
      for (std::size_t r = 0; r < n; ++r) c[r] = r == big ? 0 : small;
      c[big] = total - small * (n - 1);
      break;
    }
    case Form::many_zero: {
      const std::size_t holders = (n + 3) / 4;
      for (std::size_t r = 0; r < n; r += 4) c[r] = total / holders;
      c[(holders - 1) * 4] += total % holders;
      break;
    }
    case Form::ramp: {
      const std::size_t weights = n * (n + 1) / 2;
      std::size_t sum = 0;
      for (std::size_t r = 0; r < n; ++r) sum += c[r] = total / weights * (r + 1);
      c[n - 1] += total - sum;
      break;
    }
  }
  return c;
}

}  // namespace

Problem::Problem(Form f, bool in_place_, std::size_t bytes, int nranks)
    : form(f), in_place(in_place_), bytes_per_rank(bytes),
      total_bytes(bytes * static_cast<std::size_t>(nranks)) {
  counts = block_sizes(f, total_bytes, nranks);
  displs.resize(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = at;
    at += counts[r];
  }
  if (total_bytes <= static_cast<std::size_t>(INT_MAX)) {
    int_counts.assign(counts.begin(), counts.end());
    int_displs.assign(displs.begin(), displs.end());
  }
}

Buffers::Buffers(const Problem& p, int rank, Alloc alloc)
    : p_(p), rank_(rank), alloc_(alloc), recv_bytes_(p.total_bytes + guard_bytes),
      send_(p.counts[static_cast<std::size_t>(rank)]) {
  fill_pattern(send_.data(), send_.size(), rank);
  if (alloc_ == Alloc::shared) {
    recv_ = static_cast<std::uint8_t*>(agx::allocate(recv_bytes_));
  } else if (alloc_ == Alloc::mpi) {
    if (MPI_Alloc_mem(static_cast<MPI_Aint>(recv_bytes_), MPI_INFO_NULL, &recv_) != MPI_SUCCESS)
      throw std::bad_alloc();
  } else {
    heap_.resize(recv_bytes_);
    recv_ = heap_.data();
  }
}

Buffers::~Buffers() {
  if (alloc_ == Alloc::shared) agx::deallocate(recv_);
  if (alloc_ == Alloc::mpi) MPI_Free_mem(recv_);
}

const std::vector<std::uint8_t>& Buffers::source() {
  if (source_.size() != p_.total_bytes) {
    source_.resize(p_.total_bytes);
    for (std::size_t r = 0; r < p_.counts.size(); ++r)
      fill_pattern(source_.data() + p_.displs[r], p_.counts[r], static_cast<int>(r));
  }
  return source_;
}

void Buffers::reset() {
  std::fill(recv_, recv_ + recv_bytes_, 0);
  if (p_.in_place)
    std::memcpy(recv_ + p_.displs[static_cast<std::size_t>(rank_)], send_.data(), send_.size());
}

bool Buffers::check() const {
  for (std::size_t r = 0; r < p_.counts.size(); ++r)
    if (!matches_pattern(recv_ + p_.displs[r], p_.counts[r], static_cast<int>(r))) return false;
  return std::all_of(recv_ + p_.total_bytes, recv_ + recv_bytes_,
                     [](std::uint8_t b) { return b == 0; });
}

}  // namespace bench
