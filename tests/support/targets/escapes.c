/* Text that would act on a terminal: a function whose symbol (renamed with objcopy)
 * holds escape sequences, and a USDT string key that does too. `escapes N` calls the
 * function and fires the probe N times, then stays a second. */
#include <stdlib.h>
#include <sys/sdt.h>
#include <unistd.h>

__attribute__((noinline)) int evil(int x) { return x + 1; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    const char *key = "key\033]0;owned\007\033[2J";
    int sum = 0;
    for (long i = 0; i < n; i++) {
        sum += evil((int)i);
        DTRACE_PROBE1(adaptyst_esc, hit, key);
    }
    sleep(1); /* alive while the monitor reads the key's text from it */
    return sum == -1;
}
