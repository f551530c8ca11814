#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test agx (needs root or sudo).
# Does nothing when everything is present.
set -euo pipefail
packages=(build-essential pkg-config meson ninja-build
          openmpi-bin libopenmpi-dev mpich libmpich-dev
          libhwloc-dev hwloc catch2 gfortran)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Installing MPICH must not switch the system MPI away from Open MPI.
if command -v update-alternatives >/dev/null && [ -e /usr/bin/mpicc.openmpi ]; then
  current=$(readlink -f /etc/alternatives/mpi 2>/dev/null || true)
  case "$current" in *openmpi*) ;; *)
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO update-alternatives --set mpi /usr/bin/mpicc.openmpi >/dev/null
    $SUDO update-alternatives --set mpirun /usr/bin/mpirun.openmpi >/dev/null ;;
  esac
fi
