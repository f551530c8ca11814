#pragma once
// The single-copy probe of a node's set-up (hier_context.cpp, node_set_up.cpp).

#include "hier/hier_context.hpp"

#include <mpi.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace agx::hier {

// Single copy is used only where it is faster than staging, which depends on the
// kernel (and on a virtual machine's hypervisor): process_vm_readv pins and maps the
// peer's pages. At setup every rank reads a 256 KiB buffer from its neighbour with
// process_vm_readv and copies it locally with memcpy (best of three each), and the
// node agrees on the slowest ratio. Staging writes each block twice (owner into the
// segment, reader out of it) where single copy writes it once through the kernel,
// so for a node of n ranks single copy wins when the kernel copy runs at more than
// (n-1)/n of memcpy's speed; agx asks for 10% more than that.
inline constexpr std::size_t probe_bytes = 256 * 1024;

inline std::uint64_t probe_value(std::int64_t pid) { return static_cast<std::uint64_t>(pid) * 7919u + 13u; }

template <class Copy>
inline double best_of_three(Copy copy) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const double t0 = MPI_Wtime();
    if (!copy()) return 0;
    best = std::min(best, MPI_Wtime() - t0);
  }
  return best;
}

/// Kernel copy speed relative to memcpy (1 = equal) reading `peer`'s probe buffer,
/// or 0 when process_vm_readv does not work between the two processes.
inline double probe_single_copy(const Slot& peer, std::byte* dst, const std::byte* local_src) {
  const auto read_peer = [&] {
    iovec local{dst, probe_bytes};
    iovec remote{reinterpret_cast<void*>(peer.address.load()), probe_bytes};
    return process_vm_readv(static_cast<pid_t>(peer.pid), &local, 1, &remote, 1, 0) ==
           static_cast<ssize_t>(probe_bytes);
  };
  std::uint64_t first = 0;
  if (!read_peer()) return 0;
  std::memcpy(&first, dst, sizeof first);
  if (first != probe_value(peer.pid)) return 0;
  const double kernel = best_of_three(read_peer);
  const double local = best_of_three([&] {
    std::memcpy(dst, local_src, probe_bytes);
    asm volatile("" ::"r"(dst) : "memory");  // keep the copy
    return true;
  });
  return kernel > 0 ? local / kernel : 0;
}

}  // namespace agx::hier
