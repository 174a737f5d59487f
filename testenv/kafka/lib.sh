# shellcheck shell=bash
# Common settings and functions for the Apache Kafka test environment.
# Sourced by install.sh, start.sh, stop.sh. Not meant to be executed.
#
# Fixed loopback ports (documented in testenv/kafka/README.md):
#   single node  : node.id 1, broker 127.0.0.1:19092, controller 127.0.0.1:19093
#   three nodes  : node.id 1,2,3, brokers 127.0.0.1:29092,29093,29094,
#                  controllers 127.0.0.1:29192,29193,29194
#   secure       : node.id 1, SASL_SSL 127.0.0.1:23092, controller 23192,
#                  inter-broker PLAINTEXT 23292
#   secure-cluster: node.id 1,2,3, SASL_SSL 127.0.0.1:24092-24094,
#                  controllers 24192-24194, inter-broker PLAINTEXT 24292-24294
#   authz        : node.id 1, SASL_PLAINTEXT 127.0.0.1:25092, controller 25192,
#                  inter-broker PLAINTEXT 25292; StandardAuthorizer
#   audit        : node.id 1, broker 127.0.0.1:26092, controller 127.0.0.1:26192;
#                  the single node again on ports of its own, for a test that
#                  stops and restarts it (the audit trail's Kafka sink)

TESTENV_KAFKA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
INORDER_CACHE="${INORDER_CACHE:-$HOME/.cache/inorder}"
KAFKA_HOME="${KAFKA_HOME:-$INORDER_CACHE/kafka-$KAFKA_VERSION}"
KAFKA_LIBS="$KAFKA_HOME/libs"
# Runtime state (data dirs, logs, pid files). Wiped by start.sh.
KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-${TMPDIR:-/tmp}/inorder-kafka}"
KAFKA_HEAP="${KAFKA_HEAP:--Xms128m -Xmx384m}"
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-aW5vcmRlci10ZXN0ZW52MQ}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"

SINGLE_BROKER_PORT=19092
SINGLE_CONTROLLER_PORT=19093
CLUSTER_BROKER_BASE=29091     # node N -> 29091+N
CLUSTER_CONTROLLER_BASE=29191 # node N -> 29191+N
# KAFKA_RELAYED_LISTENER=1 adds, in cluster mode, a second client listener
# RELAYED on 29291+N that advertises 29391+N: a relay of the caller's own
# listens there and forwards to 29291+N, so that every connection of a
# client of that listener crosses the relay (testenv/faults resets it).
CLUSTER_RELAYED_BASE=29291    # node N -> 29291+N (the broker's RELAYED listener)
CLUSTER_RELAY_BASE=29391      # node N -> 29391+N (advertised; the relay listens)
KAFKA_RELAYED_LISTENER="${KAFKA_RELAYED_LISTENER:-}"
SECURE_BASE=23091             # secure: node N -> SASL_SSL 23091+N, controller +100, inter-broker +200
SECURE_CLUSTER_BASE=24091     # secure-cluster: the same layout from 24091+N
AUTHZ_BASE=25091              # authz: node N -> SASL_PLAINTEXT 25091+N, controller +100, inter-broker +200
AUDIT_BASE=26091              # audit: node N -> PLAINTEXT 26091+N, controller +100

# Test-only SCRAM/PLAIN users of the secure modes (documented in README.md):
# "client" is what clients use, "inorder" what the proxy authenticates as.
SECURE_USERS="client inorder"
SECURE_MECHANISMS="SCRAM-SHA-256 SCRAM-SHA-512 PLAIN"
secure_password() { echo "$1-secret"; }
# SCRAM users of the authz mode: admin is the super user (what a proxy in
# front of it authenticates as), the others get only what ACLs grant.
AUTHZ_USERS="admin alice bob carol dave"

klog() { printf '[testenv/kafka %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# mode -> node ids
mode_nodes() {
  case "$1" in
    single|secure|authz|audit) echo 1 ;;
    cluster|secure-cluster) echo 1 2 3 ;;
    *) klog "unknown mode '$1' (single|cluster|secure|secure-cluster|authz|audit)"; return 2 ;;
  esac
}
mode_secure() { case "$1" in secure|secure-cluster) return 0 ;; esac; return 1; }
mode_multi() { case "$1" in cluster|secure-cluster) return 0 ;; esac; return 1; }
mode_authz() { [ "$1" = authz ]; }
ALL_MODES="single cluster secure secure-cluster authz audit"

