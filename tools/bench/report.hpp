#pragma once
// What agx-bench records and prints: the run's metadata (machine, MPI library, N, ranks
// per node, agx version), one Row per candidate and sweep point, and the three outputs
// (stdout table, CSV, JSON). Only rank 0 writes.

#include "options.hpp"
#include "problem.hpp"
#include "runner.hpp"

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace bench {

struct Meta {
  std::string agx_version, date_utc, command_line, hostname, cpu_model, mpi_library, mpi_standard,
      memory, calls;  ///< calls: blocking, or nonblocking (started, then waited for)
  int cores = 0, ranks = 0, nodes = 0, ranks_per_node_min = 0, ranks_per_node_max = 0;
};

/// Gathers the metadata; collective over `comm` (the node count comes from
/// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)).
Meta collect_meta(MPI_Comm comm, const Settings& s);

struct Row {
  Form form = Form::regular;
  bool in_place = false;
  std::size_t bytes_per_rank = 0, total_bytes = 0;
  Method method = Method::barrier;
  std::string candidate, ran, status, note;
  int iters = 0, invalid = 0;
  std::size_t samples = 0;
  double median_us = 0, mean_us = 0, p10_us = 0, p90_us = 0, min_us = 0, max_us = 0;
  double algbw_GBps = 0, busbw_GBps = 0, ratio_to_mpi = 0;  ///< 0: not measured
  double window_us = 0, sync_us = 0;                         ///< window method only
  bool timed() const { return status == "ok" && samples > 0; }
};

/// Rows of one sweep point (run_point's outcomes, method-major): statistics of each
/// outcome, bandwidths, ratios to the MPI library under the same method.
std::vector<Row> make_rows(const Problem& p, int nranks, const std::vector<Candidate>& cands,
                           const std::vector<Outcome>& outs);

/// The stdout table: a header per (form, place) section, then lines per sweep point.
class Table {
 public:
  Table(std::string style, const std::vector<Candidate>& cands) : style_(std::move(style)), cands_(cands) {}
  /// The header: machine, MPI library, N, methods, and what the drop-in candidate calls.
  void meta(const Meta& m, const Settings& s, bool interposer_loaded) const;
  void section(Form f, bool in_place) const;
  void point(const std::vector<Row>& rows) const;

 private:
  std::string style_;
  const std::vector<Candidate>& cands_;
};

/// CSV file: '# key: value' metadata lines, a header, then rows as they come (flushed).
class CsvFile {
 public:
  CsvFile(const std::string& path, const Meta& m);
  ~CsvFile();
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;
  void rows(const Meta& m, const std::vector<Row>& rows);
  bool ok() const { return f_ != nullptr; }

 private:
  std::FILE* f_ = nullptr;
};

/// Writes {"meta": {...}, "rows": [...]} to `path`; false when it cannot.
bool write_json(const std::string& path, const Meta& m, const std::vector<Row>& rows);

/// A one-line progress report rewritten in place ("\r") on `out` (null: off); cleared by
/// done(). agx-bench picks stderr when it is a terminal, else stdout when that is one
/// (under Open MPI's mpirun a rank's stdout is a terminal, its stderr a pipe).
class Progress {
 public:
  Progress(std::FILE* out, std::size_t total_points) : out_(out), total_(total_points) {}
  void show(std::size_t point, const Problem& p, const std::string& candidate, int pass, int passes);
  void done();

 private:
  std::FILE* out_;
  std::size_t total_;
  double start_ = -1;
};

}  // namespace bench
