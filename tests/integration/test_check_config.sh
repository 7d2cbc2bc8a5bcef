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

# The mixed lab fabric, or any fabric, with sed expressions applied.
mixed() { sed "$@" "$fabrics/lab-mixed.json"; }
rails() { sed "$@" "$fabrics/rail-ocs.json"; }

F=/ocsd-fabric:fabric
D=$F/devices

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
expect_valid "$fabrics/lab-mixed.json" 'OCS devices +16 ' 'models +ocs-switch 8, polatis 8$' \
  'polatis ports +ingress 1\.\.8, egress 9\.\.16$'
expect_valid "$fabrics/lab.json" 'models +ocs-switch 16$'
expect_valid "$fabrics/ocstrx-ring.json" 'models +ocs-transceiver 64$'

# --- device models and port maps (issue 23) ---
# A device entry overrides its group: device 4 of polatis group 1 is an ocs-switch.
mixed 's/"group": \[/"device": [{"id": 4, "model": "ocs-switch"}], "group": [/' >"$tmp/override.json"
expect_valid "$tmp/override.json" 'models +ocs-switch 9, polatis 7$'
# A device's own port-map wins over its group's: device 12 uses ingress 9..16, egress 17..24 of a 16 x 16 switch.
mixed 's/"group": \[/"device": [{"id": 12, "port-map": {"ingress-first": 9, "switch-ports": 32}}], "group": [/' \
  >"$tmp/devmap.json"
expect_valid "$tmp/devmap.json" 'polatis ports +ingress 1\.\.8, egress 9\.\.16 \(ocs-g1-d0; 1 other device map'
# A group's port-map without switch-ports: egress defaults to N + 1.
mixed 's/{"switch-ports": 16}/{"ingress-first": 101}/g' >"$tmp/groupmap.json"
expect_valid "$tmp/groupmap.json" 'polatis ports +ingress 101\.\.108, egress 9\.\.16$'
# Rail-OCS devices may be polatis: N = 72 GPU-side + 64 switch-side ports.
rails 's/"port-base": 19500,/"port-base": 19500, "model": "polatis",/' >"$tmp/rail-polatis.json"
expect_valid "$tmp/rail-polatis.json" 'models +polatis 4$' \
  'polatis ports +ingress 1\.\.136, egress 137\.\.272$'

lab 's/"switch-time-us": 25000/"switch-time-us": 25000, "model": "calient"/' | \
  expect_refused unknown-model $D/model 'enumeration|Invalid'
mixed 's/"id": 1, "model": "polatis"/"id": 1, "model": "polatis-xl"/' | \
  expect_refused unknown-group-model "$D/group[id='1']/model" 'enumeration|Invalid'
mixed 's/{"id": 1, "model": "polatis", "port-map": {"switch-ports": 16}}/{"id": 1, "model": "polatis", "port-map": {"ingress-first": 65530}}/' | \
  expect_refused ingress-past-65535 "$D/group[id='1']/port-map/ingress-first" \
  'ingress ids 65530\.\.65537 of ocsd.s 8 ports run past the largest port id \(65535\): ocsd.s ports 6\.\.7 would have no ingress'
mixed 's/"group": \[/"device": [{"id": 5, "port-map": {"egress-first": 9, "switch-ports": 12}}], "group": [/' | \
  expect_refused egress-past-switch "$D/device[id='5']/port-map/egress-first" \
  'egress ids 9\.\.16 .* run past switch-ports \(12\): ocsd.s ports 4\.\.7 would have no egress'
mixed 's/{"id": 3, "model": "polatis", "port-map": {"switch-ports": 16}}/{"id": 3, "model": "polatis", "port-map": {"egress-first": 5}}/' | \
  expect_refused ports-overlap "$D/group[id='3']/port-map/egress-first" \
  'egress ids 5\.\.12 overlap ingress ids 1\.\.8: ids 5\.\.8 would each be'
# switch-ports 14 alone: egress defaults to 14 / 2 + 1 = 8, an ingress id already.
mixed 's/{"id": 3, "model": "polatis", "port-map": {"switch-ports": 16}}/{"id": 3, "model": "polatis", "port-map": {"switch-ports": 14}}/' | \
  expect_refused switch-too-small "$D/group[id='3']/port-map/egress-first" 'egress ids 8\.\.15 overlap ingress ids 1\.\.8'
mixed 's/{"id": 3, "model"/{"id": 4, "model"/' | \
  expect_refused no-such-group "$D/group[id='4']/id" 'group 4 does not exist: the fabric has OCS groups 0\.\.3'
mixed 's/"model": "ocs-switch",/"model": "ocs-switch", "port-map": {"ingress-first": 1},/' | \
  expect_refused map-on-ocs-switch $D/port-map 'a port-map is for model polatis; the model here is ocs-switch'
mixed 's/"group": \[/"device": [{"id": 10, "model": "ocs-transceiver"}], "group": [/' | \
  expect_refused transceiver-in-lab "$D/device[id='10']/model" 'ocs-transceiver is the model of a ring domain'
sed 's/"port-base": 19000,/"port-base": 19000, "model": "polatis",/' "$fabrics/ocstrx-ring.json" | \
  expect_refused ring-polatis $F/ocstrx-ring/devices/model 'model ocs-transceiver, not polatis'
rails 's/"port-base": 19500,/"port-base": 19500, "group": [{"id": 0, "model": "polatis"}],/' | \
  expect_refused rail-group "$F/rail-ocs/devices/group[id='0']/id" 'groups are the OCS groups of a leaf-spine-OCS fabric'
# The default map (1, N + 1) of a 40000-port device runs past 65535.
lab 's/"k-ocs": 8/"k-ocs": 40000/; s/"switch-time-us": 25000/"switch-time-us": 25000, "model": "polatis"/' | \
  expect_refused default-map-overflow $D/model 'ingress 1\.\.40000 and egress 40001\.\.80000, past 65535: give a port-map'

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

# Valid files that will not work as they stand: warnings, exit 0 (issue 14 #16).
lab 's/"transport": "ssh"/"transport": "tls"/; s|/etc/ocsd/device-password|'"$tmp"'/no-such-password|' \
  >"$tmp/warn.json"
"$ocsd" --check-config "$tmp/warn.json" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] &&
  grep -q "^$F/devices/certificate-file: warning: transport tls without a client certificate" "$tmp/err" &&
  grep -q "^$F/devices/private-key-file: warning: transport tls without a client key" "$tmp/err" &&
  grep -q "^$F/devices/password-file: warning: $tmp/no-such-password does not exist" "$tmp/err"; then ok
else bad "warnings: $(cat "$tmp/err")"; fi
echo secret >"$tmp/pw"
lab 's|/etc/ocsd/device-password|'"$tmp"'/pw|' >"$tmp/nowarn.json"
"$ocsd" --check-config "$tmp/nowarn.json" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && ! grep -q warning "$tmp/err"; then ok; else bad "nowarn: $(cat "$tmp/err")"; fi

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
