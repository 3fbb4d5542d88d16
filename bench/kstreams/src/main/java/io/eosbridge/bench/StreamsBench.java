package io.eosbridge.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The benchmark pipelines P1-P3 (bench/transforms.py, bench/pipelines.py) as a Kafka Streams
 * application: exactly_once_v2, one stream thread, the harness's commit interval.
 *
 * <p>Arguments are those of every contender (bench/contenders/__init__.py) plus {@code
 * --state-dir}, {@code --cache-max-bytes} (absent: Kafka Streams' default record cache) and {@code
 * --warmup-records} (0: none). A warm-up runs the same topology under its own application id
 * into its own output topic for that many input records first, so the measured run starts with
 * a JIT-compiled JVM. SIGTERM closes the application cleanly and exits 0.
 */
public final class StreamsBench {
  static final ObjectMapper MAPPER = new ObjectMapper();
  static final long WINDOW_MS = 10_000; // bench.transforms.WINDOW_SECONDS

  private StreamsBench() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = parse(argv);
    String pipeline = args.get("--pipeline");
    if (!List.of("p1", "p2", "p2r", "p3").contains(pipeline)) {
      System.err.println("--pipeline must be p1, p2, p2r or p3, not " + pipeline);
      System.exit(2);
    }
    long warmup = Long.parseLong(args.getOrDefault("--warmup-records", "0"));
    if (warmup > 0) {
      warmUp(args, pipeline, warmup);
    }
    KafkaStreams streams =
        new KafkaStreams(
            topology(pipeline, args.get("--input"), args.get("--output"), null),
            config(args, args.get("--group")));
    run(streams);
  }

  /** Runs until SIGTERM; then closes (commits) and exits 0, or 1 if the close timed out. */
  static void run(KafkaStreams streams) throws InterruptedException {
    streams.setUncaughtExceptionHandler(
        e -> {
          e.printStackTrace();
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.setStateListener(
        (now, before) -> {
          if (now == KafkaStreams.State.ERROR) {
            System.err.println("Kafka Streams failed (state ERROR)");
            Runtime.getRuntime().halt(1);
          }
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  boolean closed = streams.close(Duration.ofSeconds(50));
                  // halt: the exit code of a SIGTERM'd JVM would be 143 even after a clean close.
                  Runtime.getRuntime().halt(closed ? 0 : 1);
                }));
    streams.start();
    new CountDownLatch(1).await();
  }

  /** The same topology on the same input, counted, until {@code records} have been read. */
  static void warmUp(Map<String, String> args, String pipeline, long records) throws Exception {
    String input = args.get("--input");
    String output = args.get("--output") + "-warmup";
    long target;
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", args.get("--bootstrap")))) {
      TopicDescription desc = admin.describeTopics(List.of(input)).allTopicNames().get().get(input);
      admin.createTopics(List.of(new NewTopic(output, desc.partitions().size(), (short) 1)))
          .all()
          .get();
      target = Math.min(records, inputSize(args.get("--bootstrap"), input, desc));
    }
    AtomicLong seen = new AtomicLong();
    Map<String, String> warmArgs = new HashMap<>(args);
    warmArgs.put("--state-dir", args.get("--state-dir") + "-warmup");
    KafkaStreams warm =
        new KafkaStreams(
            topology(pipeline, input, output, seen), config(warmArgs, args.get("--group") + "-warmup"));
    warm.start();
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(10);
    while (seen.get() < target && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    warm.close(Duration.ofSeconds(60));
    warm.cleanUp();
    System.err.printf("warm-up: %d input records processed%n", seen.get());
  }

  static long inputSize(String bootstrap, String topic, TopicDescription desc) {
    Map<String, Object> conf = Map.of("bootstrap.servers", bootstrap);
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(conf, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      List<TopicPartition> tps =
          desc.partitions().stream().map(p -> new TopicPartition(topic, p.partition())).toList();
      return consumer.endOffsets(tps).values().stream().mapToLong(Long::longValue).sum();
    }
  }

  static Properties config(Map<String, String> args, String applicationId) {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("--bootstrap"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    long commitMs = Math.round(Double.parseDouble(args.get("--commit-interval")) * 1000);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("--state-dir"));
    if (args.containsKey("--cache-max-bytes")) {
      props.put(
          StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG,
          Long.parseLong(args.get("--cache-max-bytes")));
    }
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    return props;
  }

  /** P1 filter + map, P2 count by key, P3 10 s tumbling sum; {@code seen} counts inputs. */
  static Topology topology(String pipeline, String input, String output, AtomicLong seen) {
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, byte[]> in =
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()));
    if (seen != null) {
      in = in.peek((k, v) -> seen.incrementAndGet());
    }
    Produced<String, byte[]> produced = Produced.with(Serdes.String(), Serdes.ByteArray());
    switch (pipeline) {
      case "p1" ->
          in.mapValues(StreamsBench::read)
              .filter((k, v) -> v.get("amount").asDouble() >= 5.0)
              .mapValues(StreamsBench::enrich)
              .to(output, produced);
      case "p2" ->
          in.mapValues(
                  v -> {
                    read(v); // every contender decodes its input
                    return v;
                  })
              .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
              .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("count"))
              .toStream()
              .processValues(CountOutput::new)
              .to(output, produced);
      case "p2r" -> // by a value field: groupBy repartitions through a topic
          in.groupBy(
                  (k, v) -> read(v).get("user").asText(),
                  Grouped.with(Serdes.String(), Serdes.ByteArray()))
              .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("count"))
              .toStream()
              .processValues(CountOutput::new)
              .to(output, produced);
      default ->
          in.mapValues(v -> read(v).get("amount").asDouble())
              .groupByKey(Grouped.with(Serdes.String(), Serdes.Double()))
              .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(WINDOW_MS)))
              .reduce(
                  Double::sum,
                  Materialized.<String, Double, WindowStore<Bytes, byte[]>>as("sum")
                      .withKeySerde(Serdes.String())
                      .withValueSerde(Serdes.Double()))
              .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
              .toStream()
              .process(WindowOutput::new)
              .to(output, produced);
    }
    return builder.build();
  }

  static JsonNode read(byte[] value) {
    try {
      return MAPPER.readTree(value);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static byte[] write(JsonNode node) {
    try {
      return MAPPER.writeValueAsBytes(node);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** bench.transforms.enrich. */
  static byte[] enrich(JsonNode value) {
    ObjectNode out = MAPPER.createObjectNode();
    out.set("id", value.get("id"));
    out.set("user", value.get("user"));
    out.put("cents", (long) (value.get("amount").asDouble() * 100));
    out.set("country", value.get("country"));
    out.set("ts", value.get("ts"));
    return write(out);
  }

  /** {@code _source_*} of the record being processed, as eos-bridge's outputs carry them. */
  static void addSource(ObjectNode out, java.util.Optional<RecordMetadata> meta) {
    meta.ifPresent(
        m -> {
          out.put("_source_topic", m.topic());
          out.put("_source_partition", m.partition());
          out.put("_source_offset", m.offset());
        });
  }

  /** P2 output: {"key", "count", "_source_*"} (eos-bridge's count step). */
  static final class CountOutput implements FixedKeyProcessor<String, Long, byte[]> {
    private FixedKeyProcessorContext<String, byte[]> context;

    @Override
    public void init(FixedKeyProcessorContext<String, byte[]> context) {
      this.context = context;
    }

    @Override
    public void process(FixedKeyRecord<String, Long> record) {
      ObjectNode out = MAPPER.createObjectNode();
      out.put("key", record.key());
      out.put("count", record.value());
      addSource(out, context.recordMetadata());
      context.forward(record.withValue(write(out)));
    }
  }

  /** P3 output: {"key", "start", "end", "value", "_source_*"} once per closed window. */
  static final class WindowOutput implements Processor<Windowed<String>, Double, String, byte[]> {
    private ProcessorContext<String, byte[]> context;

    @Override
    public void init(ProcessorContext<String, byte[]> context) {
      this.context = context;
    }

    @Override
    public void process(Record<Windowed<String>, Double> record) {
      Windowed<String> window = record.key();
      ObjectNode out = MAPPER.createObjectNode();
      out.put("key", window.key());
      out.put("start", window.window().start());
      out.put("end", window.window().end());
      out.put("value", record.value());
      addSource(out, context.recordMetadata());
      context.forward(record.withKey(window.key()).withValue(write(out)));
    }
  }

  static Map<String, String> parse(String[] argv) {
    Map<String, String> args = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      args.put(argv[i], argv[i + 1]);
    }
    for (String required :
        List.of("--bootstrap", "--input", "--output", "--group", "--pipeline", "--state-dir")) {
      if (!args.containsKey(required)) {
        System.err.println("missing argument " + required);
        System.exit(2);
      }
    }
    args.putIfAbsent("--commit-interval", "1.0");
    return args;
  }
}
