// One datatype element above 2 GiB through the interposer (issue 16, #3): a plain MPI
// program run under LD_PRELOAD=libagx_pmpi.so. The element is hvector(2, 1, stride,
// 1025 MiB of bytes): two runs of 1025 MiB with a 4 KiB gap, 2050 MiB of data, which
// MPI_Pack's int sizes cannot describe. Two calls at one rank:
//   receive: send 2050 elements of 1 MiB (contiguous), receive one big element;
//   send:    send one big element, receive 2050 elements of 1 MiB.
// Every word is checked, and the gap and the guards must stay untouched. The
// interposer's counter must show that agx served both calls.
// Memory: about 7 GiB; exit code 77 (skip) when the machine lacks it.

#include <mpi.h>

#include "big_data.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace big_test;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t run_bytes = 1025 * mib, gap_bytes = 4096;
constexpr std::size_t data_bytes = 2 * run_bytes, span_bytes = data_bytes + gap_bytes;

MPI_Datatype big_element() {
  MPI_Datatype run = MPI_DATATYPE_NULL, element = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(static_cast<int>(run_bytes), MPI_BYTE, &run);
  MPI_Type_create_hvector(2, 1, static_cast<MPI_Aint>(run_bytes + gap_bytes), run, &element);
  MPI_Type_commit(&element);
  MPI_Type_free(&run);
  return element;
}

// Word i of the data (gap excluded) sits at word i of run 0 or after the gap.
std::size_t spread(std::size_t i) {
  const std::size_t per_run = run_bytes / 8;
  return i < per_run ? i : i + gap_bytes / 8;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 1) {
    std::printf("big_element runs at one rank\n");
    MPI_Finalize();
    return 1;
  }
  if (must_skip(4 * span_bytes + (std::size_t{1} << 30), 0)) {
    MPI_Finalize();
    return 77;
  }
  using calls_fn = unsigned long long (*)(const char*);
  const auto calls = reinterpret_cast<calls_fn>(dlsym(RTLD_DEFAULT, "agx_pmpi_calls"));
  MPI_Datatype element = big_element(), one_mib = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(static_cast<int>(mib), MPI_BYTE, &one_mib);
  MPI_Type_commit(&one_mib);
  const int pieces = static_cast<int>(data_bytes / mib);
  const std::size_t words = data_bytes / 8, span_words = span_bytes / 8;
  std::string problem;
  int failures = 0;

  {  // receive one big element
    Buffer send(words), recv(span_words);
    fill(send.data(), 1, 0, words);
    for (std::size_t i = 0; i < gap_bytes / 8; ++i) recv.data()[run_bytes / 8 + i] = sentinel;
    const int rc = MPI_Allgather(send.data(), pieces, one_mib, recv.data(), 1, element, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) problem = "receive: MPI_Allgather returned " + std::to_string(rc);
    for (std::size_t i = 0; i < words && problem.empty(); ++i)
      if (recv.data()[spread(i)] != value(1, 0, i)) problem = "receive: word " + std::to_string(i) + " differs";
    for (std::size_t i = 0; i < gap_bytes / 8 && problem.empty(); ++i)
      if (recv.data()[run_bytes / 8 + i] != sentinel) problem = "receive: the gap was written";
    if (problem.empty() && !recv.guards_intact()) problem = "receive: a guard word changed";
    std::printf("receive one %zu-byte element: %s\n", data_bytes, problem.empty() ? "ok" : problem.c_str());
    failures += !problem.empty();
  }
  problem.clear();
  {  // send one big element
    Buffer send(span_words), recv(words);
    for (std::size_t i = 0; i < words; ++i) send.data()[spread(i)] = value(2, 0, i);
    const int rc = MPI_Allgather(send.data(), 1, element, recv.data(), pieces, one_mib, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) problem = "send: MPI_Allgather returned " + std::to_string(rc);
    for (std::size_t i = 0; i < words && problem.empty(); ++i)
      if (recv.data()[i] != value(2, 0, i)) problem = "send: word " + std::to_string(i) + " differs";
    if (problem.empty() && !recv.guards_intact()) problem = "send: a guard word changed";
    std::printf("send one %zu-byte element: %s\n", data_bytes, problem.empty() ? "ok" : problem.c_str());
    failures += !problem.empty();
  }
  const unsigned long long served = calls != nullptr ? calls(nullptr) : 0;
  std::printf("calls served by agx: %llu (of 2)\n", served);
  if (served < 2) failures += 1;
  MPI_Type_free(&element);
  MPI_Type_free(&one_mib);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
