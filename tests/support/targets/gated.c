/* A semaphore-gated USDT probe: the probe site runs only while its semaphore is
 * raised, as in Python's and many runtimes' probes. "sem" prints the semaphore,
 * "hit N" fires the probe N times (when enabled) and prints how many fired. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <string.h>
#include <sys/sdt.h>

unsigned short adaptyst_gated_tick_semaphore __attribute__((section(".probes")));

int main(void) {
    char cmd[16];
    long n;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (scanf("%15s", cmd) == 1) {
        if (!strcmp(cmd, "sem")) {
            printf("%u\n", (unsigned)adaptyst_gated_tick_semaphore);
        } else if (!strcmp(cmd, "hit") && scanf("%ld", &n) == 1) {
            long fired = 0;
            for (long i = 0; i < n; i++) {
                if (adaptyst_gated_tick_semaphore) {
                    DTRACE_PROBE1(adaptyst_gated, tick, i);
                    fired++;
                }
            }
            printf("%ld\n", fired);
        }
    }
    return 0;
}
