/* A 2D Jacobi stencil split by rows across MPI ranks, each rank on a
 * device of its own (rank modulo the devices found), exchanging halo rows
 * every iteration with syrah_mpi_send / syrah_mpi_recv. The exchange is
 * submitted like any command: accessors order it with the kernels. The
 * result is gathered on rank 0 and checked against a single-process
 * computation, value for value, and each rank's bytes moved and the time
 * per iteration (of the slowest rank) are printed. JACOBI_DEVICES (e.g.
 * "1.0,0.0") gives rank i the i-th device of the list, modulo its length.
 * The interior rows are computed while the halos travel; JACOBI_DEFAULT_PAGES
 * set gives the grids the default pages instead of pages of one row;
 * at most JACOBI_AHEAD iterations (default 4, 0 for no limit, at most 64)
 * are in flight: on NVIDIA's OpenCL, hundreds of commands waiting on
 * user events slow every one of them down.
 *   mpiexec -n 4 jacobi_mpi [rows] [columns] [iterations] */
#define _POSIX_C_SOURCE 200809L
#include <syrah_mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SRC =
    "/* Rows [first, first + rows) of the grid: `above` starts one row above\n"
    "   the first, `out` at it. Dimension 0 runs along a row, so neighbouring\n"
    "   work-items read and write neighbouring addresses. */\n"
    "__kernel void jacobi(__global const float *above, __global float *out, int w) {\n"
    "  int j = get_global_id(0), i = get_global_id(1);\n"
    "  const __global float *c = above + (i + 1) * w;\n"
    "  float v = c[j];\n"
    "  if (j > 0 && j < w - 1)\n"
    "    v = (c[j - w] + c[j + w] + c[j - 1] + c[j + 1]) * 0.25f;\n"
    "  out[i * w + j] = v;\n"
    "}\n";

static void watchdog(int sig) {
  static const char msg[] = "FAIL watchdog: jacobi_mpi hung for 180 s\n";
  (void)sig;
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}

/* The starting grid: the top row held at 1, everything else 0. */
static float initial(int g, int j) {
  (void)j;
  return g == 0 ? 1.0f : 0.0f;
}

/* The same iterations on one process, on the host. */
static float *reference(int rows, int w, int iters) {
  float *a = (float *)malloc((size_t)rows * w * sizeof(float)), *b = (float *)malloc((size_t)rows * w * sizeof(float));
  int t, i, j;
  if (!a || !b) exit(1);
  for (i = 0; i < rows; ++i)
    for (j = 0; j < w; ++j) a[i * w + j] = b[i * w + j] = initial(i, j);
  for (t = 0; t < iters; ++t) {
    float *c;
    for (i = 1; i < rows - 1; ++i)
      for (j = 0; j < w; ++j) {
        float v = a[i * w + j];
        if (j > 0 && j < w - 1)
          v = (a[(i - 1) * w + j] + a[(i + 1) * w + j] + a[i * w + j - 1] + a[i * w + j + 1]) * 0.25f;
        b[i * w + j] = v;
      }
    c = a;
    a = b;
    b = c;
  }
  free(b);
  return a;
}

#define REQUIRE(call)                                                                  \
  do {                                                                                 \
    syrah_status s_ = (call);                                                          \
    if (s_ != SYRAH_SUCCESS) {                                                         \
      fprintf(stderr, "FAIL rank %d: %s: %s: %s\n", rank, #call, syrah_status_name(s_), \
              syrah_last_error_message());                                             \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
    }                                                                                  \
  } while (0)

/* `count` whole rows from row `first` of a buffer `w` wide (0: all of it). */
static syrah_accessor rows_of(const syrah_buffer *b, syrah_access_mode m, size_t first, size_t count, int w) {
  syrah_accessor a;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = m;
  a.offset[0] = first;
  a.range[0] = count;
  a.range[1] = count ? (size_t)w : 0;
  return a;
}

/* Launches the sweep of `count` rows from local row `first`: it reads
 * rows first - 1 to first + count of `cur` and writes its rows of `next`. */
static void sweep(const syrah_queue *q, const syrah_kernel *k, const syrah_buffer *cur, const syrah_buffer *next,
                  int first, int count, int w, int rank, syrah_event **done) {
  syrah_accessor acc[2];
  syrah_kernel_arg args[3];
  syrah_range r = syrah_range_2d((size_t)w, (size_t)count);
  acc[0] = rows_of(cur, SYRAH_ACCESS_READ, (size_t)first - 1, (size_t)count + 2, w);
  acc[1] = rows_of(next, SYRAH_ACCESS_WRITE, (size_t)first, (size_t)count, w);
  args[0] = syrah_arg_accessor(0);
  args[1] = syrah_arg_accessor(1);
  args[2] = syrah_arg_value(&w, sizeof w);
  REQUIRE(syrah_queue_submit_kernel(q, k, &r, acc, 2, args, 3, NULL, 0, done));
}

