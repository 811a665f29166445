/* A seeded random checker of the MPI companion against a CPU model. Every
 * rank holds a buffer of ints of the same random shape (1 to 3 dimensions,
 * random extents and page sizes) on a device of its own. Each step, drawn
 * alike on every rank from the run's seed, is one of:
 *   - an exchange: every rank sends a random box of its buffer to the next
 *     rank and receives the previous rank's box of the same extents into
 *     another random box of its own, in a random writing mode (the two
 *     boxes may overlap: the send reads what was there before);
 *   - a kernel adding the step's number to a random box of every buffer;
 *   - a host accessor reading the whole buffer, checked at once.
 * Nothing waits between steps but the host accessors: the accessors alone
 * order the transfers and kernels. Every rank keeps the model of every
 * rank's buffer and checks its own, element by element, at the end of each
 * run. A failure prints the seed and shape that reproduce it.
 *   mpiexec -n 2 test_mpi_random [runs] [steps]
 *   SYRAH_MPI_SEED=s  the first run's seed (the next runs take s+1, ...)
 *   SYRAH_MPI_SECONDS=t  keep starting runs for t seconds (a stress run) */
#define _POSIX_C_SOURCE 200809L
#include "mpi_testing.h"

static const char *SRC =
    "__kernel void add(__global int *p, int n1, int n2, int l0, int l1, int l2, int h0, int h1, int h2, int v) {\n"
    "  int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);\n"
    "  if (z >= l0 && z < h0 && y >= l1 && y < h1 && x >= l2 && x < h2) p[(z * n1 + y) * n2 + x] += v;\n"
    "}\n";

static unsigned long long state;

