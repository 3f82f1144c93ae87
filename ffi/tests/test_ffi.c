/* C tests of the shmfifo C ABI: every function, and every result code that a caller can
 * provoke (see ffi/README.md for the five that cannot be: DEDUP_IN_PROGRESS,
 * PARTICIPANT_BUSY, REMOTE, PANIC, UNKNOWN_ERROR). Built and run (also under valgrind) by ffi/tests/c.rs.
 * Usage: test_ffi SCRATCH_DIR */
#include "shmfifo.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;
static int reached[200];

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* Expects result code `want` from expression `r`; records that `want` was reached. */
#define EXPECT(r, want)                                                                    \
    do {                                                                                   \
        shmfifo_result got_ = (r);                                                         \
        if (got_ != (want)) {                                                              \
            char msg_[512];                                                                \
            shmfifo_last_error_message(msg_, sizeof msg_);                                 \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__,         \
                    __LINE__, #r, shmfifo_result_name(got_), shmfifo_result_name(want),    \
                    msg_);                                                                 \
            failures++;                                                                    \
        } else if ((want) < 200) {                                                         \
            reached[(want)] = 1;                                                           \
        }                                                                                  \
    } while (0)

static shmfifo_str s(const char *c) {
    shmfifo_str r = {c, strlen(c)};
    return r;
}

static shmfifo_str absent(void) {
    shmfifo_str r = {NULL, 0};
    return r;
}

static shmfifo_send_message msg(const char *group, const char *body, const char *dedup) {
    shmfifo_send_message m;
    memset(&m, 0, sizeof m);
    m.group_id = group ? s(group) : absent();
    m.body = s(body);
    m.dedup_id = dedup ? s(dedup) : absent();
    return m;
}

static int streq(shmfifo_str v, const char *c) {
    return v.data && v.len == strlen(c) && memcmp(v.data, c, v.len) == 0;
}

/* A queue name unique to this process (static storage: 8 names in rotation). */
static const char *qname(const char *tag) {
    static char bufs[8][128];
    static int next = 0;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "shmfifo-ctest-%d-%s", (int)getpid(), tag);
    return b;
}

static void write_file(const char *path, const void *data, size_t len, size_t total) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, len) == (ssize_t)len);
    if (total > len) CHECK(ftruncate(fd, (off_t)total) == 0);
    close(fd);
}

static void test_versions_and_names(void) {
    CHECK(strlen(shmfifo_version()) > 0);
    CHECK(shmfifo_layout_version() == 27);
    CHECK(strcmp(shmfifo_result_name(SHMFIFO_OK), "SHMFIFO_OK") == 0);
    CHECK(strcmp(shmfifo_result_name(SHMFIFO_DEDUP_TABLE_FULL), "SHMFIFO_DEDUP_TABLE_FULL") == 0);
    CHECK(strcmp(shmfifo_result_name(9999), "SHMFIFO_UNKNOWN_RESULT") == 0);
    shmfifo_config c = shmfifo_config_default();
    CHECK(c.visibility_timeout_ms == 30000 && c.deduplication == 1 && c.mode == 0600);
    CHECK(c.delay_ms == 0 && c.message_retention_period_ms == 345600000);
    CHECK(c.max_in_flight == 120000 && c.max_receive_count == 0 && c.release_on_death == 1);
    CHECK(c.dead_letter_queue.data == NULL && c.dead_letter_queue.len == 0);
    shmfifo_receive_options o = shmfifo_receive_options_default();
    CHECK(o.max_messages == 1 && o.wait_time_ms == -1 && o.attempt_id.data == NULL);
    shmfifo_redrive_options ro = shmfifo_redrive_options_default();
    CHECK(ro.destination.data == NULL && ro.max_per_second == 0 && ro.limit == 0);
    CHECK(ro.cancel == NULL);
}

/* Send, receive, attributes, delete, change visibility, batches, purge, attributes. */
static void test_round_trip(void) {
    const char *name = qname("rt");
    shmfifo_queue_unlink(name);
    shmfifo_config c = shmfifo_config_default();
    c.max_messages = 64;
    c.max_groups = 16;
    c.maximum_message_size = 4096;
    c.dedup_entries = 64;
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    CHECK(q != NULL);
    if (!q) return;
    char errbuf[64];
    CHECK(shmfifo_last_error_message(errbuf, sizeof errbuf) == 0 && errbuf[0] == 0);

    shmfifo_attribute attrs[2] = {
        {s("color"), s("String"), (const uint8_t *)"blue", 4},
        {s("raw"), s("Binary"), (const uint8_t *)"\x00\x01\x02", 3},
    };
    shmfifo_send_message m = msg("g1", "hello", "d-1");
    m.attributes = attrs;
    m.attribute_count = 2;
    shmfifo_send_result r1, r2;
    EXPECT(shmfifo_send(q, &m, &r1), SHMFIFO_OK);
    CHECK(strlen(r1.message_id) == 36 && r1.duplicate == 0);
    /* D1: the same dedup id again is a duplicate naming the original. */
    shmfifo_send_message dup = msg("g1", "other", "d-1");
    EXPECT(shmfifo_send(q, &dup, &r2), SHMFIFO_OK);
    CHECK(r2.duplicate == 1 && strcmp(r1.message_id, r2.message_id) == 0);
    CHECK(strcmp(r1.sequence_number, r2.sequence_number) == 0);
    shmfifo_send_message m2 = msg("g1", "world", "d-2");
    EXPECT(shmfifo_send(q, &m2, NULL), SHMFIFO_OK);

    /* A second handle in the same process: handles are independent participants. */
    shmfifo_queue *q2 = NULL;
    EXPECT(shmfifo_queue_open(name, &q2), SHMFIFO_OK);
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    CHECK(buf != NULL);
    shmfifo_message out[10];
    size_t n = 0;
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    o.visibility_timeout_ms = 60000;
    o.wait_time_ms = 100;
    EXPECT(shmfifo_receive(q2, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(streq(out[0].body, "hello") && streq(out[1].body, "world"));
        CHECK(streq(out[0].group_id, "g1") && streq(out[0].dedup_id, "d-1"));
        CHECK(strcmp(out[0].message_id, r1.message_id) == 0);
        CHECK(strcmp(out[0].sequence_number, r1.sequence_number) == 0);
        CHECK(out[0].receive_count == 1 && out[0].sent_timestamp_ms > 0);
        CHECK(out[0].first_receive_timestamp_ms + 1 >= out[0].sent_timestamp_ms); /* sent: arena clock, within 1 ms */
        CHECK(out[0].attribute_count == 2);
        CHECK(streq(out[0].attributes[0].name, "color"));
        CHECK(streq(out[0].attributes[0].data_type, "String"));
        CHECK(out[0].attributes[1].value_len == 3 &&
              memcmp(out[0].attributes[1].value, "\x00\x01\x02", 3) == 0);
        CHECK(strncmp(out[0].receipt_handle, "sf2", 3) == 0 && strlen(out[0].receipt_handle) == 42);
        /* The group is locked while in flight (R3): nothing more to receive. */
        size_t n2 = 9;
        shmfifo_message more[10];
        shmfifo_receive_options quick = shmfifo_receive_options_default();
        quick.wait_time_ms = 0;
        EXPECT(shmfifo_receive(q, &quick, buf, more, 10, &n2), SHMFIFO_OK);
        CHECK(n2 == 0);
        /* Change visibility of the second, then delete both from the first handle. */
        EXPECT(shmfifo_change_visibility(q, out[1].receipt_handle, 120000), SHMFIFO_OK);
        EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_OK);
        EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_RECEIPT_HANDLE_EXPIRED);
        shmfifo_handle_entry cv[1] = {{s("a"), s(out[1].receipt_handle), 0}};
        shmfifo_result codes[2];
        EXPECT(shmfifo_change_visibility_batch(q, cv, 1, codes), SHMFIFO_OK);
        CHECK(codes[0] == SHMFIFO_OK);
        /* Visible again at once: receive it again, then delete it with a batch. */
        n2 = 0;
        EXPECT(shmfifo_receive(q, &quick, buf, more, 10, &n2), SHMFIFO_OK);
        CHECK(n2 == 1 && more[0].receive_count == 2 && streq(more[0].body, "world"));
        if (n2 == 1) {
            shmfifo_handle_entry del[2] = {{s("x"), s(more[0].receipt_handle), 0},
                                           {s("y"), s("sf2-not-a-handle"), 0}};
            EXPECT(shmfifo_delete_batch(q, del, 2, codes), SHMFIFO_OK);
            CHECK(codes[0] == SHMFIFO_OK && codes[1] == SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
            reached[SHMFIFO_RECEIPT_HANDLE_IS_INVALID] = 1;
        }
    }
    /* A batch: two entries, the second a duplicate of the first (D9). */
    shmfifo_batch_entry be[2] = {{s("e1"), msg("g2", "b1", "same")},
                                 {s("e2"), msg("g2", "b2", "same")}};
    shmfifo_batch_result br[2];
    EXPECT(shmfifo_send_batch(q, be, 2, br), SHMFIFO_OK);
    CHECK(br[0].code == SHMFIFO_OK && br[1].code == SHMFIFO_OK);
    CHECK(br[0].result.duplicate == 0 && br[1].result.duplicate == 1);
    shmfifo_queue_attributes a;
    EXPECT(shmfifo_queue_get_attributes(q, &a), SHMFIFO_OK);
    CHECK(a.approximate_number_of_messages == 1 && a.dedup_entries == 64);
    CHECK(a.maximum_message_size == 4096 && a.deduplication == 1 && a.arena_bytes > 0);
    /* Lifetime counters: 3 sent, 2 duplicates, 3 received (one of them again after its
       visibility was set to 0), 2 deleted, summed over both handles. */
    shmfifo_counters cn;
    EXPECT(shmfifo_queue_get_counters(q2, &cn), SHMFIFO_OK);
    CHECK(cn.sent == 3 && cn.duplicates == 2 && cn.received == 3 && cn.deleted == 2);
    CHECK(cn.visibility_expiries == 1 && cn.moved_to_dead_letter == 0 && cn.retention_expiries == 0);
    /* The receive of the locked group (R3), a poll that did not wait: tallied by its handle
       (added to the queue's count 64 at a time, or when the handle closes). */
    shmfifo_counters cq;
    EXPECT(shmfifo_queue_get_counters(q, &cq), SHMFIFO_OK);
    CHECK(cq.empty_receives == 1 && cn.empty_receives == 0);
    EXPECT(shmfifo_queue_get_counters(q, NULL), SHMFIFO_NULL_ARGUMENT);
    uint64_t purged = 0;
    EXPECT(shmfifo_purge(q, &purged), SHMFIFO_OK);
    CHECK(purged == 1);
    EXPECT(shmfifo_recover(q), SHMFIFO_OK);
    EXPECT(shmfifo_queue_prefault(q), SHMFIFO_OK);
    EXPECT(shmfifo_queue_prefault(NULL), SHMFIFO_NULL_ARGUMENT);
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q2);
    shmfifo_queue_close(q);
    shmfifo_queue_close(NULL);
    shmfifo_receive_buffer_free(NULL);
    EXPECT(shmfifo_queue_unlink(name), SHMFIFO_OK);
}

