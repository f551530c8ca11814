// agx-bench's command line, read with CLI11 (tools only; libagx has no part in it).
// Sizes accept K, M, G suffixes (powers of 1024, optionally followed by iB or B): 64K,
// 1MiB, 64M. A value that cannot be read, an unknown option or a missing value is a
// message on rank 0 and exit status 2.

#include "options.hpp"

#include <agx/algorithm.hpp>

#include "cli_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

namespace bench {
namespace {

constexpr const char* usage_text = R"(usage: mpirun -np N agx-bench [options]

Sweep (per-rank bytes):
  --min-bytes B      first size (default 1)
  --max-bytes B      last size (default 64M)
  --factor F         multiply by F from one size to the next (integer >= 2, default 2)
  --step B           add B instead of multiplying
  --sizes B,B,...    an explicit list instead of the range
Candidates (interleaved, batch by batch):
  --algos A,B,...    agx algorithms by name, 'all' (default: every entry of agx's
                     algorithm table, auto included) or 'none'
  --no-mpi           leave out the MPI library's own MPI_Allgather(v)
  --no-copy-bound    leave out the memory-copy bound
  --dropin auto|on|off|require
                     'mpi-agx': MPI_Allgather(v) through the normal MPI symbol, which
                     goes through agx's interposer when libagx_pmpi.so is preloaded
                     (auto, the default: only then; on: always, saying whether the
                     interposer took the calls; require: exit status 2 without it)
Call forms:
  --place out|in|both   out of place (default), in place, or both
  --in-place            same as --place in
  --forms F,F,...    regular, one_large, many_zero, ramp, or 'all' (default regular)
  --v                same as --forms one_large,many_zero,ramp
  --nonblocking      every call nonblocking, started and then waited for: agx's start()
                     and wait(), MPI_Iallgather(v) and MPI_Wait (the library's own, and
                     by the normal symbols for mpi-agx); the copy bound is unchanged
  --memory host      where buffers live: host only (device buffers: agx-gpu-bench,
                     built with CUDA, docs/gpu.md)
  --alloc heap|shared|mpi
                     receive buffers from the heap (default), agx::allocate (shared:
                     agx's blocking calls on one node write straight into the peers'
                     buffers) or MPI_Alloc_mem (the MPI library's; agx's shared memory
                     when libagx_pmpi.so is preloaded); every candidate uses the same
Timing:
  --method M,M,...   barrier (default), window, osu, or 'all': how each call is timed
                     (barrier: MPI_Barrier then the call, slowest rank; window: every
                     rank starts at one instant of offset-corrected clocks, largest end
                     minus that start; osu: the call then MPI_Barrier, mean over ranks)
  --window-factor F  window method: window = F x the call's estimated time (default 4)
  --sync-rounds R    window method: ping-pongs per rank for each clock offset (default 10)
  --passes P         batches per candidate, method and size (default 5)
  --batch-seconds S  target length of one batch (default 0.02)
  --max-iters I      iterations per batch at most (default 1000)
  --warmup W         untimed calls per candidate and size before it is timed (default
                     16, as OSU skips its first calls): what a library learns on its
                     first calls of a size (agx's copy and wait trials) is not timed
Output:
  --csv FILE         rows as CSV (machine, MPI library, N... as '# key: value' lines first)
  --json FILE        the same as one JSON document {"meta": {...}, "rows": [...]}
  --table wide|long|none   stdout table: one line per size (default), per candidate, or none
  --progress / --no-progress   progress line (default: on stderr when it is a terminal,
                     else on stdout when that is one; --progress forces stderr)
Fused mode (tools/bench/fused.cpp, docs/fused.md):
  --fused K,K,...    instead of the sweep: per K and size, K separate agx calls, one
                     agx::Group of K members, and K MPI_Allgather calls (e.g. --fused
                     4,16,64 --sizes 64,256,1K,4K,16K,64K); one table per K
Encoded mode (tools/bench/encoded.cpp, docs/fused.md):
  --encoded          instead of the sweep: per data kind and size, the plain agx call,
                     the encoded all-gather (sparse, lz4, zstd, automatic) and
                     MPI_Allgather, with bytes on the wire and the compressor's speed
  --data D,D,...     low_entropy, weights, sparse, random (default all)
Mixed-size mode (tools/bench/mixed.cpp, docs/benchmarks.md):
  --mixed            instead of the sweep: steps of all-gathers whose totals (all ranks'
                     bytes) cycle through a training step's sizes (default: 4K, 1M, 8M,
                     64K, 1M, 8M, 4K, 1M, 8M, 256K, 2M, 16K), each call with its own
                     buffers, every result verified; the MPI library, the drop-in and
                     auto; step time and per-call times
  --mixed-sizes T,T,...   the step's totals instead (implies --mixed)
  --steps S          steps per candidate and pass (default 25)
Self-test:
  --corrupt NAME     flip one received byte after every call of candidate NAME, to
                     show that a wrong result is reported as WRONG (exit status 1)
)";

[[noreturn]] void fail(int rank, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "agx-bench: %s (see agx-bench --help)\n", message.c_str());
  throw UsageExit{2};
}

