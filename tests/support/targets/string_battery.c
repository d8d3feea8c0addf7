/* A battery of libc string and memory functions whose every result is printed, so that
 * a run under probes can be compared byte for byte with an unprobed one. The inputs
 * vary in length and alignment to reach the vectorised paths (and their tails). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static char buf[1024], buf2[1024];
static wchar_t wbuf[512], wbuf2[512];

int main(void) {
    unsigned long h = 0;
#define OUT(v) (h = h * 1000003UL ^ (unsigned long)(v), printf("%lx\n", (unsigned long)(v)))
    for (int round = 0; round < 40; round++) {
        size_t n = 17 + (size_t)round * 23, off = (size_t)round % 7;
        memset(buf, 'a' + round % 20, sizeof buf - 1);
        buf[sizeof buf - 1] = 0;
        buf[off + n] = 0;
        buf[off + n / 2] = '%';
        for (size_t i = 0; i < 500; i++) wbuf[i] = L'a' + (wchar_t)((i + round) % 20);
        wbuf[n % 500] = 0;
        wbuf[(n / 2) % 500] = L'%';
        char *s = buf + off;
        OUT(strlen(s));
        OUT(strnlen(s, n / 3));
        OUT(strchr(s, '%') - s);
        OUT(strchrnul(s, '#') - s);
        OUT(strrchr(s, '%') - s);
        OUT(rawmemchr(s, '%') - (void *)s);
        OUT((char *)memchr(s, '%', n) - s);
        OUT((char *)memrchr(s, 'a' + round % 20, n) - s);
        OUT(strspn(s, "abcdefghijklmnopqrst"));
        OUT(strcspn(s, "%#"));
        OUT(strpbrk(s, "%") - s);
        OUT(strstr(s, "a%") ? strstr(s, "a%") - s : -1);
        memcpy(buf2, s, n / 2);
        buf2[n / 2] = 0;
        OUT(strcmp(buf2, s) < 0);
        OUT(strncmp(buf2, s, n / 4));
        OUT(memcmp(buf2, s, n / 2));
        OUT(strcasecmp(buf2, s) < 0);
        memmove(buf2 + 1, buf2, n / 2);
        OUT(buf2[n / 3]);
        strcpy(buf2, s);
        OUT(strlen(buf2));
        OUT(stpcpy(buf2, "xyz") - buf2);
        strcat(buf2, s);
        OUT(strlen(buf2));
        strncpy(buf2, s, 8);
        OUT(buf2[7]);
        memset(buf2, 'q', n);
        OUT(buf2[n - 1]);
        char *d = strdup(s);
        OUT(strlen(d));
        free(d);
        OUT(wcslen(wbuf));
        OUT(wcschr(wbuf, L'%') ? wcschr(wbuf, L'%') - wbuf : -1);
        OUT(wcsrchr(wbuf, L'a') ? wcsrchr(wbuf, L'a') - wbuf : -1);
        OUT(wcsnlen(wbuf, n / 3));
        wcscpy(wbuf2, wbuf);
        OUT(wcscmp(wbuf2, wbuf));
        OUT(wmemchr(wbuf, L'%', n % 500) ? 1 : 0);
    }
    printf("hash %lx\n", h);
    return 0;
}
