// The process-wide settings (lib/core/settings.hpp) through real MPI calls.
//
//   test_settings --tuning-once
//     rank 0 writes a tuning file, every rank sets AGX_TUNING_FILE to it before agx's
//     first call; after the first communicator's call rank 0 removes the file, and two
//     more communicators must still have its values, with the file parsed once per
//     process (tuning_parse_count(), core/tuning.hpp).
//   test_settings --expect-invalid VAR,VAR,...   (run with those variables set badly)
//     every call, automatic or with an explicit algorithm, blocking or nonblocking, fails
//     with MPI_ERR_ARG naming every VAR, on every rank.

#include <agx/agx.hpp>

#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "core/select.hpp"
#include "core/settings.hpp"
#include "core/tuning.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

int rank = 0, failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  ++failures;
}

void check_tuning(MPI_Comm comm, const std::string& path, const char* which) {
  std::vector<int> send(3, rank), recv(3 * 64);
  int n = 0;
  MPI_Comm_size(comm, &n);
  recv.resize(3 * static_cast<std::size_t>(n));
  agx::allgather<int>(comm, send, recv);
  const agx::Tuning& t = agx::context(comm).selector().tuning();
  if (t.source != path) fail(std::string(which) + ": tuning source '" + t.source + "', not " + path);
  if (t.params.network.alpha_s != 7.25e-6)
    fail(std::string(which) + ": network.alpha_s " + std::to_string(t.params.network.alpha_s) +
         ", not the file's 7.25e-6");
  if (agx::tuning_parse_count() != 1)
    fail(std::string(which) + ": the tuning file was parsed " +
         std::to_string(agx::tuning_parse_count()) + " times in this process (want once)");
}

void tuning_once() {
  char path[256] = {};
  if (rank == 0) {
    std::snprintf(path, sizeof path, "/tmp/agx-test-settings-%d.tuning", static_cast<int>(getpid()));
    FILE* f = std::fopen(path, "w");
    if (f == nullptr) std::abort();
    std::fputs("agx-tuning 1\n# test_settings\nnetwork.alpha_s 7.25e-6\n", f);
    std::fclose(f);
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  setenv("AGX_TUNING_FILE", path, 1);  // before agx's first call, which reads the settings
  check_tuning(MPI_COMM_WORLD, path, "first communicator");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::remove(path);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  check_tuning(dup, path, "second communicator");
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  check_tuning(half, path, "third communicator");
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
}

template <class F>
void expect_invalid(const char* what, const std::vector<std::string>& vars, F call) {
  try {
    call();
    fail(std::string(what) + ": invalid settings were accepted");
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG) fail(std::string(what) + ": wrong error class: " + e.what());
    for (const std::string& v : vars)
      if (std::strstr(e.what(), (v + "='").c_str()) == nullptr)
        fail(std::string(what) + ": the message does not name " + v + ": " + e.what());
    if (rank == 0 && std::string(what) == "automatic") std::printf("rank 0: %s\n", e.what());
  }
}

void invalid(const std::string& list) {
  std::vector<std::string> vars;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) vars.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> send(2, rank), recv(2 * static_cast<std::size_t>(n));
  expect_invalid("automatic", vars, [&] { agx::allgather<int>(MPI_COMM_WORLD, send, recv); });
  expect_invalid("ring", vars, [&] {
    agx::allgather<int>(MPI_COMM_WORLD, send, recv, agx::Options{agx::Algorithm::ring});
  });
  expect_invalid("nonblocking", vars, [&] {
    agx::Allgather<int>(MPI_COMM_WORLD).start(std::span<const int>(send), std::span<int>(recv)).wait();
  });
  if (agx::process_settings().invalid.size() != vars.size())
    fail("the list holds " + std::to_string(agx::process_settings().invalid.size()) +
         " invalid settings, not " + std::to_string(vars.size()));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--tuning-once") tuning_once();
  else if (mode == "--expect-invalid" && argc > 2) invalid(argv[2]);
  else fail("usage: test_settings --tuning-once | --expect-invalid VAR,VAR,...");
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("test_settings %s: %s\n", mode.c_str(), all == 0 ? "passed" : "FAILED");
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