static unsigned long long next(void) {
  unsigned long long z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A number from 0 to n - 1. */
static size_t below(size_t n) {
  return (size_t)(next() % n);
}

/* A box of the buffer's [n0][n1][n2] elements (leading extents 1 below
 * three dimensions): `lo` and extents `e`. */
typedef struct {
  size_t lo[3], e[3];
} box;

/* Random extents fitting in `n`, then a random place for them. */
static box random_box(const size_t n[3]) {
  box b;
  int k;
  for (k = 0; k < 3; ++k) {
    b.e[k] = 1 + below(n[k]);
    b.lo[k] = below(n[k] - b.e[k] + 1);
  }
  return b;
}

/* The same extents somewhere else. */
static box moved(const box *b, const size_t n[3]) {
  box m = *b;
  int k;
  for (k = 0; k < 3; ++k) m.lo[k] = below(n[k] - b->e[k] + 1);
  return m;
}

/* The accessor for box `b` of a buffer of `dims` dimensions. */
static syrah_accessor accessor(const syrah_buffer *buf, syrah_access_mode m, uint32_t dims, const box *b) {
  syrah_accessor a;
  uint32_t k;
  memset(&a, 0, sizeof a);
  a.buffer = buf;
  a.mode = m;
  for (k = 0; k < dims; ++k) {
    a.offset[k] = b->lo[3 - dims + k];
    a.range[k] = b->e[3 - dims + k];
  }
  return a;
}

#define AT(n, z, y, x) (((z) * (n)[1] + (y)) * (n)[2] + (x))

/* The elements of box `b` of `src`, packed, into `out`. */
static void take(const int *src, const size_t n[3], const box *b, int *out) {
  size_t z, y, x;
  for (z = 0; z < b->e[0]; ++z)
    for (y = 0; y < b->e[1]; ++y)
      for (x = 0; x < b->e[2]; ++x) *out++ = src[AT(n, b->lo[0] + z, b->lo[1] + y, b->lo[2] + x)];
}

/* The packed elements `in` into box `b` of `dst`. */
static void put(int *dst, const size_t n[3], const box *b, const int *in) {
  size_t z, y, x;
  for (z = 0; z < b->e[0]; ++z)
    for (y = 0; y < b->e[1]; ++y)
      for (x = 0; x < b->e[2]; ++x) dst[AT(n, b->lo[0] + z, b->lo[1] + y, b->lo[2] + x)] = *in++;
}

/* Compares this rank's buffer with its model; returns the differences. */
static int compare(const syrah_buffer *buf, const int *model, size_t count, const char *when, unsigned long long seed) {
  syrah_host_accessor *ha = NULL;
  int *p = NULL, wrong = 0;
  size_t i, first = count;
  OK(syrah_buffer_host_access(buf, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  if (!p) return 1;
  for (i = 0; i < count; ++i)
    if (p[i] != model[i]) {
      if (first == count) first = i;
      ++wrong;
    }
  CHECK(wrong == 0, "seed %llu, %s: %d of %zu elements differ from the model, the first at %zu (%d, expected %d)",
        seed, when, wrong, count, first, first < count ? p[first] : 0, first < count ? model[first] : 0);
  OK(syrah_host_accessor_release(ha));
  return wrong;
}

/* One run of `steps` steps from `seed`; returns whether it passed. */
static int run(const syrah_queue *q, syrah_kernel *k, syrah_mpi_comm *comm, unsigned long long seed, int steps) {
  uint32_t dims;
  size_t n[3], count, i, random_pages;
  int **model, s, r, before = failures;
  syrah_buffer *buf = NULL;
  syrah_buffer_desc d;
  state = seed;
  dims = 1 + (uint32_t)below(3);
  n[0] = dims == 3 ? 1 + below(4) : 1;
  n[1] = dims >= 2 ? 1 + below(12) : 1;
  n[2] = 1 + below(dims == 1 ? 400 : 40);
  count = n[0] * n[1] * n[2];
  model = (int **)malloc((size_t)size * sizeof *model);
  if (!model) MPI_Abort(MPI_COMM_WORLD, 1);
  for (r = 0; r < size; ++r) {
    model[r] = (int *)malloc(count * sizeof **model);
    if (!model[r]) MPI_Abort(MPI_COMM_WORLD, 1);
    for (i = 0; i < count; ++i) model[r][i] = r * 1000000 + (int)i;
  }
  memset(&d, 0, sizeof d);
  d.element_size = sizeof(int);
  d.dimensions = dims;
  /* The default pages, or random ones. */
  random_pages = below(2);
  for (i = 0; i < dims; ++i) {
    d.range[i] = n[3 - dims + i];
    d.page_size[i] = random_pages ? 1 + below(n[3 - dims + i]) : 0;
  }
  d.host_pointer = model[rank];
  d.ownership = SYRAH_HOST_COPY_IN;
  OK(syrah_buffer_create(&d, &buf));
  for (s = 0; buf && s < steps; ++s) {
    size_t op = below(8);
    if (op < 5) { /* an exchange */
      box from = random_box(n), to = moved(&from, n);
      syrah_access_mode m = below(2) ? SYRAH_ACCESS_DISCARD_WRITE : SYRAH_ACCESS_WRITE;
      syrah_accessor a = accessor(buf, SYRAH_ACCESS_READ, dims, &from);
      int **sent = (int **)malloc((size_t)size * sizeof *sent);
      size_t e = from.e[0] * from.e[1] * from.e[2];
      if (!sent) MPI_Abort(MPI_COMM_WORLD, 1);
      OK(syrah_mpi_send(q, comm, &a, (rank + 1) % size, s, NULL, 0, NULL));
      a = accessor(buf, m, dims, &to);
      OK(syrah_mpi_recv(q, comm, &a, (rank + size - 1) % size, s, NULL, 0, NULL));
      for (r = 0; r < size; ++r) { /* every send reads before any receive writes */
        sent[r] = (int *)malloc(e * sizeof **sent);
        if (!sent[r]) MPI_Abort(MPI_COMM_WORLD, 1);
        take(model[r], n, &from, sent[r]);
      }
      for (r = 0; r < size; ++r) put(model[(r + 1) % size], n, &to, sent[r]);
      for (r = 0; r < size; ++r) free(sent[r]);
      free(sent);
    } else if (op < 7) { /* a kernel adds the step's number to a box */
      box b = random_box(n);
      int arg[9], v = s + 1, j;
      size_t z, y, x;
      syrah_accessor a = accessor(buf, SYRAH_ACCESS_READ_WRITE, dims, &b);
      syrah_kernel_arg args[10];
      syrah_range range = syrah_range_3d(n[2], n[1], n[0]);
      a.offset[0] = a.offset[1] = a.offset[2] = 0; /* the whole buffer, the box passed as values */
      a.range[0] = a.range[1] = a.range[2] = 0;
      arg[0] = (int)n[1];
      arg[1] = (int)n[2];
      for (j = 0; j < 3; ++j) {
        arg[2 + j] = (int)b.lo[j];
        arg[5 + j] = (int)(b.lo[j] + b.e[j]);
      }
      args[0] = syrah_arg_accessor(0);
      for (j = 0; j < 8; ++j) args[1 + j] = syrah_arg_value(&arg[j], sizeof(int));
      args[9] = syrah_arg_value(&v, sizeof v);
      OK(syrah_queue_submit_kernel(q, k, &range, &a, 1, args, 10, NULL, 0, NULL));
      for (r = 0; r < size; ++r)
        for (z = 0; z < b.e[0]; ++z)
          for (y = 0; y < b.e[1]; ++y)
            for (x = 0; x < b.e[2]; ++x) model[r][AT(n, b.lo[0] + z, b.lo[1] + y, b.lo[2] + x)] += v;
    } else { /* the host reads it all */
      char when[64];
      snprintf(when, sizeof when, "host accessor after step %d", s);
      compare(buf, model[rank], count, when, seed);
    }
  }
  OK(syrah_queue_wait(q));
  OK(syrah_mpi_comm_wait(comm));
  if (buf) {
    compare(buf, model[rank], count, "the end of the run", seed);
    OK(syrah_buffer_release(buf));
  }
  if (failures != before)
    fprintf(stderr, "rank %d: reproduce with SYRAH_MPI_SEED=%llu and %d steps (%u dimensions, %zu x %zu x %zu%s)\n",
            rank, seed, steps, dims, n[0], n[1], n[2], random_pages ? ", random pages" : "");
  for (r = 0; r < size; ++r) free(model[r]);
  free(model);
  return failures == before;
}

int main(int argc, char **argv) {
  int provided = 0, runs = argc > 1 ? atoi(argv[1]) : 12, steps = argc > 2 ? atoi(argv[2]) : 30, done = 0, go = 1;
  const char *seed_text = getenv("SYRAH_MPI_SEED"), *seconds_text = getenv("SYRAH_MPI_SECONDS");
  unsigned long long seed = seed_text ? strtoull(seed_text, NULL, 10) : 20261125ULL;
  double seconds = seconds_text ? atof(seconds_text) : 0, start;
  const syrah_device *devs[16], *d;
  size_t ndev = 0;
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL;
  syrah_mpi_comm *comm = NULL;
  watchdog(600);
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || runs < 1 || steps < 1) {
    if (rank == 0) fprintf(stderr, "test_mpi_random: needs 2 or more ranks, runs and steps of at least 1\n");
    MPI_Finalize();
    return 1;
  }
  OK(syrah_get_devices(devs, 16, &ndev));
  if (ndev == 0) MPI_Abort(MPI_COMM_WORLD, 1);
  d = devs[(size_t)rank % (ndev < 16 ? ndev : 16)];
  OK(syrah_context_create(&d, 1, &ctx));
  OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  OK(syrah_program_create_from_source(ctx, SRC, NULL, &prog));
  OK(syrah_kernel_create(prog, "add", &k));
  OK(syrah_mpi_comm_create(MPI_COMM_WORLD, &comm));
  if (!q || !k || !comm) MPI_Abort(MPI_COMM_WORLD, 1);
  start = MPI_Wtime();
  while (go) {
    run(q, k, comm, seed + (unsigned long long)done, steps);
    ++done;
    /* Every rank starts the same runs: rank 0 decides whether to go on. */
    go = seconds > 0 ? MPI_Wtime() - start < seconds : done < runs;
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  OK(syrah_mpi_comm_release(comm));
  OK(syrah_kernel_release(k));
  OK(syrah_program_release(prog));
  OK(syrah_queue_release(q));
  OK(syrah_context_release(ctx));
  printf("test_mpi_random rank %d of %d: %d runs of %d steps from seed %llu, %d checks, %d failed\n", rank, size, done,
         steps, seed, checks, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
