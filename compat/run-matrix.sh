#!/usr/bin/env bash
# Client compatibility matrix: every client workload through `inorder` in
# front of each backend. Writes the table and per-row logs under
# compat/results/ (untracked); only -p (or COMPAT_PUBLISH=1) after a full run
# copies the table to the tracked compat/MATRIX.md. Exits non-zero when a row
# fails (a client's documented limitation is reported as "pass, with
# limitations" and does not fail).
#
#   compat/run-matrix.sh                       # all clients x default backends
#   compat/run-matrix.sh -c kgo -b dev         # one row: franz-go via inorder dev
#   compat/run-matrix.sh -c java,kcat -b kafka,direct
#
# Clients : java java848 kgo sarama kafkago confluent kafkapython kafkajs kcat
#           (java848: kafka-clients with group.protocol=consumer, KIP-848)
# Backends: kafka          Apache Kafka (3-node KRaft by default) behind `inorder serve`
#           kafka-ordered  same, with --upstream-ordering connection
#           sni            the same cluster behind `inorder serve --topology sni`: every
#                          broker on one TLS port, told apart by server name (none mode)
#           sni-ordered    same, with --upstream-ordering connection
#           single         same, with --topology single (the cluster as one broker at one address)
#           single-ordered same, with --topology single --upstream-ordering connection
#           dev            `inorder dev` (embedded kfake, 3 brokers)
#           proxy-auth     secured Kafka (SASL_SSL, testenv/kafka secure modes); clients
#                          plaintext without credentials, the proxy uses TLS and SCRAM upstream
#           pass-through   secured Kafka; clients TLS to the proxy with their own SCRAM
#                          credentials, the proxy uses TLS upstream
#           client-scram   `inorder dev` authenticating clients itself: SCRAM (SASL_PLAINTEXT)
#           client-plain   same, PLAIN over TLS
#           client-oauth   same, OAUTHBEARER (a JWT signed for the run) over TLS
#           client-mtls    same, mutual TLS (the certificate's subject mapped to a principal);
#                          each client-* proxy enforces an ACL file allowing that principal only
#           direct         Apache Kafka without the proxy (baseline; no address check)
#           secure-direct  secured Kafka without the proxy (baseline of the two secure columns)
# Environment: COMPAT_CLIENTS, COMPAT_BACKENDS (comma lists), KAFKA_MODE
# (cluster|single, default cluster; the secure columns use secure-cluster or
# secure), COMPAT_ROW_TIMEOUT (s, default 180),
# COMPAT_BUDGET (s for the whole run, default 2100; later rows fail as not run),
# COMPAT_MATRIX_FILE (default compat/results/MATRIX.md for a full run, else
# compat/results/MATRIX-partial.md), COMPAT_PUBLISH, INORDER_CACHE, KAFKA_VERSION.
set -uo pipefail

COMPAT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$COMPAT/.." && pwd)"
INORDER_CACHE="${INORDER_CACHE:-$HOME/.cache/inorder}"
export INORDER_CACHE
ALL_CLIENTS="java java848 kgo sarama kafkago confluent kafkapython kafkajs kcat"
CLIENTS="${COMPAT_CLIENTS:-$ALL_CLIENTS}"
DEFAULT_BACKENDS="kafka kafka-ordered sni sni-ordered single single-ordered dev client-scram client-plain client-oauth client-mtls proxy-auth pass-through"
BACKENDS="${COMPAT_BACKENDS:-$DEFAULT_BACKENDS}"
KAFKA_MODE="${KAFKA_MODE:-cluster}"
ROW_TIMEOUT="${COMPAT_ROW_TIMEOUT:-180}"
# Whole-run budget: rows not started by then are failed as "not run".
BUDGET="${COMPAT_BUDGET:-2100}"
# Clients with a known intermittent bug of their own get one more attempt;
# the cell then says so (see compat/README.md).
RETRY_CLIENTS="${COMPAT_RETRY_CLIENTS:-kafkapython}"
RESULTS="$COMPAT/results"
MATRIX="${COMPAT_MATRIX_FILE:-$RESULTS/MATRIX.md}"
PUBLISH="${COMPAT_PUBLISH:-}"
BIN="$COMPAT/go/bin"
VENV="$INORDER_CACHE/venv-py311"

while getopts "c:b:m:ph" o; do
  case "$o" in
    c) CLIENTS="${OPTARG//,/ }" ;;
    b) BACKENDS="${OPTARG//,/ }" ;;
    m) KAFKA_MODE="$OPTARG" ;;
    p) PUBLISH=1 ;;
    *) sed -n "2,39p" "$0"; exit 2 ;;
  esac
done
CLIENTS="${CLIENTS//,/ }"; BACKENDS="${BACKENDS//,/ }"
# Only a full run (every client, the default backends) may be published.
FULL=1
if [ "$(echo $CLIENTS)" != "$ALL_CLIENTS" ] || [ "$(echo $BACKENDS)" != "$DEFAULT_BACKENDS" ] || [ "$KAFKA_MODE" != cluster ]; then
  FULL=""
  [ -n "${COMPAT_MATRIX_FILE:-}" ] || MATRIX="$RESULTS/MATRIX-partial.md"
fi
for c in $CLIENTS; do case " $ALL_CLIENTS " in *" $c "*) ;; *) echo "unknown client $c"; exit 2 ;; esac; done
for b in $BACKENDS; do case "$b" in kafka|kafka-ordered|sni|sni-ordered|single|single-ordered|dev|client-scram|client-plain|client-oauth|client-mtls|direct|proxy-auth|pass-through|secure-direct) ;; *) echo "unknown backend $b"; exit 2 ;; esac; done
case "$KAFKA_MODE" in cluster|single) ;; *) echo "unknown Kafka mode $KAFKA_MODE (cluster|single)"; exit 2 ;; esac
# The secured Kafka of the secure columns (testenv/kafka secure modes).
SECURE_MODE=$([ "$KAFKA_MODE" = cluster ] && echo secure-cluster || echo secure)

. "$ROOT/testenv/kafka/lib.sh"

log() { printf '[matrix %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
has() { case " $CLIENTS " in *" $1 "*) return 0 ;; esac; return 1; }
needs_kafka() { case " $BACKENDS " in *" kafka "*|*" kafka-ordered "*|*" sni "*|*" sni-ordered "*|*" single "*|*" single-ordered "*|*" direct "*|*" proxy-auth "*|*" pass-through "*|*" secure-direct "*) return 0 ;; esac; return 1; }
# backend_mode BACKEND: the testenv/kafka mode behind it (none for dev)
backend_mode() {
  case "$1" in
    kafka|kafka-ordered|sni|sni-ordered|single|single-ordered|direct) echo "$KAFKA_MODE" ;;
    proxy-auth|pass-through|secure-direct) echo "$SECURE_MODE" ;;
  esac
}

