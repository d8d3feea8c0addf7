/* The leader thread exits (pthread_exit from main) while another thread runs on: the
 * process lives, its leader is a zombie, and its /proc/PID files read as root's. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *run(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, run, NULL);
    printf("ready\n");
    fflush(stdout);
    pthread_exit(NULL);
}
