// C++ test target: a method in a namespace, a template, an overload; called a given
// number of times from a given number of threads, after it says "ready" and reads a line.
//   solver THREADS N    each thread: N calls of solver::Kernel::step(int) and of
//                       solver::twice<double>(double), and one of solver::name(char const*)
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace solver {
struct Kernel {
    long acc = 0;
    __attribute__((noinline)) long step(int x);
};
__attribute__((noinline)) long Kernel::step(int x) {
    acc += x * 3 + 1;
    asm volatile("" ::: "memory");
    return acc;
}
template <typename T> __attribute__((noinline)) T twice(T x) {
    asm volatile("" ::: "memory");
    return x * 2;
}
__attribute__((noinline)) int name(const char *s) {
    asm volatile("" ::: "memory");  // not pure: the call stays
    return s[0];
}
__attribute__((noinline)) int name(int s) { return s + 1; }
}  // namespace solver

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    long n = argc > 2 ? atol(argv[2]) : 1000;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    printf("ready\n");
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++)
        pool.emplace_back([n] {
            solver::Kernel k;
            double d = 0;
            for (long i = 0; i < n; i++) {
                k.step(static_cast<int>(i));
                d += solver::twice<double>(1.0);
            }
            solver::name("x");
            asm volatile("" ::"r"(d));
        });
    for (auto &th : pool) th.join();
    printf("ok\n");
    return 0;
}
