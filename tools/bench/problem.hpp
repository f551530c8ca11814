#pragma once
// One point of the sweep: the block layout of a form at a size (pattern of block sizes
// across ranks, contiguous displacements in rank order), the buffers, and the check of
// the received bytes against an analytic pattern.
//
//   regular    every rank `bytes`
//   one_large  rank N/2 holds at least half of the N*bytes total, the others share the rest
//   many_zero  only ranks 0, 4, 8, ... hold data (N*bytes split among them); the rest 0
//   ramp       rank r holds a share proportional to r+1 (linear ramp)
//
// Every form moves the same total, N*bytes, so that bandwidths compare across forms.

#include "options.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

struct Problem {
  Form form = Form::regular;
  bool in_place = false;
  std::size_t bytes_per_rank = 0;     ///< the sweep's size: total / N
  std::size_t total_bytes = 0;        ///< what every rank holds afterwards
  std::vector<std::size_t> counts;    ///< per-rank block bytes
  std::vector<std::size_t> displs;    ///< per-rank block offsets in the receive buffer
  std::vector<int> int_counts, int_displs;  ///< the same for MPI; empty when over INT_MAX

  Problem(Form f, bool in_place, std::size_t bytes, int nranks);
  bool fits_int() const { return !int_counts.empty(); }
};

/// Per-rank buffers of a problem: own block, receive buffer (plus guard bytes after it)
/// and, for the copy bound, a source that already holds the whole expected result.
class Buffers {
 public:
  static constexpr std::size_t guard_bytes = 64;

  /// `alloc`: where the receive buffer comes from (Settings::alloc).
  Buffers(const Problem& p, int rank, Alloc alloc = Alloc::heap);
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  std::vector<std::uint8_t>& send() { return send_; }
  std::uint8_t* recv() { return recv_; }
  /// The expected result, made on first use (the copy bound copies from it).
  const std::vector<std::uint8_t>& source();

  /// Receive buffer to zeros (never a pattern value), own block in place for in-place calls.
  void reset();
  /// True when every block holds its owner's pattern and the guard bytes are untouched.
  bool check() const;

 private:
  const Problem& p_;
  int rank_;
  Alloc alloc_;
  std::size_t recv_bytes_;
  std::uint8_t* recv_ = nullptr;
  std::vector<std::uint8_t> send_, heap_, source_;
};

}  // namespace bench
