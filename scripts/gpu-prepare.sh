#!/bin/bash
# Prepares the kit scripts/gpu-check.sh needs on an offline GPU node (CUDA toolkit,
# driver, a C++ compiler and python3 there; no package access). Run on a connected
# Debian 12 machine (the same release as the node), from the repository root:
#
#   scripts/gpu-prepare.sh [KIT_DIR]        # default: shared/gpu-kit
#
# It downloads (apt-get download, no root needed) Open MPI, hwloc, Meson, ninja,
# pkgconf and Catch2 with their library dependencies, minus what every such node has
# (libc, libstdc++, compilers — also the Fortran compilers that libopenmpi-dev's
# alternatives pull in — python3, perl, ssh), unpacks them with dpkg -x into
# KIT_DIR/root and writes KIT_DIR/env.sh, which gpu-check.sh sources: PATH,
# LD_LIBRARY_PATH, OPAL_PREFIX (relocated Open MPI), PKG_CONFIG_* and PYTHONPATH.
# Copy KIT_DIR/debs and KIT_DIR/env.sh along with the tree (about 91 packages, 28 MiB
# of .deb files on Debian 12; unpacked they are about 110 MiB, so gpu-check.sh unpacks
# them on the node when root/ did not come along).
set -euo pipefail
kit=${1:-shared/gpu-kit}
mkdir -p "$kit/debs" "$kit/root"
kit=$(cd "$kit" && pwd)
top="openmpi-bin libopenmpi-dev libhwloc-dev meson ninja-build pkgconf catch2"
skip='^(libc6|libc6-dev|libgcc-s1|libstdc\+\+6|libstdc\+\+-.*-dev|gcc.*|g\+\+.*|cpp.*|python3.*|libpython3.*|perl.*|libperl.*|debconf.*|dpkg|tar|sensible-utils|libc-dev-bin|linux-libc-dev|libcrypt.*|zlib1g.*|libzstd1|liblzma5|libbz2-1.0|libssl3|libexpat1|libffi8|mime-support|media-types|tzdata|readline-common|libreadline8|libsqlite3-0|libncursesw6|libtinfo6|libdb5.3|libuuid1|libselinux1|libpcre2-8-0|libgfortran5|gfortran.*|libquadmath0|libgomp1|libatomic1|libasan8|libtsan2|libubsan1|liblsan0|libitm1|libhwasan0|libcc1-0|binutils.*|libbinutils|libctf.*|libgprofng0|libjansson4|libisl23|libmpc3|libmpfr6|libgmp10|libsframe0|flang.*|libflang.*|libllvm.*|libclang.*|libmlir.*|clang.*|llvm.*|lld.*|libpam.*|openssh.*|libobjc.*|libgc1|libz3-.*|libgcc-[0-9]+-dev|libasan[0-9]+|libtsan[0-9]+|libgfortran-[0-9]+-dev)$'
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
         --no-replaces --no-enhances $top | grep -E '^[a-z0-9]' | sort -u | grep -Ev "$skip" || true)
echo "gpu-prepare: $(echo "$pkgs" | wc -w) packages into $kit"
(cd "$kit/debs" && apt-get download $pkgs)
for d in "$kit"/debs/*.deb; do dpkg -x "$d" "$kit/root"; done
cat > "$kit/env.sh" <<ENV
# Sourced by scripts/gpu-check.sh: the unpacked Open MPI, Meson and ninja.
kit_root="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)/root"
export PATH="\$kit_root/usr/bin:\$PATH"
export LD_LIBRARY_PATH="\$kit_root/usr/lib/x86_64-linux-gnu:\$kit_root/usr/lib/x86_64-linux-gnu/openmpi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OPAL_PREFIX="\$kit_root/usr"
export PKG_CONFIG="\$kit_root/usr/bin/pkgconf"
export PKG_CONFIG_SYSROOT_DIR="\$kit_root"
export PKG_CONFIG_PATH="\$kit_root/usr/lib/x86_64-linux-gnu/pkgconfig:\$kit_root/usr/share/pkgconfig"
export PYTHONPATH="\$kit_root/usr/lib/python3/dist-packages\${PYTHONPATH:+:\$PYTHONPATH}"
ENV
du -sh "$kit/debs" "$kit/root"
