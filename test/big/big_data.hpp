#pragma once
// Data of the big-count tests (test_big.cpp, big_pmpi.cpp): 64-bit words whose value
// depends on the call, the rank and the word index (so a piece landing at the wrong
// offset, a stale block or an unwritten page all show), guard words around the
// receive buffer, a full check of every received word, and the memory check that
// skips the test (exit code 77) when the machine cannot hold its buffers.

#include <mpi.h>

#include <sys/mman.h>
#include <sys/statvfs.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

namespace big_test {

/// 2^31 + 4096 bytes: larger than INT_MAX, a whole number of words and of 4 KiB pages.
constexpr std::size_t default_block_bytes = (std::size_t{1} << 31) + 4096;
constexpr std::size_t guard_words = 512;
constexpr std::uint64_t sentinel = 0xA5A5A5A5A5A5A5A5ull;

/// Word i of rank r's block in call `salt`; odd, so never 0 (a page nobody wrote).
inline std::uint64_t value(unsigned salt, int r, std::size_t i) {
  return (i * 0x9E3779B97F4A7C15ull) ^ ((static_cast<std::uint64_t>(r) + 1) << 48) ^
         (static_cast<std::uint64_t>(salt) * 0xD1B54A32D192ED03ull) ^ 1ull;
}

inline void fill(std::uint64_t* p, unsigned salt, int r, std::size_t words) {
  for (std::size_t i = 0; i < words; ++i) p[i] = value(salt, r, i);
}

/// A receive buffer of `words` 64-bit words between two guards of sentinel words.
/// The data words are left untouched (zero pages until written). Transparent huge
/// pages where the kernel offers them: first touch of fresh memory is most of these
/// tests' run time, and fewer page faults make it shorter.
class Buffer {
 public:
  explicit Buffer(std::size_t words) : bytes_((words + 2 * guard_words) * 8), words_(words) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes_, MADV_HUGEPAGE);  // advice only: ignored where unsupported
    store_ = static_cast<std::uint64_t*>(p);
    for (std::size_t i = 0; i < guard_words; ++i)
      store_[i] = store_[guard_words + words + i] = sentinel;
  }
  ~Buffer() { munmap(store_, bytes_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::uint64_t* data() { return store_ + guard_words; }
  std::size_t size() const { return words_; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < guard_words; ++i)
      if (store_[i] != sentinel || store_[guard_words + words_ + i] != sentinel) return false;
    return true;
  }

 private:
  std::size_t bytes_;
  std::uint64_t* store_ = nullptr;
  std::size_t words_;
};

/// Checks every word of an n-block uniform result; returns an empty string or the
/// first problem.
inline std::string verify(Buffer& b, unsigned salt, int n, std::size_t block_words) {
  if (!b.guards_intact()) return "a guard word changed";
  for (int r = 0; r < n; ++r) {
    const std::uint64_t* p = b.data() + static_cast<std::size_t>(r) * block_words;
    for (std::size_t i = 0; i < block_words; ++i)
      if (p[i] != value(salt, r, i))
        return "block " + std::to_string(r) + " word " + std::to_string(i) + " (byte " +
               std::to_string(i * 8) + ") holds " + std::to_string(p[i]) + ", expected " +
               std::to_string(value(salt, r, i));
  }
  return {};
}

/// Bytes of MemAvailable in /proc/meminfo (0 when unreadable).
inline std::size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

/// Free bytes of /dev/shm (0 when it cannot be read).
inline std::size_t shm_available() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<std::size_t>(s.f_bavail) * s.f_frsize;
}

/// Rank 0 compares what the run needs with what the machine has and every rank learns
/// the answer: true when the test must skip (the reason is printed by rank 0).
inline bool must_skip(std::size_t need_memory, std::size_t need_shm) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int skip = 0;
  if (rank == 0) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const std::size_t mem = mem_available(), shm = shm_available();
    if (mem < need_memory) {
      std::printf("SKIP: needs %.1f GiB of memory, MemAvailable is %.1f GiB\n",
                  need_memory / gib, mem / gib);
      skip = 1;
    } else if (shm < need_shm) {
      std::printf("SKIP: needs %.1f GiB free in /dev/shm, %.1f GiB there\n", need_shm / gib,
                  shm / gib);
      skip = 1;
    }
    std::fflush(stdout);
  }
  MPI_Bcast(&skip, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return skip != 0;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Block size from argv[1] (bytes, a multiple of 4096), else the default.
inline std::size_t block_bytes_from(int argc, char** argv) {
  if (argc > 1) return static_cast<std::size_t>(std::stoull(argv[1]));
  return default_block_bytes;
}

}  // namespace big_test
