// Metadata, statistics and the table / CSV / JSON writers of agx-bench.

#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

namespace bench {
namespace {

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  const auto first = s.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : s.substr(first);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return one_line(line.substr(colon + 1));
    }
  return "unknown";
}

// Quantile q of sorted samples (nearest rank).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(std::lround(q * static_cast<double>(sorted.size() - 1)));
  return sorted[i];
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') { out += '\\'; out += ch; }
    else if (ch == '\n') out += "\\n";
    else if (static_cast<unsigned char>(ch) < 0x20) { char u[8]; std::snprintf(u, sizeof u, "\\u%04x", ch); out += u; }
    else out += ch;
  }
  return out + "\"";
}

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string human_bytes(std::size_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && b >= 1024 && b % 1024 == 0) { b /= 1024; ++u; }
  return std::to_string(b) + " " + unit[u];
}

const char* place_name(bool in_place) { return in_place ? "in_place" : "out_of_place"; }

}  // namespace

#ifndef AGX_VERSION
#define AGX_VERSION "unknown"
#endif

Meta collect_meta(MPI_Comm comm, const Settings& s) {
  Meta m;
  m.agx_version = AGX_VERSION;
  m.command_line = s.command_line;
  m.calls = s.nonblocking ? "nonblocking" : "blocking";
  m.memory = s.alloc == Alloc::heap ? s.memory : s.memory + "/" + std::string(alloc_name(s.alloc));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m.hostname = host;
  m.cpu_model = cpu_model();
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(lib, &len);
  m.mpi_library = one_line(lib);
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  m.mpi_standard = std::to_string(major) + "." + std::to_string(minor);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m.date_utc = date;

  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, local_rank = 0;
  MPI_Comm_size(node, &local);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  int leader = local_rank == 0 ? 1 : 0;
  MPI_Comm_size(comm, &m.ranks);
  MPI_Allreduce(&leader, &m.nodes, 1, MPI_INT, MPI_SUM, comm);
  MPI_Allreduce(&local, &m.ranks_per_node_min, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(&local, &m.ranks_per_node_max, 1, MPI_INT, MPI_MAX, comm);
  return m;
}

std::vector<Row> make_rows(const Problem& p, int nranks, const std::vector<Candidate>& cands,
                           const std::vector<Outcome>& outs) {
  std::vector<Row> rows;
  for (std::size_t first = 0; first < outs.size(); first += cands.size()) {  // one method
    double mpi_us = 0;
    const std::size_t from = rows.size();
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const Outcome& o = outs[first + i];
      Row r;
      r.form = p.form;
      r.in_place = p.in_place;
      r.bytes_per_rank = p.bytes_per_rank;
      r.total_bytes = p.total_bytes;
      r.method = o.method;
      r.candidate = cands[i].name;
      r.ran = o.ran.empty() ? cands[i].name : o.ran;
      r.status = o.status;
      r.note = o.note;
      r.iters = o.iters;
      r.invalid = o.invalid;
      r.samples = o.samples.size();
      r.window_us = o.window_s * 1e6;
      r.sync_us = o.sync_s * 1e6;
      if (o.status == "ok" && o.invalid > 0 && o.samples.empty())
        r.note += std::string(r.note.empty() ? "" : "; ") +
                  "every window start was missed by some rank: try a larger --window-factor";
      if (r.timed()) {
        std::vector<double> s = o.samples;
        std::sort(s.begin(), s.end());
        r.median_us = quantile(s, 0.5) * 1e6;
        double sum = 0;
        for (double v : s) sum += v;
        r.mean_us = sum / static_cast<double>(s.size()) * 1e6;
        r.p10_us = quantile(s, 0.1) * 1e6;
        r.p90_us = quantile(s, 0.9) * 1e6;
        r.min_us = s.front() * 1e6;
        r.max_us = s.back() * 1e6;
        // NCCL's definitions for all-gather: algbw = total bytes / time, busbw = algbw (N-1)/N.
        if (r.median_us > 0) {
          r.algbw_GBps = static_cast<double>(p.total_bytes) / (r.median_us * 1e-6) / 1e9;
          r.busbw_GBps = r.algbw_GBps * (nranks - 1) / nranks;
        }
        if (cands[i].kind == Kind::mpi) mpi_us = r.median_us;
      }
      rows.push_back(r);
    }
    for (std::size_t k = from; k < rows.size(); ++k)
      if (mpi_us > 0 && rows[k].median_us > 0) rows[k].ratio_to_mpi = rows[k].median_us / mpi_us;
  }
  return rows;
}

