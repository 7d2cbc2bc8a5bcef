#!/usr/bin/env bash
# README command (a): sets up ocsd and runs it on the simulated 4-pod lab
# fabric (deploy/fabrics/lab.json).
#
# What runs today: dependencies are installed, ocsd is built, and the lab
# fabric is validated and summarised by `ocsd --check-config`. Starting the
# device simulator fleet, the daemon and a sample job joins this script as
# those parts land (issue 5); the script says what it did not do rather than
# pretend.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash deploy/install-deps.sh --build-only
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build.configure.log
cmake --build build -j "$(nproc)" >build.log
echo "== ocsd --check-config deploy/fabrics/lab.json"
./build/daemon/ocsd --check-config deploy/fabrics/lab.json
echo
echo "Not yet available in this build: the device simulator fleet, the running"
echo "daemon and ocsctl. The fabric above is what they will run on."
