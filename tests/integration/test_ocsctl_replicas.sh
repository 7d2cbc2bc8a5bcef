#!/usr/bin/env bash
# test_ocsctl_replicas.sh OCSCTL NB_TEST_SERVER MAKE_CERTS - ocsctl against
# ocsd replicas (issue 15 #3 and #6), played over mTLS by nb_test_server
# with --replica-id (no etcd needed): a leader "b"; a follower "a" that
# serves reads and answers writes "UNAVAILABLE: not the leader; leader is
# HOST:PORT" (and NOT_SERVING for ocs.v1.Jobs); followers "x" (naming
# itself the leader) and "y" (naming x) that make a redirect loop; a
# follower "z" whose leader is gone, with a store problem; a server on
# 127.0.0.2, a host its certificate does not name; and a plain server
# without replicas. Checks: writes through `--server follower,leader`,
# `--server follower` and `--server dead,leader` land on the leader only;
# $OCSD_SERVER takes a list; reads go to the first replica that answers;
# a loop and a dead leader are reported naming every server tried and why;
# each address's host is checked against the certificate; `status` prints
# the replica fields, and nothing new when ocsd runs alone.
set -euo pipefail
ocsctl=$1
server_bin=$2
make_certs=$3

work=$(mktemp -d /tmp/test_ocsctl_replicas.XXXXXX)
pids=""
cleanup() {
  for pid in $pids; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

bash "$make_certs" "$work/certs" >/dev/null 2>&1
c=$work/certs
tls="--ca $c/ca.pem --cert $c/server.pem --key $c/server.key"

# start NAME ARGS...: starts nb_test_server over mTLS; its port in $port.
# shellcheck source=tests/integration/nb_server.sh
. "$(dirname "$0")/nb_server.sh"
start() {
  local name=$1
  shift
  # shellcheck disable=SC2086
  nb_server_start "$name" $tls "$@"
  pids="$pids $nb_server_pid"
}

dead=127.0.0.1:1 # nothing listens there: the connection is refused
start leader --replica-id b --peer c@127.0.0.1:7
L=127.0.0.1:$port
start follower --replica-id a --leader "b@$L"
F=127.0.0.1:$port
start loop_x --replica-id x --leader x@self
X=127.0.0.1:$port
start loop_y --replica-id y --leader "x@$X"
Y=127.0.0.1:$port
start orphan --replica-id z --leader b@$dead \
  --store-problem "etcd unreachable since 2026-11-24T20:01:02Z: connection refused"
Z=127.0.0.1:$port
start wrong_name --listen 127.0.0.2:0
W=127.0.0.2:$port
start alone
A=127.0.0.1:$port
unset OCSD_SERVER

. "$(dirname "$0")/ocsctl_expect.sh"
# row KEY VALUE DESCRIPTION: stdout has the key/value row "KEY  VALUE"
# (the key column as wide as the longest key).
row() {
  if ! sed 's/   */  /' "$work/out" | grep -qxF -- "$1  $2"; then
    echo "FAIL: $3: row '$1' '$2' not in:"
    sed 's/^/  /' "$work/out"
    failures=$((failures + 1))
  fi
}
as() { # role -> TLS flags
  echo "--ca $c/ca.pem --cert $c/$1.pem --key $c/$1.key"
}

cat >"$work/job.json" <<'EOF'
{
  "id": "train-1",
  "placement": {"gpus": [{"gpu": 0, "leaf": 0, "pod": 0}, {"gpu": 40, "leaf": 5, "pod": 1}]},
  "leaf_demand": {"pairs": [{"a": 0, "b": 5, "links": 1}]}
}
EOF

# --- writes find the leader (each test server keeps its own table, so a
# job shows up only on the server that took the submission) ---
# shellcheck disable=SC2046
expect 0 "submit through --server follower,leader" -- $(as scheduler) --server "$F,$L" \
  job submit "$work/job.json"
has out "job train-1: active (submitted)" "the leader took the submission"
# shellcheck disable=SC2046
expect 0 "jobs on the leader" -- $(as viewer) --server "$L" jobs
has out "train-1" "the job is on the leader"
# shellcheck disable=SC2046
expect 0 "jobs on the follower" -- $(as viewer) --server "$F" jobs
hasnt out "train-1" "the follower did not take the submission"
# shellcheck disable=SC2046
expect 0 "reads go to the first replica that answers" -- $(as viewer) --server "$dead,$F,$L" \
  status
row "server" "$F" "status answered by the follower, the first that answers"
# shellcheck disable=SC2046
expect 0 "release through a lone follower's redirect" -- $(as scheduler) --server "$F" \
  job release train-1
has out "job train-1: released" "released on the leader"
# shellcheck disable=SC2046
expect 0 "drain through --server dead,leader" -- $(as operator) --server "$dead,$L" \
  drain ocs-g0-d0
has out "device ocs-g0-d0: drained" "drained on the leader"
# shellcheck disable=SC2046
OCSD_SERVER="$dead, $F ,$L" expect 0 "OCSD_SERVER takes a list" -- $(as operator) \
  undrain ocs-g0-d0
has out "device ocs-g0-d0: undrained" "undrained on the leader"
# shellcheck disable=SC2046
expect 0 "plan (not a follower's read) goes to the leader" -- $(as scheduler) \
  --server "$F" --json job plan "$work/job.json"
# shellcheck disable=SC2046
expect 0 "the leader is found also past a loop" -- $(as operator) --server "$Y,$L" \
  drain ocs-g1-d0
has out "device ocs-g1-d0: drained" "drained past the loop"

# --- failures name every server tried and why ---
# shellcheck disable=SC2046
expect 1 "a redirect loop is an error" -- $(as operator) --server "$Y" drain ocs-g0-d1
has err "no server took the call (2 tried)" "loop: how many tried"
has err "$Y: UNAVAILABLE: not the leader; leader is $X" "loop: y redirects to x"
has err "$X (leader according to $Y): UNAVAILABLE: not the leader; leader is $X: a redirect loop ($X was tried already)" "loop: x named as the loop"
# shellcheck disable=SC2046
expect 1 "a loop and dead servers" -- $(as operator) --server "$dead,$Y" drain ocs-g0-d1
has err "no server took the call (3 tried)" "loop and dead: how many tried"
has err "$dead: cannot reach it: connection failed" "loop and dead: the dead one"
has err "a redirect loop" "loop and dead: the loop"
# shellcheck disable=SC2046
expect 1 "a follower naming a dead leader" -- $(as operator) --server "$Z" drain ocs-g0-d1
has err "$Z: UNAVAILABLE: not the leader; leader is $dead" "dead leader: the follower's answer"
has err "$dead (leader according to $Z): cannot reach it: connection failed" "dead leader: named"
# shellcheck disable=SC2046
expect 3 "no server reachable" -- $(as viewer) --server "$dead,127.0.0.1:2" jobs
has err "cannot reach any of the 2 servers:" "all dead: headline"
has err "$dead: connection failed" "all dead: first"
has err "127.0.0.1:2: connection failed" "all dead: second"
# shellcheck disable=SC2046
expect 3 "one server, unreachable: as before" -- $(as viewer) --server "$dead" jobs
has err "ocsctl: cannot reach $dead: connection failed" "one dead server message"
# shellcheck disable=SC2046
expect 1 "a refusal from the leader is the answer" -- $(as viewer) --server "$F,$L" \
  drain ocs-g0-d1
has err "PERMISSION_DENIED: role viewer may not call Fabric/DrainDevice" "leader's refusal"
hasnt err "no server took the call" "a refusal is not a failover"
expect 2 "an empty address" -- --insecure --server "$F,,$L" jobs
has err "--server: an empty address in '$F,,$L'" "empty address named"

# --- TLS: one client certificate, each address's host checked (IP
# literals: a name such as localhost goes through c-ares, whose lookup
# leaks 10 bytes that LeakSanitizer reports in the sanitizer build) ---
# shellcheck disable=SC2046
expect 3 "a host the certificate does not name" -- $(as viewer) --server "$W" jobs
# shellcheck disable=SC2046
expect 0 "the next server after a name mismatch" -- $(as viewer) --server "$W,$F" status
row "server" "$F" "the follower's host is in its certificate"


# --- status: the replica fields (41-46) ---
# shellcheck disable=SC2046
expect 0 "status on the leader" -- $(as viewer) --server "$L" status
row "store" "etcd" "leader: store"
row "replica" "b (leader)" "leader: replica and role"
row "leader" "b at $L" "leader: leader"
row "replicas" "b $L (leader), c 127.0.0.1:7" "leader: live replicas"
hasnt out "store problem" "leader: no store problem"
# shellcheck disable=SC2046
expect 0 "status on a follower" -- $(as viewer) --server "$F" status
row "replica" "a (follower)" "follower: replica and role"
row "leader" "b at $L" "follower: the leader"
row "replicas" "a $F, b $L (leader)" "follower: live replicas"
# shellcheck disable=SC2046
expect 0 "status with a store problem" -- $(as viewer) --server "$Z" status
row "store problem" "etcd unreachable since 2026-11-24T20:01:02Z: connection refused" \
  "store problem shown"
# shellcheck disable=SC2046
expect 0 "status --json on a follower" -- $(as viewer) --server "$dead,$F" --json status
has out "\"server\": \"$F\"" "json: the server that answered"
has out '"role": "follower"' "json: role"
has out "\"leader_address\": \"$L\"" "json: leader address"
has out '"id": "b"' "json: replicas"
# shellcheck disable=SC2046
expect 0 "status when ocsd runs alone" -- $(as viewer) --server "$A" status
for row in "replica " "leader " "replicas " "store problem"; do
  hasnt out "$row" "alone: no '$row' row"
done
has out "ocs ports  0 used, 0 free" "alone: the key column as wide as before"

echo "$failures failure(s)"
[ "$failures" = 0 ]
