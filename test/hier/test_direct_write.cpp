// MPI test of the direct-write path (lib/hier/direct_write.hpp): receive buffers from
// agx::allocate on one node. Each case fills the whole region with a sentinel, runs one
// blocking call and checks every block's pattern, every byte outside the blocks, and
// whether the call ran by direct write (agx::hier::direct_write_calls). Cases: auto and
// forced shared_memory, out of place and in place, the v form with zero blocks, gaps and
// reversed order, a forced point-to-point algorithm (never direct), a region freed and
// another allocated between calls (often at the same address), one rank receiving into
// ordinary memory (the usual path for all), one rank that cannot map its peers' regions
// (the usual path for all), and disagreeing counts (MPI_ERR_TRUNCATE on every rank). Run
// with AGX_DIRECT_WRITE_MIN_BYTES=0 so that small blocks take the path.
// Receive buffers on the heap are pushed by the kernel (process_vm_writev) where the copy
// choice takes the kernel's copies: `test_direct_write kernel` runs with
// AGX_CMA_MIN_BYTES=0 (the kernel's copies always, without trials) and expects the push
// for heap buffers and the mixed case out of place, and in place from 3 ranks on (at 2
// ranks in place is never pushed: direct_write.cpp), the usual path where one rank's
// pushes fail, and MPI_ERR_TRUNCATE for disagreeing counts on the heap; without
// `kernel` none: AGX_CMA=0 pushes nothing, and with the default trials the blocks below
// their smallest size (4 KiB) take no kernel copies while the 1 MiB case's one call is
// its size class's first trial call, which stages (copy_choice.hpp).
// `test_direct_write kernel-p2p` runs as `kernel` with a tuning file whose measured
// winner is `direct` at every size (direct.tuning): every automatic call is then a
// point-to-point choice that tries direct write first (lib/api/dispatch.cpp), so the
// same expectations hold, except that the first call on a communicator writes directly
// too (no node path is deferred).

#include <agx/agx.hpp>
#include <agx/allocate.hpp>

#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "hier/direct_write.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"
#include "hier/shared_alloc.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr unsigned char sentinel = 0xA5;
int failures = 0;
int rank = 0, size = 1;

unsigned char pattern(unsigned salt, int owner, std::size_t i) {
  unsigned x = salt * 2654435761u ^ static_cast<unsigned>(owner) * 40503u ^ static_cast<unsigned>(i) * 2246822519u;
  x ^= x >> 15;
  const auto b = static_cast<unsigned char>(x);
  return b == sentinel ? 0x5A : b;
}

void fail(const std::string& what) {
  if (failures++ < 8) std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
}

struct Shape {
  std::vector<std::size_t> bytes, offsets;
  std::size_t extent = 0;
};

Shape uniform(std::size_t block) {
  Shape s;
  for (int r = 0; r < size; ++r) s.bytes.push_back(block), s.offsets.push_back(block * static_cast<std::size_t>(r));
  s.extent = block * static_cast<std::size_t>(size);
  return s;
}

// Reversed order, a 40-byte gap before each block, every third block empty.
Shape varying(std::size_t block) {
  Shape s;
  s.bytes.resize(static_cast<std::size_t>(size));
  s.offsets.resize(s.bytes.size());
  std::size_t at = 0;
  for (int r = size - 1; r >= 0; --r) {
    const std::size_t b = r % 3 == 1 ? 0 : block + static_cast<std::size_t>(r) * 7;
    at += 40;
    s.bytes[static_cast<std::size_t>(r)] = b;
    s.offsets[static_cast<std::size_t>(r)] = b ? at : 0;
    at += b;
  }
  s.extent = at + 40;
  return s;
}

struct Case {
  std::string name;
  agx::Algorithm algo = agx::Algorithm::automatic;
  bool in_place = false, v_form = false, shared = true, expect_direct = true;
  std::size_t block = 3000;
};

// The receive buffer: `lead` bytes of the region before it, its extent, 64 bytes after.
void run_case(const Case& c, unsigned salt, unsigned char* region, std::size_t region_bytes,
              std::size_t lead) {
  const Shape s = c.v_form ? varying(c.block) : uniform(c.block);
  const agx::Layout layout = c.v_form ? agx::Layout::varying(s.bytes, s.offsets)
                                      : agx::Layout::uniform(size, c.block);
  unsigned char* recv = region + lead;
  if (lead + s.extent + 64 > region_bytes) return fail(c.name + ": region too small");
  std::memset(region, sentinel, region_bytes);
  const auto me = static_cast<std::size_t>(rank);
  std::vector<unsigned char> send(s.bytes[me]);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = pattern(salt, rank, i);
  if (c.in_place) std::memcpy(recv + s.offsets[me], send.data(), send.size());
  const std::uint64_t before = agx::hier::direct_write_calls();
  const agx::Buffers buffers{c.in_place ? nullptr : send.data(), recv, c.in_place};
  agx::allgather_bytes(MPI_COMM_WORLD, buffers, layout, agx::Options{c.algo, false});
  const bool direct = agx::hier::direct_write_calls() == before + 1;
  if (direct != (c.expect_direct && size > 1))
    fail(c.name + (direct ? ": ran by direct write" : ": did not run by direct write"));
  std::vector<char> covered(region_bytes, 0);
  for (int r = 0; r < size; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t i = 0; i < s.bytes[ur]; ++i) {
      covered[lead + s.offsets[ur] + i] = 1;
      if (recv[s.offsets[ur] + i] != pattern(salt, r, i)) {
        fail(c.name + ": block " + std::to_string(r) + " byte " + std::to_string(i) + " wrong");
        break;
      }
    }
  }
  for (std::size_t i = 0; i < region_bytes; ++i)
    if (!covered[i] && region[i] != sentinel) {
      fail(c.name + ": byte " + std::to_string(i) + " of the region outside the blocks written");
      break;
    }
}

