// Fused all-gathers (agx::Group, docs/fused.md) under mpirun: for auto and every
// algorithm of the registry, a group of five members of different element types, sizes
// and layouts (out of place, in place, v with zeros and gaps, v in place, an empty one)
// runs blocking, started + waited and started + polled; every member's receive buffer
// is checked byte for byte (gaps and guards untouched) and the first member against the
// MPI library's own MPI_Allgather. Members in separate buffers run segmented (no staging
// copy) on every algorithm, node paths included, staged only under AGX_INTEGRITY;
// members laid out back to back in one buffer run direct, also when only some ranks
// have them so (run_mixed); bad members are rejected when added.
// Options: --algos a,b,... runs only those algorithms (auto: the automatic choice; an
// algorithm that cannot serve the placement is skipped, e.g. shared_memory on several
// virtual nodes); --scale S multiplies every member's counts by S (large blocks: the
// node stage's chunked copies cross the pieces). --mismatch: see run_mismatch.
#include <agx/agx.hpp>

#include "../mpi/pattern.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace agx_test;

namespace {

int rank = 0, nranks = 1;
long passed = 0, failed = 0;
int scale = 1;  // --scale

void expect(bool ok, const std::string& what) {
  if (ok) { ++passed; return; }
  ++failed;
  if (failed <= 20) std::fprintf(stderr, "FAIL rank %d N=%d: %s\n", rank, nranks, what.c_str());
}

/// One member: a guarded receive buffer, its counts and displacements (elements), its
/// send block, and whether it runs in place.
struct Member {
  std::size_t elem;
  std::vector<int> counts, displs;
  bool in_place;
  unsigned salt;
  Guarded recv;
  std::vector<std::byte> send;

  Member(std::size_t e, std::vector<int> c, std::vector<int> d, bool ip, unsigned s, std::size_t elems)
      : elem(e), counts(std::move(c)), displs(std::move(d)), in_place(ip), salt(s), recv(elems * e) {}

  void fill_inputs() {
    std::memset(recv.data(), sentinel, recv.size());
    const auto me = static_cast<std::size_t>(rank);
    send.assign(static_cast<std::size_t>(counts[me]) * elem + 1, std::byte{0});
    fill(send.data(), salt, rank, static_cast<std::size_t>(counts[me]), elem);
    if (in_place)
      fill(recv.data() + static_cast<std::size_t>(displs[me]) * elem, salt, rank,
           static_cast<std::size_t>(counts[me]), elem);
  }