/* Every error code a caller can provoke. */
static void test_errors(const char *dir) {
    const char *name = qname("err");
    shmfifo_queue_unlink(name);
    shmfifo_config c = shmfifo_config_default();
    c.max_messages = 4;
    c.size_limit = 0; /* no growth: the class fills */
    c.max_groups = 1;
    c.max_participants = 1;
    c.maximum_message_size = 1048576;
    c.dedup_entries = 1;
    c.dedup_overflow = 1; /* refuse rather than forget an id early */
    shmfifo_queue *q = NULL, *other = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    EXPECT(shmfifo_queue_create(name, &c, &other), SHMFIFO_QUEUE_NAME_EXISTS);
    CHECK(other == NULL);
    EXPECT(shmfifo_queue_open(name, &other), SHMFIFO_PARTICIPANT_LIMIT_REACHED);
    EXPECT(shmfifo_queue_open(qname("nonexistent"), &other), SHMFIFO_QUEUE_DOES_NOT_EXIST);
    /* A symlink at a queue's name is never followed (names cannot be squatted). */
    char target[256], link[256];
    snprintf(target, sizeof target, "/dev/shm/%s", name);
    snprintf(link, sizeof link, "/dev/shm/%s", qname("symlink"));
    unlink(link);
    CHECK(symlink(target, link) == 0);
    EXPECT(shmfifo_queue_open(link, &other), SHMFIFO_UNTRUSTED_FILE);
    CHECK(other == NULL);
    unlink(link);
    EXPECT(shmfifo_queue_create("bad name", NULL, &other), SHMFIFO_INVALID_QUEUE_NAME);
    {
        /* The caller's bytes quoted in a message are escaped: a NUL in a group id cut the
           message short (its length counted past it), an escape sequence reached the
           terminal the message is printed to. */
        shmfifo_send_message m = msg("g", "x", "d");
        m.group_id.data = "a\0b\x1b[31m";
        m.group_id.len = 8;
        EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
        char text[512];
        size_t n = shmfifo_last_error_message(text, sizeof text);
        CHECK(n < sizeof text);
        CHECK(strlen(text) == n);
        CHECK(strstr(text, "a\\u{0}b\\u{1b}[31m") != NULL);
        CHECK(strchr(text, 0x1b) == NULL);
    }
    shmfifo_config bad = shmfifo_config_default();
    bad.max_groups = 0;
    EXPECT(shmfifo_queue_create(qname("badcfg"), &bad, &other), SHMFIFO_INVALID_CONFIG);
    bad = shmfifo_config_default();
    bad.deduplication = 7;
    EXPECT(shmfifo_queue_create(qname("badcfg"), &bad, &other), SHMFIFO_INVALID_CONFIG);
    bad = shmfifo_config_default();
    bad.dedup_overflow = 2;
    EXPECT(shmfifo_queue_create(qname("badcfg"), &bad, &other), SHMFIFO_INVALID_CONFIG);
    /* A 0-or-1 field takes nothing else, and an error names the C field. (One name for the
       three: qname's eight buffers are the caller's names too.) */
    const char *badcfg = qname("badcfg");
    bad = shmfifo_config_default();
    bad.content_based_deduplication = 7;
    EXPECT(shmfifo_queue_create(badcfg, &bad, &other), SHMFIFO_INVALID_CONFIG);
    bad = shmfifo_config_default();
    bad.test_clock = 2;
    EXPECT(shmfifo_queue_create(badcfg, &bad, &other), SHMFIFO_INVALID_CONFIG);
    bad = shmfifo_config_default();
    bad.receive_wait_ms = 20001;
    EXPECT(shmfifo_queue_create(badcfg, &bad, &other), SHMFIFO_INVALID_CONFIG);
    {
        char why[256];
        shmfifo_last_error_message(why, sizeof why);
        CHECK(strstr(why, "receive_wait_ms") != NULL);
    }
    CHECK(other == NULL);
    bad = shmfifo_config_default();
    bad.max_messages = 1u << 30; /* a 256 GiB arena: more than /dev/shm holds */
    EXPECT(shmfifo_queue_create(qname("huge"), &bad, &other), SHMFIFO_NO_SPACE);
    EXPECT(shmfifo_queue_create("/etc/hostname/not-a-directory", NULL, &other), SHMFIFO_IO);
    {
        /* A directory that takes no new file is no missing directory ("no directory /proc/"
           was said), and the OS's refusal names the path. */
        char why[512];
        EXPECT(shmfifo_queue_create("/proc/shmfifo-test-no-file-here", NULL, &other), SHMFIFO_IO);
        shmfifo_last_error_message(why, sizeof why);
        CHECK(strstr(why, "/proc/shmfifo-test-no-file-here") != NULL);
        CHECK(strstr(why, "no directory") == NULL);
    }

    /* A queue whose file is cut under it: every call that reads it says so, the figures'
       too (they read as zeros, not the queue's). */
    char path[512];
    {
        snprintf(path, sizeof path, "%s/cut", dir);
        unlink(path);
        shmfifo_config cc = shmfifo_config_default();
        cc.max_messages = 16;
        shmfifo_queue *cq = NULL;
        EXPECT(shmfifo_queue_create(path, &cc, &cq), SHMFIFO_OK);
        if (cq) {
            shmfifo_queue_attributes qa;
            shmfifo_counters qc;
            EXPECT(shmfifo_queue_get_attributes(cq, &qa), SHMFIFO_OK);
            CHECK(truncate(path, 4096) == 0);
            EXPECT(shmfifo_queue_get_attributes(cq, &qa), SHMFIFO_TRUNCATED);
            EXPECT(shmfifo_queue_get_counters(cq, &qc), SHMFIFO_TRUNCATED);
            EXPECT(shmfifo_queue_prefault(cq), SHMFIFO_TRUNCATED);
            shmfifo_queue_close(cq);
        }
        unlink(path);
    }

    /* Files that are not (good) arenas. */
    snprintf(path, sizeof path, "%s/text", dir);
    write_file(path, "hello world, not an arena", 25, 0);
    EXPECT(shmfifo_queue_open(path, &other), SHMFIFO_NOT_AN_ARENA);
    unsigned char hdr[4096];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, "SHMFIFO\x1a", 8);
    snprintf(path, sizeof path, "%s/short", dir);
    write_file(path, hdr, 8, 0);
    EXPECT(shmfifo_queue_open(path, &other), SHMFIFO_TRUNCATED);
    hdr[8] = 99; /* layout version */
    snprintf(path, sizeof path, "%s/version", dir);
    write_file(path, hdr, sizeof hdr, 0);
    EXPECT(shmfifo_queue_open(path, &other), SHMFIFO_LAYOUT_VERSION_MISMATCH);
    hdr[8] = (unsigned char)shmfifo_layout_version();
    snprintf(path, sizeof path, "%s/notready", dir);
    write_file(path, hdr, sizeof hdr, 0); /* state word 0: a stale, never finished arena */
    EXPECT(shmfifo_queue_open(path, &other), SHMFIFO_NOT_READY);
    memcpy(hdr + 0x158, "READY\0\0\0", 8); /* ready, but hash algorithm 0 */
    snprintf(path, sizeof path, "%s/corrupt", dir);
    write_file(path, hdr, sizeof hdr, 0);
    EXPECT(shmfifo_queue_open(path, &other), SHMFIFO_CORRUPTED);
    CHECK(other == NULL);

    /* Send errors. */
    shmfifo_send_message m = msg("has space", "x", "d");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m = msg(NULL, "x", "d");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_MISSING_PARAMETER);
    /* S5: a per-message delay is refused on a FIFO queue (0, the zeroed default, is none). */
    m = msg("g", "x", "d");
    m.delay_seconds = 5;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m = msg("g", "bell\x07", "d");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_MESSAGE_CONTENTS);
    m = msg("g", "\xff\xfe", "d");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_MESSAGE_CONTENTS); /* S7, as a loan's */
    m = msg("g\xff", "x", "d"); /* an id is no body: the C layer's code for a string not UTF-8 */
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_UTF8);
    m = msg("g", "x", "d");
    m.body.data = NULL; /* absent: SQS's missing parameter, as an absent group */
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_MISSING_PARAMETER);
    EXPECT(shmfifo_send(NULL, &m, NULL), SHMFIFO_NULL_ARGUMENT);
    EXPECT(shmfifo_send(q, NULL, NULL), SHMFIFO_NULL_ARGUMENT);
    char err[256];
    size_t full = shmfifo_last_error_message(err, sizeof err);
    CHECK(full > 0 && strstr(err, "NULL") != NULL);
    CHECK(shmfifo_last_error_message(NULL, 0) == full);
    m = msg("g", "one", "d1");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_OK);
    /* A one-entry dedup table, strict setting (dedup_overflow 1): refused. */
    m = msg("g", "two", "d2");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_DEDUP_TABLE_FULL);
    EXPECT(shmfifo_purge(q, NULL), SHMFIFO_OK);

    /* Batch request-level errors. */
    shmfifo_batch_entry be[11];
    shmfifo_batch_result br[11];
    for (int i = 0; i < 11; i++) {
        be[i].id = s(i % 2 ? "odd" : "even");
        be[i].message = msg("g", "b", "d");
    }
    EXPECT(shmfifo_send_batch(q, be, 0, br), SHMFIFO_EMPTY_BATCH_REQUEST);
    EXPECT(shmfifo_send_batch(q, be, 11, br), SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    EXPECT(shmfifo_send_batch(q, be, 3, br), SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT);
    be[0].id = s("bad id!");
    EXPECT(shmfifo_send_batch(q, be, 1, br), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    char *big = malloc(600001);
    memset(big, 'b', 600000);
    big[600000] = 0;
    be[0].id = s("a");
    be[0].message = msg("g", big, "x1");
    be[1].id = s("b");
    be[1].message = msg("g", big, "x2");
    EXPECT(shmfifo_send_batch(q, be, 2, br), SHMFIFO_BATCH_REQUEST_TOO_LONG);
    free(big);
    /* SIZE_CLASS_FULL, on a dedup-off queue (this one's table holds one id). */
    EXPECT(shmfifo_purge(q, NULL), SHMFIFO_OK);
    shmfifo_queue_close(q);
    EXPECT(shmfifo_queue_unlink(name), SHMFIFO_OK);
    c = shmfifo_config_default();
    c.max_messages = 4;
    c.size_limit = 0; /* no growth: the class fills */
    c.max_groups = 1;
    c.deduplication = 0;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    m = msg("g", "first", NULL);
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_OK);
    m = msg("g2", "other group", NULL);
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_GROUP_LIMIT_REACHED);
    EXPECT(shmfifo_purge(q, NULL), SHMFIFO_OK);
    shmfifo_result last = SHMFIFO_OK;
    int sent = 0;
    for (int i = 0; i < 10 && last == SHMFIFO_OK; i++) {
        m = msg("g", "small", NULL);
        last = shmfifo_send(q, &m, NULL);
        sent += last == SHMFIFO_OK;
    }
    EXPECT(last, SHMFIFO_SIZE_CLASS_FULL);
    CHECK(sent == 4);
    m = msg("g", "x", "d");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE); /* dedup id when off */

    /* Receive errors. */
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_message out[10];
    size_t n = 0;
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    EXPECT(shmfifo_receive(q, &o, buf, out, 1, &n), SHMFIFO_BUFFER_TOO_SMALL);
    o.max_messages = 11;
    EXPECT(shmfifo_receive(q, &o, buf, out, 11, &n), SHMFIFO_INVALID_PARAMETER_VALUE);
    /* The request's error before the array's size, as SQS would answer it (R1). */
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_INVALID_PARAMETER_VALUE);
    o.max_messages = 1;
    o.borrow = 2; /* a flag is 0 or 1 (2 was read as "on") */
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_INVALID_PARAMETER_VALUE);
    o.borrow = 0;
    o.attempt_id = s("not valid");
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_INVALID_PARAMETER_VALUE);
    EXPECT(shmfifo_receive(q, NULL, NULL, out, 10, &n), SHMFIFO_NULL_ARGUMENT);
    EXPECT(shmfifo_delete(q, "not-a-handle"), SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
    EXPECT(shmfifo_delete(q, NULL), SHMFIFO_NULL_ARGUMENT);
    /* R11: a retry with the same attempt id returns the same message and receipt handle. */
    o.attempt_id = s("attempt-1");
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1);
    char first_handle[48] = {0};
    if (n == 1) {
        memcpy(first_handle, out[0].receipt_handle, sizeof first_handle);
    }
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && strcmp(out[0].receipt_handle, first_handle) == 0);
    if (n == 1) {
        char handle[48];
        memcpy(handle, out[0].receipt_handle, sizeof handle);
        EXPECT(shmfifo_delete(q, handle), SHMFIFO_OK);
        EXPECT(shmfifo_change_visibility(q, handle, 10), SHMFIFO_RECEIPT_HANDLE_EXPIRED);
    }
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q);
    EXPECT(shmfifo_queue_unlink(name), SHMFIFO_OK);
}