// A value that cannot be read: CLI11 reports it as "OPTION: message".
[[noreturn]] void bad_value(const std::string& option, const std::string& message) {
  throw CLI::ValidationError(option, message);
}

using agx_tools::number;
using agx_tools::parse_bytes;
using agx_tools::split;

}  // namespace

std::vector<std::size_t> default_mixed_step() {
  constexpr std::size_t K = 1024, M = 1024 * 1024;
  return {4 * K, 1 * M, 8 * M, 64 * K, 1 * M, 8 * M, 4 * K, 1 * M, 8 * M, 256 * K, 2 * M, 16 * K};
}

namespace {

Form parse_form(std::string name) {
  const std::string given = name;
  std::replace(name.begin(), name.end(), '-', '_');
  for (Form f : {Form::regular, Form::one_large, Form::many_zero, Form::ramp})
    if (form_name(f) == name) return f;
  bad_value("--forms", "unknown form '" + given + "' (regular, one_large, many_zero, ramp, all)");
}

Method parse_method(const std::string& name) {
  for (Method m : {Method::barrier, Method::window, Method::osu})
    if (method_name(m) == name) return m;
  bad_value("--method", "unknown method '" + name + "' (barrier, window, osu, all)");
}

}  // namespace

std::string_view method_name(Method m) {
  switch (m) {
    case Method::barrier: return "barrier";
    case Method::window: return "window";
    case Method::osu: return "osu";
  }
  return "unknown";
}

std::string_view alloc_name(Alloc a) {
  switch (a) {
    case Alloc::heap: return "heap";
    case Alloc::shared: return "shared";
    case Alloc::mpi: return "mpi";
  }
  return "unknown";
}

std::string_view form_name(Form f) {
  switch (f) {
    case Form::regular: return "regular";
    case Form::one_large: return "one_large";
    case Form::many_zero: return "many_zero";
    case Form::ramp: return "ramp";
  }
  return "unknown";
}

