#!/bin/sh
# The southbound YANG modules are yanglint-clean, and the constraints they
# express (unique output port, port range, mandatory external peer, the
# direction each transceiver bundle faces) reject bad instance data while
# good data passes.
#   usage: test_sb_yang_lint.sh SOUTHBOUND-YANG-DIR
set -eu
dir=$1
ietf=/usr/share/yuma/modules/ietf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for m in ocs-switch ocs-transceiver ocs-devsim; do
  if ! out=$(yanglint -p "$ietf" "$dir/$m.yang" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: yanglint $m.yang: $out"; fail=1
  else
    echo "ok: $m.yang lints clean"
  fi
done

expect() { # expect ok|bad FILE PATTERN MODULE  (PATTERN: what the error must say)
  want=$1; file=$2; pattern=$3; shift 3
  if yanglint -p "$ietf" -t config "$@" "$file" >"$tmp/out" 2>&1; then got=ok; else got=bad; fi
  if [ "$got" = bad ] && ! grep -q "$pattern" "$tmp/out"; then
    echo "FAIL: $(basename "$file") refused for another reason: $(cat "$tmp/out")"; fail=1
  elif [ "$got" != "$want" ]; then
    echo "FAIL: $(basename "$file") expected $want, got $got: $(cat "$tmp/out")"; fail=1
  else
    echo "ok: $(basename "$file") is $want"
  fi
}

cat >"$tmp/good-switch.xml" <<'X'
<cross-connects xmlns="urn:ocsd:yang:ocs-switch">
  <connection><input>0</input><output>1</output></connection>
  <connection><input>1</input><output>0</output></connection>
</cross-connects>
X
cat >"$tmp/dup-output.xml" <<'X'
<cross-connects xmlns="urn:ocsd:yang:ocs-switch">
  <connection><input>0</input><output>1</output></connection>
  <connection><input>2</input><output>1</output></connection>
</cross-connects>
X
cat >"$tmp/port-range.xml" <<'X'
<cross-connects xmlns="urn:ocsd:yang:ocs-switch">
  <connection><input>5000</input><output>1</output></connection>
</cross-connects>
X
cat >"$tmp/no-output.xml" <<'X'
<cross-connects xmlns="urn:ocsd:yang:ocs-switch">
  <connection><input>3</input></connection>
</cross-connects>
X
cat >"$tmp/good-trx.xml" <<'X'
<transceivers xmlns="urn:ocsd:yang:ocs-transceiver">
  <node><id>7</id>
    <bundle><id>0</id><path>external</path>
      <external><distance>2</distance><direction>down</direction></external></bundle>
    <bundle><id>1</id><path>external</path>
      <external><distance>2</distance><direction>up</direction></external></bundle>
    <bundle><id>2</id><path>loopback</path></bundle>
  </node>
</transceivers>
X
cat >"$tmp/trx-wrong-side.xml" <<'X'
<transceivers xmlns="urn:ocsd:yang:ocs-transceiver">
  <node><id>7</id><bundle><id>0</id><path>external</path>
    <external><distance>1</distance><direction>up</direction></external></bundle></node>
</transceivers>
X
cat >"$tmp/trx-idle-bundle.xml" <<'X'
<transceivers xmlns="urn:ocsd:yang:ocs-transceiver">
  <node><id>7</id><bundle><id>2</id><path>external</path>
    <external><distance>1</distance><direction>up</direction></external></bundle></node>
</transceivers>
X
cat >"$tmp/trx-no-peer.xml" <<'X'
<transceivers xmlns="urn:ocsd:yang:ocs-transceiver">
  <node><id>7</id><bundle><id>0</id><path>external</path><external/></bundle></node>
</transceivers>
X
cat >"$tmp/trx-far.xml" <<'X'
<transceivers xmlns="urn:ocsd:yang:ocs-transceiver">
  <node><id>7</id><bundle><id>0</id><path>external</path>
    <external><distance>40</distance><direction>up</direction></external></bundle></node>
</transceivers>
X
sw="$dir/ocs-switch.yang"; trx="$dir/ocs-transceiver.yang"
expect ok "$tmp/good-switch.xml" "" "$sw"
expect bad "$tmp/dup-output.xml" "Unique data leaf(s) \"output\"" "$sw"
expect bad "$tmp/port-range.xml" "5000" "$sw"
expect bad "$tmp/no-output.xml" "Mandatory node \"output\"" "$sw"
expect ok "$tmp/good-trx.xml" "" "$trx"
expect bad "$tmp/trx-no-peer.xml" "Mandatory node" "$trx"
expect bad "$tmp/trx-far.xml" "40" "$trx"
expect bad "$tmp/trx-wrong-side.xml" "bundle 0 reaches lower positions" "$trx"
expect bad "$tmp/trx-idle-bundle.xml" "other bundles have no external" "$trx"
exit $fail
