// Kafka 3.9's own producer and consumer for the real-cluster suite (tests/kafka/test_real_cluster_suite.py).
//   produce <bootstrap> <topic>   an idempotent producer with acks=all sending "r-<n>" (n = 0, 1, …) until
//                                 "stop" arrives on stdin; prints "acked <n> <partition>" for each record
//                                 acknowledged, "failed <n> <error>" for each one that is not, then "done".
//   consume <bootstrap> <topic>   reads every partition from its start to the end offsets found once
//                                 its leaders answer; prints each value, then "done <count>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaClients {
    static final PrintStream OUT = System.out;

    static synchronized void say(String line) {
        OUT.println(line);
        OUT.flush();
    }

    static void produce(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("delivery.timeout.ms", "300000");
        props.put("request.timeout.ms", "30000");
        props.put("max.block.ms", "300000");
        props.put("linger.ms", "5");
        props.put("metadata.max.age.ms", "5000");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        Thread stopper = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                String line;
                while ((line = in.readLine()) != null && !line.equals("stop")) { }
            } catch (Exception e) { }
        });
        stopper.start();
        for (long n = 0; stopper.isAlive(); n++) {
            final long sent = n;
            producer.send(new ProducerRecord<>(topic, "k-" + n, "r-" + n), (metadata, error) -> {
                if (error == null) {
                    say("acked " + sent + " " + metadata.partition());
                } else {
                    say("failed " + sent + " " + error.getClass().getSimpleName());
                }
            });
            Thread.sleep(10);
        }
        producer.flush();
        producer.close(Duration.ofMinutes(5));
        say("done");
    }

    static void consume(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        long count = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofMinutes(2))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofMinutes(2));
            while (partitions.stream().anyMatch(tp -> consumer.position(tp, Duration.ofMinutes(2)) < end.get(tp))) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofSeconds(1))) {
                    say(record.value());
                    count++;
                }
            }
        }
        say("done " + count);
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) {
            produce(args[1], args[2]);
        } else {
            consume(args[1], args[2]);
        }
    }
}
