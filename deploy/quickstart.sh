#!/usr/bin/env bash
# README command (a): sets up ocsd and runs it on the simulated 4-pod lab
# fabric (deploy/fabrics/lab.json): builds everything, starts 16 simulated
# OCS devices (ocs-devsim, real NETCONF servers) and ocsd, submits a sample
# job with ocsctl, and shows the job's circuits and one device's
# cross-connects read back over NETCONF. Everything it started is stopped on
# exit; its files stay in the printed work directory, the build's logs in
# build/ (configure.log, build.log). (Warnings do not stop this build: a
# newer compiler must not keep a user from trying ocsd; CI builds with
# -Werror.)
#
#   deploy/quickstart.sh            run the demo and exit
#   deploy/quickstart.sh --keep     leave the fabric and ocsd running until Ctrl-C
#   deploy/quickstart.sh --fabric lab-mixed
#                                   the same lab with OCS groups 1 and 3
#                                   (devices 4..7, 12..15) simulated Polatis switches
#                                   (deploy/fabrics/lab-mixed.json): the job
#                                   spans both models in one transaction
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
keep=0
fabric=lab
while [ $# -gt 0 ]; do
  case $1 in
  --keep) keep=1 ;;
  --fabric)
    fabric=${2:-}
    shift
    ;;
  *)
    echo "usage: $0 [--keep] [--fabric lab|lab-mixed]" >&2
    exit 2
    ;;
  esac
  shift
done
# The simulated devices of each fabric: "first-port count model" per ocs-devsim
# process, as the fabric file numbers and models them (port-base 18300).
case $fabric in
lab) devsims=("18300 16 ocs-switch") ;;
lab-mixed) devsims=("18300 4 ocs-switch" "18304 4 polatis" "18308 4 ocs-switch" "18312 4 polatis") ;;
*)
  echo "$0: --fabric: lab or lab-mixed, not '$fabric'" >&2
  exit 2
  ;;
esac

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
sed "s|/etc/ocsd/device-password|$work/device-password|" "deploy/fabrics/$fabric.json" \
  >"$work/fabric.json"

for d in "${devsims[@]}"; do
  read -r first count model <<<"$d"
  name=devsim-$first
  echo "== starting $count simulated $model devices on 127.0.0.1:$first..$((first + count - 1))"
  # Cross wiring: each device carries one direction of a circuit.
  build/southbound/ocs-devsim --listen "127.0.0.1:$first" --count "$count" --ports 8 \
    --model "$model" --user ocsd --password-file "$work/device-password" --unidirectional \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
  listening "$name" "$!" "$first" "$count"
done

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
if [ "$fabric" = lab-mixed ]; then
  echo
  echo "== cross-connect pairs of the Polatis device ocs-g1-d0 (127.0.0.1:18304), read over NETCONF"
  /usr/bin/python3 - "$work/device-password" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from ncclient import manager

NS = "http://www.polatis.com/yang/optical-switch"
password = open(sys.argv[1]).readline().strip()
with manager.connect(host="127.0.0.1", port=18304, username="ocsd", password=password,
                     hostkey_verify=False, allow_agent=False, look_for_keys=False,
                     timeout=10) as m:
    reply = m.get(filter=("subtree", f'<cross-connects xmlns="{NS}"/>'))
pairs = [(int(p.findtext(f"{{{NS}}}ingress")), int(p.findtext(f"{{{NS}}}egress")))
         for p in ET.fromstring(reply.data_xml).iter(f"{{{NS}}}pair")]
print("ingress  egress   (ocsd port k: ingress 1+k, egress 9+k)")
for i, e in sorted(pairs):
    print(f"{i:7d}  {e:6d}")
EOF
fi
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
