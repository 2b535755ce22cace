/* A C host in miniature: includes stagger.h, links the native library, checks the version,
 * reads a config error, and runs one session_new / step round by hand (docs/abi.md's
 * layouts, little-endian, written and read byte by byte). Run by abi/tests/header.rs. */
#include <stdio.h>
#include <string.h>
#include "stagger.h"

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Whether `len` bytes at `p` contain the text `needle`. */
static int contains(const uint8_t *p, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(p + i, needle, n) == 0) return 1;
    return 0;
}

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } } while (0)

int main(void) {
    CHECK(stagger_abi_version() == STAGGER_ABI_VERSION, "version %u", stagger_abi_version());

    /* A refused config: handle 0, and the thread's last error says which field. */
    const char *bad = "{}";
    StaggerBuf out;
    CHECK(stagger_session_new((const uint8_t *)bad, strlen(bad), 0, 0) == 0, "{} was taken");
    CHECK(stagger_last_error(&out) == STAGGER_ERR_CONFIG, "not a config error");
    CHECK(contains(out.ptr, out.len, "\"field\":\"seeds\""), "%.*s", (int)out.len, out.ptr);
    printf("config error: seeds\n");

    const char *config = "{\"seeds\": [\"b1:9092\"], \"one_shot\": true}";
    uint64_t handle = stagger_session_new((const uint8_t *)config, strlen(config), 1000000000ull, 42);
    CHECK(handle != 0, "session_new failed");

    /* One REQUEST_REFRESH event (cause requested, no broker), in memory the library gave. */
    const uint8_t batch[] = {STAGGER_ABI_VERSION, 0, 0, 0, 1, 0, 0, 0,
                             STAGGER_EVENT_REQUEST_REFRESH, 1, 0, 0, 0, STAGGER_CAUSE_REQUESTED};
    uint8_t *events = stagger_alloc(sizeof batch);
    CHECK(events != NULL, "alloc");
    memcpy(events, batch, sizeof batch);
    int status = stagger_step(handle, 1000000000ull, events, sizeof batch, &out);
    stagger_free(events, sizeof batch);
    CHECK(status == STAGGER_OK, "step: %d", status);

    /* The action batch: version, flags, count, next wake-up, then the records. */
    const uint8_t *p = out.ptr;
    CHECK(out.len >= 16 && le(p, 2) == STAGGER_ABI_VERSION && le(p + 2, 2) == 0, "header");
    uint64_t count = le(p + 4, 4), wakeup = le(p + 8, 8);
    CHECK(wakeup != STAGGER_NO_WAKEUP, "a running refresh has a wake-up");
    size_t at = 16;
    int dialled = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint8_t kind = p[at];
        size_t len = (size_t)le(p + at + 1, 4);
        const uint8_t *body = p + at + 5;
        if (kind == STAGGER_ACTION_REFRESH_REQUESTED) {
            CHECK(le(body, 4) == 1, "epoch 1");
        } else if (kind == STAGGER_ACTION_DIAL) {
            size_t n = (size_t)le(body + 9, 2);
            printf("dial conn %llu to %.*s (tls %d)\n", (unsigned long long)le(body, 8), (int)n,
                   (const char *)body + 11, body[8]);
            dialled++;
        }
        at += 5 + len;
    }
    CHECK(at == out.len && dialled == 1, "records end at the batch's end, one dial");

    /* A malformed batch is refused with a status and JSON, and the session goes on. */
    const uint8_t junk[] = {9, 9, 9};
    CHECK(stagger_step(handle, 1000000001ull, junk, sizeof junk, &out) == STAGGER_ERR_MALFORMED, "junk taken");
    CHECK(contains(out.ptr, out.len, "malformed_batch"), "%.*s", (int)out.len, out.ptr);
    CHECK(stagger_report(handle, &out) == STAGGER_OK, "report");
    CHECK(stagger_session_free(handle) == STAGGER_OK, "free");
    CHECK(stagger_session_free(handle) == STAGGER_ERR_UNKNOWN_HANDLE, "a freed handle is unknown");
    printf("ok\n");
    return 0;
}
