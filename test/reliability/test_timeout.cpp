// Hang diagnosis (AGX_TIMEOUT): one rank deliberately skips a call; the others must not
// hang. Run by run_timeout.py, which checks the time, the exit status and the text of
// the diagnostic lines (rank, algorithm, round or stage, peer, block).
//
//   test_timeout --skip R [--count C] [--grow C2] [--sleep S] --expect abort|error
//                [--calls LIST] [--mpi]
//
// Every call of LIST (blocking, start-wait, start-test, start-sleep, plan) runs on a fresh duplicate
// of MPI_COMM_WORLD: first a warm-up call on every rank (the first call on a
// communicator makes collective MPI calls agx cannot time out: MPI_Comm_dup, topology
// discovery, the shared segment; before a start, a blocking call, which sets the
// communicator up), then the same call again, which rank R skips.
//   --expect abort   the call must not return: AGX_TIMEOUT_ACTION=abort ends the job
//   --expect error   every other rank gets agx::Error with MPI_ERR_OTHER (with --mpi:
//                    MPI_Allgather under the interposer returns MPI_ERR_OTHER through
//                    MPI_ERRORS_RETURN); afterwards agx works on a new communicator
// --mpi calls MPI_Allgather (run it with LD_PRELOAD=libagx_pmpi.so) instead of the C++ API.
// start-sleep (with AGX_INTEGRITY): rank R does not skip the call but starts it (before
// the others, which wait for its word), then sleeps for --sleep seconds before waiting. Its block is in the segment from the start,
// so the others finish the rounds and then wait for its checksum, which it sends only
// once its own rounds are done: that wait must time out (the end-to-end check's stage);
// rank R's own wait afterwards must not hang.
// --grow C2: the skipped call gathers C2 elements per rank (blocking and start-wait):
// with shared_memory and C2 > C it is a call that grows the node's segment, whose
// creation must time out too (for start-wait, the growth advanced by the wait's test()).

#include <agx/agx.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int rank = 0, n = 0, skip = -1, failed = 0;
std::size_t count = 4, grow = 0;
int sleep_seconds = 6;
bool expect_abort = true, use_mpi = false;

std::vector<int> mine() { return std::vector<int>(count, 1000 * rank + 7); }

bool correct(const std::vector<int>& all) {
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i] != 1000 * static_cast<int>(i / count) + 7) return false;
  return true;
}

// One call of kind `how` on `comm`; returns the MPI error class (MPI_SUCCESS when done).
int call(MPI_Comm comm, const std::string& how, std::vector<int>& all, agx::Plan* plan) {
  const std::vector<int> send = mine();
  if (use_mpi) {
    const int rc = MPI_Allgather(send.data(), static_cast<int>(count), MPI_INT, all.data(),
                                 static_cast<int>(count), MPI_INT, comm);
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (rc != MPI_SUCCESS) std::printf("rank %d %s: MPI_Allgather returned class %d\n", rank, how.c_str(), cls);
    return cls;
  }
  try {
    agx::Allgather<int> gather(comm);
    if (how == "blocking") {
      gather(std::span<const int>(send), std::span<int>(all));
    } else if (how == "start-wait") {
      agx::Request r = gather.start(send, all);
      r.wait();
    } else if (how == "start-sleep") {
      // Rank R starts first (the others wait for its word): had it started last, its
      // start could find every block there and do the whole call, checksum included.
      constexpr int started_tag = 4711;
      char word = 1;
      if (rank != skip) MPI_Recv(&word, 1, MPI_CHAR, skip, started_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      agx::Request r = gather.start(send, all);
      if (rank == skip) {
        for (int peer = 0; peer < n; ++peer)
          if (peer != skip) MPI_Send(&word, 1, MPI_CHAR, peer, started_tag, MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::seconds(sleep_seconds));
      }
      r.wait();
    } else if (how == "start-test") {
      agx::Request r = gather.start(send, all);
      while (!r.test()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else if (how == "plan") {
      plan->start();
      plan->wait();
    }
    return MPI_SUCCESS;
  } catch (const agx::Error& e) {
    std::printf("rank %d %s: agx::Error class %d: %s\n", rank, how.c_str(), e.error_class(), e.what());
    return e.error_class();
  }
}

void scenario(const std::string& how) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (use_mpi && !expect_abort) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  std::vector<int> all(count * static_cast<std::size_t>(n), -1);
  const std::vector<int> send = mine();
  agx::Plan plan;
  if (how == "plan") plan = agx::Allgather<int>(comm).plan(send, all);  // collective
  // A start on a communicator without agx state runs as the MPI library's own call
  // (docs/nonblocking.md): a blocking call sets the communicator up first.
  if (how == "start-wait" || how == "start-test" || how == "start-sleep") {
    const agx::Allgather<int> set_up(comm);
    set_up(send, all);
  }
  // Warm-up: every rank, so that the communicator's collective setup is done.
  const std::string warm_up = how == "start-sleep" ? "start-wait" : how;  // nobody sleeps
  if (call(comm, warm_up, all, &plan) != MPI_SUCCESS || !correct(all)) {
    std::printf("FAIL rank %d %s: warm-up call failed\n", rank, how.c_str());
    ++failed;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (grow > 0 && (how == "blocking" || how == "start-wait")) {
    count = grow;
    all.assign(count * static_cast<std::size_t>(n), -1);
  }
  if (how == "start-sleep" && rank == skip) {
    const int cls = call(comm, how, all, &plan);
    std::printf("rank %d %s: slept, then waited (class %d)\n", rank, how.c_str(), cls);
  } else if (rank != skip) {
    const int cls = call(comm, how, all, &plan);
    if (expect_abort) {
      std::printf("FAIL rank %d %s: the call returned (class %d) instead of aborting\n", rank,
                  how.c_str(), cls);
      ++failed;
    } else if (cls != MPI_ERR_OTHER) {
      std::printf("FAIL rank %d %s: wanted MPI_ERR_OTHER (%d), got %d\n", rank, how.c_str(),
                  MPI_ERR_OTHER, cls);
      ++failed;
    } else {
      std::printf("rank %d %s: got MPI_ERR_OTHER\n", rank, how.c_str());
    }
  } else {
    std::printf("rank %d %s: skipped the call\n", rank, how.c_str());
  }
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);  // the skipping rank waits here for the others' errors
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<std::string> calls{"blocking"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--skip" && i + 1 < argc) skip = std::atoi(argv[++i]);
    else if (a == "--count" && i + 1 < argc) count = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--grow" && i + 1 < argc) grow = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--sleep" && i + 1 < argc) sleep_seconds = std::atoi(argv[++i]);
    else if (a == "--expect" && i + 1 < argc) expect_abort = std::string(argv[++i]) == "abort";
    else if (a == "--mpi") use_mpi = true;
    else if (a == "--calls" && i + 1 < argc) {
      calls.clear();
      std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        calls.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      if (rank == 0) std::fprintf(stderr, "test_timeout: unknown argument %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  for (const std::string& how : calls) scenario(how);

  // After the errors agx still works on a new communicator.
  MPI_Comm fresh = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  std::vector<int> all(count * static_cast<std::size_t>(n), -1);
  agx::Plan none;
  if (call(fresh, "blocking", all, &none) == MPI_SUCCESS && correct(all)) {
    std::printf("rank %d: agx works on a new communicator\n", rank);
  } else {
    std::printf("FAIL rank %d: agx fails on a new communicator\n", rank);
    ++failed;
  }
  std::fflush(stdout);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
