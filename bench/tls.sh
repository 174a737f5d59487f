#!/usr/bin/env bash
# Measures what TLS costs through inorder, side by side in one run, and
# prints a Markdown section on stdout (bench/run.sh appends it to
# BENCHMARKS.md). Paths, each to its own embedded broker:
#
#   inorder-tls  client -TLS-> inorder -TLS-> broker (TLS)
#   inorder-sni  the same, with --topology sni: the client reaches the
#                bootstrap and the broker by name on one TLS port
#                (bootstrap.kafka.bench, broker-N.kafka.bench), the proxy
#                picking the upstream from the TLS server name
#   inorder      client -> inorder -> broker (plaintext both sides)
#   relay-tls    client -TLS-> relay -TLS-> broker (TLS): a relay that
#                terminates and originates TLS and knows nothing of Kafka,
#                the floor for any proxy speaking TLS on both sides
#   direct-tls   client -TLS-> broker (TLS)
#
# inorder runs in connection mode. Certificates (ECDSA P-256, a CA and one
# for 127.0.0.1 and *.kafka.bench) are made by openssl for the run. The
# benchmark client resolves the kafka.bench names from a private /etc/hosts
# in a mount namespace (unshare: root, or unprivileged user namespaces);
# where there is none, inorder-sni is left out and the report says so.
#
# Environment (all optional): ROUNDS=5 DURATION=4s WARMUP=1s, GO=go,
# INORDER_BIN (measure this binary instead of building one), PORT_BASE
# (first of 30 loopback ports; default: a random free range).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-1s}
GO=${GO:-go}
LIFETIME=${LIFETIME:-20m}
WORK=$(mktemp -d /tmp/inorder-bench-tls.XXXXXX)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	PIDS=()
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base() {
	local base p ok try
	for try in $(seq 1 50); do
		base=$((20000 + (RANDOM % 240) * 50))
		ok=1
		for p in $(seq "$base" $((base + 29))); do port_free "$p" || { ok=0; break; }; done
		[ "$ok" = 1 ] && { echo "$base"; return; }
	done
	echo "no free range of 30 ports found" >&2
	return 1
}
wait_port() {
	local i
	for i in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on port $1" >&2
	return 1
}
PORT_BASE=${PORT_BASE:-$(pick_base)}

if [ -n "${INORDER_BIN:-}" ]; then
	BIN=$INORDER_BIN
else
	log "building inorder"
	(cd "$ROOT" && "$GO" build -o "$WORK/inorder" ./cmd/inorder)
	BIN=$WORK/inorder
fi

