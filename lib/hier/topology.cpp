// Topology discovery: MPI for nodes, hwloc for the inside of a node (topology.hpp).
// Collective steps, once per communicator: split_type, split (virtual nodes),
// allreduce (node's lowest rank), allgather (node of every rank), allgather inside
// the node (bindings).

#include "hier/topology.hpp"

#include "core/mpi_check.hpp"
#include "hier/virtual_nodes.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace agx::hier {
namespace {

hwloc_topology_t loaded_topology() {
  static hwloc_topology_t topo = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) return static_cast<hwloc_topology_t>(nullptr);
    if (hwloc_topology_load(t) != 0) {
      hwloc_topology_destroy(t);
      return static_cast<hwloc_topology_t>(nullptr);
    }
    return t;
  }();
  return topo;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  return n < 0 ? 0 : n;
}

}  // namespace

const Machine& machine() {
  static const Machine m = [] {
    Machine out;
    hwloc_topology_t t = loaded_topology();
    if (t == nullptr) return out;
    out.packages = count(t, HWLOC_OBJ_PACKAGE);
    out.numa_nodes = count(t, HWLOC_OBJ_NUMANODE);
    out.cores = count(t, HWLOC_OBJ_CORE);
    out.pus = count(t, HWLOC_OBJ_PU);
    out.l3_caches = count(t, HWLOC_OBJ_L3CACHE);
    out.l2_caches = count(t, HWLOC_OBJ_L2CACHE);
    return out;
  }();
  return m;
}

Binding own_binding() {
  Binding b;
  b.pid = static_cast<int>(getpid());
  static std::mutex mutex;  // hwloc topology queries are not documented thread-safe
  std::lock_guard lock(mutex);
  hwloc_topology_t t = loaded_topology();
  if (t == nullptr) return b;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(set)) {
    hwloc_bitmap_list_snprintf(b.cpuset, sizeof b.cpuset, set);
    b.bound_cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, set, HWLOC_OBJ_CORE);
    if (hwloc_obj_t core = hwloc_get_next_obj_covering_cpuset_by_type(t, set, HWLOC_OBJ_CORE, nullptr)) {
      b.first_core = static_cast<int>(core->logical_index);
      if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, core))
        b.package = static_cast<int>(pkg->logical_index);
      hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
      hwloc_cpuset_to_nodeset(t, core->cpuset, nodes);
      const int first = hwloc_bitmap_first(nodes);
      if (first >= 0)
        if (hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(first)))
          b.numa = static_cast<int>(numa->logical_index);
      hwloc_bitmap_free(nodes);
    }
  }
  if (hwloc_get_last_cpu_location(t, set, HWLOC_CPUBIND_PROCESS) == 0)
    b.last_cpu = hwloc_bitmap_first(set);
  hwloc_bitmap_free(set);
  return b;
}

Topology discover_topology(MPI_Comm comm) {
  Topology t;
  check_mpi(MPI_Comm_size(comm, &t.size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(comm, &t.rank), "MPI_Comm_rank");

  MPI_Comm real_node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &real_node),
            "MPI_Comm_split_type");
  int real_local = 0;
  check_mpi(MPI_Comm_rank(real_node, &real_local), "MPI_Comm_rank");
  const int label = virtual_node_label(t.rank, real_local, t.virtual_setting);
  const int split_rc = MPI_Comm_split(real_node, label, t.rank, &t.node_comm);
  const int is_real_first = real_local == 0 ? 1 : 0;  // one per real node
  MPI_Comm_free(&real_node);
  check_mpi(split_rc, "MPI_Comm_split");
  check_mpi(MPI_Allreduce(&is_real_first, &t.real_nodes, 1, MPI_INT, MPI_SUM, comm), "MPI_Allreduce");

  int lowest = 0;
  check_mpi(MPI_Allreduce(&t.rank, &lowest, 1, MPI_INT, MPI_MIN, t.node_comm), "MPI_Allreduce");
  std::vector<int> lowest_of(static_cast<std::size_t>(t.size));
  // PMPI_ on purpose: under the interposer, MPI_Allgather would re-enter agx.
  check_mpi(PMPI_Allgather(&lowest, 1, MPI_INT, lowest_of.data(), 1, MPI_INT, comm), "MPI_Allgather");

  // Nodes in order of their lowest rank; members in rank order.
  std::vector<int> leaders = lowest_of;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  t.nnodes = static_cast<int>(leaders.size());
  t.members.assign(leaders.size(), {});
  t.node_of.resize(static_cast<std::size_t>(t.size));
  t.local_of.resize(static_cast<std::size_t>(t.size));
  for (int r = 0; r < t.size; ++r) {
    const auto u = static_cast<std::size_t>(r);
    const int j = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), lowest_of[u]) -
                                   leaders.begin());
    t.node_of[u] = j;
    t.local_of[u] = static_cast<int>(t.members[static_cast<std::size_t>(j)].size());
    t.members[static_cast<std::size_t>(j)].push_back(r);
  }
  t.node = t.node_of[static_cast<std::size_t>(t.rank)];
  t.local = t.local_of[static_cast<std::size_t>(t.rank)];

  t.machine = machine();
  const Binding mine = own_binding();
  t.bindings.resize(static_cast<std::size_t>(t.local_size()));
  check_mpi(PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, t.bindings.data(), sizeof mine, MPI_BYTE,
                          t.node_comm),
            "MPI_Allgather");
  return t;
}

}  // namespace agx::hier