broker_port() { # mode node
  case "$1" in
    single) echo $SINGLE_BROKER_PORT ;;
    cluster) echo $((CLUSTER_BROKER_BASE + $2)) ;;
    secure) echo $((SECURE_BASE + $2)) ;;
    secure-cluster) echo $((SECURE_CLUSTER_BASE + $2)) ;;
    authz) echo $((AUTHZ_BASE + $2)) ;;
    audit) echo $((AUDIT_BASE + $2)) ;;
  esac
}
controller_port() { # mode node
  case "$1" in
    single) echo $SINGLE_CONTROLLER_PORT ;;
    cluster) echo $((CLUSTER_CONTROLLER_BASE + $2)) ;;
    secure) echo $((SECURE_BASE + 100 + $2)) ;;
    secure-cluster) echo $((SECURE_CLUSTER_BASE + 100 + $2)) ;;
    authz) echo $((AUTHZ_BASE + 100 + $2)) ;;
    audit) echo $((AUDIT_BASE + 100 + $2)) ;;
  esac
}
# The plaintext inter-broker listener of the secure modes, and the
# RELAYED listener of the cluster when KAFKA_RELAYED_LISTENER is set (none
# otherwise).
internal_port() { # mode node
  case "$1" in
    secure) echo $((SECURE_BASE + 200 + $2)) ;;
    secure-cluster) echo $((SECURE_CLUSTER_BASE + 200 + $2)) ;;
    authz) echo $((AUTHZ_BASE + 200 + $2)) ;;
    cluster) [ -z "$KAFKA_RELAYED_LISTENER" ] || echo $((CLUSTER_RELAYED_BASE + $2)) ;;
  esac
}
# Every port a node listens on.
node_ports() { # mode node
  broker_port "$1" "$2"; controller_port "$1" "$2"; internal_port "$1" "$2"
}

# Comma-separated bootstrap list for a mode.
bootstrap_for() {
  local mode=$1 out="" n
  for n in $(mode_nodes "$mode"); do
    out="${out:+$out,}127.0.0.1:$(broker_port "$mode" "$n")"
  done
  echo "$out"
}

kafka_installed() {
  [ -f "$KAFKA_HOME/.complete" ] && ls "$KAFKA_LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1
}

# Installs Kafka's jars with Maven into $KAFKA_LIBS (idempotent).
kafka_install() {
  if kafka_installed; then
    klog "Kafka $KAFKA_VERSION already installed in $KAFKA_HOME"
    return 0
  fi
  command -v mvn >/dev/null || { klog "mvn not found"; return 1; }
  command -v java >/dev/null || { klog "java not found"; return 1; }
  local work="$KAFKA_HOME/.build"
  rm -rf "$KAFKA_LIBS" "$work"
  mkdir -p "$work"
  cp "$TESTENV_KAFKA_DIR/pom.xml" "$work/pom.xml"
  klog "installing Apache Kafka $KAFKA_VERSION with Maven into $KAFKA_LIBS"
  if ! (cd "$work" && mvn -B -q -Dkafka.version="$KAFKA_VERSION" -Dlibs.dir="$KAFKA_LIBS" package) >"$KAFKA_HOME/install.log" 2>&1; then
    klog "Maven install failed; log: $KAFKA_HOME/install.log"
    tail -n 40 "$KAFKA_HOME/install.log" >&2
    return 1
  fi
  rm -rf "$work"
  echo "$KAFKA_VERSION" >"$KAFKA_HOME/.complete"
  klog "installed $(ls "$KAFKA_LIBS" | wc -l) jars"
}

# Writes server.properties + log4j2 config for one node.
write_node_config() { # mode node dir
  local mode=$1 n=$2 dir=$3 voters="" m rf=1 minisr=1
  for m in $(mode_nodes "$mode"); do
    voters="${voters:+$voters,}$m@127.0.0.1:$(controller_port "$mode" "$m")"
  done
  if mode_multi "$mode"; then rf=3; minisr=2; fi
  mkdir -p "$dir/data" "$dir/logs"
  if mode_secure "$mode"; then
    secure_listeners "$mode" "$n" "$(dirname "$dir")/secrets"
  elif mode_authz "$mode"; then
    authz_listeners "$mode" "$n"
  elif [ "$mode" = cluster ] && [ -n "$KAFKA_RELAYED_LISTENER" ]; then
    cat <<EOF
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),CONTROLLER://127.0.0.1:$(controller_port "$mode" "$n"),RELAYED://127.0.0.1:$((CLUSTER_RELAYED_BASE + n))
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),RELAYED://127.0.0.1:$((CLUSTER_RELAY_BASE + n))
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,RELAYED:PLAINTEXT
EOF
  else
    cat <<EOF
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),CONTROLLER://127.0.0.1:$(controller_port "$mode" "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n")
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
EOF
  fi >"$dir/listeners.properties"
  cat - "$dir/listeners.properties" >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$minisr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.retention.hours=1
