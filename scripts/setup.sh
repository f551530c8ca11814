#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test agx (needs root or sudo).
# Does nothing when everything is present.
set -euo pipefail
packages=(build-essential pkg-config meson ninja-build
          openmpi-bin libopenmpi-dev mpich libmpich-dev
          libhwloc-dev hwloc catch2 gfortran
          libcli11-dev                              # tools' command lines (header-only)
          liblz4-dev libzstd-dev libzfp-dev         # lib/codec: block compression (optional)
          python3-matplotlib                        # tools/agx-plot
          python3-dev pybind11-dev python3-numpy python3-mpi4py python3-pytest  # python/, test/python
          python3-torch libtorch-dev                # python/torch, test/torch: the torch backend
          slurmctld slurmd slurm-client munge       # test/slurm (starts its own private daemons)
          libsimgrid-dev                            # test/sim (smpicxx, smpirun)
          iproute2 procps                           # test/cluster (ip netns), Slurm scripts (pgrep, ps)
          valgrind)                                 # test/sanitizers (memcheck run)
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
# agx names each MPI explicitly (ompi-c / mpich pkg-config, mpirun.openmpi, mpiexec.mpich),
# so the system MPI alternatives are left as they are.