/* A small queue configuration for the lifecycle tests. */
static shmfifo_config small_config(void) {
    shmfifo_config c = shmfifo_config_default();
    c.max_messages = 64;
    c.max_groups = 16;
    c.maximum_message_size = 4096;
    c.dedup_entries = 64;
    return c;
}

/* A fresh queue at `name` of `max_messages` small slots that never grows (its class fills);
 * NULL (the failure checked) if it could not be created. */
static shmfifo_queue *fixed_queue(const char *name, uint32_t max_messages) {
    shmfifo_queue_unlink(name);
    shmfifo_config c = small_config();
    c.max_messages = max_messages;
    c.size_limit = 0; /* no growth: the class fills */
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    return q;
}

/* Receives what is visible now (no wait) with visibility `vt_ms`; returns the count. */
static size_t receive_now(shmfifo_queue *q, shmfifo_receive_buffer *buf, shmfifo_message *out,
                          int64_t vt_ms) {
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    o.visibility_timeout_ms = vt_ms;
    o.wait_time_ms = 0;
    size_t n = 0;
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    return n;
}

static shmfifo_queue_attributes attributes(shmfifo_queue *q) {
    shmfifo_queue_attributes a;
    memset(&a, 0, sizeof a);
    EXPECT(shmfifo_queue_get_attributes(q, &a), SHMFIFO_OK);
    return a;
}