  bool check(std::string& why) {
    std::vector<unsigned char> want(recv.size(), sentinel);
    for (int i = 0; i < nranks; ++i) {
      const auto u = static_cast<std::size_t>(i);
      fill(reinterpret_cast<std::byte*>(want.data()) + static_cast<std::size_t>(displs[u]) * elem,
           salt, i, static_cast<std::size_t>(counts[u]), elem);
    }
    long where = 0;
    if (!recv.guards_intact(where)) { why = "guard byte " + std::to_string(where) + " changed"; return false; }
    for (std::size_t b = 0; b < want.size(); ++b)
      if (static_cast<unsigned char>(recv.data()[b]) != want[b]) {
        why = "byte " + std::to_string(b) + " is " +
              std::to_string(static_cast<unsigned>(recv.data()[b])) + ", expected " +
              std::to_string(static_cast<unsigned>(want[b]));
        return false;
      }
    return true;
  }
};

std::vector<int> uniform_displs(int count) {
  std::vector<int> d(static_cast<std::size_t>(nranks));
  for (int i = 0; i < nranks; ++i) d[static_cast<std::size_t>(i)] = i * count;
  return d;
}

/// Five members of elements of 4, 8, 1, 12 and 2 bytes.
std::vector<Member> make_members(unsigned salt) {
  std::vector<Member> m;
  const std::size_t n = static_cast<std::size_t>(nranks), sc = static_cast<std::size_t>(scale);
  m.emplace_back(4, std::vector<int>(n, 5 * scale), uniform_displs(5 * scale), false, salt + 1, 5 * n * sc);
  m.emplace_back(8, std::vector<int>(n, 3 * scale), uniform_displs(3 * scale), true, salt + 2, 3 * n * sc);
  // v: counts i % 3 * 7 (zeros included), displacements in reverse order with gaps of 2.
  std::vector<int> c(n), d(n);
  int at = 0;
  for (int i = nranks - 1; i >= 0; --i) {
    c[static_cast<std::size_t>(i)] = i % 3 * 7 * scale;
    d[static_cast<std::size_t>(i)] = at;
    at += c[static_cast<std::size_t>(i)] + 2;
  }
  m.emplace_back(1, c, d, false, salt + 3, static_cast<std::size_t>(at));
  // v in place: rank 0 contributes nothing, the others i + 1.
  std::vector<int> c2(n), d2(n);
  at = 0;
  for (int i = 0; i < nranks; ++i) {
    c2[static_cast<std::size_t>(i)] = i == 0 ? 0 : (i + 1) * scale;
    d2[static_cast<std::size_t>(i)] = at + 1;
    at += c2[static_cast<std::size_t>(i)] + 1;
  }
  m.emplace_back(12, c2, d2, true, salt + 4, static_cast<std::size_t>(at + 1));
  m.emplace_back(2, std::vector<int>(n, 0), uniform_displs(0), false, salt + 5, 0);
  return m;
}

template <class T>
void add_typed(agx::Group& g, Member& m, bool v) {
  const auto me = static_cast<std::size_t>(rank);
  std::span<T> recv(reinterpret_cast<T*>(m.recv.data()), m.recv.size() / sizeof(T));
  std::span<const T> send(reinterpret_cast<const T*>(m.send.data()), static_cast<std::size_t>(m.counts[me]));
  if (!v) {
    if (m.in_place) g.add_in_place(recv);
    else g.add(send, recv);
  } else {
    if (m.in_place) g.add_v_in_place(recv, m.counts, m.displs);
    else g.add_v(send, recv, m.counts, m.displs);
  }
}

agx::Group make_group(std::vector<Member>& m, const agx::Options& o) {
  agx::Group g(MPI_COMM_WORLD, o);
  add_typed<std::int32_t>(g, m[0], false);
  add_typed<double>(g, m[1], false);
  add_typed<char>(g, m[2], true);
  add_typed<Vec3>(g, m[3], true);
  add_typed<std::uint16_t>(g, m[4], false);
  return g;
}

bool integrity_on() {
  const char* integrity = std::getenv("AGX_INTEGRITY");
  return integrity != nullptr && std::string(integrity) != "0";
}

/// How a group of members in separate buffers must run: segmented on every algorithm,
/// the node paths included (no staging buffer: the node stage gathers and scatters the
/// pieces), staged only under AGX_INTEGRITY (its checksums read a block as one range).
agx::FusedWay expected_way(agx::Algorithm) {
  return integrity_on() ? agx::FusedWay::staged : agx::FusedWay::segmented;
}

/// Whether `a` can serve this placement (shared_memory needs all ranks on one node).
bool serves(const agx::AlgorithmChoice& a) {
  if (a.id != agx::Algorithm::shared_memory) return true;
  return std::getenv("AGX_VIRTUAL_NODES") == nullptr && std::getenv("AGX_VIRTUAL_NODE_SIZE") == nullptr;
}

void run_algorithm(const agx::AlgorithmChoice& a, unsigned& salt) {
  const agx::Options o{.algorithm = a.id, .radix = a.radix};
  const std::string name = agx::to_string(a);
  for (int mode = 0; mode < 3; ++mode) {  // blocking, start + wait, start + test
    std::vector<Member> m = make_members(salt += 10);
    for (Member& x : m) x.fill_inputs();
    agx::Group g = make_group(m, o);
    expect(g.size() == 5, name + ": group size");
    try {
      // A forced algorithm runs the group as one call; `auto` may split it (then the
      // largest call's way is reported, which may be a member alone: direct).
      const bool forced = a.id != agx::Algorithm::automatic;
      if (mode == 0) {
        const agx::FusedResult r = g.run();
        expect(forced ? r.calls == 1 : r.calls >= 1, name + ": calls " + std::to_string(r.calls));
        if (r.calls == 1)
          expect(r.way == expected_way(r.algorithm),
                 name + ": members in separate buffers ran " + agx::to_string(r.way));
      } else {
        agx::FusedRequest req = g.start();
        const agx::FusedWay way = req.way();
        const agx::Algorithm ran = req.algorithm();
        const std::size_t calls = req.calls();
        if (mode == 1) req.wait();
        else while (!req.test()) {}
        expect(!req.active(), name + ": request done");
        expect(forced ? calls == 1 : calls >= 1, name + ": started calls " + std::to_string(calls));
        if (calls == 1)
          expect(way == expected_way(ran),
                 name + ": started members in separate buffers ran " + agx::to_string(way));
      }
    } catch (const agx::Error& e) {
      expect(false, name + " mode " + std::to_string(mode) + ": " + e.what());
      continue;
    }
    for (std::size_t k = 0; k < m.size(); ++k) {
      std::string why;
      expect(m[k].check(why), name + " mode " + std::to_string(mode) + " member " +
                                  std::to_string(k) + ": " + why);
    }
    // The first member against MPI's own all-gather.
    std::vector<std::int32_t> ref(5 * static_cast<std::size_t>(scale) * static_cast<std::size_t>(nranks));
    MPI_Allgather(m[0].send.data(), 5 * scale, MPI_INT32_T, ref.data(), 5 * scale, MPI_INT32_T,
                  MPI_COMM_WORLD);
    expect(std::memcmp(ref.data(), m[0].recv.data(), ref.size() * 4) == 0,
           name + ": member 0 differs from MPI_Allgather");
  }
}

/// Two members whose pieces of each rank lie back to back in one buffer (rank i's
/// a-piece then its b-piece), in place and out of place: the group runs direct.
void run_direct(unsigned salt) {
  const int a = 3, b = 5;  // ints of member A, bytes of member B per rank
  const std::size_t stride = a * 4 + b;
  for (int form = 0; form < 3; ++form) {  // in place, out of place, one of each
    const bool in_place = form == 0;
    std::vector<std::byte> buf(stride * static_cast<std::size_t>(nranks), std::byte{0});
    std::vector<std::byte> mine(stride);
    fill(mine.data(), salt, rank, a, 4);
    fill(mine.data() + a * 4, salt + 1, rank, b, 1);
    if (in_place) std::memcpy(buf.data() + stride * static_cast<std::size_t>(rank), mine.data(), stride);
    std::vector<int> cb(static_cast<std::size_t>(nranks), b), db;
    for (int i = 0; i < nranks; ++i) db.push_back(static_cast<int>(stride) * i + a * 4);
    agx::Group g(MPI_COMM_WORLD);
    std::span<char> all(reinterpret_cast<char*>(buf.data()), buf.size());
    // Member A as its bytes: the stride is not a multiple of 4.
    std::vector<int> cabytes(static_cast<std::size_t>(nranks), a * 4), dabytes;
    for (int i = 0; i < nranks; ++i) dabytes.push_back(static_cast<int>(stride) * i);
    std::span<const char> s(reinterpret_cast<const char*>(mine.data()), mine.size());
    if (form == 2)  // member A in place, member B out of place
      std::memcpy(buf.data() + stride * static_cast<std::size_t>(rank), mine.data(), a * 4);
    if (form == 0 || form == 2) g.add_v_in_place(all, cabytes, dabytes);
    else g.add_v(s.first(a * 4), all, cabytes, dabytes);
    if (form == 0) g.add_v_in_place(all, cb, db);
    else g.add_v(s.subspan(a * 4), all, cb, db);
    const agx::FusedResult r = g.run();
    expect(r.way == agx::FusedWay::direct, std::string("back-to-back members run direct, ") + (form == 0 ? "in place" : form == 1 ? "out of place" : "mixed"));
    bool ok = true;
    for (int i = 0; i < nranks; ++i) {
      std::vector<std::byte> want(stride);
      fill(want.data(), salt, i, a, 4);
      fill(want.data() + a * 4, salt + 1, i, b, 1);
      ok = ok && std::memcmp(want.data(), buf.data() + stride * static_cast<std::size_t>(i), stride) == 0;
    }
    expect(ok, std::string("direct result, ") + (form == 0 ? "in place" : form == 1 ? "out of place" : "mixed"));
    expect(r.bytes == stride * static_cast<std::size_t>(nranks), "direct result byte count");
  }
}

/// Two members, an int one out of place and a byte one in place, which on even ranks
/// lie back to back in one buffer (rank i's int piece, then its byte piece: the group is
/// direct there) and on odd ranks in two buffers with reversed, gapped displacements
/// (segmented there). The ranks of one call take different ways, so on a node path the
/// direct ranks run the node call of pieces too; blocking, started + waited, started +
/// polled, each result checked byte for byte.
void run_mixed(const agx::AlgorithmChoice& choice, unsigned salt) {
  const agx::Options o{.algorithm = choice.id, .radix = choice.radix};
  const std::string name = "mixed direct/segmented ranks, " + agx::to_string(choice);
  const std::size_t n = static_cast<std::size_t>(nranks);
  const int a = 3 * scale, b = 5 * scale;  // ints of A, bytes of B per rank
  const bool direct = rank % 2 == 0;
  const std::size_t stride = static_cast<std::size_t>(a) * 4 + static_cast<std::size_t>(b);
  for (int mode = 0; mode < 3; ++mode, salt += 2) {
    std::vector<int> ca(n, a), cb(n, b), da(n), db(n);
    // Direct: one buffer of strides (A counted in bytes: the stride is not a multiple of
    // 4). Separate: A and B each in its own buffer, ranks in reverse order, gaps of 1.
    Guarded one(direct ? stride * n : 0), ra(direct ? 0 : (static_cast<std::size_t>(a) * 4 + 1) * n),
        rb(direct ? 0 : (static_cast<std::size_t>(b) + 1) * n);
    for (std::size_t i = 0; i < n; ++i) {
      da[i] = direct ? static_cast<int>(stride * i) : static_cast<int>((n - 1 - i) * (static_cast<std::size_t>(a) * 4 + 1));
      db[i] = direct ? static_cast<int>(stride * i) + a * 4 : static_cast<int>((n - 1 - i) * (static_cast<std::size_t>(b) + 1));
    }
    std::byte* abase = direct ? one.data() : ra.data();
    std::byte* bbase = direct ? one.data() : rb.data();
    std::vector<std::byte> mine(static_cast<std::size_t>(a) * 4);
    fill(mine.data(), salt, rank, static_cast<std::size_t>(a), 4);
    fill(bbase + db[static_cast<std::size_t>(rank)], salt + 1, rank, static_cast<std::size_t>(b), 1);
    std::vector<int> cab(n, a * 4);
    agx::Group g(MPI_COMM_WORLD, o);
    const std::size_t aspan = direct ? one.size() : ra.size(), bspan = direct ? one.size() : rb.size();
    g.add_v(std::span<const char>(reinterpret_cast<const char*>(mine.data()), mine.size()),
            std::span<char>(reinterpret_cast<char*>(abase), aspan), cab, da);
    g.add_v_in_place(std::span<char>(reinterpret_cast<char*>(bbase), bspan), cb, db);
    const agx::FusedWay want = direct ? agx::FusedWay::direct : expected_way(choice.id);
    try {
      if (mode == 0) {
        const agx::FusedResult r = g.run();
        expect(r.calls == 1 && r.way == want, name + ": ran " + agx::to_string(r.way));
      } else {
        agx::FusedRequest req = g.start();
        expect(req.calls() == 1 && req.way() == want, name + ": started " + agx::to_string(req.way()));
        if (mode == 1) req.wait();
        else while (!req.test()) {}
      }
    } catch (const agx::Error& e) {
      expect(false, name + " mode " + std::to_string(mode) + ": " + e.what());
      continue;
    }
    bool ok = true;
    long where = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::byte> wa(static_cast<std::size_t>(a) * 4), wb(static_cast<std::size_t>(b));
      fill(wa.data(), salt, static_cast<int>(i), static_cast<std::size_t>(a), 4);
      fill(wb.data(), salt + 1, static_cast<int>(i), static_cast<std::size_t>(b), 1);
      ok = ok && std::memcmp(wa.data(), abase + da[i], wa.size()) == 0 &&
           std::memcmp(wb.data(), bbase + db[i], wb.size()) == 0;
    }
    ok = ok && (direct ? one.guards_intact(where) : ra.guards_intact(where) && rb.guards_intact(where));
    expect(ok, name + " mode " + std::to_string(mode) + ": results");
  }
}

