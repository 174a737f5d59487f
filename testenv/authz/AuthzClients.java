// The Java clients' cases of the authorizer differential (testenv/authz):
// Kafka's own Admin, producer (plain, idempotent, transactional) and
// consumer, each as one principal, print one line per case,
// "case <case> = <answer>", where the answer is "ok", a sorted list, or the
// simple name of the Kafka exception the client raised. The Go test runs
// this straight at Kafka and through the proxy and compares the lines.
// Run with Kafka's classpath:
//   java -cp "$KAFKA_LIBS/*" AuthzClients.java BOOTSTRAP SECRETS_DIR TOKEN
// SECRETS_DIR holds <user>.password; TOKEN names what this run creates.
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AuthzClients {
    static String bootstrap;
    static Path secrets;

    static Properties props(String user) throws Exception {
        String pw = Files.readString(secrets.resolve(user + ".password"));
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user + "\" password=\"" + pw + "\";");
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "15000");
        p.put("reconnect.backoff.max.ms", "500");
        return p;
    }

    // answer names what a client raised: the first Kafka API exception in
    // the chain of causes, or the outermost class.
    static String answer(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ApiException) {
                return c.getClass().getSimpleName();
            }
        }
        return t.getClass().getSimpleName();
    }

    static void report(String name, Callable<String> c) {
        String a;
        try {
            a = c.call();
        } catch (Throwable t) {
            a = answer(t);
        }
        System.out.println("case " + name + " = " + a);
    }

    static Admin admin(String user) throws Exception {
        return Admin.create(props(user));
    }

    static KafkaProducer<String, String> producer(String user, boolean idempotent, String txnId) throws Exception {
        Properties p = props(user);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("enable.idempotence", Boolean.toString(idempotent));
        p.put("acks", "all");
        p.put("max.block.ms", "10000");
        p.put("delivery.timeout.ms", "15000");
        p.put("request.timeout.ms", "5000");
        if (txnId != null) {
            p.put("transactional.id", txnId);
        }
        return new KafkaProducer<>(p);
    }

    static String send(String user, boolean idempotent, String topic) throws Exception {
        try (var pr = producer(user, idempotent, null)) {
            pr.send(new ProducerRecord<>(topic, "k", "v")).get(20, TimeUnit.SECONDS);
            return "ok";
        }
    }

    static String consume(String user, String group, String topic, String protocol) throws Exception {
        Properties p = props(user);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        try (var c = new KafkaConsumer<String, String>(p)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                if (!rs.isEmpty()) {
                    c.commitSync();
                    return "ok";
                }
            }
            return "no records";
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        secrets = Path.of(args[1]);
        String tok = args[2];

        for (String user : List.of("alice", "bob", "dave")) {
            report("admin listTopics " + user, () -> {
                try (var a = admin(user)) {
                    var names = new TreeSet<>(a.listTopics(new ListTopicsOptions().listInternal(true)).names().get());
                    return names.toString();
                }
            });
        }
        for (String user : List.of("alice", "bob")) {
            report("admin describeAcls " + user, () -> {
                try (var a = admin(user)) {
                    // As Kafka's tools list a binding, sorted, " | " between.
                    var lines = new TreeSet<String>();
                    for (var x : a.describeAcls(AclBindingFilter.ANY).values().get()) {
                        var e = x.entry();
                        var p = x.pattern();
                        lines.add(String.format("(principal=%s, host=%s, operation=%s, permissionType=%s) on ResourcePattern(resourceType=%s, name=%s, patternType=%s)",
                                e.principal(), e.host(), e.operation(), e.permissionType(), p.resourceType(), p.name(), p.patternType()));
                    }
                    return String.join(" | ", lines);
                }
            });
        }
        for (String topic : List.of("new-alice-j", "new-other-j")) {
            report("admin createTopics alice " + topic, () -> {
                try (var a = admin("alice")) {
                    a.createTopics(List.of(new NewTopic(topic, 1, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
                    return "ok";
                }
            });
        }
        report("admin deleteConsumerGroups alice g-alice", () -> {
            try (var a = admin("alice")) {
                a.deleteConsumerGroups(List.of("g-alice")).all().get();
                return "ok";
            }
        });

        report("producer alice t-alice", () -> send("alice", false, "t-alice"));
        report("producer alice t-shared", () -> send("alice", false, "t-shared"));
        report("producer idempotent alice t-alice", () -> send("alice", true, "t-alice"));
        report("producer idempotent carol t-public", () -> send("carol", true, "t-public"));
        report("producer idempotent dave t-public", () -> send("dave", true, "t-public"));

        report("transaction alice tx-alice", () -> {
            try (var pr = producer("alice", true, "tx-alice")) {
                pr.initTransactions();
                pr.beginTransaction();
                pr.send(new ProducerRecord<>("t-alice", "k", "v")).get(20, TimeUnit.SECONDS);
                pr.sendOffsetsToTransaction(Map.of(new TopicPartition("t-alice", 0), new OffsetAndMetadata(0)),
                        new org.apache.kafka.clients.consumer.ConsumerGroupMetadata("g-alice"));
                pr.commitTransaction();
                return "ok";
            }
        });
        report("transaction bob tx-alice", () -> {
            try (var pr = producer("bob", true, "tx-alice")) {
                pr.initTransactions();
                return "ok";
            }
        });

        report("consumer alice g-alice-" + tok + " t-alice", () -> consume("alice", "g-alice-" + tok, "t-alice", "classic"));
        report("consumer bob g-bob t-host", () -> consume("bob", "g-bob", "t-host", "classic"));
        report("consumer dave g-alice t-shared", () -> consume("dave", "g-alice", "t-shared", "classic"));
        // The consumer group protocol (KIP-848).
        report("consumer protocol alice g-alice-cg-" + tok + " t-alice", () -> consume("alice", "g-alice-cg-" + tok, "t-alice", "consumer"));
        report("consumer protocol alice g-alice-cg-" + tok + " p-data-1", () -> consume("alice", "g-alice-cg-" + tok, "p-data-1", "consumer"));
        report("consumer protocol dave g-alice t-shared", () -> consume("dave", "g-alice", "t-shared", "consumer"));
    }
}
