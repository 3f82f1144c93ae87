/* shmfifo C example: a producer.
 * Usage: producer QUEUE ID GROUPS N
 * Sends N messages round-robin over GROUPS groups named c{ID}-g{j}, body "c{ID}-g{j}:{k}"
 * (k counts per group), with the body as dedup id when the queue deduplicates. Waits and
 * retries while the queue is full.
 * Build: cc producer.c $(pkg-config --cflags --libs shmfifo) -o producer
 * Run (the queue made first, e.g. with the CLI; the consumer ends once QUEUE.done exists and
 * the queue is empty):
 *   shmfifo create jobs
 *   ./consumer jobs > seen.txt & ./producer jobs 1 4 1000
 *   touch /dev/shm/jobs.done; wait; shmfifo unlink jobs; rm /dev/shm/jobs.done */
#include <shmfifo.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, shmfifo_result r) {
    char msg[512];
    shmfifo_last_error_message(msg, sizeof msg);
    fprintf(stderr, "producer: %s: %s: %s\n", what, shmfifo_result_name(r), msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: producer QUEUE ID GROUPS N\n");
        return 2;
    }
    const char *name = argv[1];
    int id = atoi(argv[2]), groups = atoi(argv[3]);
    long n = atol(argv[4]);
    if (groups < 1 || n < 0) {
        fprintf(stderr, "producer: GROUPS must be at least 1 and N at least 0\n");
        return 2;
    }
    shmfifo_queue *q = NULL;
    shmfifo_result r = shmfifo_queue_open(name, &q);
    if (r != SHMFIFO_OK) return fail("open", r);
    shmfifo_queue_attributes attrs;
    r = shmfifo_queue_get_attributes(q, &attrs);
    if (r != SHMFIFO_OK) return fail("attributes", r);
    long *k = calloc((size_t)groups, sizeof *k);
    char group[64], body[96];
    for (long i = 0; i < n; i++) {
        int j = (int)(i % groups);
        snprintf(group, sizeof group, "c%d-g%d", id, j);
        snprintf(body, sizeof body, "%s:%ld", group, k[j]);
        shmfifo_send_message m;
        memset(&m, 0, sizeof m);
        m.group_id.data = group;
        m.group_id.len = strlen(group);
        m.body.data = body;
        m.body.len = strlen(body);
        if (attrs.deduplication != 0) m.dedup_id = m.body;
        for (;;) {
            r = shmfifo_send(q, &m, NULL);
            if (r == SHMFIFO_SIZE_CLASS_FULL || r == SHMFIFO_GROUP_LIMIT_REACHED) {
                usleep(200); /* back-pressure: wait for consumers */
                continue;
            }
            break;
        }
        if (r != SHMFIFO_OK) {
            free(k);
            shmfifo_queue_close(q);
            return fail("send", r);
        }
        k[j]++;
    }
    free(k);
    shmfifo_queue_close(q);
    return 0;
}