/* Sets the cancellation flag of a redrive after 20 ms, from another thread. */
static void *cancel_later(void *flag) {
    usleep(20000);
    __atomic_store_n((int32_t *)flag, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* Dead-letter queue, redrive, live settings (set_attribute), delay, retention, in-flight
 * limit, and the lifecycle fields of the attributes. */
static void test_lifecycle(void) {
    const char *dlq_name = qname("dlq");
    const char *src_name = qname("src");
    shmfifo_queue_unlink(dlq_name);
    shmfifo_queue_unlink(src_name);
    shmfifo_config c = small_config();
    shmfifo_queue *dlq = NULL, *src = NULL, *other = NULL;
    EXPECT(shmfifo_queue_create(dlq_name, &c, &dlq), SHMFIFO_OK);
    if (!dlq) return;
    /* A redrive policy needs both halves. */
    c.max_receive_count = 1;
    EXPECT(shmfifo_queue_create(src_name, &c, &other), SHMFIFO_INVALID_CONFIG);
    c.max_receive_count = 0;
    c.dead_letter_queue = s(dlq_name);
    EXPECT(shmfifo_queue_create(src_name, &c, &other), SHMFIFO_INVALID_CONFIG);
    c.max_receive_count = 1;
    c.dead_letter_queue = s(qname("no-such-dlq"));
    EXPECT(shmfifo_queue_create(src_name, &c, &other), SHMFIFO_DEAD_LETTER_QUEUE);
    CHECK(other == NULL);
    c.dead_letter_queue = s(dlq_name);
    c.message_retention_period_ms = 3600000;
    c.max_in_flight = 1000;
    c.release_on_death = 0;
    EXPECT(shmfifo_queue_create(src_name, &c, &src), SHMFIFO_OK);
    if (!src) return;

    shmfifo_queue_attributes a = attributes(src);
    char dlq_path[300];
    snprintf(dlq_path, sizeof dlq_path, "/dev/shm/%s", dlq_name);
    CHECK(a.max_receive_count == 1 && strcmp(a.dead_letter_queue, dlq_path) == 0);
    CHECK(a.delay_ms == 0 && a.message_retention_period_ms == 3600000);
    CHECK(a.max_in_flight == 1000 && a.in_flight_count == 0 && a.moved_to_dead_letter == 0);
    CHECK(a.release_on_death == 0);
    a = attributes(dlq);
    CHECK(a.max_receive_count == 0 && a.dead_letter_queue[0] == 0);
    CHECK(a.message_retention_period_ms == 345600000 && a.max_in_flight == 120000);
    CHECK(a.release_on_death == 1);

    /* Received twice with visibility 0: the second receive moves it to the DLQ (X1). */
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_message out[10];
    shmfifo_send_message m = msg("g", "poison", "p-1");
    shmfifo_send_result sent;
    EXPECT(shmfifo_send(src, &m, &sent), SHMFIFO_OK);
    size_t n = receive_now(src, buf, out, 0);
    CHECK(n == 1 && out[0].receive_count == 1);
    CHECK(n == 1 && out[0].dead_letter_source.data == NULL && out[0].dead_letter_source.len == 0);
    n = receive_now(src, buf, out, 0);
    CHECK(n == 0);
    a = attributes(src);
    CHECK(a.moved_to_dead_letter == 1 && a.approximate_number_of_messages == 0);
    n = receive_now(dlq, buf, out, 0);
    CHECK(n == 1);
    if (n == 1) {
        char src_path[300];
        snprintf(src_path, sizeof src_path, "/dev/shm/%s", src_name);
        CHECK(out[0].dead_letter_source.len > 0 && streq(out[0].dead_letter_source, src_path));
        CHECK(out[0].receive_count == 2 && streq(out[0].body, "poison"));
        CHECK(strcmp(out[0].message_id, sent.message_id) == 0); /* it keeps its id */
    }

    /* Redrive it back to its source (visible again: received with visibility 0). */
    shmfifo_redrive_report rep;
    memset(&rep, 0xff, sizeof rep);
    EXPECT(shmfifo_queue_redrive(dlq, NULL, &rep), SHMFIFO_OK);
    CHECK(rep.moved == 1 && rep.skipped == 0 && rep.cancelled == 0);
    n = receive_now(src, buf, out, 60000);
    CHECK(n == 1 && streq(out[0].body, "poison") && out[0].receive_count == 1);
    CHECK(n == 1 && out[0].dead_letter_source.data == NULL);
    if (n == 1) EXPECT(shmfifo_delete(src, out[0].receipt_handle), SHMFIFO_OK);
    CHECK(attributes(dlq).approximate_number_of_messages == 0);

    /* A message sent straight to the DLQ names no source: skipped (in flight for 30 s). */
    m = msg("direct", "no source", "d-1");
    EXPECT(shmfifo_send(dlq, &m, NULL), SHMFIFO_OK);
    shmfifo_redrive_options ro = shmfifo_redrive_options_default();
    EXPECT(shmfifo_queue_redrive(dlq, &ro, &rep), SHMFIFO_OK);
    CHECK(rep.moved == 0 && rep.skipped == 1 && rep.cancelled == 0);
    EXPECT(shmfifo_purge(dlq, NULL), SHMFIFO_OK);
    /* A destination that does not exist: the error at once, also with nothing to move, and
       the report zeroed. */
    ro.destination = s(qname("no-such-destination"));
    rep.moved = 77;
    EXPECT(shmfifo_queue_redrive(dlq, &ro, &rep), SHMFIFO_QUEUE_DOES_NOT_EXIST);
    CHECK(rep.moved == 0 && rep.skipped == 0);
    EXPECT(shmfifo_send(dlq, &m, NULL), SHMFIFO_OK);
    EXPECT(shmfifo_queue_redrive(dlq, &ro, &rep), SHMFIFO_QUEUE_DOES_NOT_EXIST);
    EXPECT(shmfifo_purge(dlq, NULL), SHMFIFO_OK);
    /* To a named destination, at most 2 of 3 (three groups: none waits behind another). */
    const char *groups[3] = {"r0", "r1", "r2"};
    char dedup[16];
    for (int i = 0; i < 3; i++) {
        snprintf(dedup, sizeof dedup, "r-%d", i);
        m = msg(groups[i], "redrive me", dedup);
        EXPECT(shmfifo_send(dlq, &m, NULL), SHMFIFO_OK);
    }
    ro = shmfifo_redrive_options_default();
    ro.destination = s(src_name);
    ro.limit = 2;
    ro.max_per_second = 1000;
    EXPECT(shmfifo_queue_redrive(dlq, &ro, NULL), SHMFIFO_OK);
    CHECK(attributes(src).approximate_number_of_messages == 2);
    CHECK(attributes(dlq).approximate_number_of_messages == 1);
    /* A cancellation flag already set: nothing moves. */
    int32_t flag = 1;
    ro.limit = 0;
    ro.cancel = &flag;
    EXPECT(shmfifo_queue_redrive(dlq, &ro, &rep), SHMFIFO_OK);
    CHECK(rep.moved == 0 && rep.cancelled == 1);
    CHECK(attributes(dlq).approximate_number_of_messages == 1);
    /* Cancelled from another thread while it runs (4 per second: 0, 250, 500 ms). */
    for (int i = 0; i < 2; i++) {
        snprintf(dedup, sizeof dedup, "r-%d", 3 + i);
        m = msg(groups[i], "redrive me too", dedup);
        EXPECT(shmfifo_send(dlq, &m, NULL), SHMFIFO_OK);
    }
    flag = 0;
    ro.max_per_second = 4;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, &flag) == 0);
    EXPECT(shmfifo_queue_redrive(dlq, &ro, &rep), SHMFIFO_OK);
    pthread_join(t, NULL);
    CHECK(rep.cancelled == 1 && rep.moved < 3);
    a = attributes(dlq);
    CHECK(a.approximate_number_of_messages + rep.moved == 3); /* the rest is visible again */
    EXPECT(shmfifo_purge(dlq, NULL), SHMFIFO_OK);
    EXPECT(shmfifo_purge(src, NULL), SHMFIFO_OK);

    /* Live settings by SQS attribute name. */
    EXPECT(shmfifo_queue_set_attribute(src, s("VisibilityTimeoutMs"), s("1500")), SHMFIFO_OK);
    EXPECT(shmfifo_queue_set_attribute(src, s("MessageRetentionPeriod"), s("60")), SHMFIFO_OK);
    EXPECT(shmfifo_queue_set_attribute(src, s("ContentBasedDeduplication"), s("true")),
           SHMFIFO_OK);
    EXPECT(shmfifo_queue_set_attribute(src, s("RedrivePolicy"), s("")), SHMFIFO_OK);
    a = attributes(src);
    CHECK(a.visibility_timeout_ms == 1500 && a.message_retention_period_ms == 60000);
    CHECK(a.content_based_deduplication == 1);
    CHECK(a.max_receive_count == 0 && a.dead_letter_queue[0] == 0);
    char policy[512];
    snprintf(policy, sizeof policy, "{\"deadLetterTargetArn\":\"%s\",\"maxReceiveCount\":3}",
             dlq_name);
    EXPECT(shmfifo_queue_set_attribute(src, s("RedrivePolicy"), s(policy)), SHMFIFO_OK);
    a = attributes(src);
    CHECK(a.max_receive_count == 3 && strcmp(a.dead_letter_queue, dlq_path) == 0);
    EXPECT(shmfifo_queue_set_attribute(src, s("NoSuchAttribute"), s("1")),
           SHMFIFO_INVALID_ATTRIBUTE_NAME);
    EXPECT(shmfifo_queue_set_attribute(src, s("DeduplicationScope"), s("messageGroup")),
           SHMFIFO_ATTRIBUTE_NOT_MUTABLE);
    /* MaximumMessageSize and ReceiveMessageWaitTimeSeconds are live, as on SQS, within what
       the arena was created for. */
    EXPECT(shmfifo_queue_set_attribute(src, s("MaximumMessageSize"), s("99999999")),
           SHMFIFO_INVALID_CONFIG);
    EXPECT(shmfifo_queue_set_attribute(src, s("ReceiveMessageWaitTimeSeconds"), s("21")),
           SHMFIFO_INVALID_CONFIG);
    EXPECT(shmfifo_queue_set_attribute(src, s("ReceiveMessageWaitTimeSeconds"), s("0")),
           SHMFIFO_OK);
    snprintf(policy, sizeof policy, "{\"deadLetterTargetArn\":\"%s\",\"maxReceiveCount\":3}",
             qname("no-such-dlq"));
    EXPECT(shmfifo_queue_set_attribute(src, s("RedrivePolicy"), s(policy)),
           SHMFIFO_DEAD_LETTER_QUEUE);
    snprintf(policy, sizeof policy, "{\"deadLetterTargetArn\":\"%s\",\"maxReceiveCount\":3}",
             src_name);
    EXPECT(shmfifo_queue_set_attribute(src, s("RedrivePolicy"), s(policy)),
           SHMFIFO_DEAD_LETTER_QUEUE); /* its own dead-letter queue */
    /* A value that does not parse: SQS's InvalidAttributeValue (SHMFIFO_INVALID_CONFIG). */
    EXPECT(shmfifo_queue_set_attribute(src, s("RedrivePolicy"), s("{\"maxReceiveCount\":3}")),
           SHMFIFO_INVALID_CONFIG);
    EXPECT(shmfifo_queue_set_attribute(src, s("DelaySeconds"), s("soon")),
           SHMFIFO_INVALID_CONFIG);
    EXPECT(shmfifo_queue_set_attribute(src, s("DelaySeconds"), s("901")), SHMFIFO_INVALID_CONFIG);
    EXPECT(shmfifo_queue_set_attribute(src, absent(), s("1")), SHMFIFO_NULL_ARGUMENT);
    EXPECT(shmfifo_queue_set_attribute(src, s("DelayMs"), absent()), SHMFIFO_NULL_ARGUMENT);
    EXPECT(shmfifo_queue_set_attribute(NULL, s("DelayMs"), s("0")), SHMFIFO_NULL_ARGUMENT);
    a = attributes(src); /* nothing changed by the failures */
    CHECK(a.max_receive_count == 3 && a.delay_ms == 0 && a.message_retention_period_ms == 60000);

    /* Queue delay (changed live): a message sent now is delayed, then delivered. */
    EXPECT(shmfifo_queue_set_attribute(src, s("DelayMs"), s("300")), SHMFIFO_OK);
    m = msg("g", "late", NULL); /* content-based dedup id */
    EXPECT(shmfifo_send(src, &m, NULL), SHMFIFO_OK);
    a = attributes(src);
    CHECK(a.delay_ms == 300 && a.approximate_number_of_messages_delayed == 1);
    CHECK(a.approximate_number_of_messages == 0);
    CHECK(receive_now(src, buf, out, 60000) == 0);
    shmfifo_receive_options wait = shmfifo_receive_options_default();
    wait.wait_time_ms = 5000;
    n = 0;
    EXPECT(shmfifo_receive(src, &wait, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && streq(out[0].body, "late") && out[0].dedup_id.len == 64);
    a = attributes(src);
    CHECK(a.in_flight_count == 1 && a.approximate_number_of_messages_not_visible == 1);
    if (n == 1) EXPECT(shmfifo_delete(src, out[0].receipt_handle), SHMFIFO_OK);
    EXPECT(shmfifo_queue_set_attribute(src, s("DelaySeconds"), s("0")), SHMFIFO_OK);
    shmfifo_queue_close(src);
    shmfifo_queue_close(dlq);
    EXPECT(shmfifo_queue_unlink(src_name), SHMFIFO_OK);
    EXPECT(shmfifo_queue_unlink(dlq_name), SHMFIFO_OK);

    /* Retention (1 ms) and the in-flight limit (1), set at creation; a delay at creation. */
    const char *name = qname("limits");
    shmfifo_queue_unlink(name);
    c = small_config();
    c.message_retention_period_ms = 1;
    c.max_in_flight = 1;
    EXPECT(shmfifo_queue_create(name, &c, &src), SHMFIFO_OK);
    if (!src) {
        shmfifo_receive_buffer_free(buf);
        return;
    }
    m = msg("g", "short-lived", "t-1");
    EXPECT(shmfifo_send(src, &m, NULL), SHMFIFO_OK);
    usleep(20000);
    CHECK(receive_now(src, buf, out, 60000) == 0);
    a = attributes(src);
    CHECK(a.retention_expiries == 1 && a.approximate_number_of_messages == 0);
    EXPECT(shmfifo_queue_set_attribute(src, s("MessageRetentionPeriodMs"), s("60000")),
           SHMFIFO_OK);
    for (int i = 0; i < 2; i++) {
        m = msg(groups[i], "limited", i ? "l-1" : "l-0");
        EXPECT(shmfifo_send(src, &m, NULL), SHMFIFO_OK);
    }
    n = receive_now(src, buf, out, 60000);
    CHECK(n == 1); /* two visible groups, but only one message may be in flight */
    a = attributes(src);
    CHECK(a.in_flight_count == 1 && a.in_flight_limit_hits >= 1 && a.max_in_flight == 1);
    EXPECT(shmfifo_purge(src, NULL), SHMFIFO_OK);
    shmfifo_queue_close(src);
    EXPECT(shmfifo_queue_unlink(name), SHMFIFO_OK);
    c = small_config();
    c.delay_ms = 900001;
    EXPECT(shmfifo_queue_create(name, &c, &src), SHMFIFO_INVALID_CONFIG);
    c.delay_ms = 60000;
    EXPECT(shmfifo_queue_create(name, &c, &src), SHMFIFO_OK);
    if (src) {
        m = msg("g", "delayed", "x-1");
        EXPECT(shmfifo_send(src, &m, NULL), SHMFIFO_OK);
        a = attributes(src);
        CHECK(a.delay_ms == 60000 && a.approximate_number_of_messages_delayed == 1);
        shmfifo_queue_close(src);
        EXPECT(shmfifo_queue_unlink(name), SHMFIFO_OK);
    }
    shmfifo_receive_buffer_free(buf);
}

/* Every count and length is checked against its SQS limit before the library reads
   the caller's memory. Each parameter below is huge while the caller's memory ends at an
   inaccessible page: an over-read would crash (SIGSEGV), a check returns the code. */
static void test_lengths_checked_before_reading(void) {
    const char *name = qname("lengths");
    shmfifo_queue_unlink(name);
    shmfifo_config c = shmfifo_config_default();
    c.max_messages = 16;
    c.maximum_message_size = 4096;
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    long page = sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    CHECK(mprotect(mem + page, page, PROT_NONE) == 0);
    /* 16 bytes of text, then the guard page. */
    char *edge = mem + page - 16;
    memset(edge, 'a', 16);
    const size_t huge = (size_t)1 << 40;
    shmfifo_send_message m;

    m = msg("g", "x", "d");
    m.group_id.data = edge;
    m.group_id.len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m.group_id.len = 129; /* one past the limit, reaching into the guard page */
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);

    m = msg("g", "x", "d");
    m.dedup_id.data = edge;
    m.dedup_id.len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);

    m = msg("g", "x", "d");
    m.body.data = edge;
    m.body.len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m.body.len = 4097; /* past this queue's maximum message size */
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);

    shmfifo_attribute *attrs = (shmfifo_attribute *)(mem + page - sizeof(shmfifo_attribute));
    memset(attrs, 0, sizeof *attrs);
    attrs->name = s("n");
    attrs->data_type = s("String");
    attrs->value = (const uint8_t *)"v";
    attrs->value_len = 1;
    m = msg("g", "x", "d");
    m.attributes = attrs;
    m.attribute_count = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m.attribute_count = 11;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    m.attribute_count = 1;
    attrs->name.data = edge;
    attrs->name.len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    attrs->name = s("n");
    attrs->data_type.data = edge;
    attrs->data_type.len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    attrs->data_type = s("String");
    attrs->value = (const uint8_t *)edge;
    attrs->value_len = huge;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);

    /* Batches: n far past 10, the entries ending at the guard page. */
    shmfifo_batch_entry *be = (shmfifo_batch_entry *)(mem + page - sizeof(shmfifo_batch_entry));
    be->id = s("one");
    be->message = msg("g", "x", "d");
    shmfifo_batch_result br[1];
    EXPECT(shmfifo_send_batch(q, be, SIZE_MAX, br), SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    EXPECT(shmfifo_send_batch(q, be, huge, br), SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    /* An entry id past 80 bytes: SQS's InvalidBatchEntryId, unread. */
    be->id.data = edge;
    be->id.len = huge;
    EXPECT(shmfifo_send_batch(q, be, 1, br), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    be->id.len = 81;
    EXPECT(shmfifo_send_batch(q, be, 1, br), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    be->id = s("one");
    shmfifo_handle_entry *he = (shmfifo_handle_entry *)(mem + page - sizeof(shmfifo_handle_entry));
    he->id = s("one");
    he->receipt = s("sf2");
    he->timeout_ms = 0;
    shmfifo_result codes[1];
    EXPECT(shmfifo_delete_batch(q, he, SIZE_MAX, codes), SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    EXPECT(shmfifo_change_visibility_batch(q, he, huge, codes),
           SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    he->id.data = edge;
    he->id.len = huge;
    EXPECT(shmfifo_delete_batch(q, he, 1, codes), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    EXPECT(shmfifo_change_visibility_batch(q, he, 1, codes), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    he->id.len = 81;
    EXPECT(shmfifo_delete_batch(q, he, 1, codes), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    EXPECT(shmfifo_change_visibility_batch(q, he, 1, codes), SHMFIFO_INVALID_BATCH_ENTRY_ID);
    he->id = s("one");
    he->receipt.data = edge;
    he->receipt.len = huge;
    EXPECT(shmfifo_delete_batch(q, he, 1, codes), SHMFIFO_INVALID_PARAMETER_VALUE);
    {
        /* A receipt that is not UTF-8 fails its own entry, as any other bad receipt (it
           failed the whole batch). */
        shmfifo_handle_entry two[2];
        shmfifo_result c2[2];
        two[0].id = s("bytes");
        two[0].receipt.data = "sf2\xff\xfe";
        two[0].receipt.len = 5;
        two[0].timeout_ms = 0;
        two[1].id = s("text");
        two[1].receipt = s("sf2-not-a-handle");
        two[1].timeout_ms = 0;
        EXPECT(shmfifo_delete_batch(q, two, 2, c2), SHMFIFO_OK);
        EXPECT(c2[0], SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
        EXPECT(c2[1], SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
        EXPECT(shmfifo_change_visibility_batch(q, two, 2, c2), SHMFIFO_OK);
        EXPECT(c2[0], SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
        /* The same bytes to the single calls: the same code. */
        EXPECT(shmfifo_delete(q, "sf2\xff\xfe"), SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
        EXPECT(shmfifo_change_visibility(q, "sf2\xff\xfe", 0), SHMFIFO_RECEIPT_HANDLE_IS_INVALID);
    }

    /* S13: an entry too large for the queue (a body, or an attribute value, past its
       4,096-byte maximum, or 11 attributes) fails alone, its memory unread; the others are
       sent, in order. A batch over 1 MiB in all is refused whole. */
    shmfifo_batch_entry five[5];
    shmfifo_batch_result r5[5];
    const char *bodies[5] = {"first", "big body", "big value", "11 attributes", "last"};
    const char *dedups[5] = {"s13-1", "s13-2", "s13-3", "s13-4", "s13-5"};
    const char *ids[5] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) {
        five[i].id = s(ids[i]);
        five[i].message = msg("s13", bodies[i], dedups[i]);
    }
    five[1].message.body.data = edge;
    five[1].message.body.len = 4097;
    attrs->name = s("n");
    attrs->data_type = s("String");
    attrs->value = (const uint8_t *)edge;
    attrs->value_len = 4097;
    five[2].message.attributes = attrs;
    five[2].message.attribute_count = 1;
    five[3].message.attributes = attrs;
    five[3].message.attribute_count = 11;
    memset(r5, 0xff, sizeof r5);
    EXPECT(shmfifo_send_batch(q, five, 5, r5), SHMFIFO_OK);
    CHECK(r5[0].code == SHMFIFO_OK && r5[4].code == SHMFIFO_OK);
    for (int i = 1; i < 4; i++) {
        CHECK(r5[i].code == SHMFIFO_INVALID_PARAMETER_VALUE);
        CHECK(r5[i].result.message_id[0] == 0);
    }
    CHECK(r5[0].result.sequence_lo < r5[4].result.sequence_lo);
    {
        shmfifo_receive_buffer *rb = shmfifo_receive_buffer_new();
        shmfifo_message got[10];
        size_t n = receive_now(q, rb, got, 60000);
        CHECK(n == 2);
        if (n == 2) CHECK(streq(got[0].body, "first") && streq(got[1].body, "last"));
        shmfifo_receive_buffer_free(rb);
        EXPECT(shmfifo_purge(q, NULL), SHMFIFO_OK);
    }
    /* So does an entry whose fields cannot be read as text: a body that is not UTF-8, a
       group id over 128 bytes, an attribute name over 256, an absent body; with its own code. */
    for (int i = 0; i < 5; i++) {
        five[i].message = msg("s13", bodies[i], dedups[i]);
    }
    five[1].message.body = (shmfifo_str){"\xff", 1};
    five[2].message.group_id.data = edge;
    five[2].message.group_id.len = 129;
    attrs->value = (const uint8_t *)"v";
    attrs->value_len = 1;
    attrs->name.data = edge;
    attrs->name.len = 257;
    five[3].message.attributes = attrs;
    five[3].message.attribute_count = 1;
    five[4].message.body = (shmfifo_str){NULL, 0};
    memset(r5, 0xff, sizeof r5);
    EXPECT(shmfifo_send_batch(q, five, 5, r5), SHMFIFO_OK);
    CHECK(r5[0].code == SHMFIFO_OK);
    CHECK(r5[1].code == SHMFIFO_INVALID_MESSAGE_CONTENTS);
    CHECK(r5[2].code == SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(r5[3].code == SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(r5[4].code == SHMFIFO_MISSING_PARAMETER);
    for (int i = 1; i < 5; i++) CHECK(r5[i].result.message_id[0] == 0);
    CHECK(attributes(q).approximate_number_of_messages == 1);
    EXPECT(shmfifo_purge(q, NULL), SHMFIFO_OK);
    attrs->name = s("n");
    /* Still request-level: ids checked on every entry (an oversized one's too), and the
       lengths' total, oversized bodies included, against 1 MiB. */
    for (int i = 0; i < 5; i++) {
        five[i].message = msg("s13", bodies[i], dedups[i]);
    }
    five[2].message.attributes = attrs;
    five[2].message.attribute_count = 1;
    attrs->value = (const uint8_t *)edge;
    attrs->value_len = 4097;
    five[3].id = s("a");
    EXPECT(shmfifo_send_batch(q, five, 5, r5), SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT);
    five[3].id = s("d");
    five[1].message.body.len = huge;
    EXPECT(shmfifo_send_batch(q, five, 5, r5), SHMFIFO_BATCH_REQUEST_TOO_LONG);
    CHECK(attributes(q).approximate_number_of_messages == 0);

    /* NUL-terminated arguments (names, receipt handles) are read at most 4,096 bytes far. */
    char *longstr = malloc(5001);
    memset(longstr, 'a', 5000);
    longstr[5000] = 0;
    EXPECT(shmfifo_delete(q, longstr), SHMFIFO_INVALID_PARAMETER_VALUE);
    shmfifo_queue *other = NULL;
    EXPECT(shmfifo_queue_open(longstr, &other), SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(other == NULL);
    free(longstr);

    /* Settings by name: a huge name. */
    shmfifo_str big = {edge, huge};
    EXPECT(shmfifo_queue_set_attribute(q, big, s("1")), SHMFIFO_INVALID_PARAMETER_VALUE);

    munmap(mem, 2 * page);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
}

/* A test clock (extension): a 12-hour visibility timeout ends when the clock is advanced,
   from C as from Rust (R4); a real clock cannot be advanced. */
static void test_test_clock(void) {
    const char *name = qname("clock");
    shmfifo_queue_unlink(name);
    shmfifo_config c = shmfifo_config_default();
    c.max_messages = 64;
    c.max_groups = 16;
    c.maximum_message_size = 4096;
    c.dedup_entries = 64;
    c.test_clock = 1;
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    shmfifo_send_message m = msg("g", "job", "d-1");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_OK);
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_message out[10];
    size_t n = 0;
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 1;
    o.wait_time_ms = 0;
    o.visibility_timeout_ms = 12 * 3600 * 1000;
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1);
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 0);
    EXPECT(shmfifo_queue_advance_clock(q, 12 * 3600 * 1000), SHMFIFO_OK);
    EXPECT(shmfifo_receive(q, &o, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && out[0].receive_count == 2);
    shmfifo_queue_attributes a = attributes(q);
    CHECK(a.test_clock_ms == 1 + 12ull * 3600 * 1000);
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
    c.test_clock = 0;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    EXPECT(shmfifo_queue_advance_clock(q, 1000), SHMFIFO_INVALID_CONFIG);
    {
        /* Said in C's words: the field to set, not the Rust builder. */
        char why[256];
        shmfifo_last_error_message(why, sizeof why);
        CHECK(strstr(why, "shmfifo_config.test_clock = 1") != NULL);
    }
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
}

/* Receives what is visible and deletes the first message after 30 ms, from another thread (a consumer). */
static void *delete_one_later(void *q) {
    usleep(30000);
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_message out[10];
    if (receive_now((shmfifo_queue *)q, buf, out, 600000) >= 1)
        EXPECT(shmfifo_delete((shmfifo_queue *)q, out[0].receipt_handle), SHMFIFO_OK);
    else
        CHECK(!"a message to delete");
    shmfifo_receive_buffer_free(buf);
    return NULL;
}

/* shmfifo_send_timeout: on a full size class it waits, and fails when the time passes; a
 * delete in another thread wakes it and its message goes in. */
static void test_send_timeout(void) {
    const char *name = qname("wait");
    shmfifo_queue *q = fixed_queue(name, 4);
    if (!q) return;
    const char *ids[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        shmfifo_send_message m = msg(ids[i], "x", ids[i]);
        EXPECT(shmfifo_send_timeout(q, &m, 1000, NULL), SHMFIFO_OK);
    }
    shmfifo_send_message fifth = msg("e", "x", "e");
    EXPECT(shmfifo_send(q, &fifth, NULL), SHMFIFO_SIZE_CLASS_FULL);
    EXPECT(shmfifo_send_timeout(q, &fifth, 0, NULL), SHMFIFO_SIZE_CLASS_FULL);
    EXPECT(shmfifo_send_timeout(q, &fifth, 20, NULL), SHMFIFO_SIZE_CLASS_FULL);
    /* Other errors return at once, whatever the timeout. */
    shmfifo_send_message bad = msg("e", "x", NULL);
    EXPECT(shmfifo_send_timeout(q, &bad, 60000, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, delete_one_later, q) == 0);
    shmfifo_send_result r;
    EXPECT(shmfifo_send_timeout(q, &fifth, 30000, &r), SHMFIFO_OK);
    CHECK(r.duplicate == 0);
    pthread_join(t, NULL);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
}

/* A loaned send (the body written in place), a borrowing receive (the body read in
 * place) and its check, a loan given back, a refused loan kept, and a binary queue's bytes. */
static void test_zero_copy(void) {
    const char *name = qname("zc");
    shmfifo_queue_unlink(name);
    shmfifo_config c = small_config();
    c.max_messages = 4;
    c.size_limit = 0; /* no growth: the class fills */
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;

    shmfifo_loan *l = NULL;
    EXPECT(shmfifo_loan_new(q, s("g"), 0, &l), SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(l == NULL);
    /* S1: an absent group is SQS's missing parameter, as for shmfifo_send; a batch's (S12)
       its invalid parameter value, as for shmfifo_send_batch. */
    EXPECT(shmfifo_loan_new(q, absent(), 16, &l), SHMFIFO_MISSING_PARAMETER);
    CHECK(l == NULL);
    {
        shmfifo_loan_member one = {0};
        one.len = 4;
        one.dedup_id = s("nb");
        shmfifo_loan_batch *nb = NULL;
        EXPECT(shmfifo_loan_batch_new(q, absent(), &one, 1, &nb), SHMFIFO_INVALID_PARAMETER_VALUE);
        CHECK(nb == NULL);
    }
    EXPECT(shmfifo_loan_new(q, s("g"), 16, &l), SHMFIFO_OK);
    CHECK(l != NULL && shmfifo_loan_len(l) == 16);
    memcpy(shmfifo_loan_data(l), "in place", 8);
    /* A body is never empty: 0 is refused, the loan unchanged (it kept a byte, and sent it). */
    EXPECT(shmfifo_loan_truncate(l, 0), SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(shmfifo_loan_len(l) == 16);
    EXPECT(shmfifo_loan_truncate(l, 8), SHMFIFO_OK);
    CHECK(shmfifo_loan_len(l) == 8);
    /* No dedup id on a deduplicating queue: refused, the loan kept. */
    EXPECT(shmfifo_loan_send(&l, absent(), NULL, 0, NULL), SHMFIFO_INVALID_PARAMETER_VALUE);
    CHECK(l != NULL && memcmp(shmfifo_loan_data(l), "in place", 8) == 0);
    shmfifo_send_result r;
    EXPECT(shmfifo_loan_send(&l, s("d1"), NULL, 0, &r), SHMFIFO_OK);
    CHECK(l == NULL && r.duplicate == 0);

    /* A loan released unsent gives its slot back: four loans fill the class, a release
     * makes room. */
    shmfifo_loan *ls[3];
    for (int i = 0; i < 3; i++) EXPECT(shmfifo_loan_new(q, s("h"), 4, &ls[i]), SHMFIFO_OK);
    shmfifo_loan *none = NULL;
    EXPECT(shmfifo_loan_new(q, s("h"), 4, &none), SHMFIFO_SIZE_CLASS_FULL);
    for (int i = 0; i < 3; i++) shmfifo_loan_release(ls[i]);
    shmfifo_loan_release(NULL);

    shmfifo_receive_buffer *b = shmfifo_receive_buffer_new();
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    o.wait_time_ms = 0;
    o.borrow = 1;
    shmfifo_message out[10];
    size_t n = 0;
    EXPECT(shmfifo_receive(q, &o, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && out[0].body.len == 8 && memcmp(out[0].body.data, "in place", 8) == 0);
    EXPECT(shmfifo_verify(q, out[0].receipt_handle), SHMFIFO_OK);
    char handle[48];
    memcpy(handle, out[0].receipt_handle, sizeof handle);
    EXPECT(shmfifo_delete(q, handle), SHMFIFO_OK);
    EXPECT(shmfifo_verify(q, handle), SHMFIFO_RECEIPT_HANDLE_EXPIRED);
    /* Borrowed with an attempt id: the retry replays the same message, in place (R11). */
    shmfifo_loan_new(q, s("g"), 5, &l);
    memcpy(shmfifo_loan_data(l), "again", 5);
    EXPECT(shmfifo_loan_send(&l, s("d2"), NULL, 0, NULL), SHMFIFO_OK);
    shmfifo_receive_options att = o;
    att.attempt_id = s("a1");
    EXPECT(shmfifo_receive(q, &att, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && out[0].body.len == 5 && memcmp(out[0].body.data, "again", 5) == 0);
    memcpy(handle, out[0].receipt_handle, sizeof handle);
    EXPECT(shmfifo_receive(q, &att, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && strcmp(out[0].receipt_handle, handle) == 0);
    CHECK(memcmp(out[0].body.data, "again", 5) == 0);
    EXPECT(shmfifo_verify(q, handle), SHMFIFO_OK);
    EXPECT(shmfifo_delete(q, handle), SHMFIFO_OK);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);

    /* A binary queue: any bytes, sent copied and loaned, received copied and borrowed. */
    const char *bname = qname("zcbin");
    shmfifo_queue_unlink(bname);
    c = small_config();
    c.body_mode = 1;
    c.deduplication = 0;
    EXPECT(shmfifo_queue_create(bname, &c, &q), SHMFIFO_OK);
    if (!q) {
        shmfifo_receive_buffer_free(b);
        return;
    }
    shmfifo_queue_attributes a;
    EXPECT(shmfifo_queue_get_attributes(q, &a), SHMFIFO_OK);
    CHECK(a.body_mode == 1);
    const unsigned char frame[4] = {0x00, 0xff, 0x01, 0xfe};
    shmfifo_send_message m = msg("g", "", NULL);
    m.body.data = (const char *)frame;
    m.body.len = sizeof frame;
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_OK);
    EXPECT(shmfifo_loan_new(q, s("g"), sizeof frame, &l), SHMFIFO_OK);
    memcpy(shmfifo_loan_data(l), frame, sizeof frame);
    EXPECT(shmfifo_loan_send(&l, absent(), NULL, 0, NULL), SHMFIFO_OK);
    o.borrow = 0;
    o.max_messages = 1;
    EXPECT(shmfifo_receive(q, &o, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && out[0].body.len == 4 && memcmp(out[0].body.data, frame, 4) == 0);
    EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_OK);
    o.borrow = 1;
    EXPECT(shmfifo_receive(q, &o, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && out[0].body.len == 4 && memcmp(out[0].body.data, frame, 4) == 0);
    EXPECT(shmfifo_verify(q, out[0].receipt_handle), SHMFIFO_OK);
    EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_OK);
    shmfifo_receive_buffer_free(b);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(bname);
}

/* A loaned batch: one slot for three messages to one group, each body written in place, sent
 * as one unit; a member repeating a dedup id sent before answered as its duplicate (D1), a
 * member whose body is not text failing alone (S7); a batch released unsent gives its slot
 * back; the request's own errors lend nothing. */
static void test_loan_batch(void) {
    const char *name = qname("zcb");
    shmfifo_queue *q = fixed_queue(name, 2);
    if (!q) return;
    shmfifo_send_message first = msg("g", "first", "d0");
    EXPECT(shmfifo_send(q, &first, NULL), SHMFIFO_OK);

    shmfifo_loan_member m[4];
    memset(m, 0, sizeof m);
    const char *ids[4] = {"d0", "d1", "d2", "d3"};
    for (int j = 0; j < 4; j++) {
        m[j].len = 4;
        m[j].dedup_id = s(ids[j]);
    }
    /* Each refusal writes NULL to *out (set to a non-NULL value before each). */
    shmfifo_loan_batch *const poison = (shmfifo_loan_batch *)&m;
    shmfifo_loan_batch *lb = poison;
    EXPECT(shmfifo_loan_batch_new(q, s("g"), m, 0, &lb), SHMFIFO_EMPTY_BATCH_REQUEST);
    CHECK(lb == NULL);
    lb = poison;
    EXPECT(shmfifo_loan_batch_new(q, s("g"), m, 11, &lb), SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST);
    CHECK(lb == NULL);
    lb = poison;
    m[1].len = 0;
    EXPECT(shmfifo_loan_batch_new(q, s("g"), m, 4, &lb), SHMFIFO_INVALID_PARAMETER_VALUE);
    m[1].len = 4;
    CHECK(lb == NULL);
    /* Released unsent, twice over: the class's other slot comes back each time. */
    for (int i = 0; i < 2; i++) {
        EXPECT(shmfifo_loan_batch_new(q, s("g"), m, 4, &lb), SHMFIFO_OK);
        CHECK(lb != NULL && shmfifo_loan_batch_count(lb) == 4);
        shmfifo_loan_batch_release(lb);
        lb = NULL;
    }
    shmfifo_loan_batch_release(NULL);

    EXPECT(shmfifo_loan_batch_new(q, s("g"), m, 4, &lb), SHMFIFO_OK);
    const char *bodies[4] = {"dup!", "one.", "\xff\xfe\xfd\xfc", "two."};
    for (size_t j = 0; j < 4; j++) {
        size_t len = 0;
        uint8_t *p = shmfifo_loan_batch_data(lb, j, &len);
        CHECK(p != NULL && len == 4);
        if (p) memcpy(p, bodies[j], 4);
    }
    size_t len = 7;
    CHECK(shmfifo_loan_batch_data(lb, 4, &len) == NULL && len == 0);
    shmfifo_batch_result r[4];
    /* No results array: refused, the batch kept. */
    EXPECT(shmfifo_loan_batch_send(&lb, NULL), SHMFIFO_NULL_ARGUMENT);
    CHECK(lb != NULL && shmfifo_loan_batch_count(lb) == 4);
    EXPECT(shmfifo_loan_batch_send(&lb, r), SHMFIFO_OK);
    CHECK(lb == NULL);
    CHECK(r[0].code == SHMFIFO_OK && r[0].result.duplicate == 1);
    CHECK(r[1].code == SHMFIFO_OK && r[1].result.duplicate == 0);
    CHECK(r[2].code == SHMFIFO_INVALID_MESSAGE_CONTENTS);
    CHECK(r[3].code == SHMFIFO_OK && r[3].result.duplicate == 0);
    EXPECT(shmfifo_loan_batch_send(&lb, r), SHMFIFO_NULL_ARGUMENT);

    shmfifo_receive_buffer *b = shmfifo_receive_buffer_new();
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    o.wait_time_ms = 0;
    shmfifo_message out[10];
    size_t n = 0;
    EXPECT(shmfifo_receive(q, &o, b, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(out[0].body.len == 5 && memcmp(out[0].body.data, "first", 5) == 0);
        CHECK(out[1].body.len == 4 && memcmp(out[1].body.data, "one.", 4) == 0);
        CHECK(out[2].body.len == 4 && memcmp(out[2].body.data, "two.", 4) == 0);
        CHECK(strcmp(out[1].message_id, r[1].result.message_id) == 0);
        CHECK(strcmp(out[2].message_id, r[3].result.message_id) == 0);
        CHECK(strcmp(out[0].message_id, r[0].result.message_id) == 0);
    }
    shmfifo_receive_buffer_free(b);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The flag as the header recommends it: a lock-free C11 atomic, stored from the handler. */
static atomic_int alarm_flag = 0;

static void on_alarm(int sig) {
    (void)sig;
    atomic_store_explicit(&alarm_flag, 1, memory_order_relaxed);
}

/* shmfifo_receive_cancellable: a 20-second long poll ended by a flag another thread sets, or a
 * signal handler; a flag already set still takes what is there, without waiting; NULL is
 * shmfifo_receive; a cancelled wait counts once as an empty receive. */
static void test_receive_cancellable(void) {
    const char *name = qname("cancel");
    shmfifo_queue_unlink(name);
    shmfifo_config c = small_config();
    shmfifo_queue *q = NULL;
    EXPECT(shmfifo_queue_create(name, &c, &q), SHMFIFO_OK);
    if (!q) return;
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_message out[10];
    size_t n = 99;
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 10;
    o.wait_time_ms = 20000;
    shmfifo_counters c0, c1;
    EXPECT(shmfifo_queue_get_counters(q, &c0), SHMFIFO_OK);

    /* Set by another thread after 20 ms: the wait ends with nothing. */
    int32_t flag = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancel_later, &flag) == 0);
    double t0 = now_s();
    EXPECT(shmfifo_receive_cancellable(q, &o, &flag, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 0);
    CHECK(now_s() - t0 < 5.0);
    pthread_join(t, NULL);
    EXPECT(shmfifo_queue_get_counters(q, &c1), SHMFIFO_OK);
    CHECK(c1.empty_receives == c0.empty_receives + 1);

    /* Already set: what is there is taken, without a wait; then nothing, at once. */
    shmfifo_send_message m = msg("g", "one", "1");
    EXPECT(shmfifo_send(q, &m, NULL), SHMFIFO_OK);
    EXPECT(shmfifo_receive_cancellable(q, &o, &flag, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && streq(out[0].body, "one"));
    if (n == 1) EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_OK);
    t0 = now_s();
    EXPECT(shmfifo_receive_cancellable(q, &o, &flag, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 0 && now_s() - t0 < 5.0);

    /* A borrowing receive, ended by a signal handler's store (SIGALRM after 50 ms). */
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, &old_sa) == 0);
    struct itimerval it, off;
    memset(&it, 0, sizeof it);
    memset(&off, 0, sizeof off);
    it.it_value.tv_usec = 50000;
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    o.borrow = 1;
    t0 = now_s();
    EXPECT(shmfifo_receive_cancellable(q, &o, (const int32_t *)&alarm_flag, buf, out, 10, &n),
           SHMFIFO_OK);
    CHECK(n == 0 && atomic_load(&alarm_flag) == 1 && now_s() - t0 < 5.0);
    /* Disarmed before the handler goes (a timer still armed would end the process). */
    CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
    CHECK(sigaction(SIGALRM, &old_sa, NULL) == 0);

    /* NULL: a receive as shmfifo_receive, bodies in place where asked. */
    shmfifo_send_message m2 = msg("g", "two", "2");
    EXPECT(shmfifo_send(q, &m2, NULL), SHMFIFO_OK);
    EXPECT(shmfifo_receive_cancellable(q, &o, NULL, buf, out, 10, &n), SHMFIFO_OK);
    CHECK(n == 1 && streq(out[0].body, "two"));
    if (n == 1) {
        EXPECT(shmfifo_verify(q, out[0].receipt_handle), SHMFIFO_OK);
        EXPECT(shmfifo_delete(q, out[0].receipt_handle), SHMFIFO_OK);
    }
    /* The request's own errors first, as shmfifo_receive's. */
    o.max_messages = 11;
    EXPECT(shmfifo_receive_cancellable(q, &o, &flag, buf, out, 10, &n),
           SHMFIFO_INVALID_PARAMETER_VALUE);
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(name);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    test_versions_and_names();
    test_round_trip();
    test_errors(dir);
    test_lifecycle();
    test_lengths_checked_before_reading();
    test_test_clock();
    test_send_timeout();
    test_zero_copy();
    test_loan_batch();
    test_receive_cancellable();
    /* Every provokable code was reached. */
    const shmfifo_result all[] = {
        SHMFIFO_OK, SHMFIFO_INVALID_PARAMETER_VALUE, SHMFIFO_MISSING_PARAMETER,
        SHMFIFO_INVALID_MESSAGE_CONTENTS, SHMFIFO_RECEIPT_HANDLE_IS_INVALID,
        SHMFIFO_RECEIPT_HANDLE_EXPIRED, SHMFIFO_EMPTY_BATCH_REQUEST,
        SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST, SHMFIFO_INVALID_BATCH_ENTRY_ID,
        SHMFIFO_BATCH_ENTRY_IDS_NOT_DISTINCT, SHMFIFO_BATCH_REQUEST_TOO_LONG,
        SHMFIFO_QUEUE_DOES_NOT_EXIST, SHMFIFO_QUEUE_NAME_EXISTS, SHMFIFO_INVALID_QUEUE_NAME,
        SHMFIFO_INVALID_CONFIG, SHMFIFO_NOT_AN_ARENA, SHMFIFO_LAYOUT_VERSION_MISMATCH,
        SHMFIFO_TRUNCATED, SHMFIFO_NOT_READY, SHMFIFO_CORRUPTED, SHMFIFO_NO_SPACE,
        SHMFIFO_SIZE_CLASS_FULL, SHMFIFO_GROUP_LIMIT_REACHED,
        SHMFIFO_PARTICIPANT_LIMIT_REACHED, SHMFIFO_DEDUP_TABLE_FULL, SHMFIFO_IO,
        SHMFIFO_INVALID_ATTRIBUTE_NAME, SHMFIFO_ATTRIBUTE_NOT_MUTABLE,
        SHMFIFO_DEAD_LETTER_QUEUE, SHMFIFO_UNTRUSTED_FILE, SHMFIFO_NULL_ARGUMENT, SHMFIFO_INVALID_UTF8,
        SHMFIFO_BUFFER_TOO_SMALL,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!reached[all[i]]) {
            fprintf(stderr, "result code %s was never reached\n", shmfifo_result_name(all[i]));
            failures++;
        }
    }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("test_ffi: all checks passed\n");
    return 0;
}
