#!/usr/bin/env bash
# inorder compatibility workload for kcat (librdkafka, Debian package).
#
#   workload.sh BOOTSTRAP TOPIC_PREFIX [EXPECT]
#
# Same steps and checks as compat/go (see compat/README.md), driven through
# kcat processes: one idempotent producer per partition (kcat -p fixes the
# partition), two `kcat -G` group members, a restarted `kcat -G`, and
# transactions via `-X transactional.id` (commit = end of input, abort =
# SIGINT while the transaction is open). Checks run in verify.py (stdlib).
set -uo pipefail
BOOT="$1"; PREFIX="$2"; EXPECT="${3:-}"
RF="${COMPAT_RF:-1}"
HERE="$(cd "$(dirname "$0")" && pwd)"
W="$(mktemp -d "${TMPDIR:-/tmp}/inorder-kcat.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; if [ -n "${COMPAT_KEEP:-}" ]; then echo "INFO work files kept in $W"; else rm -rf "$W"; fi; }
trap cleanup EXIT
FAILED=(); LIMITS=(); START=$SECONDS
# Security settings (COMPAT_TLS_CA, COMPAT_TLS_CERT, COMPAT_TLS_KEY,
# COMPAT_SASL_MECHANISM, COMPAT_SASL_USERNAME, COMPAT_SASL_PASSWORD; the
# same variables every workload reads) go to
# librdkafka through a config file (-F), so the password is not on a command line.
SEC=()
if [ -n "${COMPAT_TLS_CA:-}${COMPAT_SASL_MECHANISM:-}" ]; then
  proto=$([ -n "${COMPAT_SASL_MECHANISM:-}" ] && echo SASL_ || true)$([ -n "${COMPAT_TLS_CA:-}" ] && echo SSL || echo PLAINTEXT)
  (umask 077
   echo "security.protocol=$proto"
   [ -z "${COMPAT_TLS_CA:-}" ] || echo "ssl.ca.location=$COMPAT_TLS_CA"
   [ -z "${COMPAT_TLS_CERT:-}" ] || printf 'ssl.certificate.location=%s\nssl.key.location=%s\n' "$COMPAT_TLS_CERT" "$COMPAT_TLS_KEY"
   [ -z "${COMPAT_SASL_MECHANISM:-}" ] || printf 'sasl.mechanisms=%s\nsasl.username=%s\nsasl.password=%s\n' \
     "$COMPAT_SASL_MECHANISM" "${COMPAT_SASL_USERNAME:-}" "${COMPAT_SASL_PASSWORD:-}"
  ) >"$W/security.conf"
  SEC=(-F "$W/security.conf")
