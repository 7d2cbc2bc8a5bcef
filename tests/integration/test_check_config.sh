#!/usr/bin/env bash
# test_check_config.sh - drives `ocsd --check-config` with the example
# fabrics (must pass, with the right counts) and with broken fabric files
# (each must be refused with exit code 2 and a message naming the path).
# Usage: test_check_config.sh OCSD_BINARY FABRICS_DIR
set -u
shopt -s lastpipe # the counters below are updated at the end of pipelines
ocsd=$1
fabrics=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_valid FILE REGEX...: exit 0 and every regex found in stdout.
expect_valid() {
  local file=$1; shift
  local out rc
  out=$("$ocsd" --check-config "$file" 2>"$tmp/err"); rc=$?
  if [ $rc -ne 0 ]; then bad "$file: exit $rc: $(cat "$tmp/err")"; return; fi
  for re in "$@"; do
    if ! grep -Eq "$re" <<<"$out"; then bad "$file: summary lacks /$re/"; return; fi
  done
  ok
}

# expect_refused NAME PATH MESSAGE-REGEX < content
expect_refused() {
  local name=$1 path=$2 msg=$3 rc
  cat >"$tmp/$name.json"
  "$ocsd" --check-config "$tmp/$name.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -ne 2 ]; then bad "$name: exit $rc (want 2): $(cat "$tmp/err")"; return; fi
  if [ -s "$tmp/out" ]; then bad "$name: printed a summary although refused"; return; fi
  if ! grep -F -- "$path: " "$tmp/err" | grep -Eq -- "$msg"; then
    bad "$name: no line '$path: /$msg/' in: $(cat "$tmp/err")"; return
  fi
  ok
}

# A valid lab fabric with one member replaced: base MEMBER-JSON-FRAGMENT
lab() { # extra members appended / replaced via sed expressions
  sed "$@" "$fabrics/lab.json"
}

F=/ocsd-fabric:fabric

# --- the examples ---
expect_valid "$fabrics/lab.json" 'GPUs +64$' 'pods +4$' 'OCS devices +16 '
expect_valid "$fabrics/8k.json" 'GPUs +8192$' 'pods +64$' 'leaves +512 ' 'spines +512 ' \
  'OCS devices +128 '
expect_valid "$fabrics/16k.json" 'GPUs +16384$' 'pods +128$' 'leaves +1024 \(8 per pod' \
  'spines +1024 \(8 per pod' 'OCS groups +8$' 'OCS devices +64 \(8 per group, 256 ports' \
  'OCS ports +16384 in total, 16384 cabled' 'wiring +dual'
expect_valid "$fabrics/131k.json" 'GPUs +131072$' 'pods +256$' 'leaves +4096 ' \
  'spines +4096 ' 'OCS groups +16$' 'OCS devices +512 ' 'OCS ports +131072 in total'
expect_valid "$fabrics/ocstrx-ring.json" 'GPUs +256$' 'nodes +64 '
expect_valid "$fabrics/rail-ocs.json" 'GPUs +256 \(\+32 spare\)' 'servers +32 \(\+4 spare\)' \
  'rails +8$' 'rail ports +256$' 'OCS devices +4 \(one per 9 servers, 72 GPU-side \+ 64 switch-side'

# --- broken files: syntax ---
expect_refused empty / 'file is empty' </dev/null
printf '  \n\t\n' | expect_refused blank / 'file is empty'
head -c 120 "$fabrics/lab.json" | expect_refused truncated $F 'line [0-9]+: .*JSON string'
echo '{"ocsd-fabric:fabric": {"name": "x",, }}' | expect_refused malformed $F "line 1: .*expected"
echo '[1, 2, 3]' | expect_refused array-top / '.'
printf '{"ocsd-fabric:fabric": {"name": "a\0b"}}' | expect_refused nul-byte / 'NUL byte'
echo '{"fabric": {"name": "x"}}' | expect_refused no-module-prefix / '.'
echo '{"ocsd-fabric:fabric": {"name": "x"}, "other:thing": 1}' | \
  expect_refused unknown-top /thing 'unknown member'