int main(int argc, char **argv) {
  int rank = 0, size = 1, provided = 0;
  int rows = argc > 1 ? atoi(argv[1]) : 258, w = argc > 2 ? atoi(argv[2]) : 256;
  int iters = argc > 3 ? atoi(argv[3]) : 50;
  int interior, mine, first, t, i, j, wrong = 0, timed;
  int ahead = getenv("JACOBI_AHEAD") ? atoi(getenv("JACOBI_AHEAD")) : 4;
  syrah_event *ring[64] = {NULL}, **slot;
  const syrah_device *devs[16], *d;
  size_t ndev = 0;
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL;
  syrah_mpi_comm *comm = NULL;
  syrah_buffer *buf[2] = {NULL, NULL};
  float *host[2];
  syrah_buffer_desc desc;
  uint64_t sent = 0, received = 0, all[2 * 64];
  double start, elapsed, slowest = 0;
  signal(SIGALRM, watchdog);
  alarm(180);
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  interior = rows - 2;
  if (ahead < 0 || ahead > 64) ahead = 64;
  if (rows < 3 || w < 3 || iters < 1 || size > 64 || interior < size) {
    if (rank == 0) fprintf(stderr, "jacobi_mpi: need rows >= ranks + 2, columns >= 3, 1 to 64 ranks\n");
    MPI_Finalize();
    return 1;
  }
  /* Interior rows split as evenly as they go; `first` is this rank's first
   * global row. Local row 0 and row mine + 1 are the halos. */
  mine = interior / size + (rank < interior % size);
  first = 1 + rank * (interior / size) + (rank < interior % size ? rank : interior % size);

  REQUIRE(syrah_get_devices(devs, 16, &ndev));
  d = devs[(size_t)rank % (ndev < 16 ? ndev : 16)];
  if (getenv("JACOBI_DEVICES")) {
    char list[256], *tok, *save = NULL;
    int k = 0, count = 0;
    snprintf(list, sizeof list, "%s", getenv("JACOBI_DEVICES"));
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) ++count;
    snprintf(list, sizeof list, "%s", getenv("JACOBI_DEVICES"));
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save), ++k)
      if (k == rank % count) REQUIRE(syrah_device_select_by_string(tok, &d));
  }
  REQUIRE(syrah_context_create(&d, 1, &ctx));
  REQUIRE(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  REQUIRE(syrah_program_create_from_source(ctx, SRC, NULL, &prog));
  REQUIRE(syrah_kernel_create(prog, "jacobi", &k));
  REQUIRE(syrah_mpi_comm_create(MPI_COMM_WORLD, &comm));
  memset(&desc, 0, sizeof desc);
  desc.element_size = sizeof(float);
  desc.dimensions = 2;
  desc.range[0] = (size_t)mine + 2;
  desc.range[1] = (size_t)w;
  /* Pages of one row: a halo row and the rows next to it are pages of
   * their own, so the interior sweep need not wait for the halos.
   * JACOBI_DEFAULT_PAGES set keeps the default pages instead. */
  if (!getenv("JACOBI_DEFAULT_PAGES")) {
    desc.page_size[0] = 1;
    desc.page_size[1] = (size_t)w;
  }
  desc.ownership = SYRAH_HOST_WRITE_BACK;
  for (i = 0; i < 2; ++i) {
    host[i] = (float *)malloc(((size_t)mine + 2) * w * sizeof(float));
    if (!host[i]) MPI_Abort(MPI_COMM_WORLD, 1);
    for (t = 0; t < mine + 2; ++t)
      for (j = 0; j < w; ++j) host[i][t * w + j] = initial(first - 1 + t, j);
    desc.host_pointer = host[i];
    REQUIRE(syrah_buffer_create(&desc, &buf[i]));
  }

  /* The first iteration (program build, the grids' first copies to the
   * device) is left out of the timing: the clock starts after it, at a
   * barrier. */
  timed = iters > 1 ? iters - 1 : 1;
  MPI_Barrier(MPI_COMM_WORLD);
  start = MPI_Wtime();
  for (t = 0; t < iters; ++t) {
    const syrah_buffer *cur = buf[t % 2], *next = buf[(t + 1) % 2];
    if (t == 1) {
      REQUIRE(syrah_queue_wait(q));
      REQUIRE(syrah_mpi_comm_wait(comm));
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    int up = (t % 16000) * 2, down = up + 1; /* tags: rows going up, rows going down */
    syrah_accessor halo;
    if (rank > 0) {
      halo = rows_of(cur, SYRAH_ACCESS_READ, 1, 1, w);
      REQUIRE(syrah_mpi_send(q, comm, &halo, rank - 1, up, NULL, 0, NULL));
      halo = rows_of(cur, SYRAH_ACCESS_DISCARD_WRITE, 0, 1, w);
      REQUIRE(syrah_mpi_recv(q, comm, &halo, rank - 1, down, NULL, 0, NULL));
    }
    if (rank < size - 1) {
      halo = rows_of(cur, SYRAH_ACCESS_READ, (size_t)mine, 1, w);
      REQUIRE(syrah_mpi_send(q, comm, &halo, rank + 1, down, NULL, 0, NULL));
      halo = rows_of(cur, SYRAH_ACCESS_DISCARD_WRITE, (size_t)mine + 1, 1, w);
      REQUIRE(syrah_mpi_recv(q, comm, &halo, rank + 1, up, NULL, 0, NULL));
    }
    /* At most `ahead` iterations in flight: this one waits for the end of
     * the one `ahead` before it. */
    slot = NULL;
    if (ahead) {
      slot = &ring[t % ahead];
      if (*slot) {
        REQUIRE(syrah_event_wait(*slot));
        REQUIRE(syrah_event_release(*slot));
        *slot = NULL;
      }
    }
    /* The interior rows need no halo: they run while the halos travel.
     * Then the first and the last row, once their halo has arrived. */
    if (mine > 2) sweep(q, k, cur, next, 2, mine - 2, w, rank, NULL);
    sweep(q, k, cur, next, 1, 1, w, rank, mine > 1 ? NULL : slot);
    if (mine > 1) sweep(q, k, cur, next, mine, 1, w, rank, slot);
  }
  for (i = 0; i < 64; ++i)
    if (ring[i]) REQUIRE(syrah_event_release(ring[i]));
  REQUIRE(syrah_queue_wait(q));
  /* A send's command completes once its data is taken; MPI may still be
   * sending it. */
  REQUIRE(syrah_mpi_comm_wait(comm));
  elapsed = MPI_Wtime() - start;
  MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  REQUIRE(syrah_mpi_comm_get_stats(comm, &sent, &received));
  REQUIRE(syrah_mpi_comm_release(comm));
  for (i = 0; i < 2; ++i) REQUIRE(syrah_buffer_release(buf[i]));

  /* Gather the interior rows on rank 0 and compare with one process. */
  {
    float *result = host[iters % 2];
    int *counts = (int *)malloc((size_t)size * sizeof(int)), *at = (int *)malloc((size_t)size * sizeof(int));
    float *grid = rank == 0 ? (float *)malloc((size_t)rows * w * sizeof(float)) : NULL;
    uint64_t mine_bytes[2];
    if (!counts || !at || (rank == 0 && !grid)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (i = 0; i < size; ++i) {
      counts[i] = (interior / size + (i < interior % size)) * w;
      at[i] = (1 + i * (interior / size) + (i < interior % size ? i : interior % size)) * w;
    }
    MPI_Gatherv(result + w, mine * w, MPI_FLOAT, grid, counts, at, MPI_FLOAT, 0, MPI_COMM_WORLD);
    mine_bytes[0] = sent;
    mine_bytes[1] = received;
    MPI_Gather(mine_bytes, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      float *ref = reference(rows, w, iters);
      for (i = 1; i < rows - 1; ++i)
        for (j = 0; j < w; ++j) wrong += grid[i * w + j] != ref[i * w + j];
      /* Each iteration reads and writes every interior value once. */
      printf("jacobi_mpi: %d x %d grid, %d iterations over %d ranks: %d of %d values differ from one process; "
             "%.3f ms per iteration (slowest rank), %.1f GB/s of grid read and written\n",
             rows, w, iters, size, wrong, interior * w, 1e3 * slowest / timed,
             2.0 * interior * w * sizeof(float) * timed / slowest / 1e9);
      for (i = 0; i < size; ++i)
        printf("  rank %d: %llu bytes sent, %llu received (%d halo rows of %zu bytes per iteration)\n", i,
               (unsigned long long)all[2 * i], (unsigned long long)all[2 * i + 1], (i > 0) + (i < size - 1),
               (size_t)w * sizeof(float));
      for (i = 0; i < size; ++i) {
        uint64_t want = (uint64_t)((i > 0) + (i < size - 1)) * (uint64_t)iters * (uint64_t)w * sizeof(float);
        if (all[2 * i] != want || all[2 * i + 1] != want) {
          printf("FAIL rank %d moved %llu / %llu bytes, expected %llu each way\n", i, (unsigned long long)all[2 * i],
                 (unsigned long long)all[2 * i + 1], (unsigned long long)want);
          ++wrong;
        }
      }
      free(ref);
      free(grid);
    }
    MPI_Bcast(&wrong, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(counts);
    free(at);
  }
  REQUIRE(syrah_kernel_release(k));
  REQUIRE(syrah_program_release(prog));
  REQUIRE(syrah_queue_release(q));
  REQUIRE(syrah_context_release(ctx));
  free(host[0]);
  free(host[1]);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
