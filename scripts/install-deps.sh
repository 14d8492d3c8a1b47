#!/usr/bin/env bash
# Installs what numadb's tests use, when missing: Debian's numactl and hwloc (cross-checks of the topology),
# likwid (likwid-bench, the prober's bandwidth peer), qemu, a static busybox and xz (the emulated multi-node guests),
# PostgreSQL's clients and server (psql, pgbench, and the PostgreSQL that `numadb bench wire` and the experiments'
# --compare postgres run; Debian keeps initdb and pg_ctl in /usr/lib/postgresql/*/bin), and a Python virtual
# environment (.venv) with DuckDB and numpy (the differential SQL tests' and benchmarks' peer) and psycopg 3 (a
# driver the server tests use).
set -euo pipefail
need=()
command -v numactl >/dev/null || need+=(numactl)
command -v lstopo-no-graphics >/dev/null || need+=(hwloc)
command -v likwid-bench >/dev/null || need+=(likwid)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v xz >/dev/null || need+=(xz-utils)
command -v python3 >/dev/null || need+=(python3)
python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
command -v psql >/dev/null || need+=(postgresql-client)
# pgbench and initdb come with Debian's server package.
{ command -v pgbench >/dev/null && { command -v initdb >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }; } ||
  need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing packages: ${need[*]}; install them with: sudo apt-get install ${need[*]}" >&2
    exit 1
  fi
  echo "installing ${need[*]}"
  # The server package is for its binaries: no cluster of its own, please.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold \
    "${need[@]}" >/dev/null
else
  echo "all host packages present"
fi

# A Python environment with the peers the tests compare against (DuckDB) and the clients they drive (psycopg).
venv="$(dirname "$0")/../.venv"
if ! "$venv/bin/python" -c "import duckdb, numpy" 2>/dev/null; then
  echo "creating $venv with duckdb and numpy"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check duckdb numpy
fi
if ! "$venv/bin/python" -c "import psycopg" 2>/dev/null; then
  echo "installing psycopg 3 into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "psycopg[binary]"
fi
