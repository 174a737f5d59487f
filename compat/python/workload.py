#!/usr/bin/env python3
"""inorder compatibility workload for Python clients.

    workload.py confluent|kafkapython BOOTSTRAP TOPIC_PREFIX [EXPECT]

EXPECT: comma-separated host:port or host:lo-hi every broker address the
client learns must fall in ("-" or absent: no check). COMPAT_RF sets the
replication factor of the created topics (default 1). COMPAT_AUTO_CREATE=N
(kafka-python): produce to a topic never created and expect the backend to
create it with N partitions. Steps and checks are
those of compat/go (see compat/README.md).
"""
import faulthandler
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import uuid

from common import (MAIN_PARTITIONS, N_MAIN, N_RESUME, N_TXN, TXN_PARTITIONS, Limit, Runner,
                    check_addrs, deadline, gen, parse_expect, parse_got, verify)


class Members:
    """Runs one poll loop per group member in its own thread."""

    def __init__(self, n):
        self.lock = threading.Lock()
        self.out = [[] for _ in range(n)]
        self.assigned = [set() for _ in range(n)]
        self.total = 0
        self.stop = threading.Event()
        self.errors = []
        self.threads = []

    def add(self, i, gots):
        with self.lock:
            self.out[i].extend(gots)
            self.total += len(gots)

    def start(self, i, poll_once):
        def loop():
            try:
                while not self.stop.is_set():
                    poll_once()
            except Exception as e:  # noqa: BLE001
                self.errors.append("member %d: %s: %s" % (i, type(e).__name__, e))
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self.threads.append(t)

    def stable(self, parts):
        with self.lock:
            seen = [p for a in self.assigned for p in a]
            return all(self.assigned) and len(seen) == parts and len(set(seen)) == parts

    def desc(self):
        with self.lock:
            return " ".join("member%d=%d partitions" % (i, len(a)) for i, a in enumerate(self.assigned))

    def wait(self, cond, seconds, what):
        alive = deadline(seconds)
        while not cond():
            if self.errors:
                raise AssertionError("; ".join(self.errors))
            if not alive():
                raise AssertionError("%s (after %ds)" % (what(), seconds))
            time.sleep(0.05)

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)
        if self.errors:
            raise AssertionError("; ".join(self.errors))


def group_flow(members, topic, want, produce):
    members.wait(lambda: members.stable(MAIN_PARTITIONS), 60, lambda: "group never became stable: " + members.desc())
    print("INFO group stable: " + members.desc(), flush=True)
    produce()
    members.wait(lambda: members.total >= want, 90, lambda: "received %d of %d records" % (members.total, want))
    members.join()
    for i, m in enumerate(members.out):
        if not m:
            raise AssertionError("group member %d received no records" % i)


# ---------------------------------------------------------------- security
# The run's security settings, from the environment every workload of the
# matrix reads: COMPAT_TLS_CA (PEM CA file: TLS), COMPAT_TLS_CERT and
# COMPAT_TLS_KEY (PEM client certificate and key: mutual TLS),
# COMPAT_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER),
# COMPAT_SASL_USERNAME, COMPAT_SASL_PASSWORD, COMPAT_OAUTH_TOKEN_FILE (the
# bearer token, a JWT); COMPAT_SASL_HANDSHAKE=v0 makes kafka-python use the
# legacy SaslHandshake v0 flow. Nothing set: plaintext without authentication.
def security_protocol():
    tls, sasl = bool(os.environ.get("COMPAT_TLS_CA")), bool(os.environ.get("COMPAT_SASL_MECHANISM"))
    return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}[(tls, sasl)]


def oauth_token():
    """The bearer token and its expiry (the JWT's exp, seconds since the epoch)."""
    import base64
    with open(os.environ["COMPAT_OAUTH_TOKEN_FILE"]) as f:
        token = f.read().strip()
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return token, float(claims["exp"])


