#!/usr/bin/env bash
# Installs every Debian package ocsd needs to build and to run its tests.
# Idempotent: packages already present are skipped, and apt is only asked
# when something is missing. Run as root (or through sudo).
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libgrpc-dev protobuf-compiler-grpc
  protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev libevent-dev libssl-dev
  libyang2-dev libyang2-tools libnetconf2-dev libssh-dev libcmocka-dev
  libsqlite3-dev libsystemd-dev libyuma-base libglpk-dev glpk-utils libjansson-dev
  zlib1g-dev libslurm-dev scdoc ninja-build)
# coinor-libcbc-dev: tests/bench/bench_delta_milp solves with CBC beside
# GLPK when cmake finds it (install before configuring); optional.
# clang-format: tests/check_format.sh (the code style check).
# clang-14, libclang-rt-14-dev: the libFuzzer harnesses of tests/fuzz (the
# compiler and its fuzzer and sanitizer runtimes; tests/run.sh's build-fuzz).
# ninja-build: tests/run.sh's build directories (a third faster than make's).
# scdoc: the man pages of docs/man (without it they are not built, and the
# test_man_pages test fails saying so).
# libslurm-dev: slurm/spank.h, for integrations/slurm's spank_ocs.so (the
# --ocs option of sbatch); without it the plugin is skipped.
# slurmctld, slurmd, slurm-client, munge: the real Slurm cluster of the
# slurm test (integrations/slurm; it starts its own daemons on loopback).
# debhelper, lintian, fakeroot, systemd (systemd-sysusers, systemd-tmpfiles,
# systemd-analyze), man-db: tests/packages.sh (the Debian packages of
# debian/, built, checked by lintian and installed into a scratch root).
# etcd-server, etcd-client: ocsd --store etcd and its tests (test_etcd,
# test_store_etcd, test_daemon_etcd start their own etcd on loopback).
# Debian enables an etcd service on 127.0.0.1:2379 when it installs
# etcd-server; `systemctl disable --now etcd` if that machine needs none.
# graphviz: `dot`, which the topology test runs on ocsctl topology's DOT and
# which `ocsctl topology --format svg` calls (ocsctl runs without it).
# chromium, chromium-driver: the status page's browser test (status_browser:
# headless chromium driven through chromedriver).
# gdb: a test client that hangs past its bound prints every thread's stack
# before it is stopped (test_sb_netconfd).
test_pkgs=(python3-grpcio python3-grpc-tools python3-ncclient netconfd
  openssh-server prometheus openssl curl coinor-libcbc-dev clang-format
  clang-14 libclang-rt-14-dev etcd-server etcd-client slurmctld slurmd slurm-client munge
  debhelper lintian fakeroot systemd man-db graphviz chromium chromium-driver gdb)

want=("${build_pkgs[@]}")
if [ "${1:-}" != "--build-only" ]; then
  want+=("${test_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
