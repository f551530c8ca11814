#!/usr/bin/env bash
# Installs agx into a scratch prefix, builds examples/hello_allgather.cpp as an outside
# project would (pkg-config --cflags --libs agx), and runs it on 3 ranks.
set -euo pipefail
build_dir=$1 source_dir=$2 mpirun=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$scratch" --quiet >/dev/null
prefix=$(meson introspect "$build_dir" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
root="$scratch$prefix"
pcdir=$(dirname "$(find "$root" -name agx.pc | head -1)")
# The .pc file names the real prefix; point it at the scratch copy.
sed -i "s|^prefix=.*|prefix=$root|" "$pcdir/agx.pc"
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$(pkg-config --cflags --libs agx)
echo "pkg-config --cflags --libs agx: $flags"
c++ -std=c++20 -o "$scratch/hello" "$source_dir/examples/hello_allgather.cpp" $flags
libdir=$(pkg-config --variable=libdir agx)
out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH="$libdir" \
      "$mpirun" -np 3 --oversubscribe -x LD_LIBRARY_PATH "$scratch/hello")
echo "$out"
[ "$out" = "algorithm $(echo "$out" | awk '{print $2}') 0 0 0 1 1 1 2 2 2" ] || { echo "unexpected output"; exit 1; }
