#pragma once
// agx::Allgather<T>: the typed front end. Checks spans and counts, turns elements
// into bytes, and hands the call to libagx (bytes.hpp). Header-only.

#include <mpi.h>

#include <agx/bytes.hpp>
#include <agx/error.hpp>
#include <agx/options.hpp>
#include <agx/request.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <ranges>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace agx {

namespace detail {

/// The rank count; the first MPI call of every typed call, so it checks that MPI may be
/// called at all (check_mpi_usable, request.hpp).
inline int comm_size(MPI_Comm comm) {
  check_mpi_usable();
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  int n = 0;
  if (MPI_Comm_size(comm, &n) != MPI_SUCCESS) throw Error(MPI_ERR_COMM, "agx: invalid communicator");
  return n;
}

inline int comm_rank(MPI_Comm comm) {
  int r = 0;
  if (MPI_Comm_rank(comm, &r) != MPI_SUCCESS) throw Error(MPI_ERR_COMM, "agx: invalid communicator");
  return r;
}

/// count * elem_bytes, or an MPI_ERR_COUNT error when negative or overflowing.
template <std::integral I>
std::size_t checked_bytes(I count, std::size_t elem_bytes, const char* what, int index) {
  if constexpr (std::is_signed_v<I>) {
    if (count < 0)
      throw Error(MPI_ERR_COUNT, std::string("agx: negative ") + what + " " +
                                     std::to_string(count) + " at index " + std::to_string(index));
  }
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(count), elem_bytes, &bytes) ||
      bytes > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    throw Error(MPI_ERR_COUNT, std::string("agx: ") + what + " " + std::to_string(count) +
                                   " at index " + std::to_string(index) +
                                   " overflows the byte size");
  return bytes;
}

/// block_bytes * n, the bytes every rank receives, or an MPI_ERR_COUNT error when it
/// overflows or exceeds what a pointer difference can hold.
inline std::size_t check_total(std::size_t block_bytes, int n) {
  std::size_t total = 0;
  if (__builtin_mul_overflow(block_bytes, static_cast<std::size_t>(n), &total) ||
      total > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    throw Error(MPI_ERR_COUNT, "agx: " + std::to_string(n) + " blocks of " +
                                   std::to_string(block_bytes) +
                                   " bytes overflow the byte size of the receive buffer");
  return total;
}

template <class T>
void check_not_null(std::span<T> s, const char* what) {
  if (s.data() == nullptr && !s.empty())
    throw Error(MPI_ERR_BUFFER, std::string("agx: ") + what + " buffer is null with " +
                                    std::to_string(s.size()) + " elements");
}

template <class T>
void check_no_overlap(std::span<const T> send, std::span<T> recv) {
  if (send.empty() || recv.empty()) return;
  const auto* s0 = reinterpret_cast<const std::byte*>(send.data());
  const auto* r0 = reinterpret_cast<const std::byte*>(recv.data());
  const auto* s1 = s0 + send.size_bytes();
  const auto* r1 = r0 + recv.size_bytes();
  if (s0 < r1 && r0 < s1)
    throw Error(MPI_ERR_BUFFER,
                "agx: send and receive buffers overlap; use the in-place call instead");
}

}  // namespace detail

/// A contiguous range of integers: std::vector<int>, std::array<long, N>, std::span<const int>...
template <class R>
concept IntegralRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                        std::integral<std::ranges::range_value_t<R>>;

/// Typed all-gather over an intra-communicator, for any trivially copyable T.
/// Every call returns the algorithm that ran and throws agx::Error on bad input
/// (before any communication) or on an MPI failure.
template <class T>
class Allgather {
  static_assert(std::is_trivially_copyable_v<T>, "agx::Allgather<T> needs a trivially copyable T");

 public:
  explicit Allgather(MPI_Comm comm, Options options = {}) : comm_(comm), options_(options) {}