void Table::meta(const Meta& m, const Settings& s, bool interposer_loaded) const {
  if (style_ == "none") return;
  std::printf("# agx-bench %s  %s\n", m.agx_version.c_str(), m.date_utc.c_str());
  std::printf("# host %s: %s, %d cores\n", m.hostname.c_str(), m.cpu_model.c_str(), m.cores);
  std::string lib = m.mpi_library;  // MPICH's is long: the CSV and JSON keep it whole
  if (lib.size() > 100) lib = lib.substr(0, 97) + "...";
  std::printf("# MPI: %s (standard %s)\n", lib.c_str(), m.mpi_standard.c_str());
  std::printf("# N = %d ranks on %d node(s), %d-%d ranks per node, %s memory\n", m.ranks, m.nodes,
              m.ranks_per_node_min, m.ranks_per_node_max, m.memory.c_str());
  std::string methods;
  for (const Method x : s.methods) methods += (methods.empty() ? "" : ", ") + std::string(method_name(x));
  std::printf("# timing: %s (docs/benchmarks.md); median us; (x): ratio to the MPI library, below 1 = faster\n",
              methods.c_str());
  if (s.nonblocking)
    std::printf("# calls: nonblocking, each started and then waited for (agx: start() and wait(); "
                "MPI: MPI_Iallgather(v) and MPI_Wait)\n");
  for (const auto& c : cands_)
    if (c.kind == Kind::dropin)
      std::printf(s.nonblocking ? "# mpi-agx: MPI_Iallgather(v) by its normal symbol: %s\n"
                                : "# mpi-agx: MPI_Allgather(v) by its normal symbol: %s\n",
                  interposer_loaded ? "libagx_pmpi.so is loaded (agx's interposer)"
                                    : "libagx_pmpi.so NOT loaded, so the MPI library's own");
}

void Table::section(Form f, bool in_place) const {
  if (style_ == "none") return;
  std::printf("\n## %s, %s%s\n", std::string(form_name(f)).c_str(), place_name(in_place),
              f == Form::regular ? "" : " (v form)");
  if (style_ == "wide") {
    std::printf("%12s %-7s", "bytes/rank", "method");
    for (const auto& c : cands_) std::printf(" %18s", c.name.c_str());
    std::printf("\n");
  } else {
    std::printf("%12s %-7s %-20s %-20s %11s %23s %10s %10s %7s  %s\n", "bytes/rank", "method",
                "candidate", "ran", "median_us", "p10..p90 us", "algbw GB/s", "busbw GB/s", "vs mpi",
                "check");
  }
  std::fflush(stdout);
}

