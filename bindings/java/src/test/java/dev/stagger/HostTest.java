package dev.stagger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The java.nio host's refusals, with no cluster: what it cannot do fails the refresh, named. */
class HostTest {
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aDialAskingForTlsIsAnsweredWithAnIoError() {
        String config = "{\"seeds\": [\"127.0.0.1:9\"], \"tls\": true, \"one_shot\": true, \"settings\": {\"retry.retries\": \"0\"}}";
        RefreshFailedException e = assertThrows(RefreshFailedException.class, () -> Stagger.refresh(config));
        JsonNode last = Conformance.parse(e.errorJson()).get("last_error");
        assertEquals("tls", last.get("kind").asText(), e.errorJson());
        assertTrue(last.get("detail").asText().contains("TLS is not supported by this host"), e.errorJson());
    }
}