mkdir -p "$RESULTS"
RUN_ID="$(date +%H%M%S)$$"
PROXY_PID=""; KAFKA_UP="" # KAFKA_UP: the testenv/kafka mode this run started
TIMINGS=()
stop_kafka() {
  [ -n "$KAFKA_UP" ] && "$ROOT/testenv/kafka/stop.sh" "$KAFKA_UP" >/dev/null 2>&1
  KAFKA_UP=""
}
cleanup() {
  stop_proxy
  stop_kafka
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timed() { # NAME CMD...: runs CMD, records its duration
  local name=$1 t0=$SECONDS rc; shift
  "$@"; rc=$?
  TIMINGS+=("$name: $((SECONDS - t0)) s$([ $rc = 0 ] || echo " (failed)")")
  return $rc
}

# ------------------------------------------------------------------ installs
install_kafka() { "$ROOT/testenv/kafka/install.sh" >/dev/null; }
build_go() {
  (cd "$ROOT" && go build -o "$BIN/inorder" ./cmd/inorder) &&
  (cd "$COMPAT/go" && go build -o "$BIN/compat-go" .)
}
install_python() {
  local py stamp want
  py="$(command -v python3.11 || command -v python3)"
  want="$(sha256sum "$COMPAT/python/requirements.txt" | cut -c1-16) $("$py" -c 'import sys;print("%d.%d"%sys.version_info[:2])')"
  stamp="$VENV/.inorder-requirements"
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
  rm -rf "$VENV" && "$py" -m venv "$VENV" &&
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$COMPAT/python/requirements.txt" &&
    echo "$want" >"$stamp"
}
install_node() {
  if [ -d "$COMPAT/node/node_modules/kafkajs" ] && [ "$COMPAT/node/node_modules/.package-lock.json" -nt "$COMPAT/node/package-lock.json" ]; then return 0; fi
  (cd "$COMPAT/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
install_kcat() {
  command -v kcat >/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then log "kcat missing and not root: apt-get install kcat"; return 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
}
build_java() {
  local cls="$COMPAT/java/target/classes/inorder/compat/Workload.class"
  if [ -f "$cls" ] && [ -z "$(find "$COMPAT/java/src" "$COMPAT/java/pom.xml" -newer "$cls" 2>/dev/null)" ] && [ -d "$COMPAT/java/target/libs" ]; then return 0; fi
  (cd "$COMPAT/java" && mvn -B -q package -DskipTests >"$RESULTS/java-build.log" 2>&1) || { tail -n 30 "$RESULTS/java-build.log" >&2; return 1; }
}

SETUP_FAIL=()
setup() {
  local t0=$SECONDS
  timed "build inorder + compat-go" build_go || SETUP_FAIL+=("go build")
  # the workloads' own checks must be able to fail (compat/go/common_test.go)
  timed "compat-go self-test" bash -c "cd '$COMPAT/go' && go test -count=1 ./... >'$RESULTS/compat-go-test.log' 2>&1" ||
    { SETUP_FAIL+=("compat-go self-test"); cat "$RESULTS/compat-go-test.log" >&2; }
  if needs_kafka; then timed "install Kafka $KAFKA_VERSION (Maven)" install_kafka || SETUP_FAIL+=("kafka install"); fi
  if has java || has java848; then timed "build java workload (Maven)" build_java || SETUP_FAIL+=("java build"); fi
  if has confluent || has kafkapython; then timed "python venv (pip)" install_python || SETUP_FAIL+=("python venv"); fi
  if has kafkajs; then timed "kafkajs (npm ci)" install_node || SETUP_FAIL+=("npm ci"); fi
  if has kcat; then timed "kcat (apt)" install_kcat || SETUP_FAIL+=("kcat install"); fi
  TIMINGS+=("setup total: $((SECONDS - t0)) s")
  if ! command -v ss >/dev/null; then
    log "ss (iproute2) not found: the direct-connection sampling is off"
    TIMINGS+=("note: ss (iproute2) not found, direct-connection sampling off")
  fi
}

# ------------------------------------------------------------------ backends
port_wait() { # PORT SECONDS PID
  local end=$((SECONDS + $2))
  until port_open "$1"; do
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then return 1; fi
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
stop_proxy() {
  [ -n "$PROXY_PID" ] || return 0
  kill -TERM "$PROXY_PID" 2>/dev/null
  local end=$((SECONDS + 20))
  while kill -0 "$PROXY_PID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
  kill -KILL "$PROXY_PID" 2>/dev/null
  wait "$PROXY_PID" 2>/dev/null
  PROXY_PID=""
}
start_kafka() { # MODE: one Kafka at a time (two clusters would share 2 cores)
  [ "$KAFKA_UP" = "$1" ] && return 0
  stop_kafka
  if KAFKA_BOOT="$("$ROOT/testenv/kafka/start.sh" "$1" 2>"$RESULTS/kafka-start-$1.log")"; then
    KAFKA_UP=$1
  else
    cat "$RESULTS/kafka-start-$1.log" >&2; return 1
  fi
}
# The sni columns: the proxy's names, a CA and a certificate for them, and a
# hosts file sending every name to the loopback address, as DNS would send
# them to a load balancer. The names are not in any DNS; each client is
# pointed at them the way it allows (sni_client).
SNI_DIR="$RESULTS/sni"
SNI_DOMAIN=kafka.test
# make_proxy_cert DIR CA_NAME CN SAN: DIR afresh (mode 700) with a CA
# (ca.crt, ca.key) and the proxy's certificate it signs (proxy.crt,
# proxy.key) for the names in SAN (openssl's subjectAltName syntax).
make_proxy_cert() {
  rm -rf "$1" && mkdir -p "$1" && chmod 700 "$1"
  (
    cd "$1" || exit 1
    set -e
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj "/CN=$2" -days 2 -out ca.crt \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout proxy.key -subj "/CN=$3" -out proxy.csr 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$4" >proxy.ext
    openssl x509 -req -in proxy.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile proxy.ext -out proxy.crt 2>/dev/null
    chmod 600 proxy.key ca.key
    rm -f proxy.csr proxy.ext ca.srl
  )
}
make_sni_names() { # NODE_IDS...
  local n
  make_proxy_cert "$SNI_DIR" "inorder compat sni CA" "*.$SNI_DOMAIN" "DNS:*.$SNI_DOMAIN" || return 1
  {
    printf '127.0.0.1 bootstrap.%s' "$SNI_DOMAIN"
    for n in "$@"; do printf ' broker-%s.%s' "$n" "$SNI_DOMAIN"; done
    echo
  } >"$SNI_DIR/hosts"
}
# How a private /etc/hosts is given to a client with no resolver setting of
# its own: a mount namespace (root, or unprivileged user namespaces).
SNI_NS=""
sni_namespace() {
  [ -n "$SNI_NS" ] && { [ "$SNI_NS" != none ]; return; }
  local try
  for try in "unshare --mount" "unshare --map-root-user --mount"; do
    if $try -- sh -c 'mount --bind "$0" /etc/hosts && grep -q "bootstrap.$1" /etc/hosts' "$SNI_DIR/hosts" "$SNI_DOMAIN" 2>/dev/null; then
      SNI_NS=$try; return 0
    fi
  done
  SNI_NS=none; return 1
}
# sni_client CLIENT: points the command in CMD at the proxy's names. Java
# and franz-go take a hosts file themselves; every other client resolves
# through the C library (librdkafka, Node, Python) or Go's resolver, which
# read /etc/hosts, so they run with a private one.
sni_client() {
  case "$1" in
    java|java848) # after the java executable (java848's command starts with env)
      local i out=()
      for i in "${CMD[@]}"; do
        out+=("$i")
        [ "$i" = java ] && out+=("-Djdk.net.hosts.file=$SNI_DIR/hosts")
      done
      CMD=("${out[@]}") ;;
    kgo) ;; # COMPAT_HOSTS_FILE: its Dialer resolves the names
    *)
      if ! sni_namespace; then
        CMD=(sh -c 'echo "FAIL names: this client takes no hosts file and no mount namespace is available to give it one (needs root or unprivileged user namespaces)"; echo "RESULT fail"; exit 1')
        return
      fi
      CMD=($SNI_NS -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$SNI_DIR/hosts" "${CMD[@]}")
      case "$1" in
        confluent|kcat) SECNOTE="names: librdkafka has no resolver hook here (kcat, confluent-kafka); it resolved the proxy's names from a private /etc/hosts in a mount namespace ($SNI_NS)" ;;
      esac ;;
  esac
}
# The client-* columns: `inorder dev` authenticating its clients itself,
# with an ACL file (--acl-file) that allows the one principal the column's
# clients authenticate as, and super users that do not include it: a pass
# shows the proxy established that identity, not merely let the client in.
# The CA, certificates, passwords, credentials file, JWKS and tokens are
# made for the run in compat/results/<column>/, for that principal and for
# a second one (compat-other) that the ACL does not name, which must be
# denied (client_auth_denial_check).
OAUTH_ISSUER=https://issuer.compat.test
OAUTH_AUDIENCE=inorder-compat
client_auth_principal() { echo "compat-${1#client-}"; } # COLUMN -> user name
CLIENT_AUTH_OTHER=compat-other
client_auth_port() {
  case "$1" in client-scram) echo 26100 ;; client-plain) echo 26200 ;; client-oauth) echo 26300 ;; client-mtls) echo 26400 ;; esac
}
make_client_auth() { # COLUMN
  local b=$1 d="$RESULTS/$1" user
  user="$(client_auth_principal "$b")"
  make_proxy_cert "$d" "inorder compat $b CA" localhost "IP:127.0.0.1,DNS:localhost" || return 1
  (
    cd "$d" || exit 1
    set -e
    for u in "$user" "$CLIENT_AUTH_OTHER"; do
      case "$b" in
        client-mtls)
          # subject CN=Compat-MTLS,O=Inorder Compat; the mapping rule makes it User:compat-mtls
          openssl req -newkey rsa:2048 -nodes -keyout "$u.key" -subj "/O=Inorder Compat/CN=${u^}" -out "$u.csr" 2>/dev/null
          printf 'extendedKeyUsage=clientAuth\n' >client.ext
          openssl x509 -req -in "$u.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out "$u.crt" 2>/dev/null ;;
        client-scram|client-plain)
          (umask 077 && openssl rand -hex 16 >"$u.password")
          "$BIN/inorder" credentials add --file credentials.yaml --user "$u" \
            --mechanism SCRAM-SHA-256 --mechanism SCRAM-SHA-512 --password-file "$u.password" >/dev/null ;;
      esac
    done
    chmod 600 ./*.key
    rm -f ./*.csr client.ext ca.srl
    [ "$b" != client-oauth ] || "$BIN/compat-go" mint-jwt "$d" "$OAUTH_ISSUER" "$OAUTH_AUDIENCE" "$user" "$CLIENT_AUTH_OTHER"
    {
      echo "acls:"
      for r in TOPIC:'"*"' GROUP:'"*"' TRANSACTIONAL_ID:'"*"' CLUSTER:kafka-cluster; do
        printf '  - principal: User:%s\n    resourceType: %s\n    resourceName: %s\n    operation: ALL\n' "$user" "${r%%:*}" "${r#*:}"
      done
    } >acl.yaml
  )
}
# client_auth_env CLIENT COLUMN [USER] -> SECENV, AUTH_MECH (the mechanism the proxy must count)
client_auth_env() {
  local d="$RESULTS/$2" user=${3:-}
  [ -n "$user" ] || user="$(client_auth_principal "$2")"
  case "$2" in
    client-scram)
      # both SCRAM mechanisms, as in the secure columns
      case "$1" in java|kgo|kafkago|kafkapython) AUTH_MECH=SCRAM-SHA-512 ;; *) AUTH_MECH=SCRAM-SHA-256 ;; esac
      SECENV=(COMPAT_SASL_MECHANISM=$AUTH_MECH COMPAT_SASL_USERNAME="$user" COMPAT_SASL_PASSWORD="$(cat "$d/$user.password")") ;;
    client-plain)
      AUTH_MECH=PLAIN
      SECENV=(COMPAT_TLS_CA="$d/ca.crt" COMPAT_SASL_MECHANISM=PLAIN COMPAT_SASL_USERNAME="$user" COMPAT_SASL_PASSWORD="$(cat "$d/$user.password")") ;;
    client-oauth)
      AUTH_MECH=OAUTHBEARER
      SECENV=(COMPAT_TLS_CA="$d/ca.crt" COMPAT_SASL_MECHANISM=OAUTHBEARER COMPAT_OAUTH_TOKEN_FILE="$d/token-$user") ;;
    client-mtls)
      AUTH_MECH=""
      SECENV=(COMPAT_TLS_CA="$d/ca.crt" COMPAT_TLS_CERT="$d/$user.crt" COMPAT_TLS_KEY="$d/$user.key") ;;
  esac
  [ "$2,$1" != client-oauth,kafkago ] ||
    SECNOTE="oauth: kafka-go has no OAUTHBEARER; the workload implements it as a kafka-go sasl.Mechanism (RFC 7628's initial response with the token)"
  # the legacy flow (SaslHandshake v0, raw tokens) from the clients that can send it
  case "$2,$1" in client-scram,kafkapython|client-scram,sarama|client-plain,kafkapython|client-plain,sarama) SECENV+=(COMPAT_SASL_HANDSHAKE=v0) ;; esac
}
# The ACL is in force: franz-go, authenticated as the principal the ACL
# does not name, must be refused creating a topic (a further check).
client_auth_denial_check() { # COLUMN
  local out rc
  client_auth_env kgo "$1" "$CLIENT_AUTH_OTHER"
  out="$(env "${SECENV[@]}" timeout 60 "$BIN/compat-go" create-topics "$BOOT" "m$RUN_ID-denied:1" 2>&1)"; rc=$?
  out="$(echo "$out" | tail -n 1)"
  # its connections' close lines (naming it) must come before the first
  # row's: wait until they stop coming (the proxy logs each as it sees the
  # connection end, milliseconds after the process exits)
  local n last=-1
  for _ in $(seq 25); do
    n=$(grep -c "principal=User:$CLIENT_AUTH_OTHER\b" "$PROXYLOG")
    [ "$n" -gt 0 ] && [ "$n" = "$last" ] && break
    last=$n; sleep 0.2
  done
  if ! grep -q "principal=User:$CLIENT_AUTH_OTHER\b" "$PROXYLOG"; then
    EXTRA+=("$1, franz-go as User:$CLIENT_AUTH_OTHER: **FAIL**: the proxy log never names that principal")
    EXTRA_FAILS=$((EXTRA_FAILS + 1))
  elif [ $rc != 0 ] && [[ "$out" == *AUTHORIZATION_FAILED* ]]; then
    EXTRA+=("$1, franz-go as User:$CLIENT_AUTH_OTHER (authenticated, not in the ACL): refused as it must be ($out)")
  else
    EXTRA+=("$1, franz-go as User:$CLIENT_AUTH_OTHER (authenticated, not in the ACL): **FAIL**: want a refusal with *_AUTHORIZATION_FAILED, got exit $rc: $out")
    EXTRA_FAILS=$((EXTRA_FAILS + 1))
  fi
}
# What the proxy says about a row's clients: the admin endpoint's
# authentication counters and the principals its (debug) log names.
client_auth_metric() { # FILTER: the sum of inorder_client_authentications_total over lines matching FILTER
  curl -sf --max-time 5 "http://127.0.0.1:$(( $(client_auth_port "$B_CUR") + 9 ))/metrics" |
    awk -v f="$1" '/^inorder_client_authentications_total\{/ && $0 ~ f { s += $NF } END { print s + 0 }'
}
client_auth_mark() { # before a row
  AUTH_LINES=$(wc -l <"$PROXYLOG")
  AUTH_OK0=$(client_auth_metric "mechanism=\"$AUTH_MECH\".*result=\"success\"")
  AUTH_BAD0=$(client_auth_metric 'result="failure"')
}
client_auth_check() { # LOGFILE, after a row: prints FAIL lines, or nothing
  local user ok bad seen others
  user="User:$(client_auth_principal "$B_CUR")"
  # the proxy logs a connection's close just after the client's process ended
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    tail -n +$((AUTH_LINES + 1)) "$PROXYLOG" | grep -q "principal=$user\b" && break
    sleep 0.2
  done
  seen=$(tail -n +$((AUTH_LINES + 1)) "$PROXYLOG" | grep -c "principal=$user\b")
  others=$(tail -n +$((AUTH_LINES + 1)) "$PROXYLOG" | grep -o 'principal=[^ ]*' | grep -v "^principal=$user\$" | sort | uniq -c | tr '\n' ' ')
  echo "INFO proxy: $seen log lines name principal=$user${others:+; others: $others}" >>"$1"
  [ "$seen" -gt 0 ] || echo "FAIL proxy-identity: the proxy log names no connection of $user"
  [ -z "$others" ] || echo "FAIL proxy-identity: the proxy log names other principals: $others"
  [ -n "$AUTH_MECH" ] || return 0
  ok=$(( $(client_auth_metric "mechanism=\"$AUTH_MECH\".*result=\"success\"") - AUTH_OK0 ))
  bad=$(( $(client_auth_metric 'result="failure"') - AUTH_BAD0 ))
  echo "INFO proxy: inorder_client_authentications_total{mechanism=\"$AUTH_MECH\",result=\"success\"} +$ok, failures +$bad" >>"$1"
  [ "$ok" -gt 0 ] || echo "FAIL proxy-identity: the proxy counted no $AUTH_MECH authentication"
  [ "$bad" = 0 ] || echo "FAIL proxy-identity: the proxy counted $bad failed authentications"
}
# Secure columns: the testenv's CA, certificates and passwords.
secrets_dir() { echo "$KAFKA_RUN_DIR/$SECURE_MODE/secrets"; }
# secure_env CLIENT BACKEND -> SECENV (env assignments for the client)
secure_env() {
  local s mech
  s="$(secrets_dir)"
  SECENV=(); SECNOTE=""
  case "$2" in
    sni|sni-ordered)
      SECENV=(COMPAT_TLS_CA="$SNI_DIR/ca.crt" COMPAT_HOSTS_FILE="$SNI_DIR/hosts")
      sni_client "$1"
      return 0 ;;
    pass-through|secure-direct) ;;
    client-scram|client-plain|client-oauth|client-mtls) client_auth_env "$1" "$2"; return 0 ;;
    *) return 0 ;;
  esac
  # Both SCRAM mechanisms are covered: each client uses one.
  case "$1" in
    java|kgo|kafkago|kafkapython) mech=SCRAM-SHA-512 ;;
    java848|sarama|confluent|kafkajs) mech=SCRAM-SHA-256 ;;
    kcat) mech=PLAIN
      SECNOTE="sasl: kcat's librdkafka (2.0.2, Debian) fails SCRAM against Kafka 4.x (a nonce bug fixed in librdkafka 2.6.1), so kcat uses PLAIN over TLS" ;;
  esac
  SECENV=(COMPAT_TLS_CA="$s/ca.crt" COMPAT_SASL_MECHANISM="$mech" COMPAT_SASL_USERNAME=client
    COMPAT_SASL_PASSWORD="$(cat "$s/client.password")")
  # The legacy flow (SaslHandshake v0, raw tokens) from the clients that can send it.
  case "$1" in kafkapython|sarama) SECENV+=(COMPAT_SASL_HANDSHAKE=v0) ;; esac
}
# start_backend NAME: sets BOOT, EXPECT, RF; the proxy log is $RESULTS/proxy-NAME.log
start_backend() {
  local b=$1 port nodes n
  PROXYLOG="$RESULTS/proxy-$b.log"; : >"$PROXYLOG"
  # Leader moves (Java and Go workloads) need the 3-node Kafka cluster.
  LEADER_MOVE=""; AUTO_CREATE=""
  # The move itself (AlterPartitionReassignments) names brokers, which the
  # single endpoint refuses; the single columns move no leader.
  case "$b" in dev|client-*|single|single-ordered) ;; *) [ "$KAFKA_MODE" = cluster ] && LEADER_MOVE=1 ;; esac
  local s; s="$(secrets_dir)"
  case "$b" in
    direct|secure-direct)
      start_kafka "$(backend_mode "$b")" || return 1
      BOOT="$KAFKA_BOOT"; EXPECT="-"; RF=$([ "$KAFKA_MODE" = cluster ] && echo 3 || echo 1) ;;
    proxy-auth|pass-through)
      start_kafka "$SECURE_MODE" || return 1
      port=$([ "$b" = proxy-auth ] && echo 21500 || echo 21600)
      [ "$KAFKA_MODE" = single ] && port=$((port + 200))
      local sec=(--upstream-tls --upstream-tls-ca "$s/ca.crt")
      if [ "$b" = proxy-auth ]; then
        sec+=(--upstream-sasl-mechanism SCRAM-SHA-512 --upstream-sasl-username inorder
          --upstream-sasl-password-file "$s/inorder.password")
      else
        # the broker's certificate (SANs 127.0.0.1, localhost) serves the proxy's listeners too
        sec+=(--tls-cert "$s/broker.crt" --tls-key "$s/broker.key")
      fi
      "$BIN/inorder" serve --listen "127.0.0.1:$port" --upstream "$KAFKA_BOOT" "${sec[@]}" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      BOOT="127.0.0.1:$port"; EXPECT="127.0.0.1:$port"
      for n in $(mode_nodes "$SECURE_MODE"); do EXPECT="$EXPECT,127.0.0.1:$((port + 1 + n))"; done
      RF=$([ "$KAFKA_MODE" = cluster ] && echo 3 || echo 1) ;;
    sni|sni-ordered)
      start_kafka "$KAFKA_MODE" || return 1
      port=$([ "$b" = sni ] && echo 21900 || echo 21950)
      [ "$KAFKA_MODE" = single ] && port=$((port - 400))
      nodes="$(mode_nodes "$KAFKA_MODE")"
      make_sni_names $nodes || { log "could not make the sni certificate (openssl)"; return 1; }
      "$BIN/inorder" serve --listen "127.0.0.1:$port" --upstream "$KAFKA_BOOT" --topology sni \
        --tls-cert "$SNI_DIR/proxy.crt" --tls-key "$SNI_DIR/proxy.key" \
        --sni-bootstrap "bootstrap.$SNI_DOMAIN" --sni-node-pattern "broker-{id}.$SNI_DOMAIN" \
        --upstream-ordering "$([ "$b" = sni ] && echo none || echo connection)" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      BOOT="bootstrap.$SNI_DOMAIN:$port"; EXPECT="$BOOT"
      for n in $nodes; do EXPECT="$EXPECT,broker-$n.$SNI_DOMAIN:$port"; done
      RF=$([ "$KAFKA_MODE" = cluster ] && echo 3 || echo 1) ;;
    kafka|kafka-ordered)
      start_kafka "$KAFKA_MODE" || return 1
      port=$([ "$b" = kafka ] && echo 21100 || echo 21300)
      [ "$KAFKA_MODE" = single ] && port=$((port - 100))
      "$BIN/inorder" serve --listen "127.0.0.1:$port" --upstream "$KAFKA_BOOT" \
        --upstream-ordering "$([ "$b" = kafka ] && echo none || echo connection)" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      nodes="$(mode_nodes "$KAFKA_MODE")"
      BOOT="127.0.0.1:$port"; EXPECT="127.0.0.1:$port"
      for n in $nodes; do EXPECT="$EXPECT,127.0.0.1:$((port + 1 + n))"; done
      RF=$([ "$KAFKA_MODE" = cluster ] && echo 3 || echo 1) ;;
    single|single-ordered)
      start_kafka "$KAFKA_MODE" || return 1
      port=$([ "$b" = single ] && echo 22000 || echo 22100)
      [ "$KAFKA_MODE" = single ] && port=$((port + 10))
      "$BIN/inorder" serve --listen "127.0.0.1:$port" --upstream "$KAFKA_BOOT" --topology single \
        --upstream-ordering "$([ "$b" = single ] && echo none || echo connection)" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      # the one address, and no other
      BOOT="127.0.0.1:$port"; EXPECT="127.0.0.1:$port"
      RF=$([ "$KAFKA_MODE" = cluster ] && echo 3 || echo 1) ;;
    client-scram|client-plain|client-oauth|client-mtls)
      port="$(client_auth_port "$b")"
      make_client_auth "$b" || { log "could not make the $b certificates, credentials or token"; return 1; }
      local d="$RESULTS/$b" auth=()
      case "$b" in
        client-scram) auth=(--client-sasl-mechanisms SCRAM-SHA-256,SCRAM-SHA-512 --client-credentials "$d/credentials.yaml") ;;
        client-plain) auth=(--tls-cert "$d/proxy.crt" --tls-key "$d/proxy.key"
          --client-sasl-mechanisms PLAIN --client-credentials "$d/credentials.yaml") ;;
        client-oauth) auth=(--tls-cert "$d/proxy.crt" --tls-key "$d/proxy.key" --client-sasl-mechanisms OAUTHBEARER
          --client-oauth-jwks "$d/jwks.json" --client-oauth-issuer "$OAUTH_ISSUER" --client-oauth-audience "$OAUTH_AUDIENCE") ;;
        client-mtls) auth=(--tls-cert "$d/proxy.crt" --tls-key "$d/proxy.key" --tls-client-ca "$d/ca.crt"
          --tls-principal-mapping-rules 'RULE:^CN=([^,]*),.*$/$1/L,DEFAULT') ;;
      esac
      # debug: every closed connection's log line names its principal
      "$BIN/inorder" dev --listen "127.0.0.1:$port" --data-dir "" --admin-listen "127.0.0.1:$((port + 9))" --log-level debug \
        "${auth[@]}" --acl-file "$d/acl.yaml" --super-users "User:admin" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      BOOT="127.0.0.1:$port"; EXPECT="127.0.0.1:$port,127.0.0.1:$((port + 1))-$((port + 3))"; RF=1
      AUTO_CREATE=1 ;;
    dev)
      port=21200
      "$BIN/inorder" dev --listen "127.0.0.1:$port" --data-dir "" >"$PROXYLOG" 2>&1 &
      PROXY_PID=$!
      BOOT="127.0.0.1:$port"; EXPECT="127.0.0.1:$port,127.0.0.1:$((port + 1))-$((port + 3))"; RF=1
      AUTO_CREATE=1 ;; # dev's --default-partitions
  esac
  if [ -n "$PROXY_PID" ] && ! port_wait "${BOOT##*:}" 30 "$PROXY_PID"; then
    log "proxy for $b did not start; log $PROXYLOG:"; tail -n 20 "$PROXYLOG" >&2
    stop_proxy; return 1
  fi
}

# ------------------------------------------------------------------ rows
client_cmd() { # CLIENT BOOT PREFIX EXPECT -> CMD array
  case "$1" in
    java848) CMD=(env COMPAT_GROUP_PROTOCOL=consumer java -Xmx256m -XX:TieredStopAtLevel=1 -cp "$COMPAT/java/target/classes:$COMPAT/java/target/libs/*" inorder.compat.Workload "$2" "$3" "$4") ;;
    java) CMD=(java -Xmx256m -XX:TieredStopAtLevel=1 -cp "$COMPAT/java/target/classes:$COMPAT/java/target/libs/*" inorder.compat.Workload "$2" "$3" "$4") ;;
    kgo|sarama|kafkago) CMD=("$BIN/compat-go" "$1" "$2" "$3" "$4") ;;
    confluent|kafkapython) CMD=("$VENV/bin/python" "$COMPAT/python/workload.py" "$1" "$2" "$3" "$4") ;;
    kafkajs) CMD=(node "$COMPAT/node/workload.js" "$2" "$3" "$4") ;;
    kcat) CMD=("$COMPAT/kcat/workload.sh" "$2" "$3" "$4") ;;
  esac
}

declare -A CELL DETAIL SECS
FAILS=0
# Independent of what the client reports: while a row runs behind the proxy,
# sample the established TCP connections to the Kafka nodes' ports; every one
# must belong to the proxy or to a Kafka node itself (inter-broker traffic).
direct_filter() { # MODE -> ss -tnp state established (...) for every port of its nodes
  local n p f="" sep=""
  for n in $(mode_nodes "$1"); do
    for p in $(node_ports "$1" "$n"); do f="$f$sep dport = :$p"; sep=" or"; done
  done
  echo "($f )"
}
start_sampler() { # LOGFILE
  SAMPLER_PID=""
  case "$B_CUR" in kafka|kafka-ordered|sni|sni-ordered|single|single-ordered|proxy-auth|pass-through) ;; *) return 0 ;; esac
  local filt; filt="$(direct_filter "$(backend_mode "$B_CUR")")"
  ( while :; do ss -tnpH state established "$filt" 2>/dev/null; sleep 0.2; done ) >"$1" &
  SAMPLER_PID=$!
}
stop_sampler() { # LOGFILE -> prints offending connections
  [ -n "$SAMPLER_PID" ] || return 0
  kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null; SAMPLER_PID=""
  local allowed="$PROXY_PID" n f
  for f in "$KAFKA_RUN_DIR/$(backend_mode "$B_CUR")"/node*/pid; do [ -f "$f" ] && allowed="$allowed $(cat "$f")"; done
  local re; re="$(echo $allowed | sed 's/ /|/g')"
  # lines without an owner are sockets caught while opening or closing
  grep 'users:' "$1" | grep -vE "pid=($re)," | awk '{print $3, $4, $5}' | sort -u | head -n 5
}
attempt() { # CLIENT BACKEND LOG -> rc
  local c=$1 b=$2 logf=$3 prefix rc bad
  prefix="m$RUN_ID-$c-$b-$((++ATTEMPTS))"
  client_cmd "$c" "$BOOT" "$prefix" "$EXPECT"
  secure_env "$c" "$b" # may wrap CMD (the sni columns)
  start_sampler "$logf.conns"
  case "$b" in client-*) client_auth_mark ;; esac
  env "${SECENV[@]}" COMPAT_RF=$RF COMPAT_LEADER_MOVE=$LEADER_MOVE COMPAT_AUTO_CREATE=$AUTO_CREATE COMPAT_GO="$BIN/compat-go" timeout -k 10 "$ROW_TIMEOUT" "${CMD[@]}" >"$logf" 2>"$logf.stderr"
  rc=$?
  # a limitation of the client's security support that the workload cannot know
  [ -z "$SECNOTE" ] || echo "LIMIT $SECNOTE" >>"$logf"
  case "$b" in
    client-*)
      bad="$(client_auth_check "$logf")"
      if [ -n "$bad" ]; then
        echo "$bad" >>"$logf"
        echo "RESULT fail $c: the proxy did not show the client's identity" >>"$logf"
        rc=1
      fi ;;
  esac
  bad="$(stop_sampler "$logf.conns")"
  if [ -n "$bad" ]; then
    echo "FAIL direct-connections: connections to Kafka that bypass the proxy: $(echo "$bad" | tr '\n' ';')" >>"$logf"
    echo "RESULT fail $c: connected to Kafka directly" >>"$logf"
    rc=1
  else
    rm -f "$logf.conns"
  fi
  return $rc
}
# unsupported CLIENT BACKEND: why the client cannot run in that column at
# all (its cell says so and the row does not count as run); false otherwise.
unsupported() {
  case "$2,$1" in
    client-scram,kcat) echo "kcat's librdkafka (2.0.2, Debian) sends a SCRAM client-final-message with an invalid nonce (fixed in librdkafka 2.6.1, confluentinc/librdkafka#4895), which the proxy refuses as Kafka 4.x does; confluent-kafka's librdkafka 2.16 passes this column, and kcat's PLAIN is tested in client-plain" ;;
    client-oauth,kcat) echo "kcat passes librdkafka no token callback, and Debian's librdkafka 2.0.2 is built without OIDC (libcurl), so its only OAUTHBEARER token is the unsecured one (alg none), which the proxy refuses as it must; confluent-kafka's librdkafka 2.16 (oauth_cb) passes this column" ;;
    *) return 1 ;;
  esac
}
ATTEMPTS=0
NOT_SUPPORTED=0
run_row() { # CLIENT BACKEND
  local c=$1 b=$2 logf t0 rc res first="" why plines
  logf="$RESULTS/$b-$c.log"
  t0=$SECONDS
  if why="$(unsupported "$c" "$b")"; then
    CELL[$c,$b]="not supported by the client"; DETAIL[$c,$b]="not run: $why"; SECS[$c,$b]=0
    NOT_SUPPORTED=$((NOT_SUPPORTED + 1))
    log "row $c x $b: not supported by the client"
    return
  fi
  log "row $c x $b"
  plines=$(wc -l <"$PROXYLOG" 2>/dev/null || echo 0)
  attempt "$c" "$b" "$logf"; rc=$?
  res="$(grep '^RESULT ' "$logf" | tail -n1)"
  if { [ $rc != 0 ] || [[ "$res" != "RESULT pass"* ]]; } && [[ " $RETRY_CLIENTS " == *" $c "* ]]; then
    first="$(grep -E '^FAIL ' "$logf" | head -n 3 | tr '\n' ' ')"; [ -n "$first" ] || first="rc $rc"
    mv "$logf" "$logf.attempt1"; mv "$logf.stderr" "$logf.attempt1.stderr"
    log "  attempt 1 failed ($first); retrying once (known intermittent client bug)"
    attempt "$c" "$b" "$logf"; rc=$?
    res="$(grep '^RESULT ' "$logf" | tail -n1)"
  fi
  SECS[$c,$b]=$((SECONDS - t0))
  if [ $rc = 0 ] && [[ "$res" == "RESULT pass"* ]]; then
    if grep -q '^LIMIT ' "$logf" || [ -n "$first" ]; then
      CELL[$c,$b]="pass, with limitations"
      DETAIL[$c,$b]="$(grep '^LIMIT ' "$logf" | sed 's/^LIMIT /limitation: /' | sort -u)"
      if [ -n "$first" ]; then
        CELL[$c,$b]="pass on 2nd attempt"
        DETAIL[$c,$b]="$(printf '%s\n%s' "first attempt failed (known intermittent client bug, see compat/README.md): $first" "${DETAIL[$c,$b]}")"
      fi
    else
      CELL[$c,$b]="pass"; DETAIL[$c,$b]=""
    fi
    log "  ${CELL[$c,$b]} (${SECS[$c,$b]} s)"
  else
    FAILS=$((FAILS + 1))
    if [ $rc = 124 ] || [ $rc = 137 ]; then
      CELL[$c,$b]="FAIL: row timed out after ${ROW_TIMEOUT} s"
    else
      CELL[$c,$b]="FAIL"
    fi
    DETAIL[$c,$b]="$( (grep -E '^(FAIL|LIMIT) ' "$logf"; [ -n "$res" ] || tail -n 5 "$logf.stderr") | head -n 12)"
    log "  FAIL (rc $rc, ${SECS[$c,$b]} s); log $logf"
    grep -E '^(STEP|INFO|FAIL|LIMIT|RESULT)' "$logf" | tail -n 12 >&2
    # a row ended by its timeout: the workload's stack dump, where it has one
    tail -n "$({ [ $rc = 124 ] || [ $rc = 137 ]; } && echo 40 || echo 5)" "$logf.stderr" >&2
    # what the proxy warned of while the row ran
    if [ -s "$PROXYLOG" ]; then
      tail -n "+$((plines + 1))" "$PROXYLOG" | grep -E 'level=(WARN|ERROR)' | tail -n 8 | sed 's/^/proxy: /' >&2
    fi
  fi
}