  /// Out of place: every rank contributes `send`; `recv` receives N * send.size()
  /// elements, rank i's block at i * send.size().
  Algorithm operator()(std::span<const T> send, std::span<T> recv) const {
    const Call c = out_of_place(send, recv);
    return allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  /// In place: rank r's block (recv.size() / N elements) is already at its place.
  Algorithm in_place(std::span<T> recv) const {
    const Call c = in_place_call(recv);
    return allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  /// The v form, out of place: rank i's counts[i] elements land at recv[displs[i]].
  /// Counts may be 0, displacements in any order; elements between blocks are untouched.
  /// Blocks must not overlap one another (MPI_ERR_ARG naming two of them; an empty block
  /// takes no room).
  template <IntegralRange C, IntegralRange D>
  Algorithm v(std::span<const T> send, std::span<T> recv, const C& counts,
              const D& displs) const {
    const Call c = v_call(send, recv, counts, displs);
    return allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  /// The v form, in place: rank r's block is already at recv[displs[r]].
  template <IntegralRange C, IntegralRange D>
  Algorithm v_in_place(std::span<T> recv, const C& counts, const D& displs) const {
    const Call c = v_in_place_call(recv, counts, displs);
    return allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  /// Nonblocking operator(): starts the call and returns its request (same checks,
  /// collective start order). Buffers stay untouched until the request completes.
  Request start(std::span<const T> send, std::span<T> recv) const {
    const Call c = out_of_place(send, recv);
    return start_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Nonblocking in_place().
  Request start_in_place(std::span<T> recv) const {
    const Call c = in_place_call(recv);
    return start_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Nonblocking v().
  template <IntegralRange C, IntegralRange D>
  Request start_v(std::span<const T> send, std::span<T> recv, const C& counts,
                  const D& displs) const {
    const Call c = v_call(send, recv, counts, displs);
    return start_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Nonblocking v_in_place().
  template <IntegralRange C, IntegralRange D>
  Request start_v_in_place(std::span<T> recv, const C& counts, const D& displs) const {
    const Call c = v_in_place_call(recv, counts, displs);
    return start_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  /// Persistent operator(): checks, chooses and prepares once for these buffers;
  /// each plan.start() then gathers their current content (collective).
  Plan plan(std::span<const T> send, std::span<T> recv) const {
    const Call c = out_of_place(send, recv);
    return plan_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Persistent in_place().
  Plan plan_in_place(std::span<T> recv) const {
    const Call c = in_place_call(recv);
    return plan_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Persistent v().
  template <IntegralRange C, IntegralRange D>
  Plan plan_v(std::span<const T> send, std::span<T> recv, const C& counts,
              const D& displs) const {
    const Call c = v_call(send, recv, counts, displs);
    return plan_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }
  /// Persistent v_in_place().
  template <IntegralRange C, IntegralRange D>
  Plan plan_v_in_place(std::span<T> recv, const C& counts, const D& displs) const {
    const Call c = v_in_place_call(recv, counts, displs);
    return plan_allgather_bytes(comm_, c.buffers, c.layout(), options_);
  }

  MPI_Comm comm() const { return comm_; }
  const Options& options() const { return options_; }

 private:
  friend class Group;  // agx/fused.hpp: a group member gets the same checks as a call

  struct VLayout {
    int rank = 0;
    std::vector<std::size_t> bytes, offsets;
  };

  /// A checked call in bytes: buffers plus a uniform or varying layout.
  struct Call {
    Buffers buffers;
    int n = 0;
    std::size_t block = 0;  // uniform block bytes
    VLayout vl;             // the v form (bytes non-empty)
    Layout layout() const {
      return vl.bytes.empty() ? Layout::uniform(n, block) : Layout::varying(vl.bytes, vl.offsets);
    }
  };

  Call out_of_place(std::span<const T> send, std::span<T> recv) const {
    Call c;
    c.n = detail::comm_size(comm_);
    detail::check_not_null(send, "send");
    detail::check_not_null(recv, "receive");
    c.block = detail::checked_bytes(send.size(), sizeof(T), "count", 0);
    check_recv_size(recv, send.size(), c.n);
    detail::check_no_overlap(send, recv);
    c.buffers = {send.data(), recv.data(), false};
    return c;
  }

  Call in_place_call(std::span<T> recv) const {
    Call c;
    c.n = detail::comm_size(comm_);
    detail::check_not_null(recv, "receive");
    if (recv.size() % static_cast<std::size_t>(c.n) != 0)
      throw Error(MPI_ERR_COUNT, "agx: in-place receive size " + std::to_string(recv.size()) +
                                     " is not a multiple of the rank count " + std::to_string(c.n));
    const std::size_t count = recv.size() / static_cast<std::size_t>(c.n);
    c.block = detail::checked_bytes(count, sizeof(T), "count", 0);
    detail::check_total(c.block, c.n);
    c.buffers = {nullptr, recv.data(), true};
    return c;
  }

  template <IntegralRange C, IntegralRange D>
  Call v_call(std::span<const T> send, std::span<T> recv, const C& counts,
              const D& displs) const {
    detail::check_not_null(send, "send");
    detail::check_not_null(recv, "receive");
    Call c;
    c.vl = v_layout(recv, counts, displs);
    c.n = static_cast<int>(c.vl.bytes.size());
    const std::size_t own = c.vl.bytes[static_cast<std::size_t>(c.vl.rank)] / sizeof(T);
    if (send.size() != own)
      throw Error(MPI_ERR_COUNT, "agx: send has " + std::to_string(send.size()) +
                                     " elements but counts[" + std::to_string(c.vl.rank) +
                                     "] is " + std::to_string(own));
    detail::check_no_overlap(send, recv);
    c.buffers = {send.data(), recv.data(), false};
    return c;
  }

  template <IntegralRange C, IntegralRange D>
  Call v_in_place_call(std::span<T> recv, const C& counts, const D& displs) const {
    detail::check_not_null(recv, "receive");
    Call c;
    c.vl = v_layout(recv, counts, displs);
    c.n = static_cast<int>(c.vl.bytes.size());
    c.buffers = {nullptr, recv.data(), true};
    return c;
  }

  static void check_recv_size(std::span<T> recv, std::size_t count, int n) {
    std::size_t need = 0;
    if (__builtin_mul_overflow(count, static_cast<std::size_t>(n), &need))
      throw Error(MPI_ERR_COUNT, "agx: count * ranks overflows");
    detail::check_total(count * sizeof(T), n);
    if (recv.size() < need)
      throw Error(MPI_ERR_COUNT, "agx: receive buffer holds " + std::to_string(recv.size()) +
                                     " elements, needs " + std::to_string(need) + " (" +
                                     std::to_string(n) + " ranks x " + std::to_string(count) + ")");
  }

  template <IntegralRange C, IntegralRange D>
  VLayout v_layout(std::span<T> recv, const C& counts, const D& displs) const {
    const int n = detail::comm_size(comm_);
    VLayout vl;
    vl.rank = detail::comm_rank(comm_);
    const std::size_t nc = std::ranges::size(counts), nd = std::ranges::size(displs);
    if (nc != static_cast<std::size_t>(n) || nd != static_cast<std::size_t>(n))
      throw Error(MPI_ERR_ARG, "agx: counts and displacements need " + std::to_string(n) +
                                   " entries, got " + std::to_string(nc) + " and " +
                                   std::to_string(nd));
    vl.bytes.resize(nc);
    vl.offsets.resize(nc);
    const auto* c = std::ranges::data(counts);
    const auto* d = std::ranges::data(displs);
    std::size_t total = 0;
    for (int i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const std::size_t count = detail::checked_bytes(c[u], 1, "count", i);
      const std::size_t displ = detail::checked_bytes(d[u], 1, "displacement", i);
      vl.bytes[u] = detail::checked_bytes(count, sizeof(T), "count", i);
      if (count > recv.size() || displ > recv.size() - count)
        throw Error(MPI_ERR_ARG, "agx: block " + std::to_string(i) + " (displacement " +
                                     std::to_string(displ) + ", count " + std::to_string(count) +
                                     ") ends past the receive buffer of " +
                                     std::to_string(recv.size()) + " elements");
      // In bytes the block must end inside the address range a pointer can span.
      detail::checked_bytes(displ + count, sizeof(T), "block end (displacement + count)", i);
      vl.offsets[u] = displ * sizeof(T);
      if (__builtin_add_overflow(total, vl.bytes[u], &total) ||
          total > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()))
        throw Error(MPI_ERR_COUNT, "agx: the blocks of counts[0.." + std::to_string(i) +
                                       "] add up to more bytes than a buffer can hold");
    }
    check_disjoint(vl);
    return vl;
  }

  /// Rejects blocks that share receive elements (each would overwrite the other), with
  /// MPI_ERR_ARG naming two of them. Empty blocks take no room. One pass where the
  /// non-empty blocks lie in ascending order (the usual layouts: nothing is allocated);
  /// else they are sorted by offset once, O(N log N).
  static void check_disjoint(const VLayout& vl) {
    const std::size_t n = vl.bytes.size();
    const auto end = [&](std::size_t b) { return vl.offsets[b] + vl.bytes[b]; };
    std::size_t last = n;  // the last non-empty block so far
    bool ascending = true;
    for (std::size_t b = 0; b < n && ascending; ++b) {
      if (vl.bytes[b] == 0) continue;
      if (last != n && vl.offsets[b] < vl.offsets[last]) ascending = false;
      else if (last != n && end(last) > vl.offsets[b]) throw overlap(vl, last, b);
      else last = b;
    }
    if (ascending) return;
    std::vector<std::size_t> order;
    for (std::size_t b = 0; b < n; ++b)
      if (vl.bytes[b] > 0) order.push_back(b);
    std::ranges::sort(order, [&](std::size_t a, std::size_t b) {
      return vl.offsets[a] != vl.offsets[b] ? vl.offsets[a] < vl.offsets[b] : a < b;
    });
    for (std::size_t k = 1; k < order.size(); ++k)
      if (end(order[k - 1]) > vl.offsets[order[k]])
        throw overlap(vl, std::min(order[k - 1], order[k]), std::max(order[k - 1], order[k]));
  }

  static Error overlap(const VLayout& vl, std::size_t a, std::size_t b) {
    const auto block = [&](std::size_t i) {
      return "block " + std::to_string(i) + ": displacement " +
             std::to_string(vl.offsets[i] / sizeof(T)) + ", count " +
             std::to_string(vl.bytes[i] / sizeof(T));
    };
    return Error(MPI_ERR_ARG, "agx: blocks " + std::to_string(a) + " and " + std::to_string(b) +
                                  " overlap in the receive buffer (" + block(a) + "; " +
                                  block(b) + ")");
  }

  MPI_Comm comm_;
  Options options_;
};

/// One-shot helpers with the same checks as Allgather<T>.
template <class T>
Algorithm allgather(MPI_Comm comm, std::span<const T> send, std::span<T> recv, Options o = {}) {
  return Allgather<T>(comm, o)(send, recv);
}

}  // namespace agx
