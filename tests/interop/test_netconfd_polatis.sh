#!/bin/sh
# Runs netconfd (yuma123, not written here) with ocsd's optical-switch and
# polatis-switch modules behind a private sshd on a loopback port, with
# throw-away host and client keys generated here, as a writable-running
# device (no candidate, like a Polatis switch), then runs a driver against
# it (PORT USER CLIENT-KEY): test_netconfd_polatis.py (ncclient: the modules
# load in a NETCONF server nobody here wrote, and pairs edited into running
# read back), or test_netconfd_polatis_daemon.py (ocsd drives it end to end;
# OCSD and OCSCTL in the environment).
#   usage: test_netconfd_polatis.sh PATH-TO-driver.py PATH-TO-optical-switch.yang
#          PATH-TO-polatis-switch.yang
# Fails with the reason when netconfd or sshd are not installed.
set -eu
driver=$1
opsw=$2
plts=$3
for bin in /usr/sbin/netconfd /usr/sbin/sshd /usr/sbin/netconf-subsystem; do
  [ -x "$bin" ] || { echo "missing $bin (deploy/install-deps.sh installs it)"; exit 1; }
done
testports="/usr/bin/python3 $(dirname "$0")/../integration/testports.py"
tmp=$(mktemp -d /tmp/netconfd-polatis-XXXXXX)
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
ssh-keygen -q -t ecdsa -N "" -m PEM -f "$tmp/client"
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
# --target=running: edits go to running, as on a Polatis switch (no candidate);
# netconfd only admits subsystem connections for the ports it is told about
netconfd --module="$opsw" --module="$plts" --no-startup --target=running \
  --with-startup=false --superuser="$user" --access-control=off \
  --ncxserver-sockname="$sock" --port="$port" --log="$tmp/netconfd.log" >/dev/null 2>&1 &
ncd_pid=$!
for i in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "netconfd did not create $sock"; cat "$tmp/netconfd.log"; exit 1; }
# both modules loaded without a complaint (SIL code is the only thing it may miss)
if grep -i "error" "$tmp/netconfd.log"; then
  echo "netconfd reported errors loading the modules"; exit 1
fi
# -D: sshd stays in the foreground, so a failed bind shows as its exit.
/usr/sbin/sshd -D -f "$tmp/sshd_config" -E "$tmp/sshd.log" &
sshd_pid=$!
$testports wait --name sshd --pid "$sshd_pid" --timeout 10 127.0.0.1 "$port" ||
  { cat "$tmp/sshd.log"; exit 1; }
/usr/bin/python3 "$driver" "$port" "$user" "$tmp/client" ||
  { echo "--- netconfd log"; tail -40 "$tmp/netconfd.log"; exit 1; }
