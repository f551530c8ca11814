// agx-sim: runs agx's schedules with agx's own executor under SimGrid SMPI (built with smpicxx;
// the node operations of shared_memory and hierarchical need SMPI's shared address space).
//
//   smpirun ... agx-sim --ppn 8 --sizes 8,65536 --algos ring,bruck,auto,mpi,smpi:mpich
//                       [--selector-sizes 8]
//                       --cost 5e-7,2.2e-12,5e-7,2.7e-6,2e-11,5e-7 [--check] [--label fat-tree]
//                       [--groups 16,2e-11] [--unsimulated direct]
//
// For every algorithm and size (bytes per rank) it plans the schedule with the planner
// registry (lib/core/planner.cpp), runs it once with agx::execute on MPI_COMM_WORLD and
// prints, on rank 0, one CSV line per point (prefix AGXSIM, columns in `header` below):
// the simulated time of the slowest rank and the cost model's prediction.
//
// Names: every registry algorithm, with parameters (`bruck:k=4`); `hierarchical` and
// `shared_memory` are lib's own node planners (lib/core/planners/node_planner.cpp: puts, gets and
// the leaders' segment messages) run by lib's round engine on the simulator's node model
// (sim_node.hpp: copies cost --node-copy's copy time, flags are exact simulated events);
// `auto` = lib's own chooser (core/choose.hpp) on lib's selector (lib/core/select.cpp) built from --cost,
// --node-copy, --groups and --leaders, exactly as libagx builds it from a tuning file;
// `ompi41`, `mpich`, `han` = the fair baselines (baselines.hpp): Open MPI 4.1's and MPICH's
// default rules and Open MPI 5's HAN composition, run with agx's planners;
// `mpi` = MPI_Allgather, i.e. the selector chosen with smpirun --cfg=smpi/allgather:<sel>;
// `smpi:ompi`, `smpi:mpich`, `smpi:mvapich2` = that SMPI selector, called directly.
// --cost: α, β, per-message overhead for the node level, then the network level;
// --node-copy C,S: the cost model's copy seconds per byte and node sync seconds (default
// the built-in ones); --groups H,β: the group term (nodes in groups of H consecutive
// nodes, β per byte on the one link between two groups, as on the dragonfly platforms);
// --group-alpha S: the network α of a message inside a group (--groups; H,0 gives groups
// for this α alone, as the fat tree's leaves); --leaders L: leaders per node of
// `hierarchical` (AGX_HIER_LEADERS; default 1).
// --routes KIND,A,B,LINK_BPS,LINK_LAT,LOOP_BPS,LOOP_LAT,RECV_S[,RENDEZVOUS_BYTES]: the
// platform's links and routes for the cost model (routes.hpp: KIND cluster, fattree or
// dragonfly with its shape A,B; the links' bandwidth and latency, the loopback's, the
// receiver's overhead per eager message, smpi/or, and SMPI's detached-send threshold,
// default 65536); then every message is priced on its own path (core/cost_model.hpp).
// --tuning FILE: an agx tuning file (agx-tune's output, docs/tuning.md), read with lib's
// parser as libagx reads AGX_TUNING_FILE: its α/β/overhead per level, copy and sync costs
// (as --cost and --node-copy; its copy.rate lines are dropped, the simulated nodes copy at
// one rate) and its measured winners, which `auto` takes where one applies, as libagx
// does; a later --cost or --node-copy overrides its numbers.
// --recv-overhead NODE_S,NETWORK_S: the receiver's CPU time per message, by level: SMPI's
// per-message receive cost (smpi/or, one value for every message) replaced by a callback
// that charges NODE_S for a message between two ranks of one host and NETWORK_S for one
// between hosts (SMPI spends it on eager messages, below smpi/send-is-detached-thresh,
// once each has arrived).
// --unsimulated A,B: when `auto` or a baseline picks one of these, its row names the pick
// and the prediction but is not simulated (sim_s nan, check `unsimulated`): direct at 1024
// ranks puts 10^6 messages in flight at once, for many minutes of wall time.
// --predict-only: every row's pick and prediction, nothing simulated (sim_s nan, check
// `predicted`; the model's predictions for points simulated before, which do not depend
// on it; MPI all-gather rows are left out).
// Ranks are placed node by node, --ppn per node (the hostfile must list them so).
// --check: real buffers with a pattern, every result verified, every schedule validated
// symbolically first; without it buffers come from SMPI_SHARED_MALLOC (one pair for all
// ranks) and are never touched, and each message is sent as one contiguous run of the same
// size (see `flattened`).
// Every row's `ran` names what ran (`hierarchical/<inter-node algorithm>`, `han/<...>`);
// a row whose `ran` already ran at that size reuses that run (simulation is deterministic).
// The command line is read with CLI11; a value that cannot be read (`--sizes 8,x`), an
// unknown option or a missing value is a message on rank 0 and exit status 2.
// Exit status: 0 all good, 1 a wrong result or a failed check, 2 bad arguments.

