#!/bin/sh
# Runs netconfd (yuma123) with our ocs-switch module behind a private sshd
# on a loopback port, with throw-away host and client keys generated here,
# then runs the C interop client (test_sb_netconfd.c) against it.
#   usage: test_sb_netconfd.sh PATH-TO-test_sb_netconfd PATH-TO-ocs-switch.yang
# Fails with the reason when netconfd or sshd are not installed.
set -eu
client=$1
module=$2
for bin in /usr/sbin/netconfd /usr/sbin/sshd /usr/sbin/netconf-subsystem; do
  [ -x "$bin" ] || { echo "missing $bin (deploy/install-deps.sh installs it)"; exit 1; }
done
testports="/usr/bin/python3 $(dirname "$0")/../integration/testports.py"
tmp=$(mktemp -d /tmp/sb-netconfd-XXXXXX)
ncd_pid=
sshd_pid=
cleanup() {
  if [ -n "$ncd_pid" ]; then
    kill "$ncd_pid" 2>/dev/null || true
    # netconfd takes its time to shut down: wait up to 3 s, then insist
    for i in $(seq 30); do kill -0 "$ncd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$ncd_pid" 2>/dev/null || true
  fi
  [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
  $testports release --owner $$
  rm -rf "$tmp"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N "" -f "$tmp/hostkey"
ssh-keygen -q -t ecdsa -N "" -f "$tmp/client"
cp "$tmp/client.pub" "$tmp/authorized_keys"
chmod 600 "$tmp/authorized_keys"
mkdir -p /run/sshd
user=$(id -un)
sock=$tmp/ncxserver.sock

# A port outside the ephemeral range, reserved for this shell until it exits
# (tests/integration/testports.py).
port=$($testports reserve --owner $$)
cat >"$tmp/sshd_config" <<X
Port $port
ListenAddress 127.0.0.1
HostKey $tmp/hostkey
PidFile $tmp/sshd.pid
AuthorizedKeysFile $tmp/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Subsystem netconf /usr/sbin/netconf-subsystem --ncxserver-sockname=$port@$sock
X
# netconfd only admits subsystem connections for the ports it is told about
netconfd --module="$module" --no-startup --target=candidate --with-validate=true \
  --with-startup=false --superuser="$user" --access-control=off \
  --ncxserver-sockname="$sock" --port="$port" --log="$tmp/netconfd.log" >/dev/null 2>&1 &
ncd_pid=$!
for i in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "netconfd did not create $sock"; cat "$tmp/netconfd.log"; exit 1; }
# -D: sshd stays in the foreground, so a failed bind shows as its exit
# (daemonized, it used to fork before binding and always "succeed").
/usr/sbin/sshd -D -f "$tmp/sshd_config" -E "$tmp/sshd.log" &
sshd_pid=$!
$testports wait --name sshd --pid "$sshd_pid" --timeout 10 127.0.0.1 "$port" ||
  { cat "$tmp/sshd.log"; exit 1; }
fp=$(ssh-keygen -lf "$tmp/hostkey.pub" -E sha256 | awk '{print $2}')
# Bounded below ctest's 120 s, so that a hang says where it was: the client's
# own steps (line-buffered), every thread's stack when gdb is installed,
# then what netconfd and sshd logged (rc 124: the client was stopped). A
# connect that netconfd leaves unanswered costs the client 20 s (its setup
# deadline) before it tries again; before that deadline existed, it waited
# for libnetconf2's 300 s and this watchdog caught it (twice in CI).
rc=0
"$client" "$port" "$user" "$tmp/client" "$tmp/client.pub" "$fp" &
client_pid=$!
(
  sleep 90 </dev/null >/dev/null 2>&1
  kill -0 "$client_pid" 2>/dev/null || exit 0
  echo "test_sb_netconfd: the client still runs after 90 s"
  if command -v gdb >/dev/null; then
    gdb -p "$client_pid" -batch -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)' || true
  fi
  echo timeout >"$tmp/timed-out"
  kill -9 "$client_pid" 2>/dev/null
) &
watchdog=$!
wait "$client_pid" || rc=$?
pkill -P "$watchdog" 2>/dev/null || true # its sleep
kill "$watchdog" 2>/dev/null || true
[ -e "$tmp/timed-out" ] && rc=124
if [ "$rc" -ne 0 ]; then
  echo "test_sb_netconfd: the client exited $rc$( [ "$rc" -eq 124 ] && echo ' (stopped after 90 s)')"
  echo "--- netconfd.log (tail)"; tail -n 40 "$tmp/netconfd.log" 2>/dev/null || true
  echo "--- sshd.log (tail)"; tail -n 40 "$tmp/sshd.log" 2>/dev/null || true
  exit "$rc"
fi
