// Counters, verbose lines, warnings and the finalize summary.

#include "pmpi/report.hpp"

#include "core/tls.hpp"
#include "pmpi/settings.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace agx::pmpi {
namespace {

// One row per registered algorithm, in registry order (all radices of one algorithm
// count in its row).
const std::size_t n_algorithms = algorithms().size();

struct Counters {
  std::vector<unsigned long long> calls = std::vector<unsigned long long>(n_algorithms);
  std::vector<unsigned long long> bytes = std::vector<unsigned long long>(n_algorithms);
  std::vector<double> seconds = std::vector<double>(n_algorithms);
  unsigned long long passthrough = 0;
  unsigned long long encoded = 0;
};

// One thread's counters. Only the owning thread writes them, with plain relaxed loads
// and stores (no locked instruction, no mutex: a call costs a few moves); readers load
// them relaxed, so a sum taken while calls run is a recent one.
struct Tally {
  std::vector<std::atomic<unsigned long long>> calls =
      std::vector<std::atomic<unsigned long long>>(n_algorithms);
  std::vector<std::atomic<unsigned long long>> bytes =
      std::vector<std::atomic<unsigned long long>>(n_algorithms);
  std::vector<std::atomic<double>> seconds = std::vector<std::atomic<double>>(n_algorithms);
  std::atomic<unsigned long long> passthrough{0};
  std::atomic<unsigned long long> encoded{0};
};

template <class T>
void bump(std::atomic<T>& v, T by) {  // owner thread only
  v.store(v.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

std::mutex mutex;  // guards everything below
std::vector<const Tally*> live;  // the tallies of running threads
Counters retired;                // what threads that ended counted

void add(Counters& into, const Tally& t) {
  for (std::size_t i = 0; i < n_algorithms; ++i) {
    into.calls[i] += t.calls[i].load(std::memory_order_relaxed);
    into.bytes[i] += t.bytes[i].load(std::memory_order_relaxed);
    into.seconds[i] += t.seconds[i].load(std::memory_order_relaxed);
  }
  into.passthrough += t.passthrough.load(std::memory_order_relaxed);
  into.encoded += t.encoded.load(std::memory_order_relaxed);
}

// This thread's tally: registered at its first count, folded into `retired` when the
// thread ends.
struct OwnTally {
  Tally tally;
  OwnTally() {
    std::lock_guard lock(mutex);
    live.push_back(&tally);
  }
  ~OwnTally() {
    std::lock_guard lock(mutex);
    add(retired, tally);
    std::erase(live, &tally);
  }
};
Tally& own_tally() {
  // The tally itself is made at the thread's first count; the hot path reads only
  // this pointer (AGX_FAST_TLS, core/tls.hpp).
  AGX_FAST_TLS thread_local Tally* mine = nullptr;
  if (mine == nullptr) {
    thread_local OwnTally own;
    mine = &own.tally;
  }
  return *mine;
}

// Every thread's counts so far. Needs the mutex.
Counters sum() {
  Counters all = retired;
  for (const Tally* t : live) add(all, *t);
  return all;
}

std::set<std::string> warned;
int note_keyval = MPI_KEYVAL_INVALID;
int next_comm_id = 0;

// What AGX_VERBOSE already said about one communicator (an attribute on it).
struct CommNote {
  int id = 0;
  bool passthrough_said = false;
  std::set<std::pair<int, int>> said;  // (size class, algorithm)
};

int delete_note(MPI_Comm, int, void* attr, void*) {
  delete static_cast<CommNote*>(attr);
  return MPI_SUCCESS;
}

// The note of `comm`, created on first use (local: no communication). Needs the mutex.
CommNote* note_of(MPI_Comm comm) {
  if (note_keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_note, &note_keyval, nullptr) !=
          MPI_SUCCESS)
    return nullptr;
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, note_keyval, &attr, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<CommNote*>(attr);
  auto* note = new CommNote{++next_comm_id, false, {}};
  if (PMPI_Comm_set_attr(comm, note_keyval, note) != MPI_SUCCESS) {
    delete note;
    return nullptr;
  }
  return note;
}

std::string comm_label(MPI_Comm comm, int id) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  PMPI_Comm_get_name(comm, name, &len);
  int size = 0;
  PMPI_Comm_size(comm, &size);
  std::string label = len > 0 ? std::string(name, static_cast<std::size_t>(len))
                              : "communicator #" + std::to_string(id);
  return label + " (" + std::to_string(size) + (size == 1 ? " rank)" : " ranks)");
}

int size_class(std::size_t bytes) {
  int k = -1;
  for (; bytes != 0; bytes >>= 1) ++k;
  return k;
}

std::string class_text(int k) {
  if (k < 0) return "0 B";
  auto human = [](unsigned long long b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && b % 1024 == 0 && u < 6) b /= 1024, ++u;
    return std::to_string(b) + " " + units[u];
  };
  const unsigned long long lo = 1ull << k;
  return k >= 63 ? ">= " + human(lo) : human(lo) + " .. <" + human(lo << 1);
}

