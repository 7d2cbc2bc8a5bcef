#!/usr/bin/env bash
# test_completion.sh OCSCTL OCSPLAN NB_TEST_SERVER MAKE_CERTS SOURCE_DIR - the
# bash completions of ocsctl and ocsplan (issue 26), sourced in this
# non-interactive bash without the bash-completion package, their functions
# called as bash calls them (COMP_WORDS split as bash splits them, at white
# space and at ':' and '=', COMP_CWORD, COMP_LINE, COMP_POINT) and COMPREPLY
# checked: the commands and options against those `ocsctl --help` lists,
# sub-words, job states, --opt=value, file names; live values from
# nb_test_server over mTLS (job ids, device names, TLS options passed on
# from the line; $OCSD_SERVER) and from nb_test_server --ring --insecure
# (node numbers); a server that is down or hung (a socket that listens and
# never answers), also a list of them: no candidates, nothing on stderr,
# back within 3 s (the completion kills ocsctl at 1.5 s; without that and
# its --timeout-ms 500 a hung server holds it for ocsctl's default 5 s);
# ocsplan's subcommands against `ocsplan --help`.
set -euo pipefail
ocsctl=$1
ocsplan=$2
server_bin=$3
make_certs=$4
src=$5

work=$(mktemp -d /tmp/test_completion.XXXXXX)
server_pid=""
ring_pid=""
hung_pid=""
cleanup() {
  for pid in $server_pid $ring_pid $hung_pid; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

# the programs as a user has them: on PATH under their own names
mkdir -p "$work/bin"
ln -s "$ocsctl" "$work/bin/ocsctl"
ln -s "$ocsplan" "$work/bin/ocsplan"
PATH=$work/bin:$PATH
unset OCSD_SERVER OCSCTL_CA OCSCTL_CERT OCSCTL_KEY
# shellcheck source=/dev/null # the source tree given as an argument
. "$src/northbound/ocsctl/ocsctl.bash-completion"
# shellcheck source=/dev/null
. "$src/solvers/ocsplan/ocsplan.bash-completion"
COMP_WORDBREAKS=$' \t\n"\'><=;|&(:' # bash's default

# comp LINE: the candidates of the function registered for the line's first
# word with the cursor at the end of LINE, sorted, one a line
comp() {
  local line=$1 func
  COMP_LINE=$line
  COMP_POINT=${#line}
  # shellcheck disable=SC2207 # word splitting is the point
  COMP_WORDS=($(sed -E 's/([:=]+)/ \1 /g' <<<"$line"))
  [[ -z $line || $line == *' ' ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  func=$(complete -p "${COMP_WORDS[0]##*/}" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
  COMPREPLY=()
  "$func" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  [ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}" | sort
}
# want LINE WORD..: the candidates are exactly WORD.. (any order)
want() {
  local line=$1 got exp
  shift
  got=$(comp "$line" | tr '\n' ' ')
  exp=$(printf '%s\n' "$@" | sed '/^$/d' | sort | tr '\n' ' ')
  if [ "$got" = "$exp" ]; then ok "'$line' -> $got"; else bad "'$line' -> '$got', want '$exp'"; fi
}

# --- words and options, checked against ocsctl --help ---
"$ocsctl" --help >"$work/help"
help_cmds=$(awk '/^commands:/{on=1; next} /^$/{on=0} on && /^  [a-z]/{print $1}' "$work/help" | sort -u)
[ "$(wc -l <<<"$help_cmds")" -ge 17 ] || bad "ocsctl --help lists only: $help_cmds"
# shellcheck disable=SC2086
want "ocsctl " $help_cmds
want "ocsctl j" job jobs
want "ocsctl dr" drain drift
want "ocsctl job " submit plan release show
want "ocsctl node " fail heal
want "ocsctl gpu " replace fail heal
want "ocsctl cabling " clear
want "ocsctl job sh" show
global_opts=$(awk '/^options:/{on=1; next} /^$/{on=0} on && /^  -/' "$work/help" |
  grep -oE '(^|[ ,])--?[a-z][a-z-]*' | tr -d ' ,' | sort -u)
[ "$(wc -l <<<"$global_opts")" -ge 12 ] || bad "ocsctl --help has only the options: $global_opts"
# shellcheck disable=SC2086
want "ocsctl -" $global_opts
want "ocsctl --st"
want "ocsctl --no" --no-headers
want "ocsctl --insecure --c" --ca --cert --columns
# each command's synopsis line (up to its description) names its own options
awk '/^commands:/{on=1; next} /^$/{on=0} on && /^  [a-z]/' "$work/help" |
  sed -E 's/^  //; s/   .*//' >"$work/synopses"
while read -r cmd rest; do
  sub=""
  [[ $rest =~ ^([a-z]+) ]] && sub=${BASH_REMATCH[1]}
  # shellcheck disable=SC2046,SC2086
  want "ocsctl $cmd ${sub:+$sub }-" $global_opts $(grep -oE -- '--[a-z][a-z-]*' <<<"$rest")
done <"$work/synopses"
want "ocsctl jobs --st" --state
want "ocsctl jobs --state " pending planning programming active releasing released failed
want "ocsctl jobs --state a" active
want "ocsctl jobs --state=re" releasing released
want "ocsctl --json jobs --state=act" active
want "ocsctl -o id,state jobs --state p" pending planning programming

# --- file names ---
mkdir -p "$work/files/sub"
touch "$work/files/a.json" "$work/files/b.json" "$work/files/ca.pem"
cd "$work/files"
want "ocsctl job submit " a.json b.json ca.pem sub
want "ocsctl job plan a" a.json
want "ocsctl --ca c" ca.pem
want "ocsctl --insecure --cert=" a.json b.json ca.pem sub
want "ocsctl --key s" sub
want "ocsctl job submit a.json " # one FILE only
cd "$work"

# --- live values: a server over mTLS ---
# shellcheck source=tests/integration/nb_server.sh
. "$(dirname "$0")/nb_server.sh"
bash "$make_certs" "$work/certs" >/dev/null
c=$work/certs
tls="--ca $c/ca.pem --cert $c/viewer.pem --key $c/viewer.key"
nb_server_start server --ca "$c/ca.pem" --cert "$c/server.pem" --key "$c/server.key"
server_pid=$nb_server_pid
addr=127.0.0.1:$port
cat >"$work/job.json" <<'EOF'
{
  "id": "train-7",
  "idempotency_key": "completion-1",
  "placement": {"gpus": [
    {"gpu": 0, "leaf": 0, "pod": 0},
    {"gpu": 40, "leaf": 5, "pod": 1}]},
  "leaf_demand": {"pairs": [{"a": 0, "b": 5, "links": 1}]},
  "options": {"planner": "pod-centric", "allow_moving_other_jobs": false}
}
EOF
"$ocsctl" --server "$addr" --ca "$c/ca.pem" --cert "$c/scheduler.pem" --key "$c/scheduler.key" \
  job submit "$work/job.json" >"$work/submit.out" ||
  { echo "job submit failed"; cat "$work/submit.out"; exit 1; }
# shellcheck disable=SC2086 # $tls: several words
devices=$("$ocsctl" --server "$addr" $tls devices --no-headers -o name)
[ "$(wc -w <<<"$devices")" -eq 4 ] || bad "nb_test_server lists devices: $devices"
want "ocsctl $tls --server $addr job show " train-7
want "ocsctl --server $addr $tls job release tr" train-7
want "ocsctl --server=$addr $tls circuits --job " train-7
want "ocsctl --server $addr $tls adopt --job " # a new id, not an existing one
# shellcheck disable=SC2086
want "ocsctl --server $addr $tls drain " $devices
want "ocsctl --server $addr $tls undrain ocs-g1" ocs-g1-d0 ocs-g1-d1
want "ocsctl --server $addr $tls cabling clear ocs-g0-d" ocs-g0-d0 ocs-g0-d1
want "ocsctl --server $addr $tls drift --device=ocs-g0-d1" ocs-g0-d1
want "ocsctl --server $addr $tls cabling clear ocs-g0-d0 " # PORT: nothing to offer
# without the TLS options on the line ocsctl cannot connect: nothing
want "ocsctl --server $addr job show "
# $OCSD_SERVER and $OCSCTL_* as ocsctl reads them
OCSD_SERVER=$addr OCSCTL_CA=$c/ca.pem OCSCTL_CERT=$c/viewer.pem OCSCTL_KEY=$c/viewer.key \
  want "ocsctl job show " train-7

# --- live values: a ring domain, plaintext ---
nb_server_start ring --ring --insecure
ring_pid=$nb_server_pid
ring_port=$port
rs="--insecure --server 127.0.0.1:$ring_port"
echo '{"id": "tp8", "idempotency_key": "ring-1", "ring": {"tp": 8, "gpus": 32, "orchestration": "fat-tree"}}' \
  >"$work/ring.json"
# shellcheck disable=SC2086
"$ocsctl" $rs job submit "$work/ring.json" >"$work/ring-submit.out" ||
  { echo "ring job submit failed"; cat "$work/ring-submit.out"; exit 1; }
# shellcheck disable=SC2086
nodes=$("$ocsctl" $rs rings --no-headers -o nodes | tr ',' '\n' | sort -n | tr '\n' ' ')
[ "$nodes" = "0 1 2 3 4 5 6 7 " ] || bad "ring nodes of tp8: $nodes"
# shellcheck disable=SC2086
want "ocsctl $rs node fail " $nodes
want "ocsctl $rs node heal 1" 1
want "ocsctl $rs rings --node " 0 1 2 3 4 5 6 7
want "ocsctl $rs job show " tp8
want "ocsctl --server 127.0.0.1:$ring_port node fail " # plaintext server, no --insecure

# --- a server that is down (nothing listens), or hung (the kernel takes the
# connection, nobody answers: ocsctl's deadline ends it): nothing, quietly, soon.
# Soon is 3 s: the kill at 1.5 s, and the shell's and an ASan ocsctl's start on
# a loaded machine (2 s was missed by 101 ms in the ASan stage of a CI run) ---
dead=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
time.sleep(110)' >"$work/hung.out" &
hung_pid=$!
for _ in $(seq 100); do
  [ -s "$work/hung.out" ] && break
  sleep 0.05
done
hung=$(cat "$work/hung.out")
[ -n "$hung" ] || { echo "the hung listener did not start"; exit 1; }
for line in "ocsctl --insecure --server 127.0.0.1:$dead job show " \
  "ocsctl --insecure --server 127.0.0.1:$dead drain " \
  "ocsctl --insecure --server 127.0.0.1:$dead node fail " \
  "ocsctl --server 127.0.0.1:$dead $tls jobs --job " \
  "ocsctl --insecure --server 127.0.0.1:$hung job show " \
  "ocsctl --server 127.0.0.1:$hung $tls drain " \
  "ocsctl --insecure --server 127.0.0.1:$hung,127.0.0.1:$dead,127.0.0.1:$hung node fail "; do
  t0=$EPOCHREALTIME
  comp "$line" >"$work/down.out" 2>"$work/down.err"
  ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
  if [ -s "$work/down.out" ] || [ -s "$work/down.err" ] || [ "$ms" -ge 3000 ]; then
    bad "'$line' with the server down or hung: $ms ms, candidates '$(cat "$work/down.out")', stderr '$(cat "$work/down.err")'"
  else ok "'$line' with the server down or hung: nothing, quietly, in $ms ms"; fi
done

# --- ocsplan ---
"$ocsplan" --help >"$work/plan-help"
plan_subs=$(awk '/^subcommands:/{on=1; next} /^[^ ]/{on=0} on && /^  [a-z]/{print $1}' "$work/plan-help")
[ "$(wc -l <<<"$plan_subs")" -ge 8 ] || bad "ocsplan --help lists only: $plan_subs"
# shellcheck disable=SC2086
want "ocsplan " $plan_subs
want "ocsplan leaf" leaf-centric
want "ocsplan -" --help --version
want "ocsplan leaf-centric -" --in --out --pretty --realize --replan
want "ocsplan hbd-ring --" --in --out --pretty
cd "$work/files"
want "ocsplan delta-fast --in " a.json b.json ca.pem sub
want "ocsplan delta-fast --in a.json --out b" b.json
cd "$work"

if [ "$failures" -gt 0 ]; then
  echo "test_completion: $failures FAILED"
  exit 1
fi
echo "test_completion: passed"