backend_title() {
  case "$1" in
    kafka) echo "Apache Kafka $KAFKA_VERSION ($KAFKA_MODE) + inorder serve" ;;
    kafka-ordered) echo "Apache Kafka $KAFKA_VERSION ($KAFKA_MODE) + inorder serve --upstream-ordering connection" ;;
    sni) echo "SNI, one port: Apache Kafka $KAFKA_VERSION ($KAFKA_MODE) + inorder serve --topology sni (every broker on one TLS port, by server name; names: Java -Djdk.net.hosts.file, franz-go its Dialer, the others a private /etc/hosts)" ;;
    sni-ordered) echo "SNI, one port, --upstream-ordering connection" ;;
    single) echo "Apache Kafka $KAFKA_VERSION ($KAFKA_MODE) + inorder serve --topology single (single endpoint)" ;;
    single-ordered) echo "Apache Kafka $KAFKA_VERSION ($KAFKA_MODE) + inorder serve --topology single --upstream-ordering connection (single endpoint)" ;;
    dev) echo "inorder dev (kfake)" ;;
    client-scram) echo "inorder dev authenticating clients: SCRAM-SHA-256/512 (SASL_PLAINTEXT), ACL for the one user" ;;
    client-plain) echo "inorder dev authenticating clients: PLAIN over TLS, ACL for the one user" ;;
    client-oauth) echo "inorder dev authenticating clients: OAUTHBEARER (JWT, JWKS file) over TLS, ACL for the one subject" ;;
    client-mtls) echo "inorder dev authenticating clients: mutual TLS (subject mapped by --tls-principal-mapping-rules), ACL for the one principal" ;;
    direct) echo "Apache Kafka $KAFKA_VERSION ($KAFKA_MODE), no proxy" ;;
    proxy-auth) echo "Apache Kafka $KAFKA_VERSION ($SECURE_MODE, SASL_SSL) + inorder serve authenticating (clients plaintext, no credentials; TLS + SCRAM-SHA-512 upstream)" ;;
    pass-through) echo "Apache Kafka $KAFKA_VERSION ($SECURE_MODE, SASL_SSL) + inorder serve passing SASL through (clients TLS + their own SCRAM; TLS upstream)" ;;
    secure-direct) echo "Apache Kafka $KAFKA_VERSION ($SECURE_MODE, SASL_SSL), no proxy" ;;
  esac
}
client_title() {
  case "$1" in
    java848) echo "kafka-clients $(sed -n 's:.*<kafka.clients.version>\(.*\)</kafka.clients.version>.*:\1:p' "$COMPAT/java/pom.xml") (Java), group.protocol=consumer (KIP-848)" ;;
    java) echo "kafka-clients $(sed -n 's:.*<kafka.clients.version>\(.*\)</kafka.clients.version>.*:\1:p' "$COMPAT/java/pom.xml") (Java)" ;;
    kgo) echo "franz-go $(awk '$1=="github.com/twmb/franz-go"{print $2}' "$COMPAT/go/go.mod") (Go)" ;;
    sarama) echo "IBM/sarama $(awk '$1=="github.com/IBM/sarama"{print $2}' "$COMPAT/go/go.mod") (Go)" ;;
    kafkago) echo "segmentio/kafka-go $(awk '$1=="github.com/segmentio/kafka-go"{print $2}' "$COMPAT/go/go.mod") (Go)" ;;
    confluent) echo "confluent-kafka $(sed -n 's/^confluent-kafka==//p' "$COMPAT/python/requirements.txt") (Python, librdkafka)" ;;
    kafkapython) echo "kafka-python $(sed -n 's/^kafka-python==//p' "$COMPAT/python/requirements.txt") (Python)" ;;
    kafkajs) echo "kafkajs $(sed -n 's/.*"kafkajs": "\(.*\)".*/\1/p' "$COMPAT/node/package.json") (Node $(node --version 2>/dev/null))" ;;
    kcat) echo "kcat $(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\).*librdkafka \([^ ]*\).*/\1, librdkafka \2/p') (Debian)" ;;
  esac
}

