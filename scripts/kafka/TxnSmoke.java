// Transactional part of scripts/kafka/smoke.sh, run as a single-file source
// program:  java -cp <kafka classpath> TxnSmoke.java BOOTSTRAP TOPIC
//
// Writes one aborted transaction (aborted-0, aborted-1) and then one committed
// transaction (committed-0..2) to TOPIC, spreading each over partitions 0 and
// 1. smoke.sh then reads TOPIC back with the console consumer: read_committed
// must see exactly the committed records, read_uncommitted all five.
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnSmoke {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: TxnSmoke BOOTSTRAP TOPIC");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "parsley-smoke-" + topic);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();

            producer.beginTransaction();
            for (int i = 0; i < 2; i++) {
                RecordMetadata m = producer.send(
                        new ProducerRecord<>(topic, i % 2, "a" + i, "aborted-" + i)).get(30, TimeUnit.SECONDS);
                System.out.println("txn 1: wrote aborted-" + i + " to " + m.topic() + "-" + m.partition() + "@" + m.offset());
            }
            producer.abortTransaction();
            System.out.println("txn 1: aborted");

            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                RecordMetadata m = producer.send(
                        new ProducerRecord<>(topic, i % 2, "c" + i, "committed-" + i)).get(30, TimeUnit.SECONDS);
                System.out.println("txn 2: wrote committed-" + i + " to " + m.topic() + "-" + m.partition() + "@" + m.offset());
            }
            producer.commitTransaction();
            System.out.println("txn 2: committed");
        }
    }
}