# --- types and ranges (libyang) ---
lab 's/"pods": 4/"pods": "4"/' | expect_refused pods-string $F/pods 'non-number-encoded'
lab 's/"k-leaf": 8/"k-leaf": -8/' | expect_refused negative-kleaf $F/k-leaf 'uint32|range|bounds'
lab 's/"tau": 2/"tau": 1.5/' | expect_refused fractional-tau $F/tau 'uint32|Invalid'
lab 's/"k-ocs": 8/"k-ocs": 70000/' | expect_refused kocs-range $F/k-ocs 'range'
lab 's/"pods": 4/"pods": 1/' | expect_refused one-pod $F/pods 'range'
lab 's/"wiring": "cross"/"wiring": "diagonal"/' | expect_refused bad-wiring $F/wiring 'enumeration'
lab 's/"port-base": 18300/"port-base": 0/' | expect_refused port-zero $F/devices/port-base 'range'
lab 's/"address": "127.0.0.1"/"address": "not a host!"/' | \
  expect_refused bad-address $F/devices/address '.'
lab 's/"name": "lab"/"name": "lab fabric\/1"/' | expect_refused bad-name $F/name 'pattern|match'
lab 's/"tau": 2,/"tau": 2, "taus": 3,/' | expect_refused unknown-field $F/taus 'unknown member'
lab 's/"username": "ocsd",/"username": "ocsd", "password": "hunter2",/' | \
  expect_refused secret-inline $F/devices/password 'unknown member'
lab 's/"devices": {/"devices": 7, "x": {/' | expect_refused devices-scalar $F 'container "devices" .*object'
lab 's/"rpc-timeout-ms": 5000/"rpc-timeout-ms": 1/' | \
  expect_refused timeout-range $F/devices/rpc-timeout-ms 'range'
lab '/"wiring"/d' | expect_refused missing-wiring $F/wiring 'Mandatory|mandatory'
lab '/"name"/d' | expect_refused missing-name $F/name 'Mandatory|mandatory'

# --- semantic rules (ocsd's own checks) ---
lab 's/"k-leaf": 8/"k-leaf": 7/' | expect_refused kleaf-tau $F/k-leaf 'must be divisible by tau \(2\)'
lab 's/"k-spine": 4/"k-spine": 9/; s/"tau": 2/"tau": 3/; s/"k-leaf": 8/"k-leaf": 9/' | \
  expect_refused kspine-odd-cross $F/k-spine 'must be even for cross wiring'
lab 's/"pods": 4/"pods": 9/' | expect_refused too-few-ocs-ports $F/k-ocs '9 pods need 9'
lab 's/"wiring": "cross"/"wiring": "dual"/; s/"pods": 4/"pods": 5/' | \
  expect_refused dual-ports $F/k-ocs 'dual wiring needs two ports per pod.*need 10'
lab 's/"port-base": 18300/"port-base": 65530/' | \
  expect_refused port-overflow $F/devices/port-base 'above 65535'
lab 's/"confirm-timeout-s": 60/"confirm-timeout-s": 60, "device": [{"id": 3, "port": 18305}]/' | \
  expect_refused duplicate-address "$F/devices/device[id='5']" 'already used by device 3'
lab 's/"confirm-timeout-s": 60/"confirm-timeout-s": 60, "device": [{"id": 16}]/' | \
  expect_refused device-id-range "$F/devices/device[id='16']/id" 'devices 0..15'
lab 's/"confirm-timeout-s": 60/"confirm-timeout-s": 60, "device": [{"id": 1, "name": "ocs-g0-d0"}]/' | \
  expect_refused duplicate-name "$F/devices/device[id='1']/name" 'already used by device 0'
lab '/"accept-any-host-key"/d' | \
  expect_refused no-host-keys "$F/devices/device[id='0']/host-key-sha256" 'no SSH host key fingerprint'
lab 's/"confirm-timeout-s": 60/"confirm-timeout-s": 60, "device": [{"id": 2, "host-key-sha256": "MD5:abc"}]/' | \
  expect_refused bad-fingerprint "$F/devices/device[id='2']/host-key-sha256" 'pattern|match'