write_matrix() {
  local b c cell tmp="$MATRIX.tmp"
  {
    echo "# Client compatibility matrix"
    echo
    echo "Generated by \`compat/run-matrix.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') at commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)\`$(git -C "$ROOT" diff --quiet HEAD -- proxy cmd wire rewrite ordering 2>/dev/null || echo ' (with local changes)'). Do not edit by hand."
    echo "Workload and checks: see compat/README.md. Cells: **pass**; **pass, with limitations** (a step the client cannot do as specified; see notes); **not supported by the client** (the client cannot authenticate that way at all; not run, see notes); **FAIL** (see notes)."
    echo
    printf '| client |'; for b in $BACKENDS; do printf ' %s |' "$(backend_title "$b")"; done; echo
    printf '|---|'; for b in $BACKENDS; do printf -- '---|'; done; echo
    for c in $CLIENTS; do
      printf '| %s |' "$(client_title "$c")"
      for b in $BACKENDS; do
        cell="${CELL[$c,$b]:-not run}"
        case "$cell" in FAIL*) cell="**$cell**" ;; esac
        printf ' %s (%s s) |' "$cell" "${SECS[$c,$b]:-0}"
      done
      echo
    done
    echo
    echo "## Notes"
    for c in $CLIENTS; do
      local same=1 first="" fb=""
      for b in $BACKENDS; do
        if [ -z "$fb" ]; then fb=$b; first="${DETAIL[$c,$b]:-}"; elif [ "${DETAIL[$c,$b]:-}" != "$first" ]; then same=0; fi
      done
      if [ $same = 1 ] && [ -n "$first" ]; then
        echo
        echo "**$(client_title "$c")**, every backend (logs: \`compat/results/<backend>-$c.log\`)"
        echo
        echo "$first" | sed 's/^/- /; s/|/\\|/g'
        continue
      fi
      for b in $BACKENDS; do
        [ -n "${DETAIL[$c,$b]:-}" ] || continue
        echo
        echo "**$(client_title "$c")** × $b (log: \`compat/results/$b-$c.log\`)"
        echo
        echo "${DETAIL[$c,$b]}" | sed 's/^/- /; s/|/\\|/g'
      done
    done
    if [ ${#EXTRA[@]} -gt 0 ]; then
      echo
      echo "## Further checks"
      echo
      for e in "${EXTRA[@]}"; do echo "- $e"; done
    fi
    echo
    echo "## Timings"
    echo
    for t in "${TIMINGS[@]}"; do echo "- $t"; done
  } >"$tmp" && mv "$tmp" "$MATRIX"
}

# ------------------------------------------------------------------ further checks
# kafka-python's admin client through `inorder dev --topology single`
# (compat/python/single_admin.py): fresh clients' CreateTopics answered by
# the controller at once, while another client bootstraps with Metadata v0.
EXTRA=()
EXTRA_FAILS=0
single_admin_check() {
  local port=22200 log="$RESULTS/dev-single-admin.log" pid rc
  "$BIN/inorder" dev --listen "127.0.0.1:$port" --topology single --data-dir "" --admin-listen "" >"$RESULTS/proxy-dev-single.log" 2>&1 &
  pid=$!
  if ! port_wait "$port" 30 "$pid"; then
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    EXTRA+=("kafka-python admin client × dev --topology single: **FAIL**: the proxy did not start (compat/results/proxy-dev-single.log)")
    EXTRA_FAILS=$((EXTRA_FAILS + 1))
    return
  fi
  timeout -k 10 120 "$VENV/bin/python" "$COMPAT/python/single_admin.py" "127.0.0.1:$port" >"$log" 2>&1
  rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ $rc = 0 ]; then
    EXTRA+=("kafka-python admin client × dev --topology single: pass ($(tail -n 1 "$log"))")
  else
    EXTRA+=("kafka-python admin client × dev --topology single: **FAIL** (log: \`compat/results/dev-single-admin.log\`): $(grep '^FAIL' "$log" | head -n 3 | tr '\n' ' ')")
    EXTRA_FAILS=$((EXTRA_FAILS + 1))
  fi
}

