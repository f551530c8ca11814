#!/usr/bin/env bash
# Cross-check with a benchmark agx did not write: the OSU micro-benchmarks' osu_allgather,
# run natively and with agx's interposer (libagx_pmpi.so) preloaded, runs alternating,
# at N = 2, 3, 4, then a side-by-side table of OSU's "Avg Latency" and the ratio
# agx/native (below 1: agx faster). OSU is built outside this repository; nothing of it
# is kept here (docs/benchmarks.md, "Cross-check with OSU").
#
#   scripts/osu.sh [--osu-src DIR] [--mpi openmpi|mpich|both] [--np "2 3 4"] [--passes P]
#                  [--cache DIR] [--results DIR] [-- OSU_ARGS...]
#
#   --osu-src DIR  an OSU micro-benchmarks source tree (with its configure script, e.g.
#                  an unpacked osu-micro-benchmarks-5.x.tar.gz from
#                  https://mvapich.cse.ohio-state.edu/benchmarks/) or a git directory of
#                  one (bare or not); default $AGX_OSU_SRC, else the mirror at
#                  /work/.mirror/forresti+osu-micro-benchmarks/repo when it exists
#   --mpi          which MPI library (default openmpi); mpich also builds agx's MPICH
#                  interposer in build-mpich/ (only that target)
#   --np           rank counts (default "2 3 4"; more ranks than cores are oversubscribed)
#   --passes P     native/agx run pairs per N, median per size (default 3)
#   --cache DIR    where OSU is unpacked and built (default ~/.cache/agx/osu)
#   --results DIR  where the CSV goes (default results/)
#   OSU_ARGS       osu_allgather's own options (default: -m 1:16777216 -f), e.g.
#                  -- -m 1:65536 -i 200 -x 20 -f   for a quick run
#
# Exit status: 0 when every run worked and every preloaded run went through agx
# (AGX_SUMMARY shows agx calls); 1 otherwise; 2 for a bad command line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
src=${AGX_OSU_SRC:-}
[ -n "$src" ] || [ ! -d /work/.mirror/forresti+osu-micro-benchmarks/repo ] ||
  src=/work/.mirror/forresti+osu-micro-benchmarks/repo
mpis=openmpi nps="2 3 4" passes=3
cache=${XDG_CACHE_HOME:-$HOME/.cache}/agx/osu
results=$root/results
osu_args=()
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --osu-src) src=$2; shift 2 ;;
    --mpi) mpis=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --) shift; osu_args=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "osu.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