void Table::point(const std::vector<Row>& rows) const {
  if (style_ == "none" || rows.empty()) return;
  if (style_ == "wide") {
    for (std::size_t first = 0; first < rows.size(); first += cands_.size()) {  // one method
      std::printf("%12zu %-7s", rows[first].bytes_per_rank,
                  std::string(method_name(rows[first].method)).c_str());
      for (std::size_t k = first; k < first + cands_.size() && k < rows.size(); ++k) {
        const Row& r = rows[k];
        std::string cell;
        if (r.status != "ok") cell = r.status;
        else if (!r.timed()) cell = "invalid";
        else if (r.candidate == "mpi" || r.ratio_to_mpi == 0) cell = fmt(r.median_us, "%.2f");
        else cell = fmt(r.median_us, "%.2f") + " (" + fmt(r.ratio_to_mpi, "%.2f") + "x)";
        std::printf(" %18s", cell.c_str());
      }
      std::printf("\n");
    }
  } else {
    for (const auto& r : rows) {
      const std::string spread = r.timed() ? fmt(r.p10_us, "%.2f") + ".." + fmt(r.p90_us, "%.2f") : "-";
      const std::string ratio = r.ratio_to_mpi > 0 ? fmt(r.ratio_to_mpi, "%.2f") : "-";
      std::string check = r.status;
      if (r.invalid > 0) check += " (" + std::to_string(r.invalid) + " invalid)";
      std::printf("%12zu %-7s %-20s %-20s %11.2f %23s %10.3f %10.3f %7s  %s%s%s\n", r.bytes_per_rank,
                  std::string(method_name(r.method)).c_str(), r.candidate.c_str(), r.ran.c_str(),
                  r.median_us, spread.c_str(), r.algbw_GBps, r.busbw_GBps, ratio.c_str(),
                  check.c_str(), r.note.empty() ? "" : ": ", r.note.c_str());
    }
  }
  std::fflush(stdout);
}

CsvFile::CsvFile(const std::string& path, const Meta& m) : f_(std::fopen(path.c_str(), "w")) {
  if (!f_) return;
  const std::pair<const char*, std::string> kv[] = {
      {"agx_version", m.agx_version}, {"date_utc", m.date_utc}, {"hostname", m.hostname},
      {"cpu_model", m.cpu_model}, {"cores", std::to_string(m.cores)}, {"mpi_library", m.mpi_library},
      {"mpi_standard", m.mpi_standard}, {"ranks", std::to_string(m.ranks)},
      {"nodes", std::to_string(m.nodes)}, {"ranks_per_node_min", std::to_string(m.ranks_per_node_min)},
      {"ranks_per_node_max", std::to_string(m.ranks_per_node_max)}, {"memory", m.memory},
      {"calls", m.calls}, {"command", m.command_line}};
  for (const auto& [k, v] : kv) std::fprintf(f_, "# %s: %s\n", k, v.c_str());
  std::fprintf(f_, "ranks,nodes,ranks_per_node,memory,form,in_place,bytes_per_rank,total_bytes,"
                   "method,candidate,ran,iters,samples,invalid,median_us,mean_us,p10_us,p90_us,"
                   "min_us,max_us,algbw_GBps,busbw_GBps,ratio_to_mpi,window_us,sync_us,verified,note\n");
}

CsvFile::~CsvFile() {
  if (f_) std::fclose(f_);
}

void CsvFile::rows(const Meta& m, const std::vector<Row>& rows) {
  if (!f_) return;
  for (const auto& r : rows) {
    const bool t = r.timed();
    auto num = [t](double v, const char* f = "%.3f") { return t ? fmt(v, f) : std::string(); };
    const bool w = r.method == Method::window && r.window_us > 0;
    std::fprintf(f_, "%d,%d,%d,%s,%s,%d,%zu,%zu,%s,%s,%s,%d,%zu,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
                 m.ranks, m.nodes, m.ranks_per_node_max, m.memory.c_str(),
                 std::string(form_name(r.form)).c_str(), r.in_place ? 1 : 0, r.bytes_per_rank,
                 r.total_bytes, std::string(method_name(r.method)).c_str(), r.candidate.c_str(),
                 csv_field(r.ran).c_str(), r.iters, r.samples, r.invalid, num(r.median_us).c_str(),
                 num(r.mean_us).c_str(), num(r.p10_us).c_str(), num(r.p90_us).c_str(),
                 num(r.min_us).c_str(), num(r.max_us).c_str(), num(r.algbw_GBps, "%.5f").c_str(),
                 num(r.busbw_GBps, "%.5f").c_str(),
                 r.ratio_to_mpi > 0 ? fmt(r.ratio_to_mpi, "%.4f").c_str() : "",
                 w ? fmt(r.window_us).c_str() : "", w ? fmt(r.sync_us).c_str() : "", r.status.c_str(),
                 csv_field(r.note).c_str());
  }
  std::fflush(f_);
}

