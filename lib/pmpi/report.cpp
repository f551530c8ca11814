// Counters, verbose lines, warnings and the finalize summary.

#include "pmpi/report.hpp"

#include "core/tls.hpp"
#include "pmpi/settings.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace agx::pmpi {
namespace {

// One row per algorithm and radix: every registered algorithm at its default radix and
// at each radix the registry lists, then, for an algorithm with a radix, a row for calls
// whose radix was not reported ("bruck:k=?"), then rows for other radices met at run
// time (AGX_ALGO=bruck:k=5), added on first sight. The rows of the registry are fixed
// at start-up, so that the hot path finds its row without a lock.
constexpr std::size_t extra_rows = 32;

struct FixedRows {
  std::vector<AlgorithmChoice> keys;
  std::vector<std::size_t> first;    ///< per algorithm id: its first row
  std::vector<std::size_t> count;    ///< per algorithm id: its rows
  std::vector<int> default_radix;    ///< per algorithm id (the registry's, read once)
};
const FixedRows fixed = [] {
  FixedRows f;
  for (const AlgorithmInfo& a : algorithms()) {
    f.default_radix.push_back(a.default_radix);
    f.first.push_back(f.keys.size());
    if (a.default_radix == 0) {
      f.keys.push_back({a.id, 0});
    } else {
      f.keys.push_back({a.id, a.default_radix});
      for (int k : a.radices)
        if (k != a.default_radix) f.keys.push_back({a.id, k});
      f.keys.push_back({a.id, unknown_radix});
    }
    f.count.push_back(f.keys.size() - f.first.back());
  }
  return f;
}();
const std::size_t n_rows = fixed.keys.size() + extra_rows;

// The extra rows' keys (id << 32 | radix; 0: unused), appended under `mutex`.
std::array<std::atomic<std::uint64_t>, extra_rows> extra_keys{};
std::atomic<std::size_t> extras_used{0};

std::uint64_t key_of(const AlgorithmChoice& c) {
  return std::uint64_t(static_cast<std::uint32_t>(c.id)) << 32 | static_cast<std::uint32_t>(c.radix);
}
AlgorithmChoice choice_of(std::uint64_t key) {
  return {static_cast<Algorithm>(static_cast<int>(key >> 32)), static_cast<int>(key & 0xffffffffu)};
}

/// `c` with the radix as the rows hold it: 0 for an algorithm without one, the default
/// for 0.
AlgorithmChoice normalized(AlgorithmChoice c) {
  const auto i = static_cast<std::size_t>(c.id);
  if (i >= fixed.first.size()) return {Algorithm::automatic, 0};
  const int def = fixed.default_radix[i];
  c.radix = def == 0 ? 0 : c.radix == 0 ? def : c.radix;
  return c;
}

struct Counters {
  std::vector<unsigned long long> calls = std::vector<unsigned long long>(n_rows);
  std::vector<unsigned long long> bytes = std::vector<unsigned long long>(n_rows);
  std::vector<double> seconds = std::vector<double>(n_rows);
  unsigned long long passthrough = 0;
  unsigned long long encoded = 0;
};

// One thread's counters. Only the owning thread writes them, with plain relaxed loads
// and stores (no locked instruction, no mutex: a call costs a few moves); readers load
// them relaxed, so a sum taken while calls run is a recent one.
struct Tally {
  std::vector<std::atomic<unsigned long long>> calls =
      std::vector<std::atomic<unsigned long long>>(n_rows);
  std::vector<std::atomic<unsigned long long>> bytes =
      std::vector<std::atomic<unsigned long long>>(n_rows);
  std::vector<std::atomic<double>> seconds = std::vector<std::atomic<double>>(n_rows);
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

/// The row of `c` (normalized): a fixed row, else an extra one, added on first sight
/// (under the mutex); when the extra rows are all taken, the algorithm's "radix not
/// reported" row.
std::size_t row_of(AlgorithmChoice c) {
  c = normalized(c);
  const auto id = static_cast<std::size_t>(c.id);
  if (id >= fixed.first.size()) return 0;  // not a registered id: auto's row (never used)
  for (std::size_t r = fixed.first[id], end = r + fixed.count[id]; r < end; ++r)
    if (fixed.keys[r].radix == c.radix) return r;
  const std::uint64_t key = key_of(c);
  const auto find = [&](std::size_t used) -> std::size_t {
    for (std::size_t e = 0; e < used; ++e)
      if (extra_keys[e].load(std::memory_order_relaxed) == key) return fixed.keys.size() + e;
    return 0;
  };
  if (const std::size_t r = find(extras_used.load(std::memory_order_acquire))) return r;
  std::lock_guard lock(mutex);
  const std::size_t used = extras_used.load(std::memory_order_relaxed);
  if (const std::size_t r = find(used)) return r;
  if (used == extra_rows)
    return fixed.first[id] + fixed.count[id] - 1;  // its {id, unknown_radix} row
  extra_keys[used].store(key, std::memory_order_relaxed);
  extras_used.store(used + 1, std::memory_order_release);
  return fixed.keys.size() + used;
}

/// The key of row `r`.
AlgorithmChoice row_key(std::size_t r) {
  return r < fixed.keys.size() ? fixed.keys[r]
                               : choice_of(extra_keys[r - fixed.keys.size()].load(std::memory_order_acquire));
}

/// "bruck:k=4"; "bruck:k=?" where the radix was not reported.
std::string row_name(const AlgorithmChoice& c) {
  return c.radix == unknown_radix ? std::string(to_string(c.id)) + ":k=?" : full_name(c);
}

void add(Counters& into, const Tally& t) {
  for (std::size_t i = 0; i < n_rows; ++i) {
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
// What AGX_VERBOSE already said: (communicator's note id, size class, algorithm and radix).
std::set<std::tuple<int, int, std::uint64_t>> said;
int note_keyval = MPI_KEYVAL_INVALID;
int next_comm_id = 0;

// What AGX_VERBOSE already said about one communicator (an attribute on it).
struct CommNote {
  int id = 0;
  bool passthrough_said = false;
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
  auto* note = new CommNote{++next_comm_id, false};
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

AlgorithmChoice what_ran(Algorithm ran, const AlgorithmChoice& chosen,
                         const AlgorithmChoice& rival) {
  if (ran == chosen.id) return chosen;
  if (ran == rival.id) return rival;
  return {ran, algorithm_info(ran).default_radix == 0 ? 0 : unknown_radix};
}

std::size_t counter_row(const AlgorithmChoice& a) { return row_of(a); }

void record_call(const AlgorithmChoice& a, std::size_t bytes, double seconds) {
  record_row(row_of(a), bytes, seconds);
}

void record_row(std::size_t i, std::size_t bytes, double seconds) {
  Tally& t = own_tally();
  bump(t.calls[i], 1ULL);
  bump(t.bytes[i], static_cast<unsigned long long>(bytes));
  if (seconds != 0.0) bump(t.seconds[i], seconds);
}

void record_passthrough() { bump(own_tally().passthrough, 1ULL); }

void record_encoded() { bump(own_tally().encoded, 1ULL); }

Announcement prepare_announcement(MPI_Comm comm, const char* function,
                                  std::size_t total_bytes) {
  if (!verbose() || !is_rank_zero(comm)) return {};
  std::lock_guard lock(mutex);
  const CommNote* note = note_of(comm);
  if (note == nullptr) return {};
  const int k = size_class(total_bytes);
  return {"agx: " + std::string(function) + " on " + comm_label(comm, note->id) + ", " +
              class_text(k) + " gathered per rank: ",
          note->id, k};
}

void announce_ran(const Announcement& line, const AlgorithmChoice& a) {
  if (line.prefix.empty() || a.id == Algorithm::automatic) return;
  const AlgorithmChoice c = normalized(a);
  {
    std::lock_guard lock(mutex);
    if (!said.insert({line.comm_id, line.size_class, key_of(c)}).second) return;
  }
  say(line.prefix + row_name(c));
}

void announce(MPI_Comm comm, const char* function, const AlgorithmChoice& a,
              std::size_t total_bytes) {
  if (!verbose() || a.id == Algorithm::automatic) return;
  announce_ran(prepare_announcement(comm, function, total_bytes), a);
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
  // The rows of every rank in one order: the fixed rows, then the union of the extra
  // rows any rank added (each rank adds its own in the order it met them).
  std::array<std::uint64_t, extra_rows> my_extras{};
  for (std::size_t e = 0; e < extras_used.load(); ++e) my_extras[e] = extra_keys[e].load();
  int world = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<std::uint64_t> every_extra(extra_rows * static_cast<std::size_t>(world));
  PMPI_Allgather(my_extras.data(), static_cast<int>(extra_rows), MPI_UINT64_T, every_extra.data(),
                 static_cast<int>(extra_rows), MPI_UINT64_T, MPI_COMM_WORLD);
  std::erase(every_extra, std::uint64_t{0});
  std::sort(every_extra.begin(), every_extra.end());
  every_extra.erase(std::unique(every_extra.begin(), every_extra.end()), every_extra.end());
  std::vector<AlgorithmChoice> keys = fixed.keys;
  for (std::uint64_t k : every_extra) keys.push_back(choice_of(k));
  Counters ordered, all;
  for (Counters* c : {&ordered, &all}) {
    c->calls.assign(keys.size(), 0);
    c->bytes.assign(keys.size(), 0);
    c->seconds.assign(keys.size(), 0.0);
  }
  for (std::size_t r = 0; r < n_rows; ++r) {
    if (mine.calls[r] == 0) continue;
    const auto at = static_cast<std::size_t>(
        std::find(keys.begin(), keys.end(), row_key(r)) - keys.begin());
    ordered.calls[at] = mine.calls[r];
    ordered.bytes[at] = mine.bytes[r];
    ordered.seconds[at] = mine.seconds[r];
  }
  const int n = static_cast<int>(keys.size());
  PMPI_Reduce(ordered.calls.data(), all.calls.data(), n, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  PMPI_Reduce(ordered.bytes.data(), all.bytes.data(), n, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  PMPI_Reduce(ordered.seconds.data(), all.seconds.data(), n, MPI_DOUBLE, MPI_MAX, 0,
              MPI_COMM_WORLD);
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
  // One row per algorithm and radix that ran: registry order, radices rising, calls
  // whose radix was not reported last.
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto rank_of = [&](std::size_t i) {
    return std::pair{keys[i].id, keys[i].radix == unknown_radix ? INT_MAX : keys[i].radix};
  };
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return rank_of(x) < rank_of(y); });
  for (std::size_t i : order) {
    if (all.calls[i] == 0) continue;
    std::snprintf(line, sizeof line, "agx summary: %-20s %14llu %18llu %14.6f\n",
                  row_name(keys[i]).c_str(), all.calls[i], all.bytes[i], all.seconds[i]);
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
  // NULL or "": every call; "bruck": every radix of bruck; "bruck:k=4": that radix only.
  const std::string_view text = algorithm == nullptr ? std::string_view() : algorithm;
  std::optional<agx::AlgorithmChoice> want;
  bool any_radix = false;
  if (!text.empty()) {
    if (text.find(':') == std::string_view::npos) {
      const std::optional<agx::Algorithm> id = agx::parse_algorithm(text);
      if (id) want = agx::AlgorithmChoice{*id, 0};
      any_radix = true;
    } else {
      want = agx::parse_algorithm_choice(text);
    }
    if (!want || want->id == agx::Algorithm::automatic) return 0;
    *want = normalized(*want);
  }
  std::lock_guard lock(mutex);
  const Counters all = sum();
  unsigned long long total = 0;
  for (std::size_t r = 0; r < n_rows; ++r) {
    if (all.calls[r] == 0) continue;
    const agx::AlgorithmChoice k = row_key(r);
    if (!want || (k.id == want->id && (any_radix || k.radix == want->radix))) total += all.calls[r];
  }
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
