/* A library call from an atexit handler (a C program's cleanup, or a C++ static destructor).
 * glibc runs thread-local destructors before atexit handlers, so the thread's last-error
 * message is gone by then: touching it aborted the process (a Rust panic inside an extern "C"
 * function). The call must work and its error text must read as empty. */
#include <shmfifo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char name[256];

static void cleanup(void) {
    shmfifo_result r = shmfifo_queue_unlink(name);
    char msg[64] = "untouched";
    size_t n = shmfifo_last_error_message(msg, sizeof msg);
    /* A second unlink fails: its error cannot be kept either, and must not abort. */
    shmfifo_result again = shmfifo_queue_unlink(name);
    printf("cleanup %s %zu %s\n", r == SHMFIFO_OK ? "unlinked" : shmfifo_result_name(r), n,
           again == SHMFIFO_OK ? "again-ok" : "again-refused");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 2 || strlen(argv[1]) >= sizeof name) {
        fprintf(stderr, "usage: at_exit QUEUE_NAME\n");
        return 2;
    }
    strcpy(name, argv[1]);
    shmfifo_config cfg = shmfifo_config_default();
    shmfifo_queue *q = NULL;
    if (shmfifo_queue_create(name, &cfg, &q) != SHMFIFO_OK) {
        char msg[512];
        shmfifo_last_error_message(msg, sizeof msg);
        fprintf(stderr, "create: %s\n", msg);
        return 1;
    }
    shmfifo_queue_close(q);
    /* The thread's last error is set up now (a success clears it). */
    if (atexit(cleanup) != 0) {
        return 1;
    }
    return 0;
}
