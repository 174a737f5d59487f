#!/usr/bin/env bash
# Starts a KRaft Kafka on loopback: `start.sh single` (node 1, 127.0.0.1:19092)
# or `start.sh cluster` (nodes 1,2,3, 127.0.0.1:29092-29094); `start.sh secure`
# (node 1, SASL_SSL on 127.0.0.1:23092) or `start.sh secure-cluster` (nodes
# 1,2,3, SASL_SSL on 127.0.0.1:24092-24094) with certificates and SCRAM users
# made at start; `start.sh authz` (node 1, SASL_PLAINTEXT on 127.0.0.1:25092,
# SCRAM users, StandardAuthorizer, admin the super user); `start.sh audit`
# (node 1, 127.0.0.1:26092, a single node on ports of its own) (see README.md). Installs Kafka first if needed, formats fresh
# storage, waits until the broker(s) answer a metadata request, and prints the
# bootstrap address on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mode="${1:-single}"
nodes="$(mode_nodes "$mode")"
kafka_install

# Refuse to start twice; stop leftovers of this mode first.
"$TESTENV_KAFKA_DIR/stop.sh" "$mode" >/dev/null 2>&1 || true
for n in $nodes; do
  for p in $(node_ports "$mode" "$n"); do
    if port_open "$p"; then klog "port $p is already in use; is another Kafka running?"; exit 1; fi
  done
done

base="$KAFKA_RUN_DIR/$mode"
rm -rf "$base"
mkdir -p "$base"
fail() { klog "$*"; show_logs "$mode"; "$TESTENV_KAFKA_DIR/stop.sh" "$mode" >/dev/null 2>&1 || true; exit 1; }

bootstrap="$(bootstrap_for "$mode")"
format_args=()
ready_args=()
if mode_secure "$mode"; then
  make_secrets "$base/secrets" || fail "could not make the certificates in $base/secrets"
  write_secure_client_files "$mode" "$base/secrets" "$bootstrap"
  mapfile -t format_args < <(secure_scram_args)
  ready_args=("$base/secrets/client.properties")
elif mode_authz "$mode"; then
  write_authz_client_files "$mode" "$base/secrets" "$bootstrap"
  mapfile -t format_args < <(authz_scram_args)
  ready_args=("$base/secrets/client.properties")
fi

for n in $nodes; do
  d="$base/node$n"
  write_node_config "$mode" "$n" "$d"
  if ! kjava -Xmx256m -Dlog4j2.configurationFile="$d/log4j2.properties" kafka.tools.StorageTool \
      format -t "$KAFKA_CLUSTER_ID" -c "$d/server.properties" "${format_args[@]}" >"$d/logs/format.log" 2>&1; then
    cat "$d/logs/format.log" >&2
    fail "storage format failed for node $n (log: $d/logs/format.log)"
  fi
done

for n in $nodes; do launch_node "$mode" "$n"; done

count=$(echo $nodes | wc -w)
deadline=$((SECONDS + KAFKA_START_TIMEOUT))
for n in $nodes; do
  p=$(broker_port "$mode" "$n")
  until port_open "$p"; do
    pid_alive "$(cat "$base/node$n/pid")" || fail "node $n exited during startup"
    [ $SECONDS -lt $deadline ] || fail "node $n did not open port $p within ${KAFKA_START_TIMEOUT}s"
    sleep 0.5
  done
done
left=$((deadline - SECONDS)); [ $left -gt 5 ] || left=5
if ! kjava -Xmx128m -XX:TieredStopAtLevel=1 "$TESTENV_KAFKA_DIR/KafkaReady.java" "$bootstrap" "$count" "$left" "${ready_args[@]}" >&2 \
    2>"$base/ready.log"; then
  cat "$base/ready.log" >&2
  fail "Kafka ($mode) did not answer metadata requests"
fi
grep -v '^SLF4J' "$base/ready.log" >&2 || true
klog "Kafka $KAFKA_VERSION ($mode) ready at $bootstrap"
mode_secure "$mode" && klog "secure mode: certificates, passwords and settings in $base/secrets (env: $base/secrets/env)"
mode_authz "$mode" && klog "authz mode: passwords and settings in $base/secrets (env: $base/secrets/env)"
echo "$bootstrap"
