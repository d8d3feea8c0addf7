/* An MPI program whose last rank computes twice as long as the others at each step, after
 * which every rank meets the others in MPI_Allreduce: the others wait there for it. Rank 0
 * writes what the program measured of itself to OUT, as JSON: the imbalance of the time in
 * compute() (the most over the ranks' mean) and the rank that had the most. Each step
 * ends with a large-count call (MPI-4's MPI_Bcast_c, as mpi4py 4 makes them) where the
 * library has it: `large_count` in OUT says whether it did.
 * usage: mpi_slow GO OUT STEPS   (the ranks start once the file GO exists) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Timed inside the body, so the program's window lies within the probe's: a preemption
 * as the probe's trap returns to user space (a tick's 4 ms, at each step, on a loaded
 * node) lengthened the program's figure for rank 0 to 2x what its calls took. */
__attribute__((noinline)) double compute(long n, double *spent) {
    double t = now();
    volatile double x = 0;
    for (long i = 0; i < n; i++) x += i * 0.5;
    *spent += now() - t;
    return x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4 || size > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    struct stat st;
    while (stat(argv[1], &st) != 0) usleep(10000);
    int steps = atoi(argv[3]);
    double mine = 0, one = 1, sum;
    for (int i = 0; i < steps; i++) {
        compute(rank == size - 1 ? 4000000 : 2000000, &mine);
        MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#if MPI_VERSION >= 4
        MPI_Bcast_c(&sum, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#endif
    }
    double all[64];
    MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double most = 0, total = 0;
        int at = 0;
        for (int i = 0; i < size; i++) {
            total += all[i];
            if (all[i] > most) { most = all[i]; at = i; }
        }
        FILE *f = fopen(argv[2], "w");
        if (f) {
            fprintf(f, "{\"imbalance\": %.4f, \"rank\": %d, \"large_count\": %d}\n",
                    most / (total / size), at, MPI_VERSION >= 4);
            fclose(f);
        }
    }
    MPI_Finalize();
    return 0;
}