/// A group the cost model may split (docs/fused.md, "Fuse or not"): 16 members of 64 B
/// and, between them, one of 64 KiB in place. Under AGX_INTEGRITY (staged: the large one
/// would pay the staging copy inside the fused call), at N >= 2 on one node, the small
/// ones run as one call and the large one alone; otherwise (segmented, no staging copy)
/// as one or two calls. Every member's result is checked, blocking and started.
void run_split(unsigned salt) {
  const std::size_t n = static_cast<std::size_t>(nranks);
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<Member> m;
    for (int k = 0; k < 17; ++k) {
      const int bytes = k == 7 ? 1 << 16 : 64;
      m.emplace_back(1, std::vector<int>(n, bytes), uniform_displs(bytes), k == 7,
                     salt + static_cast<unsigned>(k), static_cast<std::size_t>(bytes) * n);
    }
    agx::Group g(MPI_COMM_WORLD);
    for (Member& x : m) {
      x.fill_inputs();
      add_typed<unsigned char>(g, x, false);
    }
    std::size_t calls = 0;
    try {
      if (mode == 0) {
        const agx::FusedResult r = g.run();
        calls = r.calls;
        expect(r.bytes == ((1u << 16) + 16 * 64) * n, "split group: bytes " + std::to_string(r.bytes));
      } else {
        agx::FusedRequest req = g.start();
        calls = req.calls();
        if (mode == 1) req.wait();
        else while (!req.test()) {}
        expect(!req.active(), "split group: request done");
      }
    } catch (const agx::Error& e) {
      expect(false, "split group mode " + std::to_string(mode) + ": " + e.what());
      continue;
    }
    expect(calls == 1 || calls == 2, "split group: " + std::to_string(calls) + " calls");
    const bool env_forced = std::getenv("AGX_ALGO") != nullptr;
    if (nranks >= 2 && !env_forced && integrity_on())
      expect(calls == 2, "split group mode " + std::to_string(mode) + ": " + std::to_string(calls) +
                             " calls, expected 2 (the small members fused, the large one alone)");
    for (std::size_t k = 0; k < m.size(); ++k) {
      std::string why;
      expect(m[k].check(why), "split group mode " + std::to_string(mode) + " member " +
                                  std::to_string(k) + ": " + why);
    }
  }
}

