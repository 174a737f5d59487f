package inorder.compat;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * inorder compatibility workload for kafka-clients (the reference Java client).
 *
 * <pre>java -cp 'target/classes:target/libs/*' inorder.compat.Workload BOOTSTRAP TOPIC_PREFIX [EXPECT]</pre>
 *
 * EXPECT: comma-separated host:port or host:lo-hi that every broker address the
 * client learns must fall in ("-" or absent: no check). COMPAT_RF sets the
 * replication factor of created topics (default 1); COMPAT_GROUP_PROTOCOL
 * (classic|consumer) the consumer group protocol. Steps and checks are those
 * of compat/go (see compat/README.md).
 */
public final class Workload {
    static final int MAIN_PARTITIONS = 6, TXN_PARTITIONS = 3, N_MAIN = 2000, N_RESUME = 200, N_TXN = 100;

    record Rec(int seq, int partition) {
        String key() { return "k" + (seq % 50); }
        String value() { return Integer.toString(seq); }
    }

    record Got(int seq, int partition, long offset) {}

    static List<Rec> gen(int lo, int hi, int parts) {
        List<Rec> out = new ArrayList<>();
        for (int s = lo; s < hi; s++) out.add(new Rec(s, (s % 50) % parts));
        return out;
    }

    static Got parse(ConsumerRecord<String, String> r) {
        try {
            return new Got(Integer.parseInt(r.value()), r.partition(), r.offset());
        } catch (NumberFormatException e) {
            throw new IllegalStateException("unexpected value " + r.value() + " at partition " + r.partition() + " offset " + r.offset());
        }
    }

