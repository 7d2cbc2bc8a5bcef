#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a DESTDIR
# (prefix /usr) and the tree it makes: every program, the unit (naming the
# installed ocsd and README), the YANG modules, the READMEs and the example
# fabrics (issue 14 #12), the bash completions of ocsctl and ocsplan
# (issue 26). Then the steps of systemd/README.md marked "(tested):"
# (device password file, TLS files) run as written, as an
# unprivileged user (nobody, when this runs as root), with /etc/ocsd
# replaced by a scratch directory; the files they make have the documented
# modes, and the installed ocsd serves the installed ocsctl with them.
# Last, the 3-replica example of deploy/replicas (docs/replicas.md "Running
# three replicas"): the drop-in merged into the installed unit passes
# systemd-analyze verify, etcd-certs.sh makes certificates that verify with
# the key usages etcd's gateway needs, and one etcd member started from
# etcd.env with them serves the installed ocsd started with the drop-in's own
# ExecStart and replica.env (addresses and /etc paths moved to loopback and
# the scratch tree): it leads on the etcd store over TLS.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d /tmp/test_install.XXXXXX)
ocsd_pid=""
replica_pid=""
etcd_pid=""
cleanup() {
  for p in $ocsd_pid $replica_pid $etcd_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
ok() { echo "ok: $*"; }

# 1. the tree
stage=$work/stage
DESTDIR=$stage cmake --install "$build" --prefix /usr >"$work/install.log"
for f in usr/sbin/ocsd usr/bin/ocsctl usr/bin/ocsplan usr/bin/ocs-devsim usr/sbin/ocs-slurm; do
  if [ -x "$stage/$f" ]; then ok "$f"; else bad "$f not installed or not executable"; fi
done
for f in usr/lib/systemd/system/ocsd.service usr/share/ocsd/yang/ocsd-fabric.yang \
  usr/share/ocsd/yang/ocs-switch.yang usr/share/ocsd/yang/ocs-transceiver.yang \
  usr/share/doc/ocsd/README.md usr/share/doc/ocsd/systemd/README.md \
  usr/share/doc/ocsd/daemon/README.md usr/share/doc/ocsd/northbound/README.md \
  usr/share/doc/ocsd/examples/fabrics/lab.json usr/share/doc/ocsd/examples/jobs/lab-ring.json \
  usr/share/doc/ocsd/integrations/README.md usr/share/doc/ocsd/integrations/slurm/README.md \
  usr/share/doc/ocsd/examples/slurm/ocs-slurm.conf \
  usr/share/doc/ocsd/examples/slurm/ocs-slurm-watch.service \
  usr/share/man/man8/ocsd.8 usr/share/man/man1/ocsctl.1 usr/share/man/man1/ocsplan.1 \
  usr/share/man/man1/ocs-devsim.1 usr/share/man/man5/ocsd-fabric.5 \
  usr/share/man/man8/ocs-slurm.8 usr/share/doc/ocsd/examples/ocsd.default usr/share/ocsd/monitoring/README.md \
  usr/share/ocsd/monitoring/ocsd.rules.yml usr/share/ocsd/monitoring/prometheus.yml \
  usr/share/ocsd/monitoring/grafana/ocsd-dashboard.json \
  usr/share/bash-completion/completions/ocsctl usr/share/bash-completion/completions/ocsplan; do
  if [ -f "$stage/$f" ]; then ok "$f"; else bad "$f not installed"; fi
done
# issue 26: man finds every page in the install
for pg in ocsd ocsctl ocsplan ocs-devsim ocs-slurm ocsd-fabric; do
  if MANPATH=$stage/usr/share/man man -w "$pg" >/dev/null 2>&1; then ok "man -w $pg"
  else bad "man -w $pg finds nothing under $stage/usr/share/man"; fi
done
# the SPANK plugin where plugstack.conf.example says, when it was built
plugin=$(sed -n 's|^optional /||p' \
  "$src/integrations/slurm/plugstack.conf.example")
if [ ! -f "$build/integrations/slurm/spank_ocs.so" ]; then
  ok "spank_ocs.so not built (no slurm/spank.h), not installed"
elif [ -f "$stage/$plugin" ]; then ok "$plugin (plugstack.conf.example's path)"
else bad "spank_ocs.so not at plugstack.conf.example's $plugin"; fi
unit=$stage/usr/lib/systemd/system/ocsd.service
# every absolute path the unit names that the install provides is in the tree
for p in $(grep -oE '(/usr/sbin/ocsd|file:///usr/share/doc/ocsd/[^ ]+)' "$unit" | sed 's|^file://||' | sort -u); do
  if [ -e "$stage$p" ]; then ok "the unit's $p is installed"; else bad "the unit names $p, not installed"; fi
done
grep -q '^LimitNOFILE=' "$unit" && ok "unit sets LimitNOFILE" || bad "unit has no LimitNOFILE"
# issue 26: configured with any prefix, installed with --prefix /usr, the
# unit names /usr's ocsd (it named the configured prefix's before)
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
others=$(sed -nE 's/^Exec[A-Za-z]*=-?([^ ]+).*/\1/p' "$unit" | grep -vxE '/usr/sbin/ocsd|/bin/kill' || true)
if grep -qE '^ExecStart=/usr/sbin/ocsd ' "$unit" && [ -z "$others" ]; then
  ok "the unit names /usr/sbin/ocsd (configured for $configured, installed for /usr)"
else bad "the unit does not name the installed /usr/sbin/ocsd: $(grep '^Exec' "$unit")"; fi

# 2. the documented steps marked (tested), extracted from systemd/README.md
awk -v dir="$work" '
  /\(tested\):/ { want = 1 }
  want && /^ *```(sh|bash)$/ { n++; out = dir "/step" n ".sh"; inblock = 1; want = 0; next }
  inblock && /^ *```$/ { inblock = 0; next }
  inblock { sub(/^   /, ""); print > out }
' "$src/systemd/README.md"
[ -f "$work/step1.sh" ] && [ -f "$work/step2.sh" ] || { bad "no (tested) steps in systemd/README.md"; exit 1; }
etc=$work/etc
mkdir -p "$etc/tls"
# /etc/ocsd -> scratch; chgrp to the service group needs root and the group
for s in "$work"/step*.sh; do
  sed -i -e "s|cd /etc/ocsd/tls|cd $etc/tls|" -e "s|cd /etc/ocsd$|cd $etc|" -e '/^chgrp ocsd /d' "$s"
done
run_as=()
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
  chown -R nobody "$etc"
  chmod 0755 "$work"
  run_as=(runuser -u nobody --)
fi
password="pw-$RANDOM-$RANDOM"
printf '%s\n' "$password" | "${run_as[@]}" bash -e "$work/step1.sh" >"$work/step1.log" 2>&1 ||
  bad "password step: $(cat "$work/step1.log")"
"${run_as[@]}" bash -e "$work/step2.sh" >"$work/step2.log" 2>&1 || bad "TLS step: $(cat "$work/step2.log")"
mode() { stat -c %a "$1" 2>/dev/null || echo missing; }
[ "$(mode "$etc/device-password")" = 640 ] && ok "device-password is 0640" ||
  bad "device-password mode $(mode "$etc/device-password")"
[ "$(cat "$etc/device-password" 2>/dev/null)" = "$password" ] && ok "device-password holds the password" ||
  bad "device-password content"
[ "$(mode "$etc/tls/server.key")" = 640 ] && ok "server.key is 0640" || bad "server.key mode $(mode "$etc/tls/server.key")"
for c in server alice; do
  if openssl verify -CAfile "$etc/tls/clients-ca.pem" "$etc/tls/$c.pem" >/dev/null 2>&1; then ok "$c.pem signed by clients-ca.pem"
  else bad "$c.pem does not verify"; fi
done

# 3. the installed ocsd, the installed example fabric and the files above;
#    the installed ocsctl as the operator of step 5
dead=$(/usr/bin/python3 "$src/tests/integration/testports.py" reserve --count 16 --owner $$)
sed -e "s|/etc/ocsd/device-password|$etc/device-password|" -e "s|\"port-base\": 18300|\"port-base\": $dead|" \
  "$stage/usr/share/doc/ocsd/examples/fabrics/lab.json" >"$etc/fabric.json"
if "$stage/usr/sbin/ocsd" --check-config "$etc/fabric.json" >/dev/null 2>"$work/check.err" &&
  ! grep -q warning "$work/check.err"; then ok "--check-config of the installed example, no warning"
else bad "--check-config: $(cat "$work/check.err")"; fi
"$stage/usr/sbin/ocsd" --config "$etc/fabric.json" --state-dir "$work/state" --listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --reconcile-interval-s 0 --tls-ca "$etc/tls/clients-ca.pem" \
  --tls-cert "$etc/tls/server.pem" --tls-key "$etc/tls/server.key" 2>"$work/ocsd.log" &
ocsd_pid=$!
mkdir -p "$work/state"
port=""
for _ in $(seq 200); do
  port=$(sed -n 's/.*gRPC on [^ ]* (port \([0-9]*\).*/\1/p' "$work/ocsd.log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$ocsd_pid" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$port" ]; then bad "installed ocsd did not start: $(cat "$work/ocsd.log")"
elif "$stage/usr/bin/ocsctl" --server "127.0.0.1:$port" --ca "$etc/tls/clients-ca.pem" \
  --cert "$etc/tls/alice.pem" --key "$etc/tls/alice.key" devices >"$work/ctl.out" 2>&1; then
  ok "installed ocsctl, as alice (operator), served by the installed ocsd"
else bad "ocsctl: $(cat "$work/ctl.out")"; fi

kill "$ocsd_pid" 2>/dev/null || true
wait "$ocsd_pid" 2>/dev/null || true
ocsd_pid=""

# 4. the 3-replica example
ex=$stage/usr/share/doc/ocsd/examples/replicas
for f in ocsd-replica.conf replica.env etcd.env etcd-certs.sh; do
  if [ -f "$ex/$f" ]; then ok "examples/replicas/$f"; else bad "examples/replicas/$f not installed"; fi
done
mkdir -p "$stage/etc/systemd/system/ocsd.service.d" "$stage/etc/ocsd"
cp "$ex/ocsd-replica.conf" "$stage/etc/systemd/system/ocsd.service.d/replica.conf"
cp "$ex/replica.env" "$stage/etc/ocsd/replica.env"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --root="$stage" ocsd.service >"$work/verify.log" 2>&1 || true
  # A file:line message is a mistake in the unit or the drop-in, and so is
  # any ocsd the unit names that is not installed; what the scratch root
  # lacks (sysinit.target, /bin/kill) is not.
  if grep -qE '\.(service|conf):[0-9]+:|Command [^ ]*/ocsd is not' "$work/verify.log"; then
    bad "systemd-analyze verify of ocsd.service with the replica drop-in: $(cat "$work/verify.log")"
  else ok "systemd-analyze verify: ocsd.service with the replica drop-in"; fi
else echo "skip: no systemd-analyze"; fi
# The drop-in's ExecStart, continuation lines joined
cmd=$(awk '/^ExecStart=./ { on = 1; sub(/^ExecStart=/, "") }
  on { line = $0; more = sub(/\\$/, "", line); printf "%s ", line; if (!more) on = 0 }' "$ex/ocsd-replica.conf")
"$stage/usr/sbin/ocsd" --help >"$work/help.txt" 2>&1 || true
case $cmd in *"--store etcd"*"--replica-id"*) ok "the drop-in's ExecStart: --store etcd, --replica-id" ;;
  *) bad "the drop-in's ExecStart: $cmd" ;; esac
for opt in $(printf '%s\n' "$cmd" | grep -oE -- '--[a-z-]+' | sort -u); do
  grep -q -- " $opt " "$work/help.txt" || bad "the drop-in's $opt is not an ocsd option"
done
tls=$etc/etcd
sh "$ex/etcd-certs.sh" "$tls" etcd-1=127.0.0.1 >"$work/certs.log" 2>&1 || bad "etcd-certs.sh: $(cat "$work/certs.log")"
for c in etcd-1 ocsd-client; do
  if openssl verify -CAfile "$tls/ca.pem" "$tls/$c.pem" >/dev/null 2>&1; then ok "$c.pem signed by the etcd CA"
  else bad "$c.pem does not verify"; fi
done
openssl x509 -in "$tls/etcd-1.pem" -noout -ext extendedKeyUsage 2>/dev/null | grep -q 'Server Authentication, TLS Web Client Authentication' &&
  ok "member certificate: serverAuth and clientAuth" || bad "member certificate's key usage"
[ "$(mode "$tls/etcd-1.key")" = 600 ] && [ "$(mode "$tls/ocsd-client.key")" = 600 ] && ok "etcd keys are 0600" || bad "etcd key modes"
c=$(/usr/bin/python3 "$src/tests/integration/testports.py" reserve --count 2 --owner $$)
p=$((c + 1))
sed -e "/^ETCD_LISTEN_CLIENT_URLS=/c ETCD_LISTEN_CLIENT_URLS=https://127.0.0.1:$c" \
  -e "/^ETCD_INITIAL_CLUSTER=/c ETCD_INITIAL_CLUSTER=etcd-1=https://127.0.0.1:$p" \
  -e "s|^ETCD_DATA_DIR=.*|ETCD_DATA_DIR=$work/etcd-data|" -e "s|/etc/etcd/tls/|$tls/|" \
  -e "s|10.0.0.1:2379|127.0.0.1:$c|" -e "s|10.0.0.1:2380|127.0.0.1:$p|" "$ex/etcd.env" >"$work/etcd.env"
(set -a && . "$work/etcd.env" && exec etcd) >"$work/etcd.log" 2>&1 &
etcd_pid=$!
/usr/bin/python3 "$src/tests/integration/testports.py" wait --name etcd --timeout 30 --pid "$etcd_pid" 127.0.0.1 "$c" ||
  bad "etcd from etcd.env did not listen: $(tail -5 "$work/etcd.log")"
sed -e "s|^OCSD_ETCD_ENDPOINTS=.*|OCSD_ETCD_ENDPOINTS=https://127.0.0.1:$c|" "$ex/replica.env" >"$work/replica.env"
cmd=$(printf '%s\n' "$cmd" | sed -e "s|/usr/sbin/ocsd|$stage/usr/sbin/ocsd|" -e "s|/etc/ocsd/|$etc/|g" \
  -e 's|0.0.0.0:50051|127.0.0.1:0|' -e 's|127.0.0.1:9464|127.0.0.1:0|')
mkdir -p "$work/state-replica"
(set -a && . "$work/replica.env" && STATE_DIRECTORY=$work/state-replica && eval "exec $cmd") 2>"$work/replica.log" &
replica_pid=$!
# ocsctl status names the etcd store; a follower that takes the lead
# restarts its gRPC server, so refusals for a moment are tried again
status_ok() {
  for _ in $(seq 20); do
    "$stage/usr/bin/ocsctl" --server "127.0.0.1:$port" --ca "$etc/tls/clients-ca.pem" \
      --cert "$etc/tls/alice.pem" --key "$etc/tls/alice.key" --json status >"$work/status.json" 2>&1 &&
      grep -q '"store": *"etcd"' "$work/status.json" && return 0
    sleep 0.5
  done
  return 1
}
port=""
for _ in $(seq 300); do
  port=$(sed -n 's/.*gRPC on [^ ]* (port \([0-9]*\).*/\1/p' "$work/replica.log" | head -1)
  [ -n "$port" ] && grep -q "replica ocsd-a leads" "$work/replica.log" && break
  port=""
  kill -0 "$replica_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then bad "replica ocsd-a did not serve: $(tail -20 "$work/replica.log")
etcd: $(tail -5 "$work/etcd.log")"
elif status_ok; then
  ok "replica ocsd-a from the drop-in leads on the TLS etcd of etcd.env"
else bad "replica status: $(cat "$work/status.json")"; fi

[ "$fail" -eq 0 ] && echo "test_install: OK" || echo "test_install: $fail FAILED"
[ "$fail" -eq 0 ]