def security_settings(names):
    """The settings under one library's names: (protocol, CA file,
    certificate file, key file, mechanism, user, password)."""
    protocol, ca, cert, key, mechanism, user, password = names
    c = {protocol: security_protocol()}
    if os.environ.get("COMPAT_TLS_CA"):
        c[ca] = os.environ["COMPAT_TLS_CA"]
    if os.environ.get("COMPAT_TLS_CERT"):
        c.update({cert: os.environ["COMPAT_TLS_CERT"], key: os.environ["COMPAT_TLS_KEY"]})
    if os.environ.get("COMPAT_SASL_MECHANISM"):
        c[mechanism] = os.environ["COMPAT_SASL_MECHANISM"]
        if os.environ["COMPAT_SASL_MECHANISM"] != "OAUTHBEARER":
            c.update({user: os.environ.get("COMPAT_SASL_USERNAME", ""),
                      password: os.environ.get("COMPAT_SASL_PASSWORD", "")})
    return c


def librdkafka_security():
    c = security_settings(("security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                           "sasl.mechanisms", "sasl.username", "sasl.password"))
    if c.get("sasl.mechanisms") == "OAUTHBEARER":
        # librdkafka asks for a token (and refreshes it before expiry) through oauth_cb
        c["oauth_cb"] = lambda _config: oauth_token()
    return c


# kafka-python picks the SaslHandshake version from the broker version it
# assumes: 0.11 is the last one without SaslAuthenticate (KIP-152, Kafka 1.0),
# so api_version=(0, 11) gives the v0 flow (raw tokens after the handshake)
# with idempotent and transactional producers still available.
KAFKAPYTHON_V0_API_VERSION = (0, 11)


def kafkapython_security():
    c = security_settings(("security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                           "sasl_mechanism", "sasl_plain_username", "sasl_plain_password"))
    if os.environ.get("COMPAT_SASL_MECHANISM") and os.environ.get("COMPAT_SASL_HANDSHAKE") == "v0":
        c["api_version"] = KAFKAPYTHON_V0_API_VERSION
    if c.get("sasl_mechanism") == "OAUTHBEARER":
        try:
            from kafka.net.sasl.oauth import AbstractTokenProvider
        except ImportError:
            from kafka.sasl.oauth import AbstractTokenProvider

        class FileToken(AbstractTokenProvider):
            def token(self):
                return oauth_token()[0]
        c["sasl_oauth_token_provider"] = FileToken()
    return c


class HandshakeVersions(logging.Handler):
    """Records the SaslHandshake versions kafka-python sends (from its
    request debug log), so that the legacy flow is checked, not assumed."""

    PATTERN = re.compile(r"Sending request \d+ SaslHandshakeRequest\(version=(\d+)")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.versions = set()

    def emit(self, record):
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.versions.add(int(m.group(1)))

    def install(self):
        lg = logging.getLogger("kafka.protocol.parser")
        lg.setLevel(logging.DEBUG)
        lg.addHandler(self)
        return self


def describe_security(name):
    d = security_protocol()
    if os.environ.get("COMPAT_TLS_CERT"):
        d += ",client certificate %s" % os.environ["COMPAT_TLS_CERT"]
    if os.environ.get("COMPAT_SASL_MECHANISM") == "OAUTHBEARER":
        d += "+OAUTHBEARER(token from %s)" % os.environ.get("COMPAT_OAUTH_TOKEN_FILE")
    elif os.environ.get("COMPAT_SASL_MECHANISM"):
        d += "+%s(%s)" % (os.environ["COMPAT_SASL_MECHANISM"], os.environ.get("COMPAT_SASL_USERNAME", ""))
        if name == "kafkapython" and os.environ.get("COMPAT_SASL_HANDSHAKE") == "v0":
            d += ",SaslHandshake v0 (api_version=%s)" % ".".join(map(str, KAFKAPYTHON_V0_API_VERSION))
    return d


# ---------------------------------------------------------------- confluent-kafka
class Confluent:
    name = "confluent"

    def __init__(self, bootstrap):
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient
        self.ck = ck
        self.bootstrap = bootstrap
        self.addrs = set()
        self.groups = []
        self.live = []  # producers kept open so their stats can be read at the end
        self.admin = AdminClient(self.conf())

    def stats(self, js):
        for b in json.loads(js).get("brokers", {}).values():
            if b.get("nodename"):
                self.addrs.add(b["nodename"])

    def conf(self, **kw):
        c = {"bootstrap.servers": self.bootstrap, "client.id": "inorder-compat-confluent",
             "statistics.interval.ms": 500, "stats_cb": self.stats, **librdkafka_security()}
        c.update({k.replace("_", "."): v for k, v in kw.items()})
        return c

    def create_topic(self, topic, partitions, rf):
        from confluent_kafka.admin import NewTopic
        fs = self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)],
                                      operation_timeout=30, request_timeout=30)
        fs[topic].result(timeout=60)

    def _produce(self, p, topic, recs):
        errs = []

        def cb(err, msg):
            if err is not None:
                errs.append(str(err))
        for r in recs:
            while True:
                try:
                    p.produce(topic, key=r.key, value=r.value, partition=r.partition, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        left = p.flush(60)
        if left:
            raise AssertionError("%d records not delivered after 60s" % left)
        if errs:
            raise AssertionError("delivery errors: %s" % errs[:3])

    def produce(self, topic, recs):
        if not hasattr(self, "prod"):
            self.prod = self.ck.Producer(self.conf(enable_idempotence=True, acks="all",
                                                   max_in_flight_requests_per_connection=5, linger_ms=2))
            self.live.append(self.prod)
        self._produce(self.prod, topic, recs)

    def consumer(self, group, **kw):
        return self.ck.Consumer(self.conf(group_id=group, enable_auto_commit=False, auto_offset_reset="earliest",
                                          session_timeout_ms=10000, heartbeat_interval_ms=1000, **kw))

    def _poll(self, c, timeout=0.2):
        m = c.poll(timeout)
        if m is None:
            return []
        if m.error():
            raise RuntimeError(str(m.error()))
        return [parse_got(m.value(), m.partition(), m.offset())]

    def group_consume(self, topic, group, n, want, produce):
        self.groups.append(group)
        ms = Members(n)
        cons = []
        for i in range(n):
            c = self.consumer(group)

            def on_assign(_c, parts, i=i):
                with ms.lock:
                    ms.assigned[i] = {p.partition for p in parts if p.topic == topic}

            def on_revoke(_c, parts, i=i):
                with ms.lock:
                    ms.assigned[i] -= {p.partition for p in parts if p.topic == topic}
            c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            cons.append(c)
            ms.start(i, lambda c=c, i=i: ms.add(i, self._poll(c)))
        try:
            group_flow(ms, topic, want, produce)
            for i, c in enumerate(cons):
                c.commit(asynchronous=False)
        finally:
            ms.stop.set()
            for t in ms.threads:
                t.join(15)
            for c in cons:
                c.close()
        return ms.out

    def resume(self, topic, group, want):
        c = self.consumer(group)
        c.subscribe([topic])
        out, alive = [], deadline(60)
        try:
            while len(out) < want and alive():
                out += self._poll(c)
        finally:
            c.close()
        if len(out) < want:
            raise AssertionError("received %d of %d records" % (len(out), want))
        return out

    def txn(self, topic, commit, abort, sentinel):
        self.txn_id = "inorder-compat-confluent-" + topic
        p = self.ck.Producer(self.conf(transactional_id=self.txn_id, enable_idempotence=True, acks="all",
                                       max_in_flight_requests_per_connection=5, linger_ms=2))
        self.live.append(p)
        p.init_transactions(30)
        for recs, ok in ((commit, True), (abort, False), (sentinel, True)):
            p.begin_transaction()
            self._produce(p, topic, recs)
            (p.commit_transaction if ok else p.abort_transaction)(30)

    def read_committed(self, topic, sentinels):
        c = self.consumer("inorder-compat-rc-" + uuid.uuid4().hex[:8], isolation_level="read_committed")
        c.assign([self.ck.TopicPartition(topic, p, self.ck.OFFSET_BEGINNING) for p in range(TXN_PARTITIONS)])
        out, alive = [], deadline(60)
        try:
            while alive() and not sentinels <= {g[0] for g in out}:
                out += self._poll(c)
        finally:
            c.close()
        if not sentinels <= {g[0] for g in out}:
            raise AssertionError("received %d records before the deadline" % len(out))
        return out

    def addresses(self, group):
        md = self.admin.list_topics(timeout=15)
        for b in md.brokers.values():
            self.addrs.add("%s:%d" % (b.host, b.port))
        for g in self.groups:
            d = self.admin.describe_consumer_groups([g], request_timeout=15)[g].result(timeout=20)
            self.addrs.add("%s:%d" % (d.coordinator.host, d.coordinator.port))
        end = time.monotonic() + 1.2  # let every live client emit a statistics event
        while time.monotonic() < end:
            for p in self.live:
                p.poll(0.1)
            self.admin.poll(0.1)
        return self.addrs

    def close(self):
        for p in self.live:
            p.flush(5)


# ---------------------------------------------------------------- kafka-python
class KafkaPython:
    name = "kafkapython"

    def __init__(self, bootstrap, admin=True):
        import kafka
        self.kafka = kafka
        self.bootstrap = bootstrap.split(",")
        self.base = dict(bootstrap_servers=self.bootstrap, client_id="inorder-compat-kafkapython", **kafkapython_security())
        self.addrs = set()
        addrs = self.addrs
        # Record every address kafka-python dials (bootstrap, brokers, coordinators).
        try:  # kafka-python 3.x: one connection factory
            import kafka.net.manager as manager
            orig = manager.create_connection

            def recording(net, host, port, *a, **kw):
                addrs.add("%s:%d" % (host, port))
                return orig(net, host, port, *a, **kw)
            manager.create_connection = recording
        except ImportError:  # kafka-python 2.x: one BrokerConnection per broker
            import kafka.conn as conn
            orig_init = conn.BrokerConnection.__init__

            def recording_init(self, host, port, *a, **kw):
                addrs.add("%s:%d" % (host, port))
                orig_init(self, host, port, *a, **kw)
            conn.BrokerConnection.__init__ = recording_init
        self.closers = []
        if admin:
            self.admin = kafka.KafkaAdminClient(**self.base)
            self.closers.append(self.admin)

    def create_topic(self, topic, partitions, rf):
        from kafka.admin import NewTopic
        self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)], timeout_ms=30000)

    def _send(self, p, topic, recs):
        fs = [p.send(topic, key=r.key, value=r.value, partition=r.partition) for r in recs]
        p.flush(timeout=60)
        for f in fs:
            f.get(timeout=30)

    def produce(self, topic, recs):
        if not hasattr(self, "prod"):
            self.prod = self.kafka.KafkaProducer(**self.base,
                                                 enable_idempotence=True, acks="all",
                                                 max_in_flight_requests_per_connection=5, linger_ms=2)
            self.closers.append(self.prod)
        self._send(self.prod, topic, recs)

    def auto_create(self, topic, recs):
        """Produces to a topic nobody created, as an application does on a
        broker with auto.create.topics.enable (kafka-python names it in a
        Metadata v1 request), and returns its partition count."""
        p = self.kafka.KafkaProducer(**self.base, acks="all", linger_ms=2, max_block_ms=30000)
        try:
            fs = [p.send(topic, key=r.key, value=r.value) for r in recs]
            p.flush(timeout=30)
            for f in fs:
                f.get(timeout=30)
            return len(p.partitions_for(topic) or ())
        finally:
            p.close(timeout=10)

    def consumer(self, group, topic=None, **kw):
        c = self.kafka.KafkaConsumer(**self.base,
                                     group_id=group, enable_auto_commit=False, auto_offset_reset="earliest",
                                     session_timeout_ms=10000, heartbeat_interval_ms=1000, **kw)
        if topic is not None:
            # Wait until this consumer's metadata has every partition of the
            # (new) topic before it joins; subscribe() then waits for the
            # group coordinator's own snapshot of it (see there).
            alive = deadline(30)
            while len(c.partitions_for_topic(topic) or ()) < MAIN_PARTITIONS:
                if not alive():
                    raise AssertionError("metadata for %s never showed %d partitions" % (topic, MAIN_PARTITIONS))
                time.sleep(0.1)
        return c

    @staticmethod
    def subscribe(c, topic, **kw):
        """Subscribes c to topic and waits until its group coordinator's own
        metadata snapshot holds every partition of it. kafka-python 3.0.12
        builds that snapshot when the consumer is made and refreshes it only
        on the next metadata response, not on subscribe, so without the wait
        the first assignment is made against a stale snapshot and the next
        metadata response makes the leader rejoin during Stable. Such a
        rejoin is not marked as needed (need_rejoin() turns False once the
        JoinGroup is sent), so if a poll's timeout ends while the rejoin is
        in flight, no later poll awaits it: the member has received its
        SyncGroup response but never takes its assignment or re-enables
        its heartbeat, and is evicted (the matrix's member logs show exactly
        this, ending in need_rejoin: False)."""
        c.subscribe([topic], **kw)
        alive = deadline(30)
        while len(c._coordinator._metadata_snapshot.get(topic) or ()) < MAIN_PARTITIONS:
            if not alive():
                raise AssertionError("the group coordinator's metadata for %s never showed %d partitions" % (topic, MAIN_PARTITIONS))
            time.sleep(0.05)

    def _poll(self, c, timeout_ms=200):
        out = []
        for tp, recs in c.poll(timeout_ms=timeout_ms).items():
            for r in recs:
                out.append(parse_got(r.value, tp.partition, r.offset))
        return out

    def group_consume(self, topic, group, n, want, produce):
        # kafka-python 3.0.x: two group members in one process (threads)
        # regularly lose their heartbeat after a rebalance and the leader is
        # evicted (seen against Kafka without the proxy), so each member runs
        # in a process of its own, as applications do.
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        q, stop, leave = ctx.Queue(), ctx.Event(), ctx.Event()
        procs = [ctx.Process(target=kafkapython_member, args=(self.bootstrap, topic, group, i, q, stop, leave), daemon=True)
                 for i in range(n)]
        for pr in procs:
            pr.start()
        ms = Members(n)
        done, committed, errors = set(), set(), []

        def drain(timeout=0.05):
            try:
                while True:
                    kind, i, val = q.get(timeout=timeout)
                    timeout = 0
                    if kind == "assigned":
                        with ms.lock:
                            ms.assigned[i] = set(val)
                    elif kind == "records":
                        ms.add(i, [tuple(g) for g in val])
                    elif kind == "addrs":
                        self.addrs.update(val)
                    elif kind == "committed":
                        committed.add(i)
                    elif kind == "done":
                        done.add(i)
                    elif kind == "error":
                        errors.append("member %d: %s" % (i, val))
            except Exception:  # queue.Empty
                pass

        def wait(cond, seconds, what):
            alive = deadline(seconds)
            while not cond():
                drain()
                if errors:
                    raise AssertionError("; ".join(errors))
                if not alive():
                    raise AssertionError("%s (after %ds)" % (what(), seconds))
        try:
            wait(lambda: ms.stable(MAIN_PARTITIONS), 60, lambda: "group never became stable: " + ms.desc())
            print("INFO group stable: " + ms.desc(), flush=True)
            produce()
            wait(lambda: ms.total >= want, 90, lambda: "received %d of %d records" % (ms.total, want))
            stop.set()  # members commit what they polled, then leave together
            wait(lambda: len(committed) == n, 60, lambda: "members did not commit")
            leave.set()
            wait(lambda: len(done) == n, 60, lambda: "members did not close")
        finally:
            stop.set()
            leave.set()
            for pr in procs:
                pr.join(15)
                if pr.is_alive():
                    pr.kill()
        for i, m in enumerate(ms.out):
            if not m:
                raise AssertionError("group member %d received no records" % i)
        return ms.out

    def resume(self, topic, group, want):
        c = self.consumer(group, topic)
        self.subscribe(c, topic)
        out, alive = [], deadline(60)
        try:
            while len(out) < want and alive():
                out += self._poll(c)
        finally:
            c.close()
        if len(out) < want:
            raise AssertionError("received %d of %d records" % (len(out), want))
        return out

    def txn(self, topic, commit, abort, sentinel):
        p = self.kafka.KafkaProducer(**self.base,
                                     transactional_id="inorder-compat-kafkapython-" + topic,
                                     enable_idempotence=True, acks="all", max_in_flight_requests_per_connection=5)
        self.closers.append(p)
        p.init_transactions()
        for recs, ok in ((commit, True), (abort, False), (sentinel, True)):
            p.begin_transaction()
            self._send(p, topic, recs)
            (p.commit_transaction if ok else p.abort_transaction)()

    def read_committed(self, topic, sentinels):
        from kafka import TopicPartition
        c = self.kafka.KafkaConsumer(**self.base,
                                     group_id=None, enable_auto_commit=False, isolation_level="read_committed")
        tps = [TopicPartition(topic, p) for p in range(TXN_PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out, alive = [], deadline(60)
        try:
            while alive() and not sentinels <= {g[0] for g in out}:
                out += self._poll(c)
        finally:
            c.close()
        if not sentinels <= {g[0] for g in out}:
            raise AssertionError("received %d records before the deadline" % len(out))
        return out

    def addresses(self, group):
        d = self.admin.describe_cluster()
        for b in d.get("brokers", []):
            self.addrs.add("%s:%d" % (b["host"], b["port"]))
        return self.addrs

    def close(self):
        for c in self.closers:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass


def kafkapython_member(bootstrap, topic, group, i, q, stop, leave):
    """One kafka-python group member (runs in its own process). Its
    coordinator's decisions and a line for every request it sends and
    response it parses go to the row's stderr log, so that a member that
    stops heartbeating (see group_consume) shows what it last sent and
    received. The parser's raw byte dumps are left out: they hold the SASL
    exchange."""
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(asctime)s member" + str(i) + " %(name)s %(levelname)s %(message)s"))
    h.addFilter(lambda rec: not (rec.name == "kafka.protocol.parser" and re.search(r"\] (Send|Recv): ", rec.getMessage())))
    logging.getLogger("kafka").addHandler(h)
    logging.getLogger("kafka").setLevel(logging.INFO)
    for name in ("kafka.coordinator", "kafka.protocol.parser"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        from kafka import ConsumerRebalanceListener
        cl = KafkaPython(",".join(bootstrap), admin=False)
        c = cl.consumer(group, topic)
        assigned = set()

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                assigned.difference_update(tp.partition for tp in revoked if tp.topic == topic)
                q.put(("assigned", i, sorted(assigned)))

            def on_partitions_assigned(self, new):
                assigned.update(tp.partition for tp in new if tp.topic == topic)
                q.put(("assigned", i, sorted(assigned)))
        cl.subscribe(c, topic, listener=L())
        while not stop.is_set():
            gots = cl._poll(c)
            if gots:
                q.put(("records", i, gots))
        c.commit()  # every member commits before any member leaves the group
        q.put(("committed", i, None))
        leave.wait(60)
        c.close()
        q.put(("addrs", i, sorted(cl.addrs)))
        q.put(("done", i, None))
    except Exception as e:  # noqa: BLE001
        q.put(("error", i, "%s: %s" % (type(e).__name__, e)))


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    # A row that runs out of time is ended with SIGTERM: print where every
    # thread was before the default action ends the process.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    name, bootstrap, prefix = sys.argv[1:4]
    expect_arg = sys.argv[4] if len(sys.argv) > 4 else ""
    expect = parse_expect(expect_arg)
    rf = int(os.environ.get("COMPAT_RF", "1"))
    handshakes = None
    if name == "kafkapython" and os.environ.get("COMPAT_SASL_HANDSHAKE") == "v0" and os.environ.get("COMPAT_SASL_MECHANISM"):
        handshakes = HandshakeVersions().install()
    cl = {"confluent": Confluent, "kafkapython": KafkaPython}[name](bootstrap)
    r = Runner(name)
    print("START %s bootstrap=%s prefix=%s rf=%d expect=%r security=%s" % (name, bootstrap, prefix, rf, expect_arg, describe_security(name)), flush=True)
    topic, txn_topic, group = prefix + "-main", prefix + "-txn", prefix + "-group"

    def create():
        cl.create_topic(topic, MAIN_PARTITIONS, rf)
        cl.create_topic(txn_topic, TXN_PARTITIONS, rf)
    if not r.step("create-topics", create):
        cl.close()
        r.finish()

    auto_parts = os.environ.get("COMPAT_AUTO_CREATE")
    if auto_parts and hasattr(cl, "auto_create"):
        # The backend creates topics on first use (Kafka's default,
        # auto.create.topics.enable=true) with this many partitions.
        def auto_create():
            got = cl.auto_create(prefix + "-auto", gen(0, 20, 1))
            if got != int(auto_parts):
                raise AssertionError("%s-auto was created with %d partitions, want %s" % (prefix, got, auto_parts))
        r.step("auto-create", auto_create)

    sent = gen(0, N_MAIN, MAIN_PARTITIONS)
    produced = []

    def produce():
        t = time.monotonic()
        cl.produce(topic, sent)
        produced.append(True)
        print("STEP produce-idempotent ok (%.3fs)" % (time.monotonic() - t), flush=True)

    def group_step():
        verify(sent, cl.group_consume(topic, group, 2, len(sent), produce))
    if r.step("group-consume", group_step) and produced:
        more = gen(N_MAIN, N_MAIN + N_RESUME, MAIN_PARTITIONS)

        def resume():
            cl.produce(topic, more)
            produced.append("more")
            verify(more, [cl.resume(topic, group, len(more))])
        r.step("resume-from-commit", resume)

    if os.environ.get("COMPAT_LEADER_MOVE") and "more" in produced:
        # The long-lived producer still has the old leaders: its next writes
        # get NOT_LEADER_OR_FOLLOWER (with the new leader's endpoint, KIP-951)
        # and must follow the move through the proxy. The move itself is made
        # by compat-go (franz-go's admin client) through the same address.
        def leader_move():
            import subprocess
            go = os.environ.get("COMPAT_GO") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "go", "bin", "compat-go")
            out = subprocess.run([go, "move-leaders", bootstrap, topic], capture_output=True, text=True, timeout=100)
            if out.returncode != 0:
                raise AssertionError("moving leaders: " + (out.stderr.strip() or out.stdout.strip()))
            print("INFO leaders moved: " + out.stdout.strip(), flush=True)
            cl.produce(topic, gen(N_MAIN + N_RESUME, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS))
            every = gen(0, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS)
            verify(every, [cl.resume(topic, prefix + "-after-move", len(every))])
        r.step("leader-move", leader_move)

    commit = gen(100000, 100000 + N_TXN, TXN_PARTITIONS)
    abort = gen(200000, 200000 + N_TXN, TXN_PARTITIONS)
    sentinel = gen(900000, 900000 + TXN_PARTITIONS, TXN_PARTITIONS)
    if r.step("transactions", lambda: cl.txn(txn_topic, commit, abort, sentinel)):
        r.step("read-committed", lambda: verify(commit + sentinel, [cl.read_committed(txn_topic, {s.seq for s in sentinel})]))

    if expect is not None:
        def addrs():
            a = cl.addresses(group)
            print("INFO addresses learned: %s" % sorted(a), flush=True)
            check_addrs(expect, a)
        r.step("addresses", addrs)
    else:
        print("INFO addresses: not checked (no EXPECT given)", flush=True)
    if handshakes is not None:
        def legacy_flow():
            if handshakes.versions != {0}:
                raise AssertionError("SaslHandshake versions sent: %s, want only v0" % (sorted(handshakes.versions) or "none"))
            print("INFO every connection of this process authenticated with SaslHandshake v0 and raw tokens", flush=True)
        r.step("sasl-handshake-v0", legacy_flow)
    cl.close()
    r.finish()


if __name__ == "__main__":
    main()
