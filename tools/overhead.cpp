// agx-overhead: what the interposer costs on the calls it defines but does not accelerate,
// each against the MPI library's own in the same process. A plain MPI program (it links
// no agx): run it with libagx_pmpi.so preloaded, and every `MPI_` call it makes goes
// through the interposer while the matching `PMPI_` call is the MPI library's own. The two
// are timed in alternating batches; each row prints the median nanoseconds per call of
// both, their ratio and difference, and whether agx is within 5 % or 100 ns (`ok`).
//
//   agx-overhead [--quick] [--max-bytes N]
//
// Rows (docs/interposer.md, "Calls agx does not accelerate"):
//   alloc+free    MPI_Alloc_mem then MPI_Free_mem of B bytes, 1 B to 64 MiB
//   alloc+touch   the same with one byte written per page in between (what a program
//                 that uses the memory pays: the page faults)
//   win-cycle     MPI_Alloc_mem, MPI_Win_create, fence, one MPI_Put, fence,
//                 MPI_Win_free, MPI_Free_mem over 1 MiB (NWChem's Global Arrays' pattern)
//   wait/test/... MPI_Wait, MPI_Test, MPI_Waitall, MPI_Testall, MPI_Waitany, MPI_Testany,
//                 MPI_Waitsome, MPI_Testsome, MPI_Request_get_status on a completed
//                 point-to-point request pair (a send to self and its receive)
//   start/startall  a persistent send/receive pair to self, started and waited
//   request_free  MPI_Request_free of a persistent request
//   cancel        MPI_Cancel of a receive that never matches, then its wait
// MPI_Finalize is called once and not timed; the all-gathers are agx-bench's.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Row {
  std::string name;
  std::size_t bytes = 0;
  std::function<void(bool agx)> once;  // one call (or cycle), through agx or the library
  int per_batch = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string size_text(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// A send to self and its receive, both completed by the `complete` step (a request pair
// that every wait/test row then completes, through agx or the library).
struct SelfPair {
  char out = 1, in = 0;
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  void post() {
    PMPI_Irecv(&in, 1, MPI_CHAR, 0, 7, MPI_COMM_SELF, &r[0]);
    PMPI_Isend(&out, 1, MPI_CHAR, 0, 7, MPI_COMM_SELF, &r[1]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  bool quick = false;
  std::size_t max_bytes = std::size_t{64} << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) max_bytes = std::strtoull(argv[++i], nullptr, 0);
    else {
      if (rank == 0) std::fprintf(stderr, "usage: agx-overhead [--quick] [--max-bytes N]\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<Row> rows;

  // MPI_Alloc_mem and MPI_Free_mem, without and with the pages touched.
  for (std::size_t b = 1; b <= max_bytes; b *= (b < 64 ? 8 : 4)) {
    const int n = b >= (std::size_t{16} << 20) ? 4 : b >= (std::size_t{1} << 20) ? 16 : 200;
    rows.push_back({"alloc+free", b, [b](bool agx) {
                      void* p = nullptr;
                      if (agx) MPI_Alloc_mem(static_cast<MPI_Aint>(b), MPI_INFO_NULL, &p), MPI_Free_mem(p);
                      else PMPI_Alloc_mem(static_cast<MPI_Aint>(b), MPI_INFO_NULL, &p), PMPI_Free_mem(p);
                    }, n});
    rows.push_back({"alloc+touch", b, [b, page](bool agx) {
                      void* p = nullptr;
                      (agx ? MPI_Alloc_mem : PMPI_Alloc_mem)(static_cast<MPI_Aint>(b), MPI_INFO_NULL, &p);
                      auto* c = static_cast<volatile char*>(p);
                      for (std::size_t i = 0; i < b; i += static_cast<std::size_t>(page)) c[i] = 1;
                      c[b - 1] = 1;
                      (agx ? MPI_Free_mem : PMPI_Free_mem)(p);
                    }, n});
  }
  // A window over MPI_Alloc_mem memory, as ARMCI/Global Arrays make them.
  rows.push_back({"win-cycle", std::size_t{1} << 20, [](bool agx) {
                    const MPI_Aint bytes = MPI_Aint{1} << 20;
                    void* p = nullptr;
                    (agx ? MPI_Alloc_mem : PMPI_Alloc_mem)(bytes, MPI_INFO_NULL, &p);
                    std::memset(p, 0, 4096);
                    MPI_Win win;
                    MPI_Win_create(p, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
                    MPI_Win_fence(0, win);
                    int size = 0, me = 0;
                    MPI_Comm_size(MPI_COMM_WORLD, &size);
                    MPI_Comm_rank(MPI_COMM_WORLD, &me);
                    const double v = me;
                    MPI_Put(&v, 1, MPI_DOUBLE, (me + 1) % size, 0, 1, MPI_DOUBLE, win);
                    MPI_Win_fence(0, win);
                    MPI_Win_free(&win);
                    (agx ? MPI_Free_mem : PMPI_Free_mem)(p);
                  }, 20});

  // Completion calls on requests agx did not make.
  static SelfPair pair;
  const auto completion = [&](const char* name, std::function<void(bool, MPI_Request*)> complete) {
    rows.push_back({name, 1, [complete](bool agx) {
                      pair.post();
                      complete(agx, pair.r);
                    }, 2000});
  };
  completion("wait", [](bool agx, MPI_Request* r) {
    for (int i = 0; i < 2; ++i) (agx ? MPI_Wait : PMPI_Wait)(&r[i], MPI_STATUS_IGNORE);
  });
  completion("test", [](bool agx, MPI_Request* r) {
    for (int i = 0; i < 2; ++i)
      for (int done = 0; !done;) (agx ? MPI_Test : PMPI_Test)(&r[i], &done, MPI_STATUS_IGNORE);
  });
  completion("waitall", [](bool agx, MPI_Request* r) {
    (agx ? MPI_Waitall : PMPI_Waitall)(2, r, MPI_STATUSES_IGNORE);
  });
  completion("testall", [](bool agx, MPI_Request* r) {
    for (int done = 0; !done;) (agx ? MPI_Testall : PMPI_Testall)(2, r, &done, MPI_STATUSES_IGNORE);
  });
  completion("waitany", [](bool agx, MPI_Request* r) {
    int index = 0;
    for (int i = 0; i < 2; ++i) (agx ? MPI_Waitany : PMPI_Waitany)(2, r, &index, MPI_STATUS_IGNORE);
  });
  completion("testany", [](bool agx, MPI_Request* r) {
    int index = 0, done = 0;
    while (r[0] != MPI_REQUEST_NULL || r[1] != MPI_REQUEST_NULL)
      (agx ? MPI_Testany : PMPI_Testany)(2, r, &index, &done, MPI_STATUS_IGNORE);
  });
  completion("waitsome", [](bool agx, MPI_Request* r) {
    int count = 0, index[2];
    while (r[0] != MPI_REQUEST_NULL || r[1] != MPI_REQUEST_NULL)
      (agx ? MPI_Waitsome : PMPI_Waitsome)(2, r, &count, index, MPI_STATUSES_IGNORE);
  });
  completion("testsome", [](bool agx, MPI_Request* r) {
    int count = 0, index[2];
    while (r[0] != MPI_REQUEST_NULL || r[1] != MPI_REQUEST_NULL)
      (agx ? MPI_Testsome : PMPI_Testsome)(2, r, &count, index, MPI_STATUSES_IGNORE);
  });
  completion("request_get_status", [](bool agx, MPI_Request* r) {
    for (int i = 0; i < 2; ++i) {
      for (int done = 0; !done;) (agx ? MPI_Request_get_status : PMPI_Request_get_status)(r[i], &done, MPI_STATUS_IGNORE);
      PMPI_Wait(&r[i], MPI_STATUS_IGNORE);
    }
  });
  // Persistent point-to-point requests: started, completed and freed through agx or not.
  static MPI_Request persistent[2];
  static char pout = 2, pin = 0;
  PMPI_Recv_init(&pin, 1, MPI_CHAR, 0, 9, MPI_COMM_SELF, &persistent[0]);
  PMPI_Send_init(&pout, 1, MPI_CHAR, 0, 9, MPI_COMM_SELF, &persistent[1]);
  rows.push_back({"start", 1, [](bool agx) {
                    for (int i = 0; i < 2; ++i) (agx ? MPI_Start : PMPI_Start)(&persistent[i]);
                    PMPI_Waitall(2, persistent, MPI_STATUSES_IGNORE);
                  }, 2000});
  rows.push_back({"startall", 1, [](bool agx) {
                    (agx ? MPI_Startall : PMPI_Startall)(2, persistent);
                    PMPI_Waitall(2, persistent, MPI_STATUSES_IGNORE);
                  }, 2000});
  rows.push_back({"request_free", 1, [](bool agx) {
                    MPI_Request r;
                    PMPI_Recv_init(&pin, 1, MPI_CHAR, 0, 11, MPI_COMM_SELF, &r);
                    (agx ? MPI_Request_free : PMPI_Request_free)(&r);
                  }, 2000});
  rows.push_back({"cancel", 1, [](bool agx) {
                    MPI_Request r;
                    PMPI_Irecv(&pin, 1, MPI_CHAR, 0, 13, MPI_COMM_SELF, &r);
                    (agx ? MPI_Cancel : PMPI_Cancel)(&r);
                    (agx ? MPI_Wait : PMPI_Wait)(&r, MPI_STATUS_IGNORE);
                  }, 2000});

  const int batches = quick ? 5 : 15;
  bool all_ok = true;
  if (rank == 0)
    std::printf("%-20s %8s %12s %12s %7s %10s  %s\n", "call", "bytes", "mpi_ns", "agx_ns", "ratio",
                "diff_ns", "within 5% or 100 ns");
  for (Row& row : rows) {
    const bool collective = row.name == "win-cycle";
    if (!collective && rank != 0) continue;  // (one rank times the local calls)
    row.once(false), row.once(true);  // (first touches out of the way)
    std::vector<double> t[2];
    for (int b = 0; b < batches; ++b)
      for (int k = 0; k < 2; ++k) {
        const bool agx = (b + k) % 2 == 1;  // alternate which goes first
        if (collective) MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < row.per_batch; ++i) row.once(agx);
        t[agx].push_back((MPI_Wtime() - t0) * 1e9 / row.per_batch);
      }
    if (rank != 0) continue;
    const double mpi = median(t[0]), agx = median(t[1]);
    const bool ok = agx <= mpi * 1.05 || agx - mpi <= 100;
    all_ok = all_ok && ok;
    std::printf("%-20s %8s %12.0f %12.0f %7.2f %+10.0f  %s\n", row.name.c_str(), size_text(row.bytes).c_str(),
                mpi, agx, agx / mpi, agx - mpi, ok ? "ok" : "SLOWER");
  }
  for (MPI_Request& r : persistent) PMPI_Request_free(&r);
  if (rank == 0) std::printf("%s\n", all_ok ? "every call within 5% or 100 ns" : "some calls slower");
  MPI_Finalize();
  return 0;
}
