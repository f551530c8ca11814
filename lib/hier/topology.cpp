// Topology discovery: host names for nodes, hwloc for the inside of a node (topology.hpp).
// A rank's record is local (its machine's identity, or under AGX_NODE_DETECT=mpi
// split_type's group translated to the communicator's); the records of all ranks come
// from the communicator's set-up exchange, and the topology is a pure function of them. The node communicator and the bindings are
// made only when a node path or a report needs them.

#include "hier/topology.hpp"

#include <agx/error.hpp>

#include "core/mpi_check.hpp"
#include "hier/settings.hpp"
#include "hier/virtual_nodes.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

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

std::uint64_t host_identity() {
  static const std::uint64_t id = [] {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
    std::string text = name;
    // Two machines may share a host name (containers); a boot id is unique per boot.
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char boot[64] = {};
      if (std::fgets(boot, sizeof boot, f) != nullptr) text += std::string("\n") + boot;
      std::fclose(f);
    }
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }();
  return id;
}

NodeRecord own_record(MPI_Comm comm, MPI_Comm shared, std::string& setting) {
  NodeRecord r;
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  r.host = host_identity();
  if (shared != MPI_COMM_NULL) {
    // The shared communicator's rank 0 is its lowest communicator rank (rank is the key).
    MPI_Group shared_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(shared, &shared_group), "MPI_Comm_group");
    check_mpi(MPI_Comm_group(comm, &comm_group), "MPI_Comm_group");
    const int first = 0;
    int lowest = 0;
    const int rc = MPI_Group_translate_ranks(shared_group, 1, &first, comm_group, &lowest);
    MPI_Group_free(&shared_group);
    MPI_Group_free(&comm_group);
    check_mpi(rc, "MPI_Group_translate_ranks");
    r.host = static_cast<std::uint64_t>(lowest);
  }
  const VirtualRule rule = virtual_node_rule(rank, setting);
  r.label = rule.label;
  r.per_local = rule.per_local;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);  // unknown: no cores
  static_assert(sizeof r.cpus >= sizeof(cpu_set_t));
  std::memcpy(r.cpus, &mine, sizeof mine);
  r.wait = static_cast<std::int32_t>(settings().wait);
  return r;
}

Topology topology_from(const std::vector<NodeRecord>& records, int rank, std::string setting) {
  Topology t;
  t.size = static_cast<int>(records.size());
  t.rank = rank;
  t.virtual_setting = std::move(setting);
  // A node is a (machine, label) pair; nodes in order of their lowest rank, members in
  // rank order (records are in rank order, so the first rank seen is the lowest).
  std::map<std::pair<std::uint64_t, int>, int> index;
  std::map<std::uint64_t, int> real;  // machine -> ranks seen on it so far
  t.node_of.resize(records.size());
  t.local_of.resize(records.size());
  for (int r = 0; r < t.size; ++r) {
    const NodeRecord& rec = records[static_cast<std::size_t>(r)];
    const int on_machine = real[rec.host]++;  // this rank's index inside its machine
    const int label = rec.per_local > 0 ? on_machine / rec.per_local : rec.label;
    if (r == rank) t.label = label;
    const auto [it, added] = index.emplace(std::make_pair(rec.host, label),
                                           static_cast<int>(t.members.size()));
    if (added) t.members.emplace_back();
    const int j = it->second;
    t.node_of[static_cast<std::size_t>(r)] = j;
    t.local_of[static_cast<std::size_t>(r)] = static_cast<int>(t.members[static_cast<std::size_t>(j)].size());
    t.members[static_cast<std::size_t>(j)].push_back(r);
  }
  t.nnodes = static_cast<int>(t.members.size());
  t.real_nodes = static_cast<int>(real.size());
  if (t.size == 0) return t;
  t.node = t.node_of[static_cast<std::size_t>(rank)];
  t.local = t.local_of[static_cast<std::size_t>(rank)];
  std::uint64_t covered[std::size(NodeRecord{}.cpus)] = {};
  for (int r : t.members[static_cast<std::size_t>(t.node)])
    for (std::size_t w = 0; w < std::size(covered); ++w)
      covered[w] |= records[static_cast<std::size_t>(r)].cpus[w];
  for (std::uint64_t w : covered) t.node_cores += std::popcount(w);
  t.node_may_sleep = false;
  for (int r : t.members[static_cast<std::size_t>(t.node)])
    t.node_may_sleep = t.node_may_sleep ||
                       wait_may_sleep(static_cast<Settings::Wait>(records[static_cast<std::size_t>(r)].wait),
                                      crowded(t));
  t.machine = machine();
  return t;
}

MPI_Comm make_node_comm(const Topology& t, MPI_Comm comm, MPI_Comm& shared) {
  MPI_Comm node = MPI_COMM_NULL;
  if (shared == MPI_COMM_NULL) {  // machines from the records: one split by node
    check_mpi(MPI_Comm_split(comm, t.node, t.local, &node), "MPI_Comm_split");
    return node;
  }
  if (t.virtual_setting.empty()) {
    std::swap(node, shared);  // the shared-memory node is the node
    return node;
  }
  check_mpi(MPI_Comm_split(shared, t.label, t.rank, &node), "MPI_Comm_split");
  return node;
}

std::vector<Binding> node_bindings(const Topology& t) {
  const Binding mine = own_binding();
  std::vector<Binding> all(static_cast<std::size_t>(t.local_size()));
  // PMPI_ on purpose: under the interposer, MPI_Allgather would re-enter agx.
  check_mpi(PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE,
                           t.node_comm),
            "MPI_Allgather");
  return all;
}

MPI_Comm shared_comm_if_asked(MPI_Comm comm) {
  if (const InvalidSetting* bad = process_settings().invalid_of("AGX_NODE_DETECT"))
    throw Error(MPI_ERR_ARG, "agx: " + bad->message());
  if (!settings().node_detect_mpi) return MPI_COMM_NULL;
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  MPI_Comm shared = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared),
            "MPI_Comm_split_type");
  return shared;
}

Topology discover_topology(MPI_Comm comm) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  MPI_Comm shared = shared_comm_if_asked(comm);
  std::string setting;
  NodeRecord mine;
  try {
    mine = own_record(comm, shared, setting);
  } catch (...) {
    if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
    throw;
  }
  std::vector<NodeRecord> all(static_cast<std::size_t>(size));
  const int rc = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm);
  if (rc != MPI_SUCCESS && shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
  check_mpi(rc, "MPI_Allgather");
  Topology t = topology_from(all, rank, setting);
  t.node_comm = make_node_comm(t, comm, shared);
  if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
  t.bindings = node_bindings(t);
  return t;
}

}  // namespace agx::hier