bool is_rank_zero(MPI_Comm comm) {
  int rank = -1;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == 0;
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

void record_call(Algorithm a, std::size_t bytes, double seconds) {
  const auto i = static_cast<std::size_t>(a);
  Tally& t = own_tally();
  bump(t.calls[i], 1ULL);
  bump(t.bytes[i], static_cast<unsigned long long>(bytes));
  if (seconds != 0.0) bump(t.seconds[i], seconds);
}

void record_passthrough() { bump(own_tally().passthrough, 1ULL); }

void record_encoded() { bump(own_tally().encoded, 1ULL); }

void announce(MPI_Comm comm, const char* function, Algorithm a, std::size_t total_bytes) {
  if (!verbose() || !is_rank_zero(comm)) return;
  std::lock_guard lock(mutex);
  CommNote* note = note_of(comm);
  const int k = size_class(total_bytes);
  if (note == nullptr || !note->said.insert({k, static_cast<int>(a)}).second) return;
  say("agx: " + std::string(function) + " on " + comm_label(comm, note->id) + ", " +
      class_text(k) + " gathered per rank: " + std::string(to_string(a)));
}

void announce_passthrough(MPI_Comm comm, const char* function, const char* why) {
  if (!verbose() || comm == MPI_COMM_NULL || !is_rank_zero(comm)) return;
  std::lock_guard lock(mutex);
  CommNote* note = note_of(comm);
  if (note == nullptr || note->passthrough_said) return;
  note->passthrough_said = true;
  say("agx: " + std::string(function) + " on " + comm_label(comm, note->id) +
      ": passed to the MPI library (" + why + ")");
}

void warn_once(MPI_Comm comm, const std::string& key, const std::string& message) {
  if (!is_rank_zero(comm)) return;
  {
    std::lock_guard lock(mutex);
    if (!warned.insert(key).second) return;
  }
  say("agx: warning: " + message);
}

void print_summary() {
  if (!settings().summary) return;
  Counters mine;
  {
    std::lock_guard lock(mutex);
    mine = sum();
  }
  Counters all;
  const int n = static_cast<int>(n_algorithms);
  PMPI_Reduce(mine.calls.data(), all.calls.data(), n, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  PMPI_Reduce(mine.bytes.data(), all.bytes.data(), n, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  PMPI_Reduce(mine.seconds.data(), all.seconds.data(), n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  PMPI_Reduce(&mine.passthrough, &all.passthrough, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  const AllocCounts a = alloc_counts();
  const unsigned long long alloc_mine[3] = {a.served, a.bytes, a.passed};
  unsigned long long alloc_all[3] = {0, 0, 0};
  PMPI_Reduce(alloc_mine, alloc_all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  int rank = 0, size = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) return;
  const Settings& s = settings();
  std::string text = "agx summary: " + std::to_string(size) + " ranks" +
                     (s.disabled ? ", AGX_DISABLE set" : "") +
                     (algo_set() ? ", AGX_ALGO=" + algo_text() : std::string()) + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "agx summary: %-20s %14s %18s %14s\n", "algorithm",
                "calls(sum)", "bytes(sum)", "time_s(max)");
  text += line;
  for (std::size_t i = 0; i < n_algorithms; ++i) {
    if (all.calls[i] == 0) continue;
    std::snprintf(line, sizeof line, "agx summary: %-20s %14llu %18llu %14.6f\n",
                  std::string(algorithms()[i].name).c_str(), all.calls[i], all.bytes[i],
                  all.seconds[i]);
    text += line;
  }
  std::snprintf(line, sizeof line, "agx summary: %-20s %14llu\n", "passed-to-MPI",
                all.passthrough);
  text += line;
  if (alloc_all[0] + alloc_all[2] > 0) {  // (worded so that no number follows the first word)
    std::snprintf(line, sizeof line,
                  "agx summary: MPI_Alloc_mem served by agx in %llu calls (%.1f MiB), by the MPI "
                  "library in %llu\n",
                  alloc_all[0], static_cast<double>(alloc_all[1]) / 1048576.0, alloc_all[2]);
    text += line;
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace agx::pmpi

extern "C" unsigned long long agx_pmpi_calls(const char* algorithm) {
  using namespace agx::pmpi;
  std::lock_guard lock(mutex);
  const Counters all = sum();
  unsigned long long total = 0;
  for (std::size_t i = 0; i < n_algorithms; ++i)
    if (algorithm == nullptr || *algorithm == '\0' ||
        agx::algorithms()[i].name == std::string_view(algorithm))
      total += all.calls[i];
  return total;
}

extern "C" unsigned long long agx_pmpi_passthrough_calls(void) {
  std::lock_guard lock(agx::pmpi::mutex);
  return agx::pmpi::sum().passthrough;
}

extern "C" unsigned long long agx_pmpi_encoded_calls(void) {
  std::lock_guard lock(agx::pmpi::mutex);
  return agx::pmpi::sum().encoded;
}