log "making certificates"
(
	cd "$WORK"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
		-days 1 -subj /CN=inorder-bench-ca 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
		-subj /CN=127.0.0.1 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:*.kafka.bench\n' >san.ext
	openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 1 \
		-extfile san.ext 2>/dev/null
	chmod 600 ./*.key
)
TLSARGS=(--tls-cert "$WORK/srv.crt" --tls-key "$WORK/srv.key")

PLAIN_BROKER=$PORT_BASE           # plaintext broker behind inorder
TLS_BROKER=$((PORT_BASE + 1))     # TLS broker behind inorder-tls, and direct-tls
RELAYED=$((PORT_BASE + 2))        # TLS broker behind the relay, advertising it
RELAY=$((PORT_BASE + 3))
INORDER=$((PORT_BASE + 10))       # node 0 on +1
INORDER_TLS=$((PORT_BASE + 20))   # node 0 on +1
SNI_BROKER=$((PORT_BASE + 4))     # TLS broker behind inorder-sni
INORDER_SNI=$((PORT_BASE + 25))   # every node on the same port

# The benchmark client reaches inorder-sni by name: a private /etc/hosts.
printf '127.0.0.1 localhost bootstrap.kafka.bench broker-0.kafka.bench broker-1.kafka.bench broker-2.kafka.bench\n' >"$WORK/hosts"
NS=()
for try in "unshare --mount" "unshare --map-root-user --mount"; do
	if $try -- sh -c 'mount --bind "$0" /etc/hosts' "$WORK/hosts" 2>/dev/null; then
		read -ra NS <<<"$try"
		break
	fi
done
WRAP=()
[ ${#NS[@]} -eq 0 ] || WRAP=("${NS[@]}" -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$WORK/hosts")
SNI_NOTE=""
[ ${#NS[@]} -gt 0 ] || SNI_NOTE="inorder-sni was left out: no mount namespace to give the client the kafka.bench names (needs root or unprivileged user namespaces)."

start() { # start KIND
	"$BIN" bench broker --kind "$1" --port "$PLAIN_BROKER" --timeout "$LIFETIME" >"$WORK/b1.log" 2>&1 &
	PIDS+=($!)
	"$BIN" bench broker --kind "$1" --port "$TLS_BROKER" "${TLSARGS[@]}" --timeout "$LIFETIME" >"$WORK/b2.log" 2>&1 &
	PIDS+=($!)
	"$BIN" bench broker --kind "$1" --port "$RELAYED" --advertise "127.0.0.1:$RELAY" "${TLSARGS[@]}" --timeout "$LIFETIME" >"$WORK/b3.log" 2>&1 &
	PIDS+=($!)
	"$BIN" bench relay --listen "127.0.0.1:$RELAY" --to "127.0.0.1:$RELAYED" "${TLSARGS[@]}" --to-tls-ca "$WORK/ca.crt" \
		--timeout "$LIFETIME" >"$WORK/relay.log" 2>&1 &
	RELAY_PID=$!
	PIDS+=($!)
	"$BIN" bench broker --kind "$1" --port "$SNI_BROKER" "${TLSARGS[@]}" --timeout "$LIFETIME" >"$WORK/b4.log" 2>&1 &
	PIDS+=($!)
	wait_port "$PLAIN_BROKER"; wait_port "$TLS_BROKER"; wait_port "$RELAYED"; wait_port "$RELAY"; wait_port "$SNI_BROKER"
	timeout "$LIFETIME" "$BIN" serve --listen "127.0.0.1:$INORDER" --upstream "127.0.0.1:$PLAIN_BROKER" \
		--upstream-ordering connection --log-level warn >"$WORK/inorder.log" 2>&1 &
	PIDS+=($!)
	INORDER_PID=$!
	timeout "$LIFETIME" "$BIN" serve --listen "127.0.0.1:$INORDER_TLS" --upstream "127.0.0.1:$TLS_BROKER" \
		--upstream-ordering connection "${TLSARGS[@]}" --upstream-tls-ca "$WORK/ca.crt" --log-level warn >"$WORK/inorder-tls.log" 2>&1 &
	PIDS+=($!)
	INORDER_TLS_PID=$!
	timeout "$LIFETIME" "$BIN" serve --listen "127.0.0.1:$INORDER_SNI" --upstream "127.0.0.1:$SNI_BROKER" \
		--upstream-ordering connection "${TLSARGS[@]}" --upstream-tls-ca "$WORK/ca.crt" --log-level warn \
		--topology sni --sni-bootstrap bootstrap.kafka.bench --sni-node-pattern 'broker-{id}.kafka.bench' >"$WORK/inorder-sni.log" 2>&1 &
	PIDS+=($!)
	INORDER_SNI_PID=$!
	wait_port "$INORDER"; wait_port "$INORDER_TLS"; wait_port "$INORDER_SNI"
}

measure() { # measure NAME BENCH-ARGS...
	local name=$1
	shift
	local sni=()
	if [ ${#NS[@]} -gt 0 ]; then
		sni=(--compare "inorder-sni=bootstrap.kafka.bench:$INORDER_SNI" --tls inorder-sni --ratio-to inorder-tls
			--cpu-pid "inorder-sni=$(pgrep -P "$INORDER_SNI_PID" | head -1 || echo "$INORDER_SNI_PID")")
	fi
	log "workload $name: $ROUNDS rounds x $((4 + ${#sni[@]} / 6)) paths x $DURATION"
	"${WRAP[@]}" "$BIN" bench --bootstrap "inorder-tls=127.0.0.1:$INORDER_TLS" \
		--compare "inorder=127.0.0.1:$INORDER" --compare "relay-tls=127.0.0.1:$RELAY" --compare "direct-tls=127.0.0.1:$TLS_BROKER" \
		--tls inorder-tls --tls relay-tls --tls direct-tls --tls-ca "$WORK/ca.crt" \
		--ratio-to inorder --ratio-to relay-tls \
		--cpu-pid "inorder-tls=$(pgrep -P "$INORDER_TLS_PID" | head -1 || echo "$INORDER_TLS_PID")" \
		--cpu-pid "inorder=$(pgrep -P "$INORDER_PID" | head -1 || echo "$INORDER_PID")" \
		--cpu-pid "relay-tls=$RELAY_PID" \
		"${sni[@]}" --rounds "$ROUNDS" --duration "$DURATION" --warmup "$WARMUP" --format markdown "$@" \
		>"$WORK/$name.md" 2>"$WORK/$name.progress"
}

start blackhole
measure produce --partitions 1
cleanup
start synthetic
measure consume --produce=false --consume --partitions 1
cleanup

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
cat <<EOF
## TLS

\`bench/tls.sh\`, one run, $ROUNDS rounds of $DURATION per path, paths taking
turns round by round (medians; ratios are medians of per-round ratios).
\`inorder-tls\` speaks TLS to the client and to a TLS broker; \`inorder\` is
the same proxy in plaintext; \`relay-tls\` terminates the client's TLS and
dials the broker with TLS, knowing nothing of Kafka: the floor for any proxy
that speaks TLS on both sides; \`direct-tls\` is the client on the TLS broker;
\`inorder-sni\` is \`inorder-tls\` with \`--topology sni\`: one TLS port for
the bootstrap and the broker, each reached by its name, the upstream picked
from the TLS server name in the handshake. $SNI_NOTE
All in connection mode; ECDSA P-256 certificates, Go's default TLS 1.3 suite
(AES-GCM). With TLS neither inorder nor the relay can splice: every byte is
decrypted and encrypted again in user space. Load average at start
$LOAD_START, at end $LOAD_END (2 cores, shared).

Produce (1 KiB records, one partition, acks=all, idempotent):

$(cat "$WORK/produce.md")

Consume (1 MiB fetches of 1 KiB records):

$(cat "$WORK/consume.md")
EOF
