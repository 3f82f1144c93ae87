/* shmfifo C example: a consumer.
 * Usage: consumer QUEUE
 * Receives (up to 10 at a time, visibility 30 s, long-polling 200 ms) and deletes every
 * message until the file /dev/shm/QUEUE.done (QUEUE.done for a path) exists and the queue has
 * nothing left (how to run it beside producer.c: the comment at the top of producer.c). For each
 * message it prints "RECV body t_ns" (CLOCK_MONOTONIC after the receive returned) and, after
 * deleting it, "DEL body t_ns" (CLOCK_MONOTONIC before the delete call), so that logs of
 * several consumers can be checked for per-group order.
 * Build: cc consumer.c $(pkg-config --cflags --libs shmfifo) -o consumer */
#include <shmfifo.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Whether the queue holds nothing, visible, in flight or delayed (a snapshot). */
static int queue_empty(const shmfifo_queue *q) {
    shmfifo_queue_attributes a;
    if (shmfifo_queue_get_attributes(q, &a) != SHMFIFO_OK) return 0;
    return a.approximate_number_of_messages == 0 &&
           a.approximate_number_of_messages_not_visible == 0 &&
           a.approximate_number_of_messages_delayed == 0;
}

static int fail(const char *what, shmfifo_result r) {
    char msg[512];
    shmfifo_last_error_message(msg, sizeof msg);
    fprintf(stderr, "consumer: %s: %s: %s\n", what, shmfifo_result_name(r), msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer QUEUE\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char done[512];
    /* The queue's own path with .done: under /dev/shm for a name, beside it for a path. */
    snprintf(done, sizeof done, strchr(argv[1], '/') ? "%s.done" : "/dev/shm/%s.done", argv[1]);
    shmfifo_queue *q = NULL;
    shmfifo_result r = shmfifo_queue_open(argv[1], &q);
    if (r != SHMFIFO_OK) return fail("open", r);
    shmfifo_receive_buffer *buf = shmfifo_receive_buffer_new();
    shmfifo_receive_options opts = shmfifo_receive_options_default();
    opts.max_messages = 10;
    opts.visibility_timeout_ms = 30000;
    opts.wait_time_ms = 200;
    shmfifo_message msgs[10];
    int empty_after_done = 0;
    while (empty_after_done < 2) {
        size_t n = 0;
        r = shmfifo_receive(q, &opts, buf, msgs, 10, &n);
        if (r != SHMFIFO_OK) return fail("receive", r);
        unsigned long long t = now_ns();
        if (n == 0) {
            /* Done only when the producers are and nothing is left: under load a long poll
               can end empty while the other consumer still holds messages in flight. */
            if (access(done, F_OK) == 0 && queue_empty(q)) empty_after_done++;
            continue;
        }
        empty_after_done = 0;
        for (size_t i = 0; i < n; i++) {
            printf("RECV %.*s %llu\n", (int)msgs[i].body.len, msgs[i].body.data, t);
            unsigned long long t_del = now_ns();
            r = shmfifo_delete(q, msgs[i].receipt_handle);
            if (r != SHMFIFO_OK) return fail("delete", r);
            printf("DEL %.*s %llu\n", (int)msgs[i].body.len, msgs[i].body.data, t_del);
        }
    }
    shmfifo_receive_buffer_free(buf);
    shmfifo_queue_close(q);
    return 0;
}