std::size_t region_for(std::size_t block) { return 4096 + (block + 64) * static_cast<std::size_t>(size) * 2; }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool p2p = mode == "kernel-p2p";  // automatic calls choose `direct` (see the header)
  unsigned salt = 1;
  // The first blocking `auto` call on a communicator whose choice is a node path runs
  // point-to-point and leaves the node state unmade (the first-call rule,
  // lib/core/choose.hpp), shared receive buffers or not; the second one makes it and writes
  // directly. Shown on a fresh communicator, then MPI_COMM_WORLD is made ready the same way.
  for (MPI_Comm comm : {MPI_COMM_NULL, MPI_COMM_WORLD}) {
    MPI_Comm fresh = comm;
    if (comm == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    const std::size_t block = 3000, bytes = block * static_cast<std::size_t>(size);
    auto* region = static_cast<unsigned char*>(agx::allocate(bytes));
    std::vector<unsigned char> send(block, static_cast<unsigned char>(rank));
    for (int call = 0; call < 2; ++call) {
      const std::uint64_t before = agx::hier::direct_write_calls();
      agx::allgather_bytes(fresh, agx::Buffers{send.data(), region, false},
                           agx::Layout::uniform(size, block), agx::Options{});
      const bool direct = agx::hier::direct_write_calls() == before + 1;
      if (direct != ((call == 1 || p2p) && size > 1))
        fail(std::string(comm == MPI_COMM_NULL ? "fresh communicator" : "MPI_COMM_WORLD") +
             ", call " + std::to_string(call + 1) + (direct ? ": ran" : ": did not run") + " by direct write");
      for (int r = 0; r < size; ++r)
        if (region[static_cast<std::size_t>(r) * block + block - 1] != static_cast<unsigned char>(r))
          fail("first calls: block " + std::to_string(r) + " wrong");
    }
    agx::deallocate(region);
    if (comm == MPI_COMM_NULL) MPI_Comm_free(&fresh);
  }
  {
    const std::vector<Case> cases = {
        {"auto uniform", agx::Algorithm::automatic, false, false},
        {"auto in place", agx::Algorithm::automatic, true, false},
        {"auto v with zeros", agx::Algorithm::automatic, false, true},
        {"auto v in place", agx::Algorithm::automatic, true, true},
        {"shared_memory uniform", agx::Algorithm::shared_memory, false, false},
        {"shared_memory v in place", agx::Algorithm::shared_memory, true, true},
        {"ring (forced: never direct)", agx::Algorithm::ring, false, false, true, false},
        {"auto 200 KiB blocks", agx::Algorithm::automatic, false, false, true, true, 200 * 1024},
        {"auto 1 B blocks", agx::Algorithm::automatic, true, true, true, true, 1},
    };
    for (const Case& c : cases) {
      const std::size_t bytes = region_for(c.block);
      auto* region = static_cast<unsigned char*>(agx::allocate(bytes));
      if (!agx::is_shared(region, bytes)) fail("agx::allocate gave memory that is not shared");
      run_case(c, ++salt, region, bytes, 256);
      run_case(c, ++salt, region, bytes, 0);  // the region's first byte, mapped and cached
      agx::deallocate(region);
    }
  }
  // Freed and reallocated between calls: the same address (often) names a new region.
  {
    const std::size_t bytes = region_for(5000);
    unsigned char* last = nullptr;
    int reused = 0;
    for (int k = 0; k < 12; ++k) {
      auto* region = static_cast<unsigned char*>(agx::allocate(bytes));
      reused += region == last;
      Case c{"reallocated " + std::to_string(k), agx::Algorithm::automatic, k % 2 == 1, k % 3 == 2};
      c.block = 5000;
      run_case(c, ++salt, region, bytes, 128);
      last = region;
      agx::deallocate(region);
    }
    if (agx::hier::peer_mappings() > agx::hier::peer_cache_per_owner * static_cast<std::size_t>(size))
      fail("peer mappings not dropped: " + std::to_string(agx::hier::peer_mappings()));
    if (rank == 0) std::printf("reallocated regions at the previous address: %d of 11\n", reused);
  }
  // Whether heap receive buffers are pushed by the kernel here (see the header).
  const bool kernel_mode = mode == "kernel" || p2p;
  const bool kernel = kernel_mode && agx::hier::hier_context(agx::context(MPI_COMM_WORLD)).cma;
  const bool in_place_push = kernel && size >= 3;
  if (kernel_mode && !kernel && rank == 0)
    std::printf("process_vm_writev unavailable here: heap buffers take the usual path\n");
  // Mixed: the last rank receives into ordinary memory, so nobody writes directly
  // (except by the kernel's push into that rank's buffer).
  {
    Case c{"mixed (last rank not shared)", agx::Algorithm::automatic, false, true, rank != size - 1,
           size == 1};
    c.expect_direct = kernel;
    const std::size_t bytes = region_for(c.block);
    std::vector<unsigned char> plain(bytes);
    auto* region = c.shared ? static_cast<unsigned char*>(agx::allocate(bytes)) : plain.data();
    run_case(c, ++salt, region, bytes, 64);
    c.in_place = true;
    c.name += " in place";
    c.expect_direct = in_place_push;  // (in place, heap buffers are pushed from 3 ranks on)
    run_case(c, ++salt, region, bytes, 64);
    if (c.shared) agx::deallocate(region);
  }
  // Every receive buffer on the heap: pushed by the kernel (mode kernel) or the usual
  // path; a forced point-to-point algorithm never; 1 MiB blocks cross many pages.
  {
    const std::vector<Case> cases = {
        {"heap uniform", agx::Algorithm::automatic, false, false, false, kernel},
        {"heap in place", agx::Algorithm::automatic, true, false, false, in_place_push},
        {"heap v with zeros", agx::Algorithm::automatic, false, true, false, kernel},
        {"heap v in place", agx::Algorithm::automatic, true, true, false, in_place_push},
        {"heap shared_memory", agx::Algorithm::shared_memory, false, false, false, kernel},
        {"heap ring (forced: never direct)", agx::Algorithm::ring, false, false, false, false},
        {"heap 1 MiB blocks", agx::Algorithm::automatic, false, false, false, kernel, 1 << 20},
    };
    for (const Case& c : cases) {
      std::vector<unsigned char> plain(region_for(c.block));
      run_case(c, ++salt, plain.data(), plain.size(), 8);
    }
  }
  // One rank cannot map its peers' regions (the test seam refuse_peer_maps): it writes
  // nothing and says so, and every rank takes the usual path, that one included.
  if (size > 1) {
    Case c{"last rank cannot map", agx::Algorithm::automatic, false, false};
    c.expect_direct = false;
    const std::size_t bytes = region_for(c.block);
    auto* region = static_cast<unsigned char*>(agx::allocate(bytes));
    agx::hier::refuse_peer_maps(rank == size - 1);
    run_case(c, ++salt, region, bytes, 32);
    c.name += ", v in place";
    c.in_place = c.v_form = true;
    run_case(c, ++salt, region, bytes, 32);
    agx::hier::refuse_peer_maps(false);
    c.name = "mapping again";
    c.expect_direct = true;
    run_case(c, ++salt, region, bytes, 32);
    agx::deallocate(region);
  }
  // The same with heap buffers: the last rank's pushes fail (the seam refuses
  // process_vm_writev too), so every rank takes the usual path.
  if (size > 1) {
    Case c{"heap, last rank cannot push", agx::Algorithm::automatic, false, false, false, false};
    std::vector<unsigned char> plain(region_for(c.block));
    agx::hier::refuse_peer_maps(rank == size - 1);
    run_case(c, ++salt, plain.data(), plain.size(), 16);
    agx::hier::refuse_peer_maps(false);
    c.name = "heap, pushing again";
    c.expect_direct = kernel;
    run_case(c, ++salt, plain.data(), plain.size(), 16);
  }
  // Disagreeing counts: the last rank's own block is one byte longer in its layout; in
  // a shared region, then on the heap where the kernel pushes (direct write's statuses
  // tell every rank; the usual path's readers of that block fail).
  for (const bool heap : {false, true}) {
    if (size == 1 || (heap && !kernel)) break;
    const std::size_t block = 4000, bytes = region_for(block);
    std::vector<unsigned char> plain(heap ? bytes : 0);
    auto* region = heap ? plain.data() : static_cast<unsigned char*>(agx::allocate(bytes));
    std::vector<std::size_t> b(static_cast<std::size_t>(size), block), o(b.size());
    for (std::size_t r = 0; r < b.size(); ++r) o[r] = r * (block + 8);
    if (rank == size - 1) b.back() += 1;
    std::vector<unsigned char> send(b[static_cast<std::size_t>(rank)], 1);
    int code = MPI_SUCCESS;
    try {
      agx::allgather_bytes(MPI_COMM_WORLD, agx::Buffers{send.data(), region, false},
                           agx::Layout::varying(b, o), agx::Options{agx::Algorithm::automatic, false});
    } catch (const agx::Error& e) {
      code = e.error_class();
    }
    if (code != MPI_ERR_TRUNCATE)
      fail(std::string(heap ? "heap: " : "") + "disagreeing counts gave error class " + std::to_string(code));
    if (!heap) agx::deallocate(region);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAIL" : "OK", total, size);
  MPI_Finalize();
  return total ? 1 : 0;
}