log.segment.bytes=16777216
EOF
  cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
}

# Starts one formatted node in the background and writes its pid file.
launch_node() { # mode node
  local d="$KAFKA_RUN_DIR/$1/node$2"
  # setsid: the broker must not get the caller's terminal signals; stop.sh stops it.
  setsid java $KAFKA_HEAP -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$d/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$d/server.properties" \
    >>"$d/logs/stdout.log" 2>&1 </dev/null &
  echo $! >"$d/pid"
  klog "node $2 started (pid $!), logs in $d/logs"
}

kjava() { # runs java with Kafka's classpath
  java -cp "$KAFKA_LIBS/*" "$@"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Prints the log locations and the tail of each node's log.
show_logs() { # mode
  local n d
  for n in $(mode_nodes "$1"); do
    d="$KAFKA_RUN_DIR/$1/node$n"
    klog "node $n logs: $d/logs/server.log and $d/logs/stdout.log"
    for f in "$d/logs/stdout.log" "$d/logs/server.log"; do
      [ -f "$f" ] || continue
      echo "----- tail $f" >&2
      tail -n 25 "$f" >&2
    done
  done
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# ------------------------------------------------------------ secure modes
# Listener settings of a secure-mode node: SASL_SSL for clients (SCRAM-SHA-256,
# SCRAM-SHA-512, PLAIN, unsecured OAUTHBEARER), PLAINTEXT on loopback between
# the nodes and to the controllers.
secure_listeners() { # mode node secretsdir
  local mode=$1 n=$2 s=$3 plain="" u
  for u in $SECURE_USERS; do plain="$plain user_$u=\"$(secure_password "$u")\""; done
  cat <<EOF
listeners=SASL_SSL://127.0.0.1:$(broker_port "$mode" "$n"),INTERNAL://127.0.0.1:$(internal_port "$mode" "$n"),CONTROLLER://127.0.0.1:$(controller_port "$mode" "$n")
advertised.listeners=SASL_SSL://127.0.0.1:$(broker_port "$mode" "$n"),INTERNAL://127.0.0.1:$(internal_port "$mode" "$n")
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$plain;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="inorder";
ssl.keystore.type=PEM
ssl.keystore.location=$s/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$s/ca.crt
listener.name.sasl_ssl.ssl.client.auth=requested
connections.max.reauth.ms=${KAFKA_REAUTH_MS:-0}
EOF
}

# --add-scram arguments of `kafka-storage format`: every user, both SCRAM mechanisms.
secure_scram_args() {
  local u m
  for u in $SECURE_USERS; do
    for m in SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s\n' --add-scram "$m=[name=$u,password=$(secure_password "$u")]"
    done
  done
}

# Makes a throw-away CA, a broker certificate (loopback SANs and
# kafka.inorder.test) and a client certificate with openssl; keys are
# unencrypted PKCS#8 PEM, as Kafka's PEM key stores require.
make_secrets() { # dir
  local s=$1
  if ! command -v openssl >/dev/null && [ "$(id -u)" = 0 ]; then
    klog "installing Debian's openssl (needed for the secure modes)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
  fi
  command -v openssl >/dev/null || { klog "openssl not found (needed for the secure modes): apt-get install openssl"; return 1; }
  mkdir -p "$s" && chmod 700 "$s"
  (
    cd "$s" || exit 1
    set -e
    key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; chmod 600 "$1"; }
    key ca.key
    printf '%s\n' basicConstraints=critical,CA:TRUE keyUsage=critical,keyCertSign,cRLSign subjectKeyIdentifier=hash >ca.ext
    openssl req -new -key ca.key -subj "/CN=inorder testenv CA" -out ca.csr
    openssl x509 -req -in ca.csr -signkey ca.key -days 30 -extfile ca.ext -out ca.crt 2>/dev/null
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature,keyEncipherment \
      extendedKeyUsage=serverAuth,clientAuth "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kafka.inorder.test" >broker.ext
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature,keyEncipherment \
      extendedKeyUsage=clientAuth >client.ext
    for name in broker client; do
      key $name.key
      openssl req -new -key $name.key -subj "/CN=$([ $name = broker ] && echo kafka.inorder.test || echo client)" -out $name.csr
      openssl x509 -req -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile $name.ext -out $name.crt 2>/dev/null
    done
    cat broker.key broker.crt >broker.pem && chmod 600 broker.pem
    rm -f ./*.csr ./*.ext ca.srl
  )
}

# Files a client or test of a secure mode uses, next to the certificates:
# <user>.password (0600), client.properties (Java client, SCRAM-SHA-512 as
# "client") and env (shell assignments, see README.md).
write_secure_client_files() { # mode secretsdir bootstrap
  local mode=$1 s=$2 boot=$3 u
  for u in $SECURE_USERS; do
    (umask 077; printf '%s' "$(secure_password "$u")" >"$s/$u.password")
  done
  cat >"$s/client.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="client" password="$(secure_password client)";
ssl.truststore.type=PEM
ssl.truststore.location=$s/ca.crt
EOF
  cat >"$s/env" <<EOF
INORDER_SECURE_KAFKA=$boot
INORDER_SECURE_KAFKA_MODE=$mode
INORDER_SECURE_KAFKA_CA=$s/ca.crt
INORDER_SECURE_KAFKA_CLIENT_CERT=$s/client.crt
INORDER_SECURE_KAFKA_CLIENT_KEY=$s/client.key
INORDER_SECURE_KAFKA_SERVER_NAME=kafka.inorder.test
INORDER_SECURE_KAFKA_MECHANISMS=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
INORDER_SECURE_KAFKA_USER=client
INORDER_SECURE_KAFKA_PASSWORD_FILE=$s/client.password
INORDER_SECURE_KAFKA_PROXY_USER=inorder
INORDER_SECURE_KAFKA_PROXY_PASSWORD_FILE=$s/inorder.password
EOF
}

# ------------------------------------------------------------- authz mode
# Listener settings of the authz node: SASL_PLAINTEXT with SCRAM for
# clients, Kafka's StandardAuthorizer deciding every request. The
# controller and inter-broker listeners are PLAINTEXT on loopback, whose
# principal is User:ANONYMOUS: it must be a super user, or the node could
# not register with its own controller.
authz_listeners() { # mode node
  local mode=$1 n=$2
  cat <<EOF
listeners=SASL_PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),INTERNAL://127.0.0.1:$(internal_port "$mode" "$n"),CONTROLLER://127.0.0.1:$(controller_port "$mode" "$n")
advertised.listeners=SASL_PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),INTERNAL://127.0.0.1:$(internal_port "$mode" "$n")
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
EOF
}

# --add-scram arguments of `kafka-storage format` for the authz users.
authz_scram_args() {
  local u m
  for u in $AUTHZ_USERS; do
    for m in SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s\n' --add-scram "$m=[name=$u,password=$(secure_password "$u")]"
    done
  done
}

# Files a test of the authz mode uses: <user>.password (0600, no newline),
# client.properties (Java client, SCRAM-SHA-256 as admin) and env (see
# README.md).
write_authz_client_files() { # mode secretsdir bootstrap
  local mode=$1 s=$2 boot=$3 u
  mkdir -p "$s" && chmod 700 "$s"
  for u in $AUTHZ_USERS; do
    (umask 077; printf '%s' "$(secure_password "$u")" >"$s/$u.password")
  done
  (umask 077; cat >"$s/client.properties" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(secure_password admin)";
EOF
  )
  cat >"$s/env" <<EOF
INORDER_AUTHZ_KAFKA_BOOTSTRAP=$boot
INORDER_AUTHZ_KAFKA_INTERNAL=127.0.0.1:$(internal_port "$mode" 1)
INORDER_AUTHZ_KAFKA_USERS=$(echo $AUTHZ_USERS | tr ' ' ,)
INORDER_AUTHZ_KAFKA_SUPER_USER=admin
INORDER_AUTHZ_KAFKA_SECRETS=$s
INORDER_AUTHZ_KAFKA_LIBS=$KAFKA_LIBS
EOF
}
