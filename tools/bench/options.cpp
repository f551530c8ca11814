// agx-bench's command line parser. Sizes accept K, M, G suffixes (powers of 1024,
// optionally followed by iB or B): 64K, 1MiB, 64M.

#include "options.hpp"

#include <agx/algorithm.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

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
Call forms:
  --place out|in|both   out of place (default), in place, or both
  --in-place            same as --place in
  --forms F,F,...    regular, one_large, many_zero, ramp, or 'all' (default regular)
  --v                same as --forms one_large,many_zero,ramp
  --memory host      where buffers live (device memory comes with the GPU issue)
Timing:
  --passes P         batches per candidate and size (default 5)
  --batch-seconds S  target length of one batch (default 0.02)
  --max-iters I      iterations per batch at most (default 1000)
Output:
  --csv FILE         rows as CSV (machine, MPI library, N... as '# key: value' lines first)
  --json FILE        the same as one JSON document {"meta": {...}, "rows": [...]}
  --table wide|long|none   stdout table: one line per size (default), per candidate, or none
  --progress / --no-progress   progress line (default: on stderr when it is a terminal,
                     else on stdout when that is one; --progress forces stderr)
Self-test:
  --corrupt NAME     flip one received byte after every call of candidate NAME, to
                     show that a wrong result is reported as WRONG (exit status 1)
)";

[[noreturn]] void fail(int rank, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "agx-bench: %s (see agx-bench --help)\n", message.c_str());
  throw UsageExit{2};
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::size_t parse_bytes(const std::string& text, int rank) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    fail(rank, "not a size: '" + text + "'");
  }
  std::string suffix = text.substr(used);
  unsigned shift = 0;
  if (!suffix.empty() && std::string("KkMmGg").find(suffix[0]) != std::string::npos) {
    shift = suffix[0] == 'K' || suffix[0] == 'k' ? 10 : suffix[0] == 'M' || suffix[0] == 'm' ? 20 : 30;
    suffix.erase(0, 1);
    if (suffix == "iB" || suffix == "B") suffix.clear();
  } else if (suffix == "B") {
    suffix.clear();
  }
  if (!suffix.empty()) fail(rank, "not a size: '" + text + "'");
  return static_cast<std::size_t>(value) << shift;
}

Form parse_form(std::string name, int rank) {
  std::replace(name.begin(), name.end(), '-', '_');
  for (Form f : {Form::regular, Form::one_large, Form::many_zero, Form::ramp})
    if (form_name(f) == name) return f;
  fail(rank, "unknown form '" + name + "'");
}

}  // namespace

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

  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(rank, a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      try {
        return std::stod(v);
      } catch (const std::exception&) {
        fail(rank, a + ": not a number: '" + v + "'");
      }
    };
    if (a == "--help" || a == "-h") {
      if (rank == 0) std::fputs(usage_text, stdout);
      throw UsageExit{0};
    } else if (a == "--min-bytes") min_bytes = parse_bytes(next(), rank);
    else if (a == "--max-bytes") max_bytes = parse_bytes(next(), rank);
    else if (a == "--factor") factor = static_cast<std::size_t>(std::max(2.0, number(next())));
    else if (a == "--step") step = parse_bytes(next(), rank);
    else if (a == "--sizes") for (const auto& t : split(next())) list.push_back(parse_bytes(t, rank));
    else if (a == "--algos") {
      const std::string v = next();
      s.algos.clear();
      if (v == "all") {
        s.algos.emplace_back("auto");
        for (const auto& c : agx::algorithm_variants()) s.algos.push_back(agx::to_string(c));
      } else if (v != "none") s.algos = split(v);
      for (const auto& name : s.algos) {
        std::string why;
        if (!agx::parse_algorithm_choice(name, &why)) fail(rank, "--algos: " + why);
      }
    } else if (a == "--no-mpi") s.mpi = false;
    else if (a == "--no-copy-bound") s.copy_bound = false;
    else if (a == "--in-place") s.in_place = {true};
    else if (a == "--place") {
      const std::string v = next();
      if (v == "out") s.in_place = {false};
      else if (v == "in") s.in_place = {true};
      else if (v == "both") s.in_place = {false, true};
      else fail(rank, "--place takes out, in or both");
    } else if (a == "--forms") {
      const std::string v = next();
      s.forms.clear();
      if (v == "all") s.forms = {Form::regular, Form::one_large, Form::many_zero, Form::ramp};
      else for (const auto& t : split(v)) s.forms.push_back(parse_form(t, rank));
    } else if (a == "--v") s.forms = {Form::one_large, Form::many_zero, Form::ramp};
    else if (a == "--memory") {
      s.memory = next();
      if (s.memory == "device") fail(rank, "--memory device is not available yet: device buffers come with agx's GPU support");
      if (s.memory != "host") fail(rank, "--memory takes host");
    } else if (a == "--passes") s.passes = std::max(1, static_cast<int>(number(next())));
    else if (a == "--batch-seconds") s.batch_seconds = std::max(0.0, number(next()));
    else if (a == "--max-iters") s.max_iters = std::max(1, static_cast<int>(number(next())));
    else if (a == "--csv") s.csv = next();
    else if (a == "--json") s.json = next();
    else if (a == "--table") {
      s.table = next();
      if (s.table != "wide" && s.table != "long" && s.table != "none") fail(rank, "--table takes wide, long or none");
    } else if (a == "--corrupt") s.corrupt = next();
    else if (a == "--progress") s.progress = 1;
    else if (a == "--no-progress") s.progress = 0;
    else fail(rank, "unknown option " + a);
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