# ------------------------------------------------------------------ main
T0=$SECONDS
setup
if [ ${#SETUP_FAIL[@]} -gt 0 ]; then
  log "setup failed: ${SETUP_FAIL[*]}"
  for t in "${TIMINGS[@]}"; do log "  $t"; done
  exit 1
fi
for b in $BACKENDS; do
  tb=$SECONDS
  if ! start_backend "$b"; then
    for c in $CLIENTS; do CELL[$c,$b]="FAIL: backend did not start"; SECS[$c,$b]=0; DETAIL[$c,$b]="see compat/results/proxy-$b.log, compat/results/kafka-start.log"; FAILS=$((FAILS + 1)); done
    continue
  fi
  TIMINGS+=("start $b: $((SECONDS - tb)) s")
  B_CUR=$b
  case "$b" in client-*) client_auth_denial_check "$b" ;; esac
  for c in $CLIENTS; do
    if [ $((SECONDS - T0)) -ge "$BUDGET" ]; then
      CELL[$c,$b]="FAIL: not run, matrix time budget (${BUDGET} s) spent"; SECS[$c,$b]=0; FAILS=$((FAILS + 1))
      continue
    fi
    run_row "$c" "$b"
    TIMINGS+=("row $c x $b: ${SECS[$c,$b]} s")
    if [ -n "$PROXY_PID" ] && ! kill -0 "$PROXY_PID" 2>/dev/null; then
      log "proxy for $b exited; log $PROXYLOG"; tail -n 20 "$PROXYLOG" >&2
      PROXY_PID=""
      start_backend "$b" || break
    fi
  done
  stop_proxy
  if grep -qE 'level=(ERROR|error)|panic' "$PROXYLOG" 2>/dev/null; then
    log "proxy log for $b has errors: $PROXYLOG"; grep -E 'level=(ERROR|error)|panic' "$PROXYLOG" | head -n 5 >&2
  fi
done
if has kafkapython && case " $BACKENDS " in *" dev "*) true ;; *) false ;; esac; then
  tb=$SECONDS
  single_admin_check
  TIMINGS+=("kafka-python admin client x dev --topology single: $((SECONDS - tb)) s")
