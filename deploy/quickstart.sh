#!/usr/bin/env bash
# README command (a): sets up ocsd and runs it on the simulated 4-pod lab
# fabric (deploy/fabrics/lab.json): builds everything, starts 16 simulated
# OCS devices (ocs-devsim, a real NETCONF server) and ocsd, submits a sample
# job with ocsctl, and shows the job's circuits and one device's
# cross-connects read back over NETCONF. Everything it started is stopped on
# exit; its files stay in the printed work directory, the build's logs in
# build/ (configure.log, build.log). (Warnings do not stop this build: a
# newer compiler must not keep a user from trying ocsd; CI builds with
# -Werror.)
#
#   deploy/quickstart.sh            run the demo and exit
#   deploy/quickstart.sh --keep     leave the fabric and ocsd running until Ctrl-C
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
keep=0
[ "${1:-}" = "--keep" ] && keep=1

bash deploy/install-deps.sh
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCSD_WERROR=OFF >build/configure.log ||
  { cat build/configure.log; exit 1; }
cmake --build build -j "$(nproc)" --target ocsd ocsctl ocs-devsim >build/build.log ||
  { tail -50 build/build.log; exit 1; }

work=$(mktemp -d /tmp/ocsd-lab.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "lab stopped; logs in $work"
}
trap cleanup EXIT
# Checks that a server listens, naming it and the port when it never does.
listening() { # name pid port [count]
  /usr/bin/python3 tests/integration/testports.py wait --name "$1" --pid "$2" --timeout 30 \
    127.0.0.1 "$3" "${4:-1}" || { cat "$work/$1.log"; exit 1; }
}

# A fresh device password for this lab, never committed anywhere.
openssl rand -hex 16 >"$work/device-password"
chmod 600 "$work/device-password"
sed "s|/etc/ocsd/device-password|$work/device-password|" deploy/fabrics/lab.json >"$work/fabric.json"

echo "== starting 16 simulated OCS devices on 127.0.0.1:18300..18315"
# Cross wiring: each device carries one direction of a circuit.
build/southbound/ocs-devsim --listen 127.0.0.1:18300 --count 16 --ports 8 \
  --user ocsd --password-file "$work/device-password" --unidirectional \
  >"$work/devsim.log" 2>&1 &
pids+=($!)
listening devsim "$!" 18300 16

echo "== starting ocsd (gRPC 127.0.0.1:50051 without TLS, loopback only; metrics 127.0.0.1:9464)"
build/daemon/ocsd --config "$work/fabric.json" --state-dir "$work" \
  --listen 127.0.0.1:50051 --insecure --metrics-listen 127.0.0.1:9464 \
  >"$work/ocsd.log" 2>&1 &
pids+=($!)
listening ocsd "$!" 50051
listening ocsd "$!" 9464

ocsctl() { build/northbound/ocsctl/ocsctl --insecure --server 127.0.0.1:50051 "$@"; }
for _ in $(seq 1 100); do
  ocsctl status >/dev/null 2>&1 && break
  sleep 0.1
done
echo
ocsctl status
echo
echo "== ocsctl job submit deploy/jobs/lab-ring.json"
ocsctl job submit deploy/jobs/lab-ring.json
echo
echo "== ocsctl circuits --job lab-ring"
ocsctl circuits --job lab-ring
echo
echo "== cross-connects of ocs-g0-d0 (127.0.0.1:18300), read over NETCONF"
/usr/bin/python3 deploy/show-device.py 127.0.0.1 18300 ocsd "$work/device-password"
echo
echo "== ocsd_cross_connects from http://127.0.0.1:9464/metrics"
curl -s http://127.0.0.1:9464/metrics | grep -E '^ocsd_(cross_connects|jobs\{state="ACTIVE"\})'
if [ "$keep" = 1 ]; then
  echo
  echo "The lab keeps running (Ctrl-C stops it). Try:"
  echo "  build/northbound/ocsctl/ocsctl --insecure jobs"
  echo "  build/northbound/ocsctl/ocsctl --insecure job release lab-ring"
  wait
fi