label=$(printf 'h%.0s' $(seq 1 40))
long_host=$label.$label.example
lab "s/\"address\": \"127.0.0.1\"/\"address\": \"$long_host\"/" | \
  expect_refused long-address "$F/devices/device[id='0']/address" 'longer than 63'
cat <<'EOF2' | expect_refused ring-khops $F/ocstrx-ring/k-hops 'below the number of nodes'
{"ocsd-fabric:fabric": {"name": "r", "ocstrx-ring": {"tors": 1, "nodes-per-tor": 2,
 "gpus-per-node": 4, "k-hops": 2, "bundles": 2}}}
EOF2
cat <<'EOF2' | expect_refused ring-agg $F/ocstrx-ring/tors-per-agg 'must divide tors'
{"ocsd-fabric:fabric": {"name": "r", "ocstrx-ring": {"tors": 6, "nodes-per-tor": 2,
 "gpus-per-node": 4, "k-hops": 2, "bundles": 2, "tors-per-agg": 4}}}
EOF2
cat <<'EOF2' | expect_refused rail-divide $F/rail-ocs/servers-per-ocs 'must divide servers \(32\)'
{"ocsd-fabric:fabric": {"name": "r", "rail-ocs": {"servers": 32, "rails": 8,
 "servers-per-ocs": 6, "spare-servers-per-ocs": 1}}}
EOF2
cat <<'EOF2' | expect_refused rail-spares $F/rail-ocs/spare-servers-per-ocs 'below servers-per-ocs \(4\)'
{"ocsd-fabric:fabric": {"name": "r", "rail-ocs": {"servers": 32, "rails": 8,
 "servers-per-ocs": 4, "spare-servers-per-ocs": 4}}}
EOF2
cat <<'EOF2' | expect_refused rail-ports $F/rail-ocs/servers-per-ocs '69632 ports .* more than 65536'
{"ocsd-fabric:fabric": {"name": "r", "rail-ocs": {"servers": 4096, "rails": 17,
 "servers-per-ocs": 2048, "spare-servers-per-ocs": 0}}}
EOF2
cat <<'EOF2' | expect_refused rail-missing $F/rail-ocs/servers-per-ocs 'Mandatory'
{"ocsd-fabric:fabric": {"name": "r", "rail-ocs": {"servers": 32, "rails": 8}}}
EOF2
cat <<'EOF2' | expect_refused rail-old-member $F/rail-ocs/ocs-ports '.'
{"ocsd-fabric:fabric": {"name": "r", "rail-ocs": {"servers": 32, "rails": 8,
 "servers-per-ocs": 8, "ocs-ports": 64}}}
EOF2

# Several errors in one file are all reported.
lab 's/"pods": 4/"pods": "four"/; s/"wiring": "cross"/"wiring": "x"/; s/"tau": 2,/"tau": 2, "extra": 1,/' \
  >"$tmp/multi.json"
"$ocsd" --check-config "$tmp/multi.json" 2>"$tmp/err" >/dev/null
if [ $? -eq 2 ] && grep -q "^$F/pods: " "$tmp/err" && grep -q "^$F/wiring: " "$tmp/err" &&
  grep -q "^$F/extra: " "$tmp/err" && grep -q '(3 errors)' "$tmp/err"; then ok
else bad "multi: not every error reported: $(cat "$tmp/err")"; fi

# 100 MB file: refused by size before parsing.
truncate -s 100M "$tmp/huge.json"
"$ocsd" --check-config "$tmp/huge.json" >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q 'more than the limit' "$tmp/err"; then ok; else bad "huge: $(cat "$tmp/err")"; fi
# Not a file, and a missing file.
"$ocsd" --check-config "$tmp" >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q 'not a regular file' "$tmp/err"; then ok; else bad "dir: $(cat "$tmp/err")"; fi
"$ocsd" --check-config "$tmp/nope.json" >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q 'No such file' "$tmp/err"; then ok; else bad "missing: $(cat "$tmp/err")"; fi

echo "check-config: $pass passed, $fail failed"
[ $fail -eq 0 ]
