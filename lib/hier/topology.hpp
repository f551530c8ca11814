#pragma once
// What agx knows about where the ranks of a communicator run, learnt once per
// communicator in its set-up exchange (lib/api/context.cpp: each rank's NodeRecord, one
// allgather) and cached in its hierarchical context.
//
//   nodes      ranks whose records name the same machine: a hash of the host name and the
//              kernel's boot id (no collective; what Open MPI and MPICH group by too), or
//              under AGX_NODE_DETECT=mpi the MPI library's own MPI_Comm_split_type
//              (MPI_COMM_TYPE_SHARED; one more collective, about 6 dups' time at N = 2),
//              then optionally cut into virtual nodes (AGX_VIRTUAL_NODE_SIZE /
//              AGX_VIRTUAL_NODES, see virtual_nodes.hpp). Ranks of different (virtual)
//              nodes never share memory.
//   numbering  nodes are numbered by their lowest communicator rank; inside a node,
//              ranks are numbered by communicator rank (the "local" index).
//   inside     hwloc: packages, NUMA domains, cores, PUs of the machine, and for every
//              rank of the node the cores it is bound to and the core it last ran on.
//
// Example, 4 ranks round-robin on 2 nodes (AGX_VIRTUAL_NODES=rr:2):
//   rank  0 1 2 3          node 0: ranks {0, 2}  (local 0, 1)
//   node  0 1 0 1          node 1: ranks {1, 3}  (local 0, 1)

#include <mpi.h>

#include "hier/settings.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace agx::hier {

/// One rank's place on its machine, as hwloc sees it.
struct Binding {
  int pid = 0;
  int first_core = -1;   ///< logical index of the first core of its binding (-1: unknown)
  int bound_cores = 0;   ///< number of cores its CPU binding covers
  int numa = -1;         ///< logical index of the NUMA domain of the first core
  int package = -1;      ///< logical index of the package of the first core
  int last_cpu = -1;     ///< OS index of the PU it last ran on
  char cpuset[48] = {};  ///< binding as hwloc list string, e.g. "0-1"
};

/// The machine of this process (hwloc, loaded once per process).
struct Machine {
  int packages = 0, numa_nodes = 0, cores = 0, pus = 0, l3_caches = 0, l2_caches = 0;
};

/// One rank's part of a communicator's set-up exchange: where it runs.
struct NodeRecord {
  std::uint64_t host = 0;       ///< its machine: equal values share memory (host_identity())
  std::int32_t label = 0;       ///< its virtual-node label there (0: no virtual nodes)
  std::int32_t per_local = 0;   ///< > 0: the label is its index in its machine / per_local
  std::uint64_t cpus[16] = {};  ///< its CPU affinity mask (the bits of a cpu_set_t)
  std::int32_t wait = 0;        ///< its AGX_WAIT (NodeSettings::Wait as a number)
};

struct Topology {
  int size = 0, rank = 0;
  int nnodes = 0;
  int node = 0;                           ///< my node
  int local = 0;                          ///< my index inside my node
  std::vector<int> node_of;               ///< per communicator rank
  std::vector<int> local_of;              ///< per communicator rank
  std::vector<std::vector<int>> members;  ///< per node: communicator ranks, increasing
  int real_nodes = 0;                     ///< nodes before the virtual split
  std::string virtual_setting;            ///< the setting that cut virtual nodes, or empty
  int label = 0;                          ///< my virtual-node label (NodeRecord::label)
  int node_cores = 0;  ///< cores the affinity masks of my node's ranks cover together (0: unknown)
  /// Whether any rank of my node may sleep on the node's futex (wait.hpp): one with
  /// AGX_WAIT=sleep, or one with AGX_WAIT=auto on a node with more ranks than cores.
  /// When none may, a flag store needs no wake-up (HierContext::notify is free).
  bool node_may_sleep = true;
  MPI_Comm node_comm = MPI_COMM_NULL;     ///< my node's ranks, rank = local index (made lazily)
  Machine machine;
  std::vector<Binding> bindings;          ///< per local rank of my node (node_bindings)

  int node_size(int j) const { return static_cast<int>(members[static_cast<std::size_t>(j)].size()); }
  int local_size() const { return node_size(node); }
};

/// This process's machine: a 64-bit hash of its host name and kernel boot id (the same
/// for every process of one operating system instance and host name).
std::uint64_t host_identity();

/// This rank's record. `shared`: MPI_COMM_NULL (the machine is host_identity()), or under
/// AGX_NODE_DETECT=mpi its shared-memory communicator, made from `comm` by
/// MPI_Comm_split_type with the rank as key (the machine is then named by its lowest
/// rank). Local (no communication); throws agx::Error for a malformed virtual-node
/// setting, whose text goes to `setting`.
NodeRecord own_record(MPI_Comm comm, MPI_Comm shared, std::string& setting);

/// MPI_COMM_NULL, or under AGX_NODE_DETECT=mpi `comm`'s shared-memory communicator
/// (MPI_Comm_split_type, collective over `comm`; the caller owns it). Throws agx::Error
/// for an AGX_NODE_DETECT that is neither host nor mpi.
MPI_Comm shared_comm_if_asked(MPI_Comm comm);

/// The topology seen by `rank` from every rank's record: pure (no MPI; tests build it
/// directly). node_comm stays null and bindings empty.
Topology topology_from(const std::vector<NodeRecord>& records, int rank, std::string setting);

/// More ranks on my node than the cores their affinity masks cover together (unknown
/// cores: not crowded).
inline bool crowded(const Topology& t) { return t.node_cores > 0 && t.local_size() > t.node_cores; }

/// Whether a rank waiting with `wait` (its AGX_WAIT) on a node that is `crowded` or not
/// may sleep on the node's futex (HierContext::oversubscribed, wait.hpp).
inline bool wait_may_sleep(Settings::Wait wait, bool crowded) {
  return wait == Settings::Wait::sleep || (wait == Settings::Wait::automatic && crowded);
}

/// My node's communicator, rank = local index: a split of `comm` by node (collective
/// over `comm`); under AGX_NODE_DETECT=mpi `shared` itself without virtual nodes (taken
/// over: `shared` becomes null), else a split of it (collective over `shared`).
MPI_Comm make_node_comm(const Topology& t, MPI_Comm comm, MPI_Comm& shared);

/// The bindings of my node's ranks (collective over t.node_comm).
std::vector<Binding> node_bindings(const Topology& t);

/// Discovers the topology of `comm` on its own (collective over it: one allgather, the
/// node communicator, the bindings), for tools. The caller owns node_comm.
Topology discover_topology(MPI_Comm comm);

/// The machine of this process.
const Machine& machine();

/// This process's binding.
Binding own_binding();

}  // namespace agx::hier
