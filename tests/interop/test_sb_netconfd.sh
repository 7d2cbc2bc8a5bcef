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
tmp=$(mktemp -d /tmp/sb-netconfd-XXXXXX)
ncd_pid=
cleanup() {
  if [ -n "$ncd_pid" ]; then
    kill "$ncd_pid" 2>/dev/null || true
    # netconfd takes its time to shut down: wait up to 3 s, then insist
    for i in $(seq 30); do kill -0 "$ncd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$ncd_pid" 2>/dev/null || true
  fi
  [ -f "$tmp/sshd.pid" ] && kill "$(cat "$tmp/sshd.pid")" 2>/dev/null
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

for attempt in 1 2 3 4 5; do
  port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000 ))
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
  if /usr/sbin/sshd -f "$tmp/sshd_config" -E "$tmp/sshd.log"; then
    break
  fi
  kill "$ncd_pid"; wait "$ncd_pid" 2>/dev/null || true; ncd_pid=; rm -f "$sock"
done
# sshd writes its pid file from the daemonized child: give it a moment
for i in $(seq 30); do [ -s "$tmp/sshd.pid" ] && break; sleep 0.1; done
[ -s "$tmp/sshd.pid" ] || { echo "could not start sshd"; cat "$tmp/sshd.log"; exit 1; }
fp=$(ssh-keygen -lf "$tmp/hostkey.pub" -E sha256 | awk '{print $2}')
"$client" "$port" "$user" "$tmp/client" "$tmp/client.pub" "$fp"
