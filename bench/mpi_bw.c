/* osu_bw's loop, to compare `wirebench mpi stream` with (the OSU micro-benchmarks are not in
 * Debian). Rank 0 starts WINDOW non-blocking sends of one buffer and waits for all of them,
 * rank 1 pre-posts WINDOW receives and waits for them; after each window rank 1 answers with
 * 4 bytes. Bandwidth = bytes / rank 0's time over the timed windows, as osu_bw prints it
 * (but in Mbit/s, 10^6 bit/s, like wirebench, not MB/s).
 *
 *   mpirun -np 2 mpi_bw SIZE SECONDS [WINDOW]   -> one line: SIZE Mbit/s windows
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: mpi_bw SIZE SECONDS [WINDOW]\n");
        MPI_Finalize();
        return 2;
    }
    long size = atol(argv[1]);
    double seconds = atof(argv[2]);
    int window = argc > 3 ? atoi(argv[3]) : 64;
    char *buf = malloc(size * window);
    memset(buf, 'w', size * window);
    MPI_Request *req = malloc(sizeof *req * window);
    char ack[4] = {0};
    /* One window as osu_bw runs it. */
#define WINDOW_ONCE()                                                                      \
    do {                                                                                   \
        if (rank == 0) {                                                                   \
            /* osu_bw sends the same buffer W times; receives go to W distinct ones. */    \
            for (int w = 0; w < window; w++)                                               \
                MPI_Isend(buf, size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &req[w]);           \
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);                                 \
            MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);         \
        } else {                                                                           \
            for (int w = 0; w < window; w++)                                               \
                MPI_Irecv(buf + w * size, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &req[w]); \
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);                                 \
            MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);                            \
        }                                                                                  \
    } while (0)
    /* Warm-up and calibration: how many windows fill SECONDS, agreed before the timed loop
     * so that it runs a fixed count, as osu_bw's does, with nothing between windows. */
    long windows = 0;
    double t0 = MPI_Wtime();
    long probe = 0;
    int more = 1;
    while (more) { /* rank 0 decides for both, so that both run as many windows */
        WINDOW_ONCE();
        probe++;
        more = probe < 10 || MPI_Wtime() - t0 < seconds / 10;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) windows = (long)(probe * seconds / (MPI_Wtime() - t0)) + 1;
    MPI_Bcast(&windows, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long i = 0; i < windows; i++) WINDOW_ONCE();
    double end = MPI_Wtime();
    if (rank == 0)
        printf("%ld %.2f %ld\n", size,
               (double)size * window * windows * 8 / (end - start) / 1e6, windows);
    MPI_Finalize();
    return 0;
}
