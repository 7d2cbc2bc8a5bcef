#!/usr/bin/env bash
# test_ocsctl.sh OCSCTL NB_TEST_SERVER MAKE_CERTS - drives ocsctl against the
# real northbound server (nb_test_server: test-only table-answering handler)
# over mTLS with certificates made at test time: every command, --json,
# roles, exit codes 0/1/2/3/4, OCSD_SERVER, and the watch stream; job submit
# waiting for a slow job (--wait, --no-wait, --wait-timeout-s); jobs over
# 25,000 jobs in pages; then a
# second server playing an OCSTrx ring domain (--ring) for ring jobs,
# rings, node fail/heal and ring and node events; the rail-OCS commands' usage errors and
# their refusal on a leaf-spine fabric.
set -euo pipefail
ocsctl=$1
server_bin=$2
make_certs=$3

work=$(mktemp -d /tmp/test_ocsctl.XXXXXX)
server_pid=""
watch_pid=""
ring_pid=""
ring_watch_pid=""
cleanup() {
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  [ -n "$ring_watch_pid" ] && kill "$ring_watch_pid" 2>/dev/null || true
  for pid in $server_pid $ring_pid; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

bash "$make_certs" "$work/certs"
c=$work/certs

# Start the server and read its port (bounded wait).
# shellcheck source=tests/integration/nb_server.sh
. "$(dirname "$0")/nb_server.sh"
nb_server_start server --ca "$c/ca.pem" --cert "$c/server.pem" --key "$c/server.key"
server_pid=$nb_server_pid
export OCSD_SERVER=127.0.0.1:$port

. "$(dirname "$0")/ocsctl_expect.sh"

as() { # role -> TLS flags
  echo "--ca $c/ca.pem --cert $c/$1.pem --key $c/$1.key"
}

cat >"$work/job.json" <<'EOF'
{
  "id": "train-1",
  "idempotency_key": "sched-42",
  "placement": {"gpus": [
    {"gpu": 0, "leaf": 0, "pod": 0},
    {"gpu": 40, "leaf": 5, "pod": 1},
    {"gpu": 100, "leaf": 12, "pod": 3}]},
  "leaf_demand": {"pairs": [{"a": 0, "b": 5, "links": 2}, {"a": 5, "b": 12, "links": 1}]},
  "options": {"planner": "pod-centric", "allow_moving_other_jobs": false}
}
EOF

# --- watch in the background: it must see the job and device events. It is
# subscribed once a probe event (undrain of an idle device) shows up. ---
# shellcheck disable=SC2046
"$ocsctl" $(as viewer) watch >"$work/watch.out" 2>"$work/watch.err" &
watch_pid=$!
for _ in $(seq 100); do
  # shellcheck disable=SC2046
  "$ocsctl" $(as operator) undrain ocs-g1-d1 >/dev/null
  grep -q "device ocs-g1-d1" "$work/watch.out" && break
  sleep 0.05
done
grep -q "device ocs-g1-d1" "$work/watch.out" || { echo "FAIL: watch never subscribed"; exit 1; }

# --- reads ---
# shellcheck disable=SC2046
expect 0 "status" -- $(as viewer) status
has out "health     serving" "status shows health"
has out "4 pods, 16 leaves, 128 GPUs, straight wiring, 2 OCS groups, 4 devices" "status summary"
# shellcheck disable=SC2046
expect 0 "status --json" -- $(as viewer) --json status
has out '"status": "SERVING"' "status json health"
has out '"pods": 4' "status json fabric"
# shellcheck disable=SC2046
expect 0 "fabric" -- $(as viewer) fabric
has out "k_leaf" "fabric lists k_leaf"
# shellcheck disable=SC2046
expect 0 "devices" -- $(as viewer) devices
has out "NAME       GROUP  INDEX  ADDRESS" "devices table header aligned"
has out "ocs-g1-d1  1      1      127.0.0.1:830  connected  -      healthy  no       0/16   1           0         Acme OCS-16, s/n S1, sw 1.0  -" "devices row aligned, ports down and product"
has out "ocs-g1-d0  1      0      127.0.0.1:830  connected  -      healthy  no       0/16   0           0         -                            -" "a device that says nothing of itself"
# shellcheck disable=SC2046
expect 0 "devices --json" -- $(as viewer) --json devices
has out '"vendor": "Acme"' "devices json vendor"
has out '"ports_down": 1' "devices json ports_down"
# shellcheck disable=SC2046
expect 0 "devices --group" -- $(as viewer) devices --group 1
if grep -q ocs-g0 "$work/out"; then echo "FAIL: --group 1 lists group 0"; failures=$((failures + 1)); fi

# --- jobs ---
# shellcheck disable=SC2046
expect 1 "viewer cannot submit" -- $(as viewer) job submit "$work/job.json"
has err "PERMISSION_DENIED: role viewer may not call Jobs/SubmitJob (needs scheduler)" "viewer refusal message"
# shellcheck disable=SC2046
expect 0 "job plan" -- $(as scheduler) job plan "$work/job.json"
has out "plan for job train-1 (dry run, nothing changed)" "plan header"
has out "links_requested   3" "plan figures"
if grep -q makespan_ms "$work/out"; then
  echo "FAIL: DELTA figures shown for a leaf-centric plan"; failures=$((failures + 1))
fi
# shellcheck disable=SC2046
expect 0 "jobs empty after plan" -- $(as viewer) jobs
if grep -q train-1 "$work/out"; then echo "FAIL: plan created a job"; failures=$((failures + 1)); fi
# shellcheck disable=SC2046
expect 0 "job submit" -- $(as scheduler) job submit "$work/job.json"
has out "job train-1: active (submitted)" "submit result"
has out "ocs-g0-d0 0->1, ocs-g0-d0 1->0" "submit lists circuits"
# shellcheck disable=SC2046
expect 0 "job submit again is idempotent" -- $(as scheduler) job submit "$work/job.json"
has out "job train-1: active (already submitted)" "resubmit result"
# shellcheck disable=SC2046
expect 0 "jobs" -- $(as viewer) jobs
has out "ID       STATE   PLANNER      GPUS  PAIRS  LINKS  REASON" "jobs header aligned"
has out "train-1  active  pod-centric  3     2      3/3    -" "jobs row"
# issue 26: -o COLS and --no-headers
# shellcheck disable=SC2046
expect 0 "jobs -o state,ID" -- $(as viewer) jobs -o state,ID
has out "STATE   ID" "-o: the columns named, in that order, header kept"
has out "active  train-1" "-o: the row's columns in that order"
hasnt out "PLANNER" "-o: the other columns left out"
# shellcheck disable=SC2046
expect 0 "jobs --no-headers --columns id" -- $(as viewer) jobs --no-headers --columns id
has out "train-1" "--no-headers: the row"
hasnt out "ID" "--no-headers: no header row"
# shellcheck disable=SC2046
expect 2 "jobs -o with a column the table lacks" -- $(as viewer) jobs -o id,bogus
has err "ocsctl: -o: no column 'bogus' in this table; its columns: ID, STATE, PLANNER" "-o: the unknown column named, the table's listed"
expect 2 "-o with --json" -- --insecure --json jobs -o id
# shellcheck disable=SC2046
expect 0 "jobs --state released" -- $(as viewer) jobs --state released
if grep -q train-1 "$work/out"; then echo "FAIL: --state released lists an active job"; failures=$((failures + 1)); fi
# shellcheck disable=SC2046
expect 0 "jobs --state active" -- $(as viewer) jobs --state JOB_STATE_ACTIVE
has out "train-1  active" "--state active lists the job"
# shellcheck disable=SC2046
expect 0 "jobs --state in capitals (issue 14 #16)" -- $(as viewer) jobs --state ACTIVE
has out "train-1  active" "--state ACTIVE lists the job"
expect 2 "jobs --state bogus" -- --insecure jobs --state bogus
# cabling (issue 23): arguments checked before any call
expect 2 "cabling clear without a port" -- --insecure cabling clear ocs-g0-d0
expect 2 "cabling clear of a bad port" -- --insecure cabling clear ocs-g0-d0 70000
expect 2 "cabling with another word" -- --insecure cabling fix ocs-g0-d0 1
expect 2 "cabling clear with --device" -- --insecure cabling clear ocs-g0-d0 1 --device x
expect 2 "cabling clear with an extra argument" -- --insecure cabling clear ocs-g0-d0 1 2
# shellcheck disable=SC2046
expect 0 "job show --json" -- $(as viewer) --json job show train-1
has out '"state": "JOB_STATE_ACTIVE"' "job json state"
has out '"planner": "pod-centric"' "job json options"
# shellcheck disable=SC2046
expect 0 "circuits --job" -- $(as viewer) circuits --job train-1
has out "train-1  1      1:1           3:1           ocs-g1-d0 1->3, ocs-g1-d0 3->1" "circuit row"
# shellcheck disable=SC2046
expect 0 "circuits --device --pod" -- $(as viewer) circuits --device ocs-g1-d0 --pod 3
if grep -q "ocs-g0-d0" "$work/out"; then echo "FAIL: device filter"; failures=$((failures + 1)); fi
has out "ocs-g1-d0" "device filter keeps its circuit"
# shellcheck disable=SC2046
expect 1 "circuits of an unknown device" -- $(as viewer) circuits --device ocs-g9-d9
has err "NOT_FOUND: device: no device named ocs-g9-d9" "unknown device message"
# shellcheck disable=SC2046
expect 1 "job show unknown" -- $(as viewer) job show nope
has err "NOT_FOUND: id: no job nope" "not found message"

# --- every --json output is valid JSON (checked by python's parser) ---
for args in "status" "fabric" "devices" "circuits" "jobs" "job show train-1" "job plan $work/job.json"; do
  # shellcheck disable=SC2046,SC2086
  expect 0 "--json $args" -- $(as scheduler) --json $args
  if ! /usr/bin/python3 -m json.tool "$work/out" >/dev/null; then
    echo "FAIL: --json $args is not JSON:"; cat "$work/out"; failures=$((failures + 1))
  fi
done

# --- bad input: refused by the server with the field path, or by ocsctl ---
sed 's/"leaf": 5, "pod": 1/"leaf": 4100, "pod": 1/' "$work/job.json" >"$work/bad-leaf.json"
# shellcheck disable=SC2046
expect 1 "out-of-range leaf" -- $(as scheduler) job submit "$work/bad-leaf.json"
has err "INVALID_ARGUMENT: placement.gpus[1].leaf: 4100 is outside 0..15" "field path in refusal"
sed 's/"gpu": 100/"gpu": "100"/' "$work/job.json" >"$work/bad-type.json"
# shellcheck disable=SC2046
expect 2 "wrong JSON type" -- $(as scheduler) job submit "$work/bad-type.json"
has err "placement.gpus[2].gpu: expected an integer, got string" "type error path"
sed 's/"options"/"optoins"/' "$work/job.json" >"$work/bad-key.json"
# shellcheck disable=SC2046
expect 2 "unknown field" -- $(as scheduler) job plan "$work/bad-key.json"
has err "optoins: unknown field of ocs.v1.JobSpec" "unknown field named"
sed 's/"leaf": 5, "pod": 1/"leaf": 5, "pod": 1, "leaf": 6/' "$work/job.json" >"$work/dup-key.json"
# shellcheck disable=SC2046
expect 2 "repeated key" -- $(as scheduler) job submit "$work/dup-key.json"
has err "dup-key.json: placement.gpus[1]: duplicate key \"leaf\"" "repeated key named"
printf '{"id": "x",' >"$work/broken.json"
# shellcheck disable=SC2046
expect 2 "broken JSON" -- $(as scheduler) job submit "$work/broken.json"
# shellcheck disable=SC2046
expect 2 "missing file" -- $(as scheduler) job submit "$work/none.json"
sed 's/"train-1"/"unavailable-1"/' "$work/job.json" >"$work/unavail.json"
# shellcheck disable=SC2046
expect 1 "server-side UNAVAILABLE is a refusal" -- $(as scheduler) job submit "$work/unavail.json"
has err "UNAVAILABLE: device ocs-g0-d1 is unreachable; nothing changed" "unavailable message"

# --- drain / undrain ---
# shellcheck disable=SC2046
expect 1 "scheduler cannot drain" -- $(as scheduler) drain ocs-g1-d1
# shellcheck disable=SC2046
expect 1 "drain of a busy device needs --force" -- $(as operator) drain ocs-g0-d0
has err "FAILED_PRECONDITION: force: ocs-g0-d0 holds circuits of 1 running job(s) (first: train-1)" "force message"
# shellcheck disable=SC2046
expect 0 "drain --force" -- $(as operator) drain ocs-g0-d0 --force
has out "device ocs-g0-d0: drained" "drain result"
has out "running job with circuits on it: train-1" "drain names affected job"
# shellcheck disable=SC2046
expect 0 "undrain" -- $(as operator) undrain ocs-g0-d0
has out "device ocs-g0-d0: undrained" "undrain result"
# shellcheck disable=SC2046
expect 0 "job release" -- $(as scheduler) job release train-1
has out "job train-1: released" "release result"

# --- usage errors (2) and unreachable (3) ---
expect 2 "no command" --
expect 2 "unknown command" -- --insecure frobnicate
hasnt err "did you mean" "no suggestion for a word far from every command"
expect 2 "mistyped command" -- --insecure jbos
has err "unknown command 'jbos' (did you mean 'jobs'?)" "did you mean: a swap"
expect 2 "mistyped command" -- --insecure circuts
has err "unknown command 'circuts' (did you mean 'circuits'?)" "did you mean: a letter left out"
expect 2 "job without subcommand" -- --insecure job
expect 2 "job show without id" -- --insecure job show
expect 2 "flag on the wrong command" -- --insecure jobs --force
expect 2 "extra argument" -- --insecure jobs extra
expect 2 "TLS without --ca" -- jobs
expect 2 "--cert without --key" -- --ca "$c/ca.pem" --cert "$c/viewer.pem" jobs
expect 2 "bad --pod" -- --insecure circuits --pod x
expect 2 "option without its value" -- --insecure jobs --server
has err "option '--server' needs a value" "missing value named"
expect 2 "unknown option" -- --insecure jobs --frobnicate
has err "unknown option '--frobnicate'" "unknown option named"
hasnt err "did you mean" "no suggestion for an option far from every option"
expect 2 "mistyped option" -- --insecure jobs --jsno
has err "unknown option '--jsno' (did you mean '--json'?)" "did you mean: an option"
expect 0 "--help" -- --help
has out "exit codes: 0 ok, 1 the server refused, 2 usage or input error, 3 unreachable" "help text"
# shellcheck disable=SC2046
expect 3 "no client certificate" -- --ca "$c/ca.pem" jobs
has err "cannot reach 127.0.0.1:$port" "unreachable message"
# shellcheck disable=SC2046
expect 3 "untrusted client certificate" -- $(as rogue) jobs
# shellcheck disable=SC2046
expect 1 "certificate without a role" -- $(as norole) jobs
has err "PERMISSION_DENIED: client certificate has no role" "no role message"
# shellcheck disable=SC2046
expect 3 "nothing listening (--server wins over OCSD_SERVER)" -- $(as viewer) --timeout-ms 2000 --server 127.0.0.1:1 jobs
expect 3 "plaintext against TLS" -- --insecure --timeout-ms 2000 jobs
if grep -qF "check --ca, --cert and --key" "$work/err"; then
  echo "FAIL: the --insecure hint talks about TLS files (issue 14 #16)"
  failures=$((failures + 1))
fi
has err "drop --insecure" "the --insecure hint names the plaintext mismatch"

# --- TLS files from the environment ---
OCSCTL_CA=$c/ca.pem OCSCTL_CERT=$c/operator.pem OCSCTL_KEY=$c/operator.key \
  expect 0 "TLS files from OCSCTL_CA/CERT/KEY" -- drain ocs-g1-d1
OCSCTL_CA=$c/ca.pem OCSCTL_CERT=$c/operator.pem OCSCTL_KEY=$c/operator.key \
  expect 1 "flags win over the environment" -- --cert "$c/viewer.pem" --key "$c/viewer.key" undrain ocs-g1-d1
has err "role viewer may not call Fabric/UndrainDevice" "flags chose the viewer"

# --- plaintext is fine on a unix socket (a second, insecure server) ---
"$server_bin" --insecure --listen "unix:$work/ocsd.sock" >"$work/unix.out" 2>"$work/unix.err" &
unix_pid=$!
for _ in $(seq 100); do
  grep -q '^port ' "$work/unix.out" 2>/dev/null && break
  sleep 0.05
done
expect 0 "insecure over a unix socket" -- --insecure --server "unix:$work/ocsd.sock" --json fabric
has out '"wiring": "straight"' "fabric over the unix socket"
kill -TERM "$unix_pid"
wait "$unix_pid" || { echo "FAIL: unix-socket server exit"; failures=$((failures + 1)); }

# --- the watch saw PENDING, ACTIVE (submit), and the drain events ---
watch_ok() {
  grep -q "job train-1 pending" "$work/watch.out" && grep -q "job train-1 active" "$work/watch.out" \
    && grep -q "job train-1 released" "$work/watch.out" \
    && grep -q "device ocs-g0-d0 session=connected health=healthy drained=yes" "$work/watch.out"
}
for _ in $(seq 100); do
  watch_ok && break
  sleep 0.05
done
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=""
if watch_ok; then
  echo "ok: watch saw the job and device events"
else
  echo "FAIL: watch output:"; cat "$work/watch.out" "$work/watch.err"; failures=$((failures + 1))
fi

# --- watch --count N stops by itself ---
# shellcheck disable=SC2046
"$ocsctl" $(as viewer) --json watch --count 1 >"$work/count.out" 2>"$work/count.err" &
count_pid=$!
for _ in $(seq 100); do
  # shellcheck disable=SC2046
  "$ocsctl" $(as operator) undrain ocs-g1-d0 >/dev/null
  kill -0 "$count_pid" 2>/dev/null || break
  sleep 0.05
done
count_rc=0
if kill -0 "$count_pid" 2>/dev/null; then
  kill "$count_pid"; count_rc=timeout
fi
wait "$count_pid" || count_rc=$?
if [ "$count_rc" = 0 ] && grep -q '"device":{"device":"ocs-g1-d0"' "$work/count.out"; then
  echo "ok: watch --count 1 --json"
else
  echo "FAIL: watch --count 1 exit $count_rc:"; cat "$work/count.out" "$work/count.err"
  failures=$((failures + 1))
fi

# --- ring requests and calls on a leaf-spine fabric: FAILED_PRECONDITION by field ---
cat >"$work/ring.json" <<'EOF'
{"id": "tp8", "idempotency_key": "ring-1", "ring": {"tp": 8, "gpus": 32, "orchestration": "fat-tree"}}
EOF
# shellcheck disable=SC2046
expect 1 "ring job on a leaf-spine fabric" -- $(as scheduler) job plan "$work/ring.json"
has err "FAILED_PRECONDITION: ring: a ring request needs an ocstrx-ring domain; this fabric is leaf-spine-ocs" "ring job refused by kind"
# shellcheck disable=SC2046
expect 1 "rings on a leaf-spine fabric" -- $(as viewer) rings
has err "FAILED_PRECONDITION: rings exist only on an ocstrx-ring domain; this fabric is leaf-spine-ocs" "rings refused by kind"
# shellcheck disable=SC2046
expect 1 "node fail on a leaf-spine fabric" -- $(as operator) node fail 1
has err "FAILED_PRECONDITION: node: nodes exist only on an ocstrx-ring domain" "node refused by kind"
# shellcheck disable=SC2046
expect 1 "gpu replace on a leaf-spine fabric" -- $(as scheduler) gpu replace 1
has err "FAILED_PRECONDITION: gpu: GPU swaps exist only on a rail-ocs fabric" "gpu refused by kind"
# shellcheck disable=SC2046
expect 1 "rail-ports on a leaf-spine fabric" -- $(as viewer) rail-ports
has err "rail ports exist only on a rail-ocs fabric" "rail-ports refused by kind"

# --- the ring domain: a second server (mTLS, same CA), 32 nodes x 4 GPUs ---
nb_server_start ring --ring --ca "$c/ca.pem" --cert "$c/server.pem" --key "$c/server.key"
ring_pid=$nb_server_pid
rs="--server 127.0.0.1:$port"
# shellcheck disable=SC2046,SC2086
"$ocsctl" $(as viewer) $rs watch >"$work/ring-watch.out" 2>"$work/ring-watch.err" &
ring_watch_pid=$!
# subscribed once a probe (node 31 faulty, then healthy) shows up
for _ in $(seq 100); do
  # shellcheck disable=SC2046,SC2086
  "$ocsctl" $(as operator) $rs node fail 31 >/dev/null
  grep -q "node 31 faulty" "$work/ring-watch.out" && break
  # shellcheck disable=SC2046,SC2086
  "$ocsctl" $(as operator) $rs node heal 31 >/dev/null
  sleep 0.05
done
# shellcheck disable=SC2046,SC2086
"$ocsctl" $(as operator) $rs node heal 31 >/dev/null
grep -q "node 31 faulty" "$work/ring-watch.out" || { echo "FAIL: ring watch never subscribed"; exit 1; }

# shellcheck disable=SC2046,SC2086
expect 0 "ring status" -- $(as viewer) $rs status
has out "ocstrx-ring, 32 nodes (8 ToRs x 4), 128 GPUs, K=2, closed ring, 32 devices" "ring status summary"
has out "nodes    0 busy, 0 faulty, 32 free" "ring status nodes"
# shellcheck disable=SC2046,SC2086
expect 0 "ring fabric" -- $(as viewer) $rs fabric
has out "gpus_per_node      4" "ring fabric lists gpus_per_node"
if grep -q "k_leaf" "$work/out"; then echo "FAIL: ring fabric lists leaf-spine fields"; failures=$((failures + 1)); fi
# shellcheck disable=SC2046,SC2086
expect 0 "ring job plan" -- $(as scheduler) $rs job plan "$work/ring.json"
has out "plan for job tp8 (dry run, nothing changed)" "ring plan header"
has out "cross_tor_share    0.333333" "ring plan figures"
has out "tp8  3     6,7    placed  -       -" "ring plan rows"
# shellcheck disable=SC2046,SC2086
expect 0 "no rings after a plan" -- $(as viewer) $rs --json rings
has out '"rings": []' "plan placed nothing"
# shellcheck disable=SC2046,SC2086
expect 0 "ring job submit" -- $(as scheduler) $rs job submit "$work/ring.json"
has out "job tp8: active (submitted)" "ring submit result"
has out "ring     tp 8, 32 GPUs, fat-tree" "ring request shown"
has out "tp8  0     0,1    placed  -       -" "submit lists rings"
# shellcheck disable=SC2046,SC2086
expect 0 "jobs on the ring domain" -- $(as viewer) $rs jobs
has out "tp8  active  fat-tree  32    -      4 rings  -" "ring job row"
# shellcheck disable=SC2046,SC2086
expect 0 "rings --json" -- $(as viewer) $rs --json rings --job tp8
if /usr/bin/python3 - "$work/out" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert list(doc) == ["rings"], doc
rings = doc["rings"]
assert [(r["job_id"], r["ring"], r["nodes"]) for r in rings] == [
    ("tp8", 0, [0, 1]), ("tp8", 1, [2, 3]), ("tp8", 2, [4, 5]), ("tp8", 3, [6, 7])], rings
assert all(list(r)[:3] == ["job_id", "ring", "nodes"] for r in rings), rings
PY
then echo "ok: rings --json shape"; else echo "FAIL: rings --json shape"; cat "$work/out"; failures=$((failures + 1)); fi
# shellcheck disable=SC2046,SC2086
expect 0 "rings --node" -- $(as viewer) $rs rings --node 5
has out "tp8  2     4,5    placed  -       -" "node filter keeps its ring"
if grep -q "0,1" "$work/out"; then echo "FAIL: --node 5 lists ring 0"; failures=$((failures + 1)); fi
# shellcheck disable=SC2046,SC2086
expect 1 "rings --node out of range" -- $(as viewer) $rs rings --node 32
has err "INVALID_ARGUMENT: node: 32 is outside 0..31" "node filter range"

# roles: MarkNode is the operator's
for role in viewer scheduler; do
  # shellcheck disable=SC2046,SC2086
  expect 1 "$role cannot mark a node" -- $(as $role) $rs node fail 3
  has err "PERMISSION_DENIED: role $role may not call Fabric/MarkNode (needs operator)" "$role refusal"
done
# shellcheck disable=SC2046,SC2086
expect 0 "node fail" -- $(as operator) $rs node fail 3
has out "node 3: faulty" "node fail result"
has out "ring repaired for job tp8" "node fail names the job"
# shellcheck disable=SC2046,SC2086
expect 0 "job show after the fault" -- $(as viewer) $rs job show tp8
has out "tp8  1     2      bypassed  3       -" "bypassed ring shown"
# shellcheck disable=SC2046,SC2086
expect 0 "node fail --json" -- $(as operator) $rs --json node fail 3
has out '"condition": "NODE_CONDITION_FAULTY"' "node json"
# shellcheck disable=SC2046,SC2086
expect 1 "node out of range" -- $(as operator) $rs node fail 32
has err "INVALID_ARGUMENT: node: 32 is outside 0..31" "node range refusal"
# shellcheck disable=SC2046,SC2086
expect 0 "node heal" -- $(as operator) $rs node heal 3
has out "node 3: healthy" "node heal result"

# ring-domain refusals, by field
# shellcheck disable=SC2046,SC2086
expect 1 "leaf-spine job on a ring domain" -- $(as scheduler) $rs job plan "$work/job.json"
has err "FAILED_PRECONDITION: leaf_demand: an ocstrx-ring domain takes ring requests (ring), not leaf_demand; this fabric is ocstrx-ring" "leaf job refused by kind"
sed 's/"tp": 8/"tp": 6/' "$work/ring.json" >"$work/ring-tp.json"
# shellcheck disable=SC2046,SC2086
expect 1 "ring tp not a multiple of the node's GPUs" -- $(as scheduler) $rs job plan "$work/ring-tp.json"
has err "INVALID_ARGUMENT: ring.tp: 6 is not a multiple of the 4 GPUs per node" "ring.tp refusal"
sed 's/"gpus": 32/"rings": 2, "gpus": 32/' "$work/ring.json" >"$work/ring-both.json"
# shellcheck disable=SC2046,SC2086
expect 1 "ring gpus and rings together" -- $(as scheduler) $rs job plan "$work/ring-both.json"
has err "INVALID_ARGUMENT: ring.rings: 2 given together with ring.gpus (32)" "ring.rings refusal"
sed 's/"fat-tree"/"best-fit"/' "$work/ring.json" >"$work/ring-orch.json"
# shellcheck disable=SC2046,SC2086
expect 1 "unknown orchestration" -- $(as scheduler) $rs job plan "$work/ring-orch.json"
has err 'INVALID_ARGUMENT: ring.orchestration: "best-fit" is not a known orchestration (dcn-free, fat-tree or greedy)' "orchestration refusal"
sed 's/"ring":/"options": {"planner": "leaf-centric"}, "ring":/' "$work/ring.json" >"$work/ring-planner.json"
# shellcheck disable=SC2046,SC2086
expect 1 "ring job with a planner" -- $(as scheduler) $rs job plan "$work/ring-planner.json"
has err "INVALID_ARGUMENT: options.planner: a ring job takes no planner" "planner refusal"
sed 's/"tp8"/"tp8-big"/; s/"gpus": 32/"gpus": 128/' "$work/ring.json" >"$work/ring-big.json"
# shellcheck disable=SC2046,SC2086
expect 1 "more rings than the free nodes give" -- $(as scheduler) $rs job submit "$work/ring-big.json"
has err "RESOURCE_EXHAUSTED: ring: the job needs 16 rings of 2 nodes; the healthy free nodes give 12" "capacity refusal"
sed 's/"tp"/"tpp"/' "$work/ring.json" >"$work/ring-key.json"
# shellcheck disable=SC2046,SC2086
expect 2 "unknown ring member" -- $(as scheduler) $rs job plan "$work/ring-key.json"
has err "ring.tpp: unknown field of ocs.v1.RingRequest" "unknown ring member named"
expect 2 "node without subcommand" -- --insecure node
expect 2 "node fail without a number" -- --insecure node fail
expect 2 "node fail with a bad number" -- --insecure node fail x
expect 2 "node with a bad subcommand" -- --insecure node break 3
expect 2 "--node on the wrong command" -- --insecure jobs --node 3
expect 2 "--pod on rings" -- --insecure rings --pod 1
expect 2 "bad --node" -- --insecure rings --node -1
expect 2 "gpu without subcommand" -- --insecure gpu
expect 2 "gpu replace without a number" -- --insecure gpu replace
expect 2 "gpu with a bad subcommand" -- --insecure gpu break 3
expect 2 "--hb on the wrong command" -- --insecure jobs --hb 1
expect 2 "bad --rail" -- --insecure rail-ports --rail x

for args in "status" "fabric" "jobs" "rings" "rings --node 2" "job show tp8" "job plan $work/ring.json"; do
  # shellcheck disable=SC2046,SC2086
  expect 0 "ring --json $args" -- $(as scheduler) $rs --json $args
  if ! /usr/bin/python3 -m json.tool "$work/out" >/dev/null; then
    echo "FAIL: ring --json $args is not JSON:"; cat "$work/out"; failures=$((failures + 1))
  fi
done
# shellcheck disable=SC2046,SC2086
expect 0 "ring job release" -- $(as scheduler) $rs job release tp8
# shellcheck disable=SC2046,SC2086
expect 0 "no rings after release" -- $(as viewer) $rs rings
has out "JOB  RING  NODES  CHANGE  FAILED  REASON" "empty rings table"
if grep -q "tp8" "$work/out"; then echo "FAIL: released rings listed"; failures=$((failures + 1)); fi

ring_watch_ok() {
  grep -q "ring tp8#0 placed nodes=0,1" "$work/ring-watch.out" \
    && grep -q "node 3 faulty source=operator" "$work/ring-watch.out" \
    && grep -q "ring tp8#1 bypassed nodes=2 was=2,3 failed=3 reaction_us=1500 devices_us=900" "$work/ring-watch.out" \
    && grep -q "node 3 healthy source=operator" "$work/ring-watch.out" \
    && grep -q "ring tp8#3 released nodes=- was=6,7" "$work/ring-watch.out"
}
for _ in $(seq 100); do
  ring_watch_ok && break
  sleep 0.05
done
kill "$ring_watch_pid" 2>/dev/null || true
wait "$ring_watch_pid" 2>/dev/null || true
ring_watch_pid=""
if ring_watch_ok; then
  echo "ok: watch saw the ring and node events"
else
  echo "FAIL: ring watch output:"; cat "$work/ring-watch.out" "$work/ring-watch.err"; failures=$((failures + 1))
fi
kill -TERM "$ring_pid"
ring_rc=0
wait "$ring_pid" || ring_rc=$?
ring_pid=""
if [ "$ring_rc" != 0 ]; then
  echo "FAIL: ring server exited $ring_rc"; cat "$work/ring.err"; failures=$((failures + 1))
else
  echo "ok: ring server stopped cleanly"
fi

# --- job submit waits for the outcome (issue 14 #15): the test server keeps
# a "slow-MS-*" job PROGRAMMING for MS ms before SubmitJob answers ---
slow_job() { # id -> a job file
  cat >"$work/$1.json" <<EOF
{"id": "$1", "placement": {"gpus": [{"gpu": 8, "leaf": 1, "pod": 0}, {"gpu": 48, "leaf": 6, "pod": 1}]},
 "leaf_demand": {"pairs": [{"a": 1, "b": 6, "links": 1}]}}
EOF
  echo "$work/$1.json"
}
no_deadline_text() {
  if grep -q DEADLINE_EXCEEDED "$work/err" "$work/out"; then
    echo "FAIL: $1 printed DEADLINE_EXCEEDED"; failures=$((failures + 1))
  fi
}
# shellcheck disable=SC2046
expect 0 "submit waits past --timeout-ms" -- $(as scheduler) --timeout-ms 1000 job submit \
  "$(slow_job slow-2500-a)"
has out "job slow-2500-a: active (submitted)" "waited for the outcome"
no_deadline_text "a slow submit"
t0=$(date +%s%N)
# shellcheck disable=SC2046
expect 0 "submit --no-wait" -- $(as scheduler) job submit --no-wait "$(slow_job slow-6000-b)"
elapsed_ms=$((($(date +%s%N) - t0) / 1000000))
has out "job slow-6000-b: programming (submitted; not waiting for the outcome: ocsctl job show slow-6000-b)" "no-wait result"
if [ "$elapsed_ms" -ge 4000 ]; then
  echo "FAIL: --no-wait took ${elapsed_ms} ms"; failures=$((failures + 1))
fi
# shellcheck disable=SC2046
expect 0 "--no-wait job goes on" -- $(as viewer) job show slow-6000-b
# shellcheck disable=SC2046
expect 4 "submit --wait-timeout-s ends the wait, not the job" -- $(as scheduler) job submit \
  --wait --wait-timeout-s 1 "$(slow_job slow-4000-c)"
has err "ocsctl: job slow-4000-c: still programming after --wait-timeout-s 1; ocsctl stopped waiting and the job goes on (follow it with ocsctl job show slow-4000-c or ocsctl watch)" "wait timeout message"
no_deadline_text "an ended wait"
sleep 3.5
# shellcheck disable=SC2046
expect 0 "the job went on" -- $(as viewer) jobs --state active
has out "slow-4000-c  active" "slow job active in the end"
expect 2 "--no-wait with --wait" -- --insecure job submit --wait --no-wait "$work/job.json"
expect 2 "--no-wait goes with submit" -- --insecure jobs --no-wait
expect 2 "bad --wait-timeout-s" -- --insecure job submit --wait-timeout-s 0 "$work/job.json"

# --- jobs and circuits follow the pages (issue 14 #5): 25,000 jobs, a 1 MiB
# message limit that one unpaged answer would exceed ---
"$server_bin" --insecure --jobs 25000 --max-message-bytes 1048576 \
  >"$work/bulk.out" 2>"$work/bulk.err" &
bulk_pid=$!
for _ in $(seq 200); do
  grep -q '^port ' "$work/bulk.out" 2>/dev/null && break
  sleep 0.05
done
bulk_port=$(awk '/^port /{print $2}' "$work/bulk.out")
[ -n "$bulk_port" ] || { echo "bulk server did not start"; cat "$work/bulk.err"; exit 1; }
expect 0 "jobs over 25,000 jobs" -- --insecure --server "127.0.0.1:$bulk_port" jobs
rows=$(grep -c '^bulk-' "$work/out" || true)
if [ "$rows" != 25000 ] || [ "$(grep -c . "$work/out")" != 25001 ]; then
  echo "FAIL: jobs listed $rows of 25000 bulk jobs"; failures=$((failures + 1))
fi
has out "bulk-00000" "first job listed"
has out "bulk-24999" "last job listed"
expect 0 "jobs --json over 25,000 jobs" -- --insecure --server "127.0.0.1:$bulk_port" --json jobs
size=$(stat -c %s "$work/out")
if [ "$(grep -c '"id": "bulk-' "$work/out")" != 25000 ] || [ "$size" -le 1048576 ]; then
  echo "FAIL: jobs --json: $size bytes, want all 25000 jobs in more than the 1 MiB limit"
  failures=$((failures + 1))
fi
expect 0 "circuits follow pages too" -- --insecure --server "127.0.0.1:$bulk_port" circuits
kill -TERM "$bulk_pid"
bulk_rc=0
wait "$bulk_pid" || bulk_rc=$?
[ "$bulk_rc" = 0 ] || { echo "FAIL: bulk server exited $bulk_rc"; failures=$((failures + 1)); }

# --- the server shuts down cleanly (exit 0; under ASan also leak-free) ---
kill -TERM "$server_pid"
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""
if [ "$server_rc" != 0 ]; then
  echo "FAIL: server exited $server_rc"; cat "$work/server.err"; failures=$((failures + 1))
else
  echo "ok: server stopped cleanly"
fi

echo "$failures failure(s)"
[ "$failures" = 0 ]