fi
cleanup
TIMINGS+=("total: $((SECONDS - T0)) s")
write_matrix
log "wrote $MATRIX"
if [ -n "$PUBLISH" ]; then
  if [ -n "$FULL" ]; then
    cp "$MATRIX" "$COMPAT/MATRIX.md" && log "published compat/MATRIX.md"
  else
    log "not published: only a full run (every client, the default backends, cluster mode) replaces compat/MATRIX.md"
  fi
fi
cat "$MATRIX" | sed -n '/^| client/,/^$/p'
for e in "${EXTRA[@]}"; do log "$e"; done
if [ $EXTRA_FAILS -gt 0 ] && [ $FAILS -eq 0 ]; then
  log "$EXTRA_FAILS further check(s) failed"
  exit 1
fi
if [ $FAILS -gt 0 ]; then
  log "$FAILS row(s) failed"
  echo "matrix: $(( $(echo $CLIENTS | wc -w) * $(echo $BACKENDS | wc -w) - FAILS - NOT_SUPPORTED )) passed, $FAILS failed$([ $NOT_SUPPORTED = 0 ] || echo ", $NOT_SUPPORTED not supported by the client")"
  exit 1
fi
echo "matrix: $(( $(echo $CLIENTS | wc -w) * $(echo $BACKENDS | wc -w) - NOT_SUPPORTED )) passed, 0 failed$([ $NOT_SUPPORTED = 0 ] || echo ", $NOT_SUPPORTED not supported by the client")"
