// Runs many `kafka-acls.sh` lines in one JVM: each line of stdin (blank
// lines and `#` comments skipped; a leading `kafka-acls.sh` dropped) is
// given to Kafka's AclCommand with this program's own arguments appended
// (e.g. `--command-config admin.properties`). Starting one JVM per line
// takes seconds each; this takes one.
//
//   scripts/kafka/broker.sh tool scripts/kafka/AclBatch.java --command-config FILE < lines
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class AclBatch {
    public static void main(String[] extra) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        int done = 0;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            List<String> words = new ArrayList<>(Arrays.asList(line.split("\\s+")));
            if (words.get(0).endsWith("kafka-acls.sh")) {
                words.remove(0);
            }
            words.addAll(Arrays.asList(extra));
            org.apache.kafka.tools.AclCommand.main(words.toArray(new String[0]));
            done++;
        }
        System.err.println("AclBatch: " + done + " line(s) run");
    }
}
