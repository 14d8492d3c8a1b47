#!/usr/bin/env bash
# Installs the Debian packages numadb's tests use, when missing: numactl and hwloc (cross-checks of the topology),
# likwid (likwid-bench, the prober's bandwidth peer), qemu, a static busybox and xz (the emulated multi-node guests).
set -euo pipefail
need=()
command -v numactl >/dev/null || need+=(numactl)
command -v lstopo-no-graphics >/dev/null || need+=(hwloc)
command -v likwid-bench >/dev/null || need+=(likwid)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v xz >/dev/null || need+=(xz-utils)
if [ ${#need[@]} -eq 0 ]; then
  echo "all host packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "missing packages: ${need[*]}; install them with: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
