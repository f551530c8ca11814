#pragma once
// Helpers of the nonblocking tests: an analytic pattern per (salt, rank, element),
// guarded receive buffers (sentinel bytes on both sides and in gaps), byte-exact
// checks that name the first mismatch, and a failure counter reduced at the end.

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace nb_test {

constexpr unsigned char sentinel = 0xA5;
constexpr std::size_t guard = 64;

inline int failures = 0;

inline void fail(const std::string& what) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (failures++ < 10) std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
}

/// Element i of rank r's block in call `salt` (never equal to a sentinel word).
inline std::uint32_t value(unsigned salt, int r, std::size_t i) {
  std::uint64_t x = salt * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(r) << 40) ^ i;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<std::uint32_t>(x) | 1u;  // odd: never 0xA5A5A5A5
}

inline std::vector<std::uint32_t> block(unsigned salt, int r, std::size_t count) {
  std::vector<std::uint32_t> b(count);
  for (std::size_t i = 0; i < count; ++i) b[i] = value(salt, r, i);
  return b;
}

/// A receive buffer of `count` uint32 with guards; everything starts as sentinel.
class Guarded {
 public:
  explicit Guarded(std::size_t count) : store_(count * 4 + 2 * guard, sentinel), count_(count) {}
  std::uint32_t* data() { return reinterpret_cast<std::uint32_t*>(store_.data() + guard); }
  std::size_t size() const { return count_; }
  bool guards_ok() const {
    for (std::size_t i = 0; i < guard; ++i)
      if (store_[i] != sentinel || store_[store_.size() - 1 - i] != sentinel) return false;
    return true;
  }

 private:
  std::vector<unsigned char> store_;
  std::size_t count_;
};

/// Checks a uniform result: block r at r*count holds value(salt, r, .).
inline void check_uniform(Guarded& g, unsigned salt, int n, std::size_t count,
                          const std::string& what) {
  if (!g.guards_ok()) return fail(what + ": guard bytes changed");
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      if (const std::uint32_t got = g.data()[static_cast<std::size_t>(r) * count + i];
          got != value(salt, r, i)) {
        std::string seen = "unknown value";
        for (unsigned d = 1; d < 4; ++d)
          if (got == value(salt - d, r, i)) seen = "the value of salt - " + std::to_string(d);
        return fail(what + ": block " + std::to_string(r) + " element " + std::to_string(i) +
                    " holds " + seen);
      }
}

/// Checks a v result: block r (counts[r]) at displs[r]; every other element untouched.
inline void check_v(Guarded& g, unsigned salt, const std::vector<int>& counts,
                    const std::vector<int>& displs, const std::string& what) {
  if (!g.guards_ok()) return fail(what + ": guard bytes changed");
  std::vector<char> covered(g.size(), 0);
  for (std::size_t r = 0; r < counts.size(); ++r)
    for (int i = 0; i < counts[r]; ++i) {
      const auto at = static_cast<std::size_t>(displs[r] + i);
      covered[at] = 1;
      if (g.data()[at] != value(salt, static_cast<int>(r), static_cast<std::size_t>(i)))
        return fail(what + ": v block " + std::to_string(r) + " element " + std::to_string(i));
    }
  std::uint32_t sent;
  std::memset(&sent, sentinel, sizeof sent);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!covered[i] && g.data()[i] != sent) return fail(what + ": gap element " + std::to_string(i));
}

/// 0 when every rank passed; prints the summary on rank 0.
inline int finish(const char* name) {
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank == 0) std::printf("%s N=%d: %s (%d failures)\n", name, n, total ? "FAIL" : "ok", total);
  return total == 0 ? 0 : 1;
}

}  // namespace nb_test