    static void verify(List<Rec> sent, List<List<Got>> members) {
        Map<Integer, Rec> want = new HashMap<>();
        Map<Integer, List<Integer>> perPartWant = new TreeMap<>();
        for (Rec r : sent) {
            want.put(r.seq(), r);
            perPartWant.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.seq());
        }
        Set<Integer> seen = new HashSet<>();
        Map<Integer, Integer> owner = new HashMap<>();
        Map<Integer, List<Integer>> perPartGot = new HashMap<>();
        Map<Integer, Long> lastOff = new HashMap<>();
        List<String> problems = new ArrayList<>();
        java.util.function.Consumer<String> add = m -> { if (problems.size() < 8) problems.add(m); };
        for (int m = 0; m < members.size(); m++) {
            for (Got g : members.get(m)) {
                Rec r = want.get(g.seq());
                if (r == null) { add.accept("unexpected record seq " + g.seq() + " (partition " + g.partition() + " offset " + g.offset() + ")"); continue; }
                if (!seen.add(g.seq())) { add.accept("duplicate record seq " + g.seq() + " (partition " + g.partition() + " offset " + g.offset() + ")"); continue; }
                if (r.partition() != g.partition()) add.accept("record seq " + g.seq() + " sent to partition " + r.partition() + ", read from " + g.partition());
                Integer o = owner.put(g.partition(), m);
                if (o != null && o != m) add.accept("partition " + g.partition() + " read by members " + o + " and " + m);
                Long lo = lastOff.put(g.partition(), g.offset());
                if (lo != null && g.offset() <= lo) add.accept("partition " + g.partition() + " offsets not increasing: " + g.offset() + " after " + lo);
                perPartGot.computeIfAbsent(g.partition(), k -> new ArrayList<>()).add(g.seq());
            }
        }
        long missing = sent.stream().filter(r -> !seen.contains(r.seq())).count();
        if (missing > 0) add.accept(missing + " of " + sent.size() + " records lost");
        for (var e : perPartWant.entrySet()) {
            List<Integer> g = perPartGot.getOrDefault(e.getKey(), List.of()), w = e.getValue();
            for (int i = 0; i < Math.min(g.size(), w.size()); i++) {
                if (!g.get(i).equals(w.get(i))) {
                    add.accept("partition " + e.getKey() + ": record #" + i + " is seq " + g.get(i) + ", sent order says " + w.get(i));
                    break;
                }
            }
        }
        if (!problems.isEmpty()) throw new IllegalStateException(String.join("; ", problems));
    }

    final String bootstrap, prefix, topic, txnTopic, group, txnId;
    final int rf;
    final String groupProtocol = Optional.ofNullable(System.getenv("COMPAT_GROUP_PROTOCOL")).orElse("classic");
    final Admin admin;
    final Set<String> addrs = ConcurrentHashMap.newKeySet();
    KafkaProducer<String, String> producer;
    boolean producedMore;
    final List<String> failed = new ArrayList<>(), limits = new ArrayList<>();

    Workload(String bootstrap, String prefix, int rf) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.topic = prefix + "-main";
        this.txnTopic = prefix + "-txn";
        this.group = prefix + "-group";
        this.txnId = "inorder-compat-java-" + txnTopic;
        this.rf = rf;
        Properties p = base();
        admin = Admin.create(p);
    }

    Properties base() {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.CLIENT_ID_CONFIG, "inorder-compat-java");
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(CommonClientConfigs.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.putAll(security());
        return p;
    }

    // The run's security settings, from the environment every workload of
    // the matrix reads: COMPAT_TLS_CA (PEM CA file: TLS), COMPAT_TLS_CERT and
    // COMPAT_TLS_KEY (PEM client certificate and key: mutual TLS),
    // COMPAT_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER),
    // COMPAT_SASL_USERNAME, COMPAT_SASL_PASSWORD, COMPAT_OAUTH_TOKEN_FILE (the
    // bearer token). Nothing set: plaintext without authentication.
    static Properties security() {
        Properties p = new Properties();
        String ca = System.getenv("COMPAT_TLS_CA");
        String mech = System.getenv("COMPAT_SASL_MECHANISM");
        String cert = System.getenv("COMPAT_TLS_CERT");
        boolean tls = ca != null && !ca.isEmpty(), sasl = mech != null && !mech.isEmpty();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, (sasl ? (tls ? "SASL_SSL" : "SASL_PLAINTEXT") : (tls ? "SSL" : "PLAINTEXT")));
        if (tls) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", ca);
        }
        if (cert != null && !cert.isEmpty()) {
            // PEM keystore: the certificate chain and the (PKCS#8, unencrypted) key inline
            try {
                p.put("ssl.keystore.type", "PEM");
                p.put("ssl.keystore.certificate.chain", new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(cert))));
                p.put("ssl.keystore.key", new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(System.getenv("COMPAT_TLS_KEY")))));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        if (sasl && mech.equals("OAUTHBEARER")) {
            // Kafka's own login handler reads the token from a file: URL
            // (which Kafka 4 only follows when the JVM allows it).
            String url = "file:" + System.getenv("COMPAT_OAUTH_TOKEN_FILE");
            System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.urls", url);
            p.put("sasl.mechanism", mech);
            p.put("sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler");
            p.put("sasl.oauthbearer.token.endpoint.url", url);
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;");
        } else if (sasl) {
            String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mech);
            p.put("sasl.jaas.config", String.format("%s required username=\"%s\" password=\"%s\";", module,
                    System.getenv("COMPAT_SASL_USERNAME"), System.getenv("COMPAT_SASL_PASSWORD")));
        }
        return p;
    }

    static String describeSecurity() {
        Properties p = security();
        String d = p.getProperty(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG);
        if (p.containsKey("ssl.keystore.certificate.chain")) d += ",client certificate " + System.getenv("COMPAT_TLS_CERT");
        if ("OAUTHBEARER".equals(p.getProperty("sasl.mechanism"))) return d + "+OAUTHBEARER(token from " + System.getenv("COMPAT_OAUTH_TOKEN_FILE") + ")";
        return d + (p.containsKey("sasl.mechanism") ? "+" + p.getProperty("sasl.mechanism") + "(" + System.getenv("COMPAT_SASL_USERNAME") + ")" : "");
    }

    interface Step { void run() throws Exception; }

    boolean step(String name, Step s) {
        long t = System.nanoTime();
        try {
            s.run();
            System.out.printf("STEP %s ok (%.3fs)%n", name, (System.nanoTime() - t) / 1e9);
            return true;
        } catch (Throwable e) {
            Throwable c = (e instanceof ExecutionException && e.getCause() != null) ? e.getCause() : e;
            String msg = c instanceof IllegalStateException ? c.getMessage() : c.toString();
            System.out.printf("FAIL %s: %s (%.3fs)%n", name, msg, (System.nanoTime() - t) / 1e9);
            failed.add(name + ": " + msg);
            return false;
        }
    }

    void createTopics() throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, MAIN_PARTITIONS, (short) rf), new NewTopic(txnTopic, TXN_PARTITIONS, (short) rf)))
                .all().get(60, TimeUnit.SECONDS);
    }

    double producerMetric(String name) {
        for (var e : producer.metrics().entrySet())
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics"))
                return ((Number) e.getValue().metricValue()).doubleValue();
        return -1;
    }

    boolean topicsExist() {
        try {
            var d = admin.describeTopics(List.of(topic, txnTopic)).allTopicNames().get(30, TimeUnit.SECONDS);
            return d.get(topic).partitions().size() == MAIN_PARTITIONS && d.get(txnTopic).partitions().size() == TXN_PARTITIONS;
        } catch (Exception e) {
            return false;
        }
    }

    KafkaProducer<String, String> newProducer(Properties extra) {
        Properties p = base();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    void send(KafkaProducer<String, String> p, String t, List<Rec> recs) throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (Rec r : recs) fs.add(p.send(new ProducerRecord<>(t, r.partition(), r.key(), r.value())));
        p.flush();
        for (var f : fs) f.get(60, TimeUnit.SECONDS);
    }

    void produce(List<Rec> recs) throws Exception {
        if (producer == null) producer = newProducer(new Properties());
        send(producer, topic, recs);
    }

    KafkaConsumer<String, String> newConsumer(String groupId, Properties extra) {
        Properties p = base();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (groupId != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
            if (groupProtocol.equals("classic")) {
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            }
        }
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "300");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    List<List<Got>> groupConsume(List<Rec> sent) throws Exception {
        int n = 2;
        List<List<Got>> out = new ArrayList<>();
        List<Set<Integer>> assigned = new ArrayList<>();
        AtomicInteger total = new AtomicInteger();
        CountDownLatch stop = new CountDownLatch(1);
        List<Future<?>> fs = new ArrayList<>();
        ExecutorService ex = Executors.newFixedThreadPool(n);
        try {
            for (int i = 0; i < n; i++) {
                List<Got> mine = Collections.synchronizedList(new ArrayList<>());
                Set<Integer> asg = ConcurrentHashMap.newKeySet();
                out.add(mine);
                assigned.add(asg);
                fs.add(ex.submit(() -> {
                    try (KafkaConsumer<String, String> c = newConsumer(group, new Properties())) {
                        c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                            public void onPartitionsRevoked(Collection<TopicPartition> ps) { ps.forEach(tp -> asg.remove(tp.partition())); }
                            public void onPartitionsAssigned(Collection<TopicPartition> ps) { ps.forEach(tp -> asg.add(tp.partition())); }
                            public void onPartitionsLost(Collection<TopicPartition> ps) { ps.forEach(tp -> asg.remove(tp.partition())); }
                        });
                        while (stop.getCount() > 0) {
                            for (var r : c.poll(Duration.ofMillis(100))) {
                                mine.add(parse(r));
                                total.incrementAndGet();
                            }
                        }
                        c.commitSync(Duration.ofSeconds(30)); // commits the positions of everything polled
                        learn(c.partitionsFor(topic));
                    }
                    return null;
                }));
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                Set<Integer> all = new HashSet<>();
                int sum = 0;
                boolean busy = true;
                for (var a : assigned) { all.addAll(a); sum += a.size(); busy &= !a.isEmpty(); }
                if (busy && all.size() == MAIN_PARTITIONS && sum == MAIN_PARTITIONS) break;
                for (var f : fs) if (f.isDone()) f.get();
                if (System.nanoTime() > end) throw new IllegalStateException("group never became stable: " + assigned);
                Thread.sleep(50);
            }
            System.out.println("INFO group stable: member0=" + assigned.get(0).size() + " partitions member1=" + assigned.get(1).size() + " partitions");
            long t = System.nanoTime();
            produce(sent);
            System.out.printf("STEP produce-idempotent ok (%.3fs)%n", (System.nanoTime() - t) / 1e9);
            end = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (total.get() < sent.size()) {
                for (var f : fs) if (f.isDone()) f.get();
                if (System.nanoTime() > end) throw new IllegalStateException("received " + total.get() + " of " + sent.size() + " records");
                Thread.sleep(20);
            }
            stop.countDown();
            for (var f : fs) f.get(60, TimeUnit.SECONDS);
        } finally {
            stop.countDown();
            ex.shutdownNow();
        }
        for (int i = 0; i < n; i++) if (out.get(i).isEmpty()) throw new IllegalStateException("group member " + i + " received no records");
        return out;
    }

    List<Got> pollUntil(KafkaConsumer<String, String> c, java.util.function.Predicate<List<Got>> done, int seconds) {
        List<Got> out = new ArrayList<>();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!done.test(out)) {
            if (System.nanoTime() > end) throw new IllegalStateException("received " + out.size() + " records before the deadline");
            for (var r : c.poll(Duration.ofMillis(200))) out.add(parse(r));
        }
        return out;
    }

    List<Got> resume(int want) {
        try (KafkaConsumer<String, String> c = newConsumer(group, new Properties())) {
            c.subscribe(List.of(topic));
            return pollUntil(c, l -> l.size() >= want, 60);
        }
    }

    void txn(List<Rec> commit, List<Rec> abort, List<Rec> sentinel) throws Exception {
        Properties x = new Properties();
        x.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        try (KafkaProducer<String, String> p = newProducer(x)) {
            p.initTransactions();
            p.beginTransaction(); send(p, txnTopic, commit); p.commitTransaction();
            p.beginTransaction(); send(p, txnTopic, abort); p.abortTransaction();
            p.beginTransaction(); send(p, txnTopic, sentinel); p.commitTransaction();
            learn(p.partitionsFor(txnTopic));
        }
    }

    List<Got> readCommitted(Set<Integer> sentinels) {
        Properties x = new Properties();
        x.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> c = newConsumer(null, x)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < TXN_PARTITIONS; p++) tps.add(new TopicPartition(txnTopic, p));
            c.assign(tps);
            c.seekToBeginning(tps);
            return pollUntil(c, l -> l.stream().filter(g -> sentinels.contains(g.seq())).count() >= sentinels.size(), 60);
        }
    }

    /**
     * Moves the leader of every partition of the main topic to another broker:
     * each replica id is replaced by the next broker id (a rotation of the
     * replica list on a 3-node cluster with RF 3, a move to the next broker
     * with RF 1), then preferred leaders are elected. Returns "p:old->new".
     */
    String moveLeaders() throws Exception {
        List<Integer> ids = new ArrayList<>();
        for (Node n : admin.describeCluster().nodes().get(30, TimeUnit.SECONDS)) ids.add(n.id());
        Collections.sort(ids);
        if (ids.size() < 2) throw new IllegalStateException("leader move needs 2+ brokers, have " + ids);
        var desc = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
        Map<Integer, Integer> wantLeader = new TreeMap<>(), oldLeader = new TreeMap<>();
        for (TopicPartitionInfo pi : desc.partitions()) {
            List<Integer> next = new ArrayList<>();
            for (Node r : pi.replicas()) next.add(ids.get((ids.indexOf(r.id()) + 1) % ids.size()));
            moves.put(new TopicPartition(topic, pi.partition()), Optional.of(new NewPartitionReassignment(next)));
            wantLeader.put(pi.partition(), next.get(0));
            oldLeader.put(pi.partition(), pi.leader() == null ? -1 : pi.leader().id());
        }
        admin.alterPartitionReassignments(moves).all().get(30, TimeUnit.SECONDS);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            if (admin.listPartitionReassignments(moves.keySet()).reassignments().get(30, TimeUnit.SECONDS).isEmpty()) {
                try {
                    admin.electLeaders(ElectionType.PREFERRED, moves.keySet()).all().get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.ElectionNotNeededException)) throw e;
                }
                var now = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                boolean done = true;
                for (TopicPartitionInfo pi : now.partitions())
                    done &= pi.leader() != null && pi.leader().id() == wantLeader.get(pi.partition());
                if (done) break;
            }
            if (System.nanoTime() > end) throw new IllegalStateException("leaders did not move within 60s (want " + wantLeader + ")");
            Thread.sleep(250);
        }
        StringBuilder sb = new StringBuilder();
        for (var e : wantLeader.entrySet()) sb.append(' ').append(e.getKey()).append(':').append(oldLeader.get(e.getKey())).append("->").append(e.getValue());
        return sb.toString().trim();
    }

    List<Got> readAll(String groupId, int want) {
        try (KafkaConsumer<String, String> c = newConsumer(groupId, new Properties())) {
            c.subscribe(List.of(topic));
            return pollUntil(c, l -> l.size() >= want, 60);
        }
    }

    void learn(List<PartitionInfo> ps) {
        for (var p : ps) {
            if (p.leader() != null && !p.leader().isEmpty()) addrs.add(p.leader().host() + ":" + p.leader().port());
            for (var r : p.replicas()) if (!r.isEmpty()) addrs.add(r.host() + ":" + r.port());
        }
    }

    Set<String> addresses() throws Exception {
        var d = admin.describeCluster();
        for (var n : d.nodes().get(30, TimeUnit.SECONDS)) addrs.add(n.host() + ":" + n.port());
        Node ctrl = d.controller().get(30, TimeUnit.SECONDS);
        if (ctrl != null && !ctrl.isEmpty()) addrs.add(ctrl.host() + ":" + ctrl.port());
        var g = admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
        if (g.coordinator() != null) addrs.add(g.coordinator().host() + ":" + g.coordinator().port());
        if (producer != null) learn(producer.partitionsFor(topic));
        return addrs;
    }

    static void checkAddrs(String expect, Set<String> addrs) {
        if (addrs.isEmpty()) throw new IllegalStateException("client reported no broker addresses");
        List<String> bad = new ArrayList<>();
        for (String a : new TreeSet<>(addrs)) {
            int i = a.lastIndexOf(':');
            String host = a.substring(0, i);
            int port = Integer.parseInt(a.substring(i + 1));
            boolean ok = false;
            for (String it : expect.split(",")) {
                int j = it.lastIndexOf(':');
                String[] r = it.substring(j + 1).split("-");
                int lo = Integer.parseInt(r[0]), hi = Integer.parseInt(r.length > 1 ? r[1] : r[0]);
                ok |= it.substring(0, j).equals(host) && port >= lo && port <= hi;
            }
            if (!ok) bad.add(a);
        }
        if (!bad.isEmpty()) throw new IllegalStateException("client learned addresses outside the proxy: " + bad + " (all: " + new TreeSet<>(addrs) + ")");
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Workload BOOTSTRAP TOPIC_PREFIX [EXPECT]");
            System.exit(2);
        }
        String expect = args.length > 2 && !args[2].isEmpty() && !args[2].equals("-") ? args[2] : null;
        int rf = Integer.parseInt(Optional.ofNullable(System.getenv("COMPAT_RF")).orElse("1"));
        long started = System.nanoTime();
        Workload w = new Workload(args[0], args[1], rf);
        System.out.printf("START java bootstrap=%s prefix=%s rf=%d expect=\"%s\" group.protocol=%s security=%s%n", args[0], args[1], rf, expect == null ? "" : args[2], w.groupProtocol, describeSecurity());
        boolean created = w.step("create-topics", w::createTopics);
        if (!created && w.topicsExist()) {
            // The topics were made even though the client failed on the answer:
            // go on so that the other steps are still exercised (the failure stays).
            System.out.println("INFO topics exist despite the create-topics failure; continuing");
            created = true;
        }
        if (created) {
            List<Rec> sent = gen(0, N_MAIN, MAIN_PARTITIONS);
            if (w.step("group-consume", () -> verify(sent, w.groupConsume(sent)))) {
                List<Rec> more = gen(N_MAIN, N_MAIN + N_RESUME, MAIN_PARTITIONS);
                w.step("resume-from-commit", () -> { w.produce(more); w.producedMore = true; verify(more, List.of(w.resume(more.size()))); });
            }
            if (w.producedMore && System.getenv("COMPAT_LEADER_MOVE") != null && !System.getenv("COMPAT_LEADER_MOVE").isEmpty()) {
                // The long-lived producer still has the old leaders: its next
                // writes get NOT_LEADER_OR_FOLLOWER (with the new leader's
                // endpoint, KIP-951) and must follow the move through the proxy.
                List<Rec> moved = gen(N_MAIN + N_RESUME, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS);
                w.step("leader-move", () -> {
                    System.out.println("INFO leaders moved: " + w.moveLeaders());
                    double retriesBefore = w.producerMetric("record-retry-total");
                    w.produce(moved);
                    // Evidence of the path taken (not a check: a metadata refresh is as valid).
                    System.out.printf("INFO producer retries during the post-move writes: %.0f%n", w.producerMetric("record-retry-total") - retriesBefore);
                    List<Rec> all = gen(0, N_MAIN + N_RESUME + 300, MAIN_PARTITIONS);
                    verify(all, List.of(w.readAll(w.prefix + "-after-move", all.size())));
                });
            }
            List<Rec> commit = gen(100000, 100000 + N_TXN, TXN_PARTITIONS), abort = gen(200000, 200000 + N_TXN, TXN_PARTITIONS),
                    sentinel = gen(900000, 900000 + TXN_PARTITIONS, TXN_PARTITIONS);
            if (w.step("transactions", () -> w.txn(commit, abort, sentinel))) {
                Set<Integer> ss = new HashSet<>();
                sentinel.forEach(r -> ss.add(r.seq()));
                List<Rec> want = new ArrayList<>(commit);
                want.addAll(sentinel);
                w.step("read-committed", () -> verify(want, List.of(w.readCommitted(ss))));
            }
            if (expect != null) {
                w.step("addresses", () -> {
                    var a = w.addresses();
                    System.out.println("INFO addresses learned: " + new TreeSet<>(a));
                    checkAddrs(expect, a);
                });
            } else {
                System.out.println("INFO addresses: not checked (no EXPECT given)");
            }
        }
        if (w.producer != null) w.producer.close(Duration.ofSeconds(10));
        w.admin.close(Duration.ofSeconds(10));
        double d = (System.nanoTime() - started) / 1e9;
        if (!w.failed.isEmpty()) {
            System.out.printf("RESULT fail java (%.1fs): %s%n", d, String.join(" | ", w.failed));
            System.exit(1);
        }
        System.out.printf("RESULT pass java (%.1fs)%n", d);
        System.exit(0);
    }
}