void run_bad_input() {
  std::vector<int> small(1), big(4 * static_cast<std::size_t>(nranks) + 4);
  agx::Group g(MPI_COMM_WORLD);
  int code = 0;
  try {
    g.add(std::span<const int>(big.data(), 4), std::span<int>(small));  // receive too small
  } catch (const agx::Error& e) { code = e.error_class(); }
  expect(code == MPI_ERR_COUNT, "a member whose receive buffer is too small: MPI_ERR_COUNT");
  code = 0;
  try {
    g.add(std::span<const int>(big.data(), 4), std::span<int>(big));  // overlap
  } catch (const agx::Error& e) { code = e.error_class(); }
  expect(code == MPI_ERR_BUFFER, "a member whose buffers overlap: MPI_ERR_BUFFER");
  expect(g.size() == 0, "rejected members are not added");
  const agx::FusedResult r = g.run();  // an empty group: nothing to do, on every rank
  expect(r.bytes == 0, "an empty group moves nothing");
}

/// --mismatch (under AGX_CHECK=1): rank 0 adds one member more than the others; every
/// rank's run() fails with MPI_ERR_ARG instead of hanging or mixing up the blocks.
void run_mismatch() {
  std::vector<int> a(2), all_a(2 * static_cast<std::size_t>(nranks));
  std::vector<int> b(1), all_b(static_cast<std::size_t>(nranks));
  agx::Group g(MPI_COMM_WORLD);
  g.add(std::span<const int>(a), std::span<int>(all_a));
  if (rank == 0) g.add(std::span<const int>(b), std::span<int>(all_b));
  int code = MPI_SUCCESS;
  try {
    g.run();
  } catch (const agx::Error& e) {
    code = e.error_class();
    if (rank == 0) std::printf("mismatched group: %s\n", e.what());
  }
  expect(code == MPI_ERR_ARG, "a group that differs across ranks: MPI_ERR_ARG, got " + std::to_string(code));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  unsigned salt = 1;
  std::string algos;  // --algos: empty runs every one
  bool mismatch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mismatch") mismatch = true;
    else if (arg == "--algos" && i + 1 < argc) algos = "," + std::string(argv[++i]) + ",";
    else if (arg == "--scale" && i + 1 < argc) scale = std::atoi(argv[++i]);
  }
  if (mismatch) {
    run_mismatch();
  } else {
    std::vector<agx::AlgorithmChoice> choices{{agx::Algorithm::automatic}};
    for (const auto& a : agx::algorithm_variants()) choices.push_back(a);
    for (const auto& a : choices) {
      if (!serves(a) || (!algos.empty() && algos.find("," + agx::to_string(a) + ",") == std::string::npos))
        continue;
      run_algorithm(a, salt);
      if (a.id != agx::Algorithm::automatic) run_mixed(a, salt += 10);
    }
    if (algos.empty()) {
      run_direct(777);
      run_split(900);
      run_bad_input();
    }
  }
  long totals[2] = {passed, failed}, sums[2] = {0, 0};
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("test_fused N=%d: %ld checks passed, %ld failed\n", nranks, sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] == 0 ? 0 : 1;
}
