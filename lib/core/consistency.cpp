#include "core/consistency.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/mpi_check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace agx {
namespace {

struct Summary {
  std::uint64_t sizes_hash;
  std::int32_t algorithm;
  std::int16_t radix;     // clamped: radices above 32767 compare as equal
  std::int16_t in_place;
  std::uint64_t nblocks;
};

std::uint64_t hash_sizes(const Layout& layout) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the block sizes
  for (int b = 0; b < layout.nranks(); ++b) {
    h ^= layout.bytes(b);
    h *= 1099511628211ull;
  }
  return h;
}

// PMPI_ on purpose: under the interposer, MPI_Allgather would re-enter agx.
template <class T>
std::vector<T> gather_all(MPI_Comm comm, int n, const T* mine, std::size_t count) {
  std::vector<T> all(count * static_cast<std::size_t>(n));
  const int bytes = static_cast<int>(count * sizeof(T));
  check_mpi(PMPI_Allgather(mine, bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, comm),
            "MPI_Allgather (checking mode)");
  return all;
}

}  // namespace

void check_consistency(CommContext& ctx, const Layout& layout, const AlgorithmChoice& algorithm,
                       bool in_place) {
  const int n = ctx.size();
  const Summary mine{hash_sizes(layout), static_cast<std::int32_t>(algorithm.id),
                     static_cast<std::int16_t>(std::min(algorithm.radix, 32767)),
                     static_cast<std::int16_t>(in_place ? 1 : 0),
                     static_cast<std::uint64_t>(layout.nranks())};
  const std::vector<Summary> all = gather_all(ctx.comm(), n, &mine, 1);
  const Summary& first = all[0];
  for (int r = 1; r < n; ++r) {
    const Summary& s = all[static_cast<std::size_t>(r)];
    if (s.algorithm != first.algorithm || s.radix != first.radix)
      throw Error(MPI_ERR_ARG, "agx (AGX_CHECK): rank " + std::to_string(r) + " runs algorithm '" +
                                   to_string(AlgorithmChoice{static_cast<Algorithm>(s.algorithm), s.radix}) +
                                   "', rank 0 runs '" +
                                   to_string(AlgorithmChoice{static_cast<Algorithm>(first.algorithm), first.radix}) +
                                   "' (AGX_ALGO or the algorithm option differs between ranks)");
    if (s.in_place != first.in_place)
      throw Error(MPI_ERR_ARG, "agx (AGX_CHECK): rank " + std::to_string(r) +
                                   (s.in_place ? " calls in place" : " does not call in place") +
                                   ", rank 0 " + (first.in_place ? "does" : "does not") +
                                   "; in place must be used by all ranks or none");
  }
  bool same_sizes = true;
  for (const Summary& s : all) same_sizes = same_sizes && s.sizes_hash == first.sizes_hash;
  if (same_sizes) return;
  // Every rank saw the mismatch: exchange the block sizes to name it.
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) sizes[static_cast<std::size_t>(b)] = layout.bytes(b);
  const std::vector<std::uint64_t> views = gather_all(ctx.comm(), n, sizes.data(), sizes.size());
  for (int r = 1; r < n; ++r)
    for (int b = 0; b < n; ++b) {
      const std::uint64_t theirs = views[static_cast<std::size_t>(r * n + b)];
      const std::uint64_t ref = views[static_cast<std::size_t>(b)];
      if (theirs != ref)
        throw Error(MPI_ERR_ARG, "agx (AGX_CHECK): rank " + std::to_string(r) + " expects " +
                                     std::to_string(theirs) + " bytes from rank " +
                                     std::to_string(b) + ", rank 0 expects " + std::to_string(ref) +
                                     " (counts or element sizes differ between ranks)");
    }
}

}  // namespace agx