bool write_json(const std::string& path, const Meta& m, const std::vector<Row>& rows) {
  std::ostringstream o;
  o << "{\n  \"meta\": {\"agx_version\": " << json_string(m.agx_version)
    << ", \"date_utc\": " << json_string(m.date_utc) << ", \"hostname\": " << json_string(m.hostname)
    << ", \"cpu_model\": " << json_string(m.cpu_model) << ", \"cores\": " << m.cores
    << ", \"mpi_library\": " << json_string(m.mpi_library)
    << ", \"mpi_standard\": " << json_string(m.mpi_standard) << ", \"ranks\": " << m.ranks
    << ", \"nodes\": " << m.nodes << ", \"ranks_per_node_min\": " << m.ranks_per_node_min
    << ", \"ranks_per_node_max\": " << m.ranks_per_node_max << ", \"memory\": " << json_string(m.memory) << ", \"calls\": " << json_string(m.calls)
    << ", \"command\": " << json_string(m.command_line) << "},\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const bool t = r.timed(), w = r.method == Method::window && r.window_us > 0;
    auto num = [&](double v) { return t ? fmt(v, "%.6g") : std::string("null"); };
    o << (i ? ",\n    " : "\n    ") << "{\"form\": " << json_string(std::string(form_name(r.form)))
      << ", \"in_place\": " << (r.in_place ? "true" : "false") << ", \"bytes_per_rank\": " << r.bytes_per_rank
      << ", \"total_bytes\": " << r.total_bytes
      << ", \"method\": " << json_string(std::string(method_name(r.method)))
      << ", \"candidate\": " << json_string(r.candidate)
      << ", \"ran\": " << json_string(r.ran) << ", \"iters\": " << r.iters << ", \"samples\": " << r.samples
      << ", \"invalid\": " << r.invalid << ", \"median_us\": " << num(r.median_us)
      << ", \"mean_us\": " << num(r.mean_us) << ", \"p10_us\": " << num(r.p10_us)
      << ", \"p90_us\": " << num(r.p90_us) << ", \"min_us\": " << num(r.min_us)
      << ", \"max_us\": " << num(r.max_us) << ", \"algbw_GBps\": " << num(r.algbw_GBps)
      << ", \"busbw_GBps\": " << num(r.busbw_GBps) << ", \"ratio_to_mpi\": "
      << (r.ratio_to_mpi > 0 ? fmt(r.ratio_to_mpi, "%.6g") : std::string("null"))
      << ", \"window_us\": " << (w ? fmt(r.window_us, "%.6g") : std::string("null"))
      << ", \"sync_us\": " << (w ? fmt(r.sync_us, "%.6g") : std::string("null"))
      << ", \"verified\": " << json_string(r.status) << ", \"note\": " << json_string(r.note) << "}";
  }
  o << "\n  ]\n}\n";
  std::ofstream out(path);
  out << o.str();
  return static_cast<bool>(out);
}

void Progress::show(std::size_t point, const Problem& p, const std::string& candidate, int pass,
                    int passes) {  // candidate: "name" or "name/method"
  if (!out_) return;
  if (start_ < 0) start_ = MPI_Wtime();
  std::fprintf(out_, "\r\033[K[%zu/%zu] %s %s %s  %s pass %d/%d  %.0f s", point + 1, total_,
               std::string(form_name(p.form)).c_str(), place_name(p.in_place),
               human_bytes(p.bytes_per_rank).c_str(), candidate.c_str(), pass + 1, passes,
               MPI_Wtime() - start_);
  std::fflush(out_);
}

void Progress::done() {
  if (!out_ || start_ < 0) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
}

}  // namespace bench
