package inorder.compat;

import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs kafka-clients producers and consumers for a while and prints the
 * throttle times the client measured itself, from producer.metrics() and
 * consumer.metrics(): one line per client and metric,
 * {@code CLIENT_ID METRIC VALUE}.
 *
 * <pre>java -cp 'target/classes:target/libs/*' inorder.compat.QuotaMetrics BOOTSTRAP PRODUCE_TOPIC FETCH_TOPIC SECONDS THROTTLED_PREFIX FREE_PREFIX</pre>
 *
 * THROTTLED_PREFIX-producer produces to PRODUCE_TOPIC as fast as it may and
 * FREE_PREFIX-producer at 1 MiB/s; THROTTLED_PREFIX-consumer and
 * FREE_PREFIX-consumer read FETCH_TOPIC from its start as fast as they may.
 * The caller sets the quotas and reads the lines.
 */
public final class QuotaMetrics {
    static final int VALUE = 8 << 10, FREE_RATE = 1 << 20;

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: QuotaMetrics BOOTSTRAP PRODUCE_TOPIC FETCH_TOPIC SECONDS THROTTLED_PREFIX FREE_PREFIX");
            System.exit(2);
        }
        String boot = args[0], produceTopic = args[1], fetchTopic = args[2];
        long runMs = Long.parseLong(args[3]) * 1000;
        String throttled = args[4], free = args[5];
        byte[] value = new byte[VALUE];
        new Random().nextBytes(value); // incompressible

        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        Map<String, List<String>> metrics = Collections.synchronizedMap(new TreeMap<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        for (String prefix : List.of(throttled, free)) {
            String id = prefix + "-producer";
            double rate = prefix.equals(free) ? FREE_RATE : 0;
            threads.add(new Thread(() -> {
                try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(boot, id))) {
                    long start = System.nanoTime();
                    long sent = 0;
                    while (!stop.get()) {
                        if (rate > 0 && sent >= rate * (System.nanoTime() - start) / 1e9) {
                            Thread.sleep(5);
                            continue;
                        }
                        p.send(new ProducerRecord<>(produceTopic, value), (md, e) -> {
                            if (e != null) errors.add(e);
                        });
                        sent += VALUE;
                    }
                    p.flush();
                    metrics.put(id, throttleTimes(p.metrics()));
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
            String cid = prefix + "-consumer";
            threads.add(new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(boot, cid))) {
                    List<TopicPartition> parts = new ArrayList<>();
                    for (PartitionInfo pi : c.partitionsFor(fetchTopic)) parts.add(new TopicPartition(fetchTopic, pi.partition()));
                    c.assign(parts);
                    c.seekToBeginning(parts);
                    while (!stop.get()) c.poll(Duration.ofMillis(200));
                    metrics.put(cid, throttleTimes(c.metrics()));
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        for (Thread t : threads) t.start();
        Thread.sleep(runMs);
        stop.set(true);
        for (Thread t : threads) t.join(60_000);
        for (Throwable e : errors) e.printStackTrace();
        for (var e : metrics.entrySet()) {
            for (String line : e.getValue()) System.out.println(e.getKey() + " " + line);
        }
        System.exit(errors.isEmpty() && metrics.size() == threads.size() ? 0 : 1);
    }

    /** The client's throttle time metrics, read while it is open. */
    static List<String> throttleTimes(Map<MetricName, ? extends Metric> all) {
        List<String> out = new ArrayList<>();
        for (var m : all.entrySet()) {
            String name = m.getKey().name();
            if (name.matches("(produce|fetch)-throttle-time-(avg|max)")) out.add(name + " " + m.getValue().metricValue());
        }
        Collections.sort(out);
        return out;
    }

    static Properties producerProps(String boot, String id) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, id);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, 32 << 10);
        // A small buffer: what a throttled producer holds is flushed at
        // its quota when it stops.
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 256 << 10);
        return p;
    }

    static Properties consumerProps(String boot, String id) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, id);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 64 << 10);
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 64 << 10);
        return p;
    }
}