// smpicxx force-includes smpi_helpers.h, whose exit(x) macro breaks CLI::App::exit:
// CLI11 is read without it.
#pragma push_macro("exit")
#undef exit
#include "cli_values.hpp"  // CLI11
#pragma pop_macro("exit")

#include <mpi.h>
#ifdef SMPI_SHARED_MALLOC
#include <simgrid/actor.h>
#endif
#ifdef SMPI_SHARED_MALLOC
#define AGX_SIM_ALLOC(bytes) SMPI_SHARED_MALLOC(bytes)
#define AGX_SIM_FREE(ptr) SMPI_SHARED_FREE(ptr)
constexpr bool kSharedAddressSpace = true;  // SMPI: every rank is a thread of one process
#else
constexpr bool kSharedAddressSpace = false;
#define AGX_SIM_ALLOC(bytes) std::malloc(bytes)
#define AGX_SIM_FREE(ptr) std::free(ptr)
#endif

#include "baselines.hpp"
#include "core/choose.hpp"
#include "core/config.hpp"
#include "core/cost_model.hpp"
#include "core/executor.hpp"
#include "core/planner.hpp"
#include "core/registry.hpp"
#include "core/select.hpp"
#include "core/tuning.hpp"
#include "core/validator.hpp"
#include "routes.hpp"
#include "sim_node.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef SMPI_SHARED_MALLOC
// SMPI's all-gather selectors, called by name so that one simulation runs all three (they
// are exported by libsimgrid; `--cfg=smpi/coll-selector` picks only one per run). Their
// inner collectives, if any, follow the run's coll-selector.
namespace simgrid::smpi {
int allgather__ompi(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
int allgather__mpich(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
int allgather__mvapich2(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
}  // namespace simgrid::smpi
#endif

namespace {

using namespace agx;

using AllgatherFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);

// `mpi` is MPI_Allgather (the run's selector); `smpi:<selector>` one of SMPI's selectors.
AllgatherFn mpi_allgather_for(const std::string& name) {
  if (name == "mpi") return &MPI_Allgather;
#ifdef SMPI_SHARED_MALLOC
  if (name == "smpi:ompi") return &simgrid::smpi::allgather__ompi;
  if (name == "smpi:mpich") return &simgrid::smpi::allgather__mpich;
  if (name == "smpi:mvapich2") return &simgrid::smpi::allgather__mvapich2;
#endif
  return nullptr;
}

constexpr const char* header =
    "AGXSIM,label,nranks,ppn,algo,ran,bytes,sim_s,pred_s,wall_s,check";

CostParams flat_copies() {
  CostParams c;
  c.copy_rates.clear();
  return c;
}

struct Args {
  int ppn = 1;
  std::vector<std::size_t> sizes;
  std::vector<std::string> algos;
  std::vector<std::size_t> selector_sizes;  // sizes at which `smpi:*` run (empty: all)
  std::vector<std::string> unsimulated;                     // auto's picks not simulated
  CostParams cost = flat_copies();  // the simulated nodes copy at one rate (sim_node.hpp)
  int group_nodes = 0;  // nodes per group (0: no groups)
  int leaders = 1;      // leaders per node of `hierarchical`
  std::vector<MeasuredBest> measured_best;  // --tuning's measured winners
  std::string tuning_source = "agx-sim --cost";
  std::optional<std::pair<double, double>> recv_overhead;  // --recv-overhead: node, network
  std::optional<sim::RouteSpec> routes;
  bool check = false;
  bool predict_only = false;
  std::string label = "sim";
};

using agx_tools::number;
using agx_tools::numbers;
using agx_tools::split;

// The command line, read with CLI11; "" when it is good, else the message.
std::string parse(int argc, char** argv, Args& a) {
  CLI::App app{"agx-sim"};
  using Text = const std::string&;
  auto value = [&](const char* name, std::function<void(Text)> apply) {
    app.add_option_function<std::string>(name, std::move(apply))->trigger_on_parse();  // last wins
  };
  app.add_flag("--check", a.check);
  app.add_flag("--predict-only", a.predict_only);
  value("--ppn", [&](Text v) {
    a.ppn = number<int>("--ppn", v);
    if (a.ppn < 1) throw CLI::ValidationError("--ppn", "must be at least 1, not '" + v + "'");
  });
  value("--label", [&](Text v) { a.label = v; });
  value("--algos", [&](Text v) { a.algos = split(v); });
  value("--unsimulated", [&](Text v) { a.unsimulated = split(v); });
  value("--selector-sizes", [&](Text v) { a.selector_sizes = numbers<std::size_t>("--selector-sizes", v); });
  value("--sizes", [&](Text v) { a.sizes = numbers<std::size_t>("--sizes", v); });
  value("--cost", [&](Text v) {
    const std::vector<double> x = numbers<double>("--cost", v, 6);
    a.cost.node = {x[0], x[1], x[2]};
    a.cost.network = {x[3], x[4], x[5]};
  });
  value("--node-copy", [&](Text v) {
    const std::vector<double> x = numbers<double>("--node-copy", v, 2);
    a.cost.copy_s_per_byte = x[0];
    a.cost.node_sync_s = x[1];
  });
  value("--tuning", [&](Text v) {
    std::ifstream in(v);
    if (!in) throw CLI::ValidationError("--tuning", "cannot read '" + v + "'");
    std::stringstream text;
    text << in.rdbuf();
    try {
      const Tuning t = parse_tuning(text.str(), v);
      a.cost = t.params;
      a.cost.copy_rates.clear();  // the simulated nodes copy at one rate (sim_node.hpp)
      a.group_nodes = t.group_nodes;
      a.measured_best = t.best;
      a.tuning_source = v;
    } catch (const std::exception& e) {
      throw CLI::ValidationError("--tuning", e.what());
    }
  });
  value("--recv-overhead", [&](Text v) {
    const std::vector<double> x = numbers<double>("--recv-overhead", v, 2);
    if (x[0] < 0 || x[1] < 0) throw CLI::ValidationError("--recv-overhead", "must not be negative, not '" + v + "'");
    a.recv_overhead = std::make_pair(x[0], x[1]);
  });
  value("--group-alpha", [&](Text v) { a.cost.group_alpha_s = number<double>("--group-alpha", v); });
  value("--leaders", [&](Text v) {
    a.leaders = number<int>("--leaders", v);
    if (a.leaders < 1) throw CLI::ValidationError("--leaders", "must be at least 1, not '" + v + "'");
  });
  value("--routes", [&](Text v) {
    const std::vector<std::string> f = split(v);
    if (f.size() != 8 && f.size() != 9)
      throw CLI::ValidationError("--routes", "needs KIND,A,B,LINK_BPS,LINK_LAT,LOOP_BPS,LOOP_LAT,RECV_S[,RENDEZVOUS_BYTES], not '" + v + "'");
    sim::RouteSpec r;
    r.kind = f[0];
    r.a = number<int>("--routes", f[1]);
    r.b = number<int>("--routes", f[2]);
    r.link_bytes_per_s = number<double>("--routes", f[3]);
    r.link_latency_s = number<double>("--routes", f[4]);
    r.loopback_bytes_per_s = number<double>("--routes", f[5]);
    r.loopback_latency_s = number<double>("--routes", f[6]);
    r.recv_overhead_s = number<double>("--routes", f[7]);
    if (f.size() == 9) r.rendezvous_bytes = number<std::size_t>("--routes", f[8]);
    if (r.link_bytes_per_s <= 0 || r.loopback_bytes_per_s <= 0)
      throw CLI::ValidationError("--routes", "bandwidths must be above 0, not '" + v + "'");
    a.routes = r;
  });
  value("--groups", [&](Text v) {
    const std::vector<std::string> g = split(v);
    if (g.size() != 2) throw CLI::ValidationError("--groups", "needs H,beta, not '" + v + "'");
    a.group_nodes = number<int>("--groups", g[0]);
    a.cost.group_link_s_per_byte = number<double>("--groups", g[1]);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  if (a.sizes.empty()) return "--sizes is missing or empty";
  if (a.algos.empty()) return "--algos is missing or empty";
  return "";
}

// The driver's own bookkeeping (choices, clocks, results) goes over binomial trees of
// point-to-point messages from and to rank 0. Under SMPI, the library's collectives first
// set up an SMP-aware MPI_COMM_WORLD (Comm::init_smp: a ring all-gather over all ranks,
// about 25 s of wall time at 1024 ranks); the trees never do, and only the runs of
// MVAPICH2's selector pay it, in its warm-up call.
constexpr int kBookkeepingTag = 4243;

void tree_bcast(void* buf, int count, MPI_Datatype type) {
  int n = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int mask = 1;  // my lowest set bit: my parent is r - mask (rank 0: past n)
  for (; mask < n; mask <<= 1)
    if (r & mask) {
      MPI_Recv(buf, count, type, r - mask, kBookkeepingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      break;
    }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (r + mask < n) MPI_Send(buf, count, type, r + mask, kBookkeepingTag, MPI_COMM_WORLD);
}

// The largest `v` of all ranks, on every rank (a reduction to rank 0, then tree_bcast).
double tree_max(double v) {
  int n = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (r & mask) {
      MPI_Send(&v, 1, MPI_DOUBLE, r - mask, kBookkeepingTag, MPI_COMM_WORLD);
      break;
    }
    if (r + mask < n) {
      double other = 0;
      MPI_Recv(&other, 1, MPI_DOUBLE, r + mask, kBookkeepingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      v = std::max(v, other);
    }
  }
  tree_bcast(&v, 1, MPI_DOUBLE);
  return v;
}

// Ranks node by node, ppn per node.
std::vector<int> node_of_ranks(int n, int ppn) {
  std::vector<int> node(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) node[static_cast<std::size_t>(r)] = r / ppn;
  return node;
}

// What a row runs, decided on rank 0 and broadcast (three ints).
struct Pick {
  enum Kind : int { schedule = 0, node = 1, han = 2, mpi = 3, unsimulated = 4 };
  int kind = schedule;
  AlgorithmChoice choice;  // schedule, node: the algorithm; han: the leaders' algorithm
};

void bcast_pick(Pick& p) {
  int v[3] = {p.kind, static_cast<int>(p.choice.id), p.choice.radix};
  tree_bcast(v, 3, MPI_INT);
  p.kind = v[0];
  p.choice = {static_cast<Algorithm>(v[1]), v[2]};
}

// Timing runs only: the same schedule with every transfer as one contiguous run of as many
// blocks, starting at block 0 of the receive buffer (executed in place). Peers, rounds and
// bytes per message are unchanged, so is the simulated time; what changes is that no
// message needs a derived datatype. SMPI packs derived-datatype messages into real,
// freshly allocated memory (it cannot see that SMPI_SHARED_MALLOC buffers are behind
// MPI_BOTTOM), which at 1024 ranks and 64 KiB took over 64 GiB and minutes of copying.
Schedule flattened(Schedule s) {
  for (Round& round : s.rounds)
    for (auto* list : {&round.sends, &round.recvs})
      for (Transfer& t : *list) t.blocks = {BlockSpan{0, block_count(t.blocks)}};
  return s;
}

// Every rank starts the timed call at the same simulated instant: a barrier releases ranks
// at different times (a tree barrier by up to its depth in latencies, which at 1024 ranks
// added 10 µs to an 8-byte all-gather), so the ranks agree on the latest clock plus 1 ms
// and idle until then. Outside SMPI it is a plain barrier.
double common_start() {
#ifdef SMPI_SHARED_MALLOC
  const double latest = tree_max(MPI_Wtime());
  const double start = latest + 1e-3;
  if (MPI_Wtime() < start) sg_actor_sleep_for(start - MPI_Wtime());
  return start;
#else
  tree_max(0);  // a barrier
  return MPI_Wtime();
#endif
}

unsigned char pattern(int rank, std::size_t i) {
  return static_cast<unsigned char>((rank * 131 + static_cast<int>(i % 251) * 7 + 1) & 0xff);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Args a;
  if (const std::string why = parse(argc, argv, a); !why.empty()) {
    if (rank == 0) std::fprintf(stderr, "agx-sim: %s (options: the comment in driver.cpp)\n", why.c_str());
    MPI_Finalize();
    return 2;
  }
#ifdef SMPI_SHARED_MALLOC
  if (a.recv_overhead && rank == 0) {
    // One callback for the whole simulation (the ranks are threads of one process),
    // registered before any timed call: a message between two ranks of one host crosses
    // the node level, any other the network.
    const auto [node_s, network_s] = *a.recv_overhead;
    smpi_register_op_cost_callback(SmpiOperation::RECV,
                                   [node_s = node_s, network_s = network_s](
                                       std::size_t, simgrid::s4u::Host* src, simgrid::s4u::Host* dst) {
                                     return src == dst ? node_s : network_s;
                                   });
  }
#else
  if (a.recv_overhead && rank == 0)
    std::fprintf(stderr, "agx-sim: --recv-overhead needs SMPI; ignored\n");
#endif
  const std::size_t max_bytes = *std::max_element(a.sizes.begin(), a.sizes.end());
  const std::size_t total = max_bytes * static_cast<std::size_t>(n);
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  if (a.check) {
    send = static_cast<unsigned char*>(std::malloc(max_bytes + 1));
    recv = static_cast<unsigned char*>(std::malloc(total + 1));
  } else {
    // Timing runs: under SMPI all ranks live in one address space, so rank 0's two
    // SMPI_SHARED_MALLOC buffers serve every rank (never touched, never copied). One
    // receive buffer per rank would map N²·M bytes, and the kernel's page tables for them
    // took minutes and gigabytes (4096 ranks × 256 KiB: 4 TiB mapped).
    unsigned long long at[2] = {0, 0};
    if (rank == 0 || !kSharedAddressSpace) {
      send = static_cast<unsigned char*>(AGX_SIM_ALLOC(max_bytes + 1));
      recv = static_cast<unsigned char*>(AGX_SIM_ALLOC(total + 1));
      at[0] = reinterpret_cast<std::uintptr_t>(send);
      at[1] = reinterpret_cast<std::uintptr_t>(recv);
    }
    if (kSharedAddressSpace) {
      tree_bcast(at, 2, MPI_UNSIGNED_LONG_LONG);
      send = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(at[0]));
      recv = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(at[1]));
    }
  }
  const std::vector<int> node_of = node_of_ranks(n, a.ppn);
  Placement placement(node_of);
  if (a.routes) {
    try {
      placement = placement.with_routes(sim::make_routes(*a.routes, (n + a.ppn - 1) / a.ppn));
    } catch (const std::invalid_argument& e) {
      if (rank == 0) std::fprintf(stderr, "agx-sim: --routes: %s\n", e.what());
      MPI_Finalize();
      return 2;
    }
  }
  // lib's own selector, built as libagx builds it from a tuning file (rank 0 decides).
  Tuning tuning;
  tuning.params = a.cost;
  tuning.group_nodes = a.group_nodes;
  tuning.source = a.tuning_source;
  tuning.best = a.measured_best;
  NodeStageParams stage;
  stage.leaders = a.leaders;
  std::unique_ptr<Selector> selector;
  if (rank == 0) selector = std::make_unique<Selector>(placement, tuning, stage);
  // Node operations: the node model of sim_node.hpp (SMPI only: ranks are threads).
  std::unique_ptr<sim::SimNodes> nodes;
  if (kSharedAddressSpace)
    nodes = std::make_unique<sim::SimNodes>(node_of, MPI_COMM_WORLD, kBookkeepingTag,
                                            a.check ? nullptr : reinterpret_cast<std::byte*>(recv),
                                            total + 1, sim::NodeCopyCost{a.cost.copy_s_per_byte, a.cost.node_sync_s},
                                            a.check);
  int failures = 0;
  if (rank == 0) { std::printf("%s\n", header); std::fflush(stdout); }
  std::set<std::string> warmed_up;  // MPI all-gathers that had their untimed first call
  const bool in_place = !a.check;   // timing runs execute in place (see `flattened`)
  for (const std::size_t bytes : a.sizes) {
    const Layout layout = Layout::uniform(n, bytes);
    NodeShape shape;
    shape.node_of = node_of;
    shape.leaders = a.leaders;
    shape.total_bytes = bytes * static_cast<std::size_t>(n);
    // Simulated times are deterministic: a row whose `ran` already ran reuses its time.
    std::map<std::string, double> measured;
    for (const std::string& name : a.algos) {
      if (name.rfind("smpi:", 0) == 0 && !a.selector_sizes.empty() &&
          std::find(a.selector_sizes.begin(), a.selector_sizes.end(), bytes) == a.selector_sizes.end())
        continue;
      // What runs, and its prediction (rank 0 decides, all follow).
      Pick pick;
      double pred = std::numeric_limits<double>::quiet_NaN();
      const bool chosen = name == "auto" || name == "ompi41" || name == "mpich" || name == "han";
      if (mpi_allgather_for(name) != nullptr) pick.kind = Pick::mpi;
      if (rank == 0 && pick.kind != Pick::mpi) {
        std::string why;
        if (name == "auto") {  // lib's chooser, as a warm blocking call on host buffers
          CallFacts facts;
          facts.in_place = in_place;
          const CallChoice c = choose(*selector, layout, Options{Algorithm::automatic, false}, facts);
          pick.choice = c.algorithm;
          if (c.path == CallPath::node) pick.kind = Pick::node;
        }
        else if (name == "ompi41") pick.choice = sim::ompi41_rule(n, bytes);
        else if (name == "mpich") pick.choice = sim::mpich_rule(n, bytes);
        else if (name == "han") pick = {Pick::han, sim::han_planner(n, a.ppn, bytes).inter()};
        else if (const auto c = parse_algorithm_choice(name, &why); c && c->id != Algorithm::automatic)
          pick.choice = resolve(*c);
        else {
          std::fprintf(stderr, "agx-sim: unknown algorithm '%s'%s%s\n", name.c_str(),
                       why.empty() ? "" : ": ", why.c_str());
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (pick.kind != Pick::han && is_node_path(pick.choice.id)) pick.kind = Pick::node;
        if (pick.kind == Pick::node && !kSharedAddressSpace) {
          std::fprintf(stderr, "agx-sim: '%s' needs SMPI (node operations)\n", name.c_str());
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
      }
      bcast_pick(pick);
      std::unique_ptr<sim::HanPlanner> han;
      if (pick.kind == Pick::han) han = std::make_unique<sim::HanPlanner>(a.ppn, pick.choice);
      std::string ran = pick.kind == Pick::mpi ? name : to_string(pick.choice);
      if (pick.kind == Pick::han) ran = "han/" + ran;
      if (pick.kind == Pick::node && pick.choice.id == Algorithm::hierarchical) {
        const int nnodes = (n + a.ppn - 1) / a.ppn;
        if (nnodes > 1 && nnodes < n)
          ran += "/" + to_string(hier_inter_algorithm(nnodes, shape.total_bytes, shape.inter));
      }
      if (rank == 0 && pick.kind != Pick::mpi)
        pred = pick.kind == Pick::han
                   ? predict_seconds(*han, layout, selector->placement(), a.cost, in_place)
                   : predict_algorithm(pick.choice, layout, selector->placement(), a.cost, in_place, stage);
      if (a.predict_only) {
        if (rank == 0 && pick.kind != Pick::mpi) {
          std::printf("AGXSIM,%s,%d,%d,%s,%s,%zu,nan,%.9g,0,predicted\n", a.label.c_str(), n, a.ppn,
                      name.c_str(), ran.c_str(), bytes, pred);
          std::fflush(stdout);
        }
        continue;
      }
      const bool reuse = !a.check && measured.count(ran) > 0;  // checked runs run every row
      if (chosen && !reuse &&
          std::find(a.unsimulated.begin(), a.unsimulated.end(), std::string(to_string(pick.choice.id))) !=
              a.unsimulated.end() && pick.kind == Pick::schedule) {
        if (rank == 0) {
          std::printf("AGXSIM,%s,%d,%d,%s,%s,%zu,nan,%.9g,0,unsimulated\n", a.label.c_str(), n,
                      a.ppn, name.c_str(), ran.c_str(), bytes, pred);
          std::fflush(stdout);
        }
        continue;
      }
      // The schedule this rank runs (planned), and as executed (timing runs: flattened).
      Schedule planned;
      if (!reuse) {
        if (pick.kind == Pick::schedule) planned = planner_for(pick.choice.id).plan({n, rank, pick.choice.radix});
        else if (pick.kind == Pick::node) planned = plan_node_algorithm(pick.choice.id, shape, rank);
        else if (pick.kind == Pick::han) planned = han->plan({n, rank});
      }
      if (a.check && pick.kind != Pick::mpi && rank == 0) {
        std::vector<Schedule> all;
        for (int r = 0; r < n; ++r)
          all.push_back(pick.kind == Pick::schedule ? planner_for(pick.choice.id).plan({n, r, pick.choice.radix})
                        : pick.kind == Pick::node   ? plan_node_algorithm(pick.choice.id, shape, r)
                                                    : han->plan({n, r}));
        if (const std::string why = validate(all, pick.kind == Pick::node ? node_of : std::vector<int>{});
            !why.empty()) {
          std::fprintf(stderr, "agx-sim: %s: invalid schedule: %s\n", name.c_str(), why.c_str());
          ++failures;
        }
      }
      if (a.check) {
        for (std::size_t i = 0; i < bytes; ++i) send[i] = pattern(rank, i);
        std::fill(recv, recv + bytes * static_cast<std::size_t>(n), static_cast<unsigned char>(0xEE));
      }
      const Schedule executed = a.check ? planned : flattened(planned);
      if (pick.kind == Pick::mpi && warmed_up.insert(name).second) {
        // One untimed call first, all ranks starting together: a selector's one-time set-up
        // (SMPI's SMP-aware communicator for MVAPICH2's algorithms: 2.5 ms simulated at
        // 1024 ranks) belongs to no timed call, as in a benchmark's warm-up.
        common_start();
        mpi_allgather_for(name)(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
      }
      const Buffers buffers = a.check ? Buffers{send, recv, false} : Buffers{recv, recv, true};
      const auto wall0 = std::chrono::steady_clock::now();
      const double t0 = common_start();
      if (reuse) {
      } else if (pick.kind == Pick::node) {
        sim::SimNodeSegment segment(*nodes, planned, executed, layout);
        Execution run(executed, buffers, layout, MPI_COMM_WORLD, 4242, Config::default_max_message_bytes,
                      segment);
        run.start();
        run.wait();
      } else if (pick.kind != Pick::mpi) {
        execute(executed, buffers, layout, MPI_COMM_WORLD, 4242, Config::default_max_message_bytes);
      } else {
        mpi_allgather_for(name)(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
      }
      double slowest = tree_max(MPI_Wtime() - t0);
      if (reuse) slowest = measured[ran];
      else measured[ran] = slowest;
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      int wrong = 0;
      if (a.check && !reuse)
        for (int b = 0; b < n && wrong == 0; ++b)
          for (std::size_t i = 0; i < bytes; ++i)
            if (recv[static_cast<std::size_t>(b) * bytes + i] != pattern(b, i)) { wrong = 1; break; }
      const int any_wrong = static_cast<int>(tree_max(wrong));
      if (rank == 0) {
        failures += any_wrong;
        std::printf("AGXSIM,%s,%d,%d,%s,%s,%zu,%.9g,%.9g,%.3f,%s\n", a.label.c_str(), n, a.ppn,
                    name.c_str(), ran.c_str(), bytes, slowest, pred, wall,
                    a.check ? (any_wrong ? "WRONG" : "ok") : "-");
        std::fflush(stdout);
      }
    }
  }
  tree_max(0);  // a barrier
  nodes.reset();
  if (a.check) { std::free(send); std::free(recv); }
  else if (rank == 0 || !kSharedAddressSpace) { AGX_SIM_FREE(send); AGX_SIM_FREE(recv); }
  tree_bcast(&failures, 1, MPI_INT);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
