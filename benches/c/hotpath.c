/* The C ABI's hot path for benches/callgrind.sh (mode c-single): N rounds of shmfifo_send,
 * shmfifo_receive of one, shmfifo_delete by the receipt handle's text, one 64-byte body to
 * one group, deduplication off: `single` of shmfifo-hotpath through the C library, so that
 * the difference is the C layer's (argument checks, UTF-8, the message's text fields).
 * Usage: hotpath N QUEUE_NAME (created, then unlinked). Exit status 0 on success; otherwise
 * the failing step and the library's message on stderr. */
#include <shmfifo.h>
#include <stdio.h>
#include <stdlib.h>

static int failed(const char *step) {
    char msg[512];
    shmfifo_last_error_message(msg, sizeof msg);
    fprintf(stderr, "hotpath: %s: %s\n", step, msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: hotpath N QUEUE_NAME\n");
        return 2;
    }
    long n = atol(argv[1]);
    shmfifo_config cfg = shmfifo_config_default();
    cfg.deduplication = 0;
    shmfifo_queue *q;
    if (shmfifo_queue_create(argv[2], &cfg, &q) != SHMFIFO_OK) {
        return failed("create");
    }
    const char *body = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_receive_options o = shmfifo_receive_options_default();
    o.max_messages = 1;
    o.wait_time_ms = 0;
    int rc = buf == NULL ? failed("receive buffer") : 0;
    for (long i = 0; i < n && rc == 0; i++) {
        shmfifo_send_message m = {0};
        m.group_id = (shmfifo_str){"g", 1};
        m.body = (shmfifo_str){body, 64};
        shmfifo_send_result r;
        shmfifo_message msgs[1];
        size_t k = 0;
        if (shmfifo_send(q, &m, &r) != SHMFIFO_OK) {
            rc = failed("send");
        } else if (shmfifo_receive(q, &o, buf, msgs, 1, &k) != SHMFIFO_OK || k != 1) {
            rc = failed("receive");
        } else if (shmfifo_delete(q, msgs[0].receipt_handle) != SHMFIFO_OK) {
            rc = failed("delete");
        }
    }
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q);
    shmfifo_queue_unlink(argv[2]);
    return rc;
}