Settings parse(int argc, char** argv, int rank) {
  Settings s;
  for (const auto& c : agx::algorithm_variants()) s.algos.push_back(agx::to_string(c));
  s.algos.insert(s.algos.begin(), "auto");
  std::size_t min_bytes = 1, max_bytes = std::size_t{64} << 20, factor = 2, step = 0;
  std::vector<std::size_t> list;
  s.command_line = argv[0];
  for (int i = 1; i < argc; ++i) s.command_line += std::string(" ") + argv[i];

  // CLI11 reads the options; every value is checked here, in command-line order
  // (trigger_on_parse), so that of two options setting the same thing the last one wins.
  CLI::App app{"agx-bench"};
  app.set_help_flag("-h,--help");
  using Text = const std::string&;
  auto value = [&](const char* name, std::function<void(Text)> apply) {
    app.add_option_function<std::string>(name, std::move(apply))->trigger_on_parse();
  };
  auto flag = [&](const char* name, std::function<void()> apply) {
    app.add_flag_callback(name, std::move(apply))->trigger_on_parse();
  };
  value("--min-bytes", [&](Text v) { min_bytes = parse_bytes("--min-bytes", v); });
  value("--max-bytes", [&](Text v) { max_bytes = parse_bytes("--max-bytes", v); });
  value("--factor", [&](Text v) {
    factor = number<std::size_t>("--factor", v);
    if (factor < 2) bad_value("--factor", "must be an integer >= 2, not '" + v + "'");
  });
  value("--step", [&](Text v) { step = parse_bytes("--step", v); });
  value("--sizes", [&](Text v) { for (const auto& t : split(v)) list.push_back(parse_bytes("--sizes", t)); });
  value("--algos", [&](Text v) {
    s.algos.clear();
    if (v == "all") {
      s.algos.emplace_back("auto");
      for (const auto& c : agx::algorithm_variants()) s.algos.push_back(agx::to_string(c));
    } else if (v != "none") s.algos = split(v);
    for (const auto& name : s.algos) {
      std::string why;
      if (!agx::parse_algorithm_choice(name, &why)) bad_value("--algos", why);
    }
  });
  flag("--no-mpi", [&] { s.mpi = false; });
  flag("--no-copy-bound", [&] { s.copy_bound = false; });
  value("--dropin", [&](Text v) {
    if (v == "auto") s.dropin = Dropin::automatic;
    else if (v == "on") s.dropin = Dropin::on;
    else if (v == "off") s.dropin = Dropin::off;
    else if (v == "require") s.dropin = Dropin::require;
    else bad_value("--dropin", "takes auto, on, off or require, not '" + v + "'");
  });
  value("--method", [&](Text v) {
    s.methods.clear();
    if (v == "all") s.methods = {Method::barrier, Method::window, Method::osu};
    else for (const auto& t : split(v)) s.methods.push_back(parse_method(t));
    std::sort(s.methods.begin(), s.methods.end());
    s.methods.erase(std::unique(s.methods.begin(), s.methods.end()), s.methods.end());
    if (s.methods.empty()) bad_value("--method", "needs at least one method");
  });
  value("--window-factor", [&](Text v) {
    s.window_factor = number<double>("--window-factor", v);
    if (!(s.window_factor >= 1) || !std::isfinite(s.window_factor))
      bad_value("--window-factor", "must be a number >= 1, not '" + v + "'");
  });
  value("--sync-rounds", [&](Text v) {
    s.sync_rounds = number<int>("--sync-rounds", v);
    if (s.sync_rounds < 1) bad_value("--sync-rounds", "must be at least 1, not '" + v + "'");
  });
  flag("--in-place", [&] { s.in_place = {true}; });
  flag("--nonblocking", [&] { s.nonblocking = true; });
  value("--place", [&](Text v) {
    if (v == "out") s.in_place = {false};
    else if (v == "in") s.in_place = {true};
    else if (v == "both") s.in_place = {false, true};
    else bad_value("--place", "takes out, in or both, not '" + v + "'");
  });
  value("--forms", [&](Text v) {
    s.forms.clear();
    if (v == "all") s.forms = {Form::regular, Form::one_large, Form::many_zero, Form::ramp};
    else for (const auto& t : split(v)) s.forms.push_back(parse_form(t));
  });
  flag("--v", [&] { s.forms = {Form::one_large, Form::many_zero, Form::ramp}; });
  value("--memory", [&](Text v) {
    if (v == "device")
      bad_value("--memory", "agx-bench times host buffers only; device buffers are timed by "
                            "agx-gpu-bench (test/cuda, docs/gpu.md)");
    if (v != "host") bad_value("--memory", "takes host, not '" + v + "'");
    s.memory = v;
  });
  value("--alloc", [&](Text v) {
    if (v == "heap") s.alloc = Alloc::heap;
    else if (v == "shared") s.alloc = Alloc::shared;
    else if (v == "mpi") s.alloc = Alloc::mpi;
    else bad_value("--alloc", "takes heap, shared or mpi, not '" + v + "'");
  });
  value("--passes", [&](Text v) {
    s.passes = number<int>("--passes", v);
    if (s.passes < 1) bad_value("--passes", "must be at least 1, not '" + v + "'");
  });
  value("--batch-seconds", [&](Text v) {
    s.batch_seconds = number<double>("--batch-seconds", v);
    if (!(s.batch_seconds >= 0) || !std::isfinite(s.batch_seconds))
      bad_value("--batch-seconds", "must be a number of seconds >= 0, not '" + v + "'");
  });
  value("--max-iters", [&](Text v) {
    s.max_iters = number<int>("--max-iters", v);
    if (s.max_iters < 1) bad_value("--max-iters", "must be at least 1, not '" + v + "'");
  });
  value("--warmup", [&](Text v) {
    s.warmup = number<int>("--warmup", v);
    if (s.warmup < 0) bad_value("--warmup", "must be at least 0, not '" + v + "'");
  });
  value("--csv", [&](Text v) { s.csv = v; });
  value("--json", [&](Text v) { s.json = v; });
  value("--table", [&](Text v) {
    if (v != "wide" && v != "long" && v != "none") bad_value("--table", "takes wide, long or none, not '" + v + "'");
    s.table = v;
  });
  value("--corrupt", [&](Text v) { s.corrupt = v; });
  value("--fused", [&](Text v) {
    s.fused_ks = agx_tools::numbers<int>("--fused", v);
    for (const int k : s.fused_ks)
      if (k < 1) bad_value("--fused", "every K must be at least 1, not '" + v + "'");
    s.fused = s.fused_ks.empty() ? 0 : s.fused_ks.front();
  });
  flag("--encoded", [&] { s.encoded = true; });
  flag("--mixed", [&] {
    if (s.mixed.empty()) s.mixed = default_mixed_step();
  });
  value("--mixed-sizes", [&](Text v) {
    s.mixed.clear();
    for (const auto& t : split(v)) {
      s.mixed.push_back(parse_bytes("--mixed-sizes", t));
      if (s.mixed.back() == 0) bad_value("--mixed-sizes", "every total must be at least 1 byte");
    }
    if (s.mixed.empty()) bad_value("--mixed-sizes", "needs at least one size");
  });
  value("--steps", [&](Text v) {
    s.steps = number<int>("--steps", v);
    if (s.steps < 1) bad_value("--steps", "must be at least 1, not '" + v + "'");
  });
  value("--data", [&](Text v) {
    s.data = split(v);
    for (const auto& d : s.data)
      if (d != "low_entropy" && d != "weights" && d != "sparse" && d != "random")
        bad_value("--data", "takes low_entropy, weights, sparse or random, not '" + d + "'");
  });
  flag("--progress", [&] { s.progress = 1; });
  flag("--no-progress", [&] { s.progress = 0; });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) std::fputs(usage_text, stdout);
    throw UsageExit{0};
  } catch (const CLI::ParseError& e) {
    fail(rank, e.what());
  }

  if (!list.empty()) {
    s.sizes = list;
  } else {
    if (min_bytes > max_bytes) fail(rank, "--min-bytes is larger than --max-bytes");
    for (std::size_t b = min_bytes; b <= max_bytes;) {
      s.sizes.push_back(b);
      const std::size_t next = step > 0 ? b + step : std::max(b + 1, b * factor);
      if (next <= b) break;  // overflow
      b = next;
    }
  }
  std::sort(s.sizes.begin(), s.sizes.end());
  s.sizes.erase(std::unique(s.sizes.begin(), s.sizes.end()), s.sizes.end());
  if (s.forms.empty()) fail(rank, "--forms is empty");
  if (s.algos.empty() && !s.mpi) fail(rank, "nothing to run: no agx algorithm and --no-mpi");
  return s;
}

}  // namespace bench