case $mpis in openmpi|mpich) ;; both) mpis="openmpi mpich" ;; *) echo "osu.sh: --mpi takes openmpi, mpich or both, not '$mpis'" >&2; exit 2 ;; esac
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "osu.sh: --passes must be a positive integer, not '$passes'" >&2; exit 2; }
for n in $nps; do [[ $n =~ ^[1-9][0-9]*$ && $n -ge 2 ]] || { echo "osu.sh: --np takes rank counts >= 2 (osu_allgather needs two), not '$n'" >&2; exit 2; }; done
[ ${#osu_args[@]} -gt 0 ] || osu_args=(-m 1:16777216 -f)
if [ -z "$src" ] || [ ! -e "$src" ]; then
  echo "osu.sh: no OSU micro-benchmarks source: give --osu-src DIR (an unpacked release or a git directory; docs/benchmarks.md)" >&2
  exit 2
fi
src=$(cd "$src" && pwd)

# 1. The OSU source, unpacked once per source into the cache (a git directory is
#    exported with git archive; a plain tree is copied), so the given tree stays untouched.
if git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  id="git-$(git --git-dir="$src" rev-parse --short HEAD)"
elif git -C "$src" rev-parse --verify -q HEAD >/dev/null 2>&1 && [ ! -f "$src/configure" ]; then
  src=$(git -C "$src" rev-parse --absolute-git-dir); id="git-$(git --git-dir="$src" rev-parse --short HEAD)"
elif [ -f "$src/configure" ]; then
  id="tree-$(printf '%s' "$src" | cksum | cut -d' ' -f1)"
else
  echo "osu.sh: $src is neither an OSU source tree (no configure) nor a git directory" >&2; exit 2
fi
tree=$cache/src-$id
if [ ! -f "$tree/configure" ]; then
  rm -rf "$tree.tmp"; mkdir -p "$tree.tmp"
  if [ "${id%%-*}" = git ]; then git --git-dir="$src" archive HEAD | tar -x -C "$tree.tmp"
  else cp -a "$src/." "$tree.tmp/"; fi
  [ -f "$tree.tmp/configure" ] || { echo "osu.sh: $src has no configure script" >&2; exit 1; }
  # The same time stamp on every file: make must not try to rerun automake.
  find "$tree.tmp" -exec touch -h -d '2000-01-01 00:00:00' {} +
  mv "$tree.tmp" "$tree"
fi

mpicc_of() { [ "$1" = openmpi ] && echo mpicc.openmpi || echo mpicc.mpich; }
# 2. osu_allgather per MPI library, configured out of tree (VPATH) in the cache.
build_osu() {
  local mpi=$1 dir=$cache/$id-$1
  if [ ! -x "$dir/osu_allgather" ]; then
    echo "osu.sh: building osu_allgather for $mpi in $dir" >&2
    mkdir -p "$dir"
    # osu_allgather alone where the layout is known (5.x/6.x: mpi/collective, 7.x:
    # c/mpi/collective/blocking), else everything.
    local sub=mpi/collective
    [ -d "$tree/$sub" ] || sub=c/mpi/collective/blocking
    (cd "$dir" && "$tree/configure" CC="$(mpicc_of "$mpi")" CXX="$(mpicc_of "$mpi" | sed 's/cc/cxx/')" \
        >configure.log 2>&1 &&
      { make -C "$sub" osu_allgather >make.log 2>&1 || make >>make.log 2>&1; }) ||
      { echo "osu.sh: building OSU for $mpi failed; see $dir/configure.log and make.log" >&2; exit 1; }
    local found
    found=$(find "$dir" -name osu_allgather -type f -perm -u+x | head -n 1)
    [ -n "$found" ] || { echo "osu.sh: no osu_allgather after building in $dir" >&2; exit 1; }
    ln -sfn "$found" "$dir/osu_allgather"
  fi
  echo "$dir/osu_allgather"
}
# 3. agx's interposer for that MPI library.
build_agx() {
  local mpi=$1 dir=build opts=()
  [ "$mpi" = openmpi ] || { dir=build-mpich; opts=(-Dmpi=mpich -Dtests=false); }
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "${opts[@]}" >/dev/null
  ninja -C "$dir" lib/pmpi/libagx_pmpi.so >/dev/null
  echo "$root/$dir/lib/pmpi/libagx_pmpi.so"
}
launch() {  # launch MPI N PRELOAD(or "") PROGRAM ARGS...
  local mpi=$1 n=$2 preload=$3; shift 3
  if [ "$mpi" = openmpi ]; then
    local env=(); [ -z "$preload" ] || env=(-x LD_PRELOAD="$preload" -x AGX_SUMMARY=1)
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun.openmpi --oversubscribe -np "$n" "${env[@]}" "$@"
  else
    local env=(); [ -z "$preload" ] || env=(-genv LD_PRELOAD "$preload" -genv AGX_SUMMARY 1)
    mpiexec.mpich -n "$n" "${env[@]}" "$@"
  fi
}

mkdir -p "$results"
stamp=$(date +%Y%m%d-%H%M%S)
raw=$(mktemp -d "${TMPDIR:-/tmp}/agx-osu.XXXXXX")
trap 'rm -rf "$raw"' EXIT
status=0
echo "# osu_allgather ${osu_args[*]}, $passes native/agx pair(s) per N; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for mpi in $mpis; do
  osu=$(build_osu "$mpi")
  preload=$(build_agx "$mpi")
  for n in $nps; do
    for ((p = 1; p <= passes; p++)); do
      for mode in native agx; do
        out=$raw/$mpi-$n-$mode-$p
        pre=""; [ $mode = native ] || pre=$preload
        if ! launch "$mpi" "$n" "$pre" "$osu" "${osu_args[@]}" >"$out.out" 2>"$out.err"; then
          echo "osu.sh: $mpi N=$n $mode run $p failed:" >&2; tail -5 "$out.err" >&2; status=1
        fi
      done
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# 4. The table: per MPI library and N, the median over passes of OSU's Avg Latency.
python3 - "$raw" "$results/osu-$stamp.csv" "$mpis" "$nps" "$passes" <<'EOF' || status=1
import os, re, statistics, sys
raw, csv_path, mpis, nps, passes = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), int(sys.argv[5])
names = {"openmpi": "Open MPI", "mpich": "MPICH"}
bad = 0

def read(path):
    """{size: avg_us} from osu_allgather's stdout (lines '# ...' are its header)."""
    out = {}
    try:
        for line in open(path + ".out"):
            f = line.split()
            if len(f) >= 2 and not line.startswith("#") and f[0].isdigit():
                out[int(f[0])] = float(f[1])
    except OSError:
        pass
    return out

def agx_calls(path):
    """Calls agx took, from the AGX_SUMMARY table on stderr (None: no table)."""
    try:
        text = open(path + ".err").read()
    except OSError:
        return None
    rows = re.findall(r"^agx summary: (\S+)\s+(\d+)", text, re.M)
    if not rows:
        return None
    return sum(int(c) for name, c in rows if name not in ("algorithm", "passed-to-MPI"))

with open(csv_path, "w") as csv:
    csv.write("mpi,ranks,bytes,native_avg_us,agx_avg_us,agx_over_native,native_runs,agx_runs\n")
    for mpi in mpis:
        for n in nps:
            runs = {m: [read(os.path.join(raw, f"{mpi}-{n}-{m}-{p}")) for p in range(1, passes + 1)]
                    for m in ("native", "agx")}
            for p in range(1, passes + 1):
                calls = agx_calls(os.path.join(raw, f"{mpi}-{n}-agx-{p}"))
                if not calls:
                    print(f"osu.sh: {names[mpi]} N={n} run {p} with libagx_pmpi.so: "
                          f"{'no AGX_SUMMARY table' if calls is None else 'no call went through agx'}",
                          file=sys.stderr)
                    bad += 1
            sizes = sorted(set().union(*[r.keys() for m in runs for r in runs[m]]))
            print(f"\n## {names[mpi]}, N = {n}: osu_allgather Avg Latency (us), "
                  f"median of {passes} run(s) each, alternating")
            print(f"{'bytes':>10} {'native':>12} {'agx':>12} {'agx/native':>11}")
            for s in sizes:
                nat = [r[s] for r in runs["native"] if s in r]
                agx = [r[s] for r in runs["agx"] if s in r]
                mn = statistics.median(nat) if nat else None
                ma = statistics.median(agx) if agx else None
                ratio = ma / mn if mn and ma else None
                cell = lambda v, f: f.format(v) if v is not None else "-"
                print(f"{s:>10} {cell(mn, '{:12.2f}'):>12} {cell(ma, '{:12.2f}'):>12} {cell(ratio, '{:10.2f}x'):>11}")
                csv.write(f"{mpi},{n},{s},{cell(mn, '{:.3f}') if nat else ''},{cell(ma, '{:.3f}') if agx else ''},"
                          f"{cell(ratio, '{:.4f}') if ratio else ''},{len(nat)},{len(agx)}\n")
                if not nat or not agx:
                    bad += 1
print(f"\nCSV: {csv_path}")
sys.exit(1 if bad else 0)
EOF
exit $status