fi
SECDESC="${proto:-PLAINTEXT}${COMPAT_TLS_CERT:+,client certificate $COMPAT_TLS_CERT}${COMPAT_SASL_MECHANISM:++$COMPAT_SASL_MECHANISM(${COMPAT_SASL_USERNAME:-})}"
K() { timeout "${KT:-60}" kcat -b "$BOOT" -X client.id=inorder-compat-kcat "${SEC[@]}" -m 15 "$@"; }
now() { date +%s.%N; }
step_ok() { awk -v n="$1" -v a="$2" -v b="$(now)" 'BEGIN{printf "STEP %s ok (%.3fs)\n", n, b-a}'; }
step_fail() { echo "FAIL $1: $2"; FAILED+=("$1: $2"); }
note() { echo "LIMIT $1: $2"; LIMITS+=("$1: $2"); }
finish() {
  d=$((SECONDS - START))
  if [ ${#FAILED[@]} -gt 0 ]; then echo "RESULT fail kcat (${d}s): $(IFS='|'; echo "${FAILED[*]}")"; exit 1; fi
  if [ ${#LIMITS[@]} -gt 0 ]; then echo "RESULT pass kcat (${d}s) with limitations: $(IFS='|'; echo "${LIMITS[*]}")"; exit 0; fi
  echo "RESULT pass kcat (${d}s)"; exit 0
}
# wait_until SECONDS CMD...: polls CMD every 0.2 s
wait_until() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done; }
lines() { cat "$@" 2>/dev/null | wc -l; }

TOPIC="$PREFIX-main"; TXN="$PREFIX-txn"; GROUP="$PREFIX-group"; TXNID="inorder-compat-kcat-$TXN"
COMPAT_GO="${COMPAT_GO:-$HERE/../go/bin/compat-go}"
VERIFY="python3 $HERE/verify.py"
# Every kcat runs with broker debug logs into $W/*.err; "Connecting to
# ipv4#host:port" lines there are the addresses librdkafka dialed.
DBG=(-X debug=broker)
echo "START kcat bootstrap=$BOOT prefix=$PREFIX rf=$RF expect=\"$EXPECT\" security=$SECDESC"

# records LO HI PARTITIONS P: "key:value" lines of the records for partition P
records() { awk -v lo="$1" -v hi="$2" -v n="$3" -v p="$4" 'BEGIN{for(s=lo;s<hi;s++) if((s%50)%n==p) printf "k%d:%d\n", s%50, s}'; }
produce() { # LO HI: idempotent producer, 5 in flight, one kcat per partition
  local p
  for p in $(seq 0 5); do
    records "$1" "$2" 6 "$p" | K -P -t "$TOPIC" -p "$p" -K: -X enable.idempotence=true -X acks=all \
      -X max.in.flight.requests.per.connection=5 -X linger.ms=2 "${DBG[@]}" 2>>"$W/produce.err" || return 1
  done
}
member_partitions() { # last assignment line of a kcat -G stderr -> partition count
  grep -E '^% Group .* rebalanced' "$1" 2>/dev/null | tail -n1 | grep -q 'assigned:' || { echo 0; return; }
  grep -E '^% Group .* rebalanced' "$1" | tail -n1 | grep -o "\[[0-9]*\]" | wc -l
}
group_stable() {
  local a b; a=$(member_partitions "$W/m0.err"); b=$(member_partitions "$W/m1.err")
  [ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ $((a + b)) -eq 6 ]
}
GROUPCONF=(-X enable.auto.commit=true -X auto.commit.interval.ms=200 -X auto.offset.reset=earliest
  -X session.timeout.ms=10000 -X heartbeat.interval.ms=1000 -f '%p %o %s\n' -u)

t=$(now)
if "$COMPAT_GO" create-topics "$BOOT" "$TOPIC:6" "$TXN:3" >"$W/create.log" 2>&1; then
  note create-topics "kcat cannot create topics; created with franz-go (compat-go create-topics) through the same address"
  step_ok create-topics "$t"
else
  step_fail create-topics "$(tail -n1 "$W/create.log")"; finish
fi

t=$(now); GROUP_OK=0
for i in 0 1; do
  # timeout(1) is the direct child so that SIGTERM reaches kcat through it.
  timeout 150 kcat -b "$BOOT" -X client.id=inorder-compat-kcat "${SEC[@]}" -m 15 -G "$GROUP" "${GROUPCONF[@]}" "${DBG[@]}" "$TOPIC" >"$W/m$i.out" 2>"$W/m$i.err" &
  PIDS+=($!)
done
if ! wait_until 60 group_stable; then
  step_fail group-consume "group never became stable: member0=$(member_partitions "$W/m0.err") member1=$(member_partitions "$W/m1.err") partitions"
else
  echo "INFO group stable: member0=$(member_partitions "$W/m0.err") partitions member1=$(member_partitions "$W/m1.err") partitions"
  tp=$(now)
  if ! produce 0 2000; then
    step_fail group-consume "produce failed: $(grep -v '^%7' "$W/produce.err" | tail -n2 | tr '\n' ' ')"
  else
    step_ok produce-idempotent "$tp"
    all_read() { [ "$(lines "$W/m0.out" "$W/m1.out")" -ge 2000 ]; }  # re-evaluated on every poll
    if ! wait_until 90 all_read; then
      step_fail group-consume "received $(lines "$W/m0.out" "$W/m1.out") of 2000 records"
    else
      # SIGTERM: kcat closes the consumer, which commits the stored offsets.
      kill -TERM "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; PIDS=()
      if out=$($VERIFY group "$W/m0.out" "$W/m1.out"); then step_ok group-consume "$t"; GROUP_OK=1
      else step_fail group-consume "$out"; fi
    fi
  fi
fi
kill -TERM "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; PIDS=()

if [ $GROUP_OK = 1 ]; then
  t=$(now)
  if ! produce 2000 2200; then
    step_fail resume-from-commit "produce failed: $(grep -v '^%7' "$W/produce.err" | tail -n2 | tr '\n' ' ')"
  else
    KT=60 K -G "$GROUP" "${GROUPCONF[@]}" "${DBG[@]}" -c 200 "$TOPIC" >"$W/resume.out" 2>"$W/resume.err"
    if out=$($VERIFY resume "$W/resume.out"); then step_ok resume-from-commit "$t"
    else step_fail resume-from-commit "$out"; fi
  fi
fi

txn_produce() { # LO HI P: one committed transaction (kcat commits when its input ends)
  records "$1" "$2" 3 "$3" | K -P -t "$TXN" -p "$3" -K: -X transactional.id="$TXNID" "${DBG[@]}" 2>>"$W/txn.err"
}
t=$(now); TXN_OK=1
for p in 0 1 2; do txn_produce 100000 100100 "$p" || { TXN_OK=0; break; }; done
[ $TXN_OK = 1 ] && for p in 0 1 2; do txn_produce 900000 900003 "$p" || { TXN_OK=0; break; }; done
if [ $TXN_OK = 1 ]; then
  note transactions "kcat commits one transaction per process at end of input and aborts only when interrupted, but sends nothing before its input ends, so no aborted transaction with records can be made; committed transactions (one per partition) and read_committed are checked"
  step_ok transactions "$t"
  t=$(now)
  K -C -t "$TXN" -o beginning -e -X isolation.level=read_committed -f '%p %o %s\n' "${DBG[@]}" >"$W/rc.out" 2>"$W/rc.err"
  if out=$($VERIFY committed "$W/rc.out"); then step_ok read-committed "$t"
  else step_fail read-committed "$out"; fi
else
  step_fail transactions "$(grep -v '^%7' "$W/txn.err" | tail -n3 | tr '\n' ' ')"
fi

if [ -n "$EXPECT" ] && [ "$EXPECT" != - ]; then
  t=$(now)
  K -L -J >"$W/md.json" 2>/dev/null
  mapfile -t dialed < <(cat "$W"/*.err | grep -o 'Connecting to ipv4#[^ ]*' | sed 's/.*#//' | sort -u)
  if out=$($VERIFY addrs "$EXPECT" "$W/md.json" "${dialed[@]}"); then echo "$out"; step_ok addresses "$t"
  else echo "$out" | head -n1; step_fail addresses "$(echo "$out" | tail -n1)"; fi
else
  echo "INFO addresses: not checked (no EXPECT given)"
fi
finish
