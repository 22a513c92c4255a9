// Kafka 3.9's own generated message classes as the oracle of kctl's wire codec (tests/kafka/test_wire_codec.py).
// One line in per message, one line out:
//   read <apiKey>|header <version> request|response <hex>   -> ok <JSON by Kafka's converter> <hex Kafka writes back>
//   write <apiKey> <version> request|response <JSON> -> ok {} <hex Kafka writes>
// or "err <message>" when Kafka refuses the input (a parse that leaves bytes over is refused too).
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

public class KafkaMessages {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final HexFormat HEX = HexFormat.of();

    static String className(String api, String kind) {
        String name = api.equals("header") ? "" : ApiKeys.forId(Short.parseShort(api)).name;
        return "org.apache.kafka.common.message." + name + (kind.equals("request") ? "Request" : "Response")
            + (api.equals("header") ? "HeaderData" : "Data");
    }

    static byte[] bytes(Message message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        return buffer.array();
    }

    static String handle(String line) throws Exception {
        String[] parts = line.split(" ", 5);
        short version = Short.parseShort(parts[2]);
        String cls = className(parts[1], parts[3]);
        Class<?> data = Class.forName(cls);
        Class<?> converter = Class.forName(cls + "JsonConverter");
        Message message;
        if (parts[0].equals("read")) {
            ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(parts[4]));
            message = (Message) data.getConstructor(Readable.class, short.class)
                .newInstance(new ByteBufferAccessor(buffer), version);
            if (buffer.hasRemaining()) {
                return "err " + buffer.remaining() + " bytes left over";
            }
        } else {
            message = (Message) converter.getMethod("read", JsonNode.class, short.class)
                .invoke(null, MAPPER.readTree(parts[4]), version);
        }
        JsonNode json = (JsonNode) converter.getMethod("write", data, short.class).invoke(null, message, version);
        return "ok " + MAPPER.writeValueAsString(json) + " " + HEX.formatHex(bytes(message, version));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String out;
            try {
                out = handle(line);
            } catch (Throwable e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                out = "err " + cause.toString().replace('\n', ' ');
            }
            System.out.println(out);
        }
    }
}
