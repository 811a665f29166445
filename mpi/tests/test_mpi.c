/* Point-to-point transfers of every region shape (1D window, 2D halo row
 * and column, 3D box) and of USM, around a ring of MPI ranks, each rank on
 * a device of its own (rank modulo the devices found); bad ranks, tags and
 * modes, a message larger than its region, and MPI without
 * MPI_THREAD_MULTIPLE. Every rank checks what it received element by
 * element. A watchdog ends a rank that hangs.
 *   mpiexec -n 2 test_mpi          (or -n 4; any number of ranks)
 *   mpiexec -n 1 test_mpi single   (MPI initialised without threads) */
#define _POSIX_C_SOURCE 200809L
#include "mpi_testing.h"

/* The value rank `r` keeps at linear index `i` of every buffer. */
static int value(int r, size_t i) {
  return r * 1000000 + (int)i;
}

static syrah_buffer *make(uint32_t dims, size_t r0, size_t r1, size_t r2, int *host) {
  syrah_buffer_desc d;
  syrah_buffer *b = NULL;
  size_t i, n = r0 * (dims > 1 ? r1 : 1) * (dims > 2 ? r2 : 1);
  memset(&d, 0, sizeof d);
  d.element_size = sizeof(int);
  d.dimensions = dims;
  d.range[0] = r0;
  d.range[1] = r1;
  d.range[2] = r2;
  d.host_pointer = host;
  d.ownership = SYRAH_HOST_WRITE_BACK;
  for (i = 0; i < n; ++i) host[i] = value(rank, i);
  OK(syrah_buffer_create(&d, &b));
  return b;
}

static syrah_accessor window(const syrah_buffer *b, syrah_access_mode m, size_t o0, size_t o1, size_t o2, size_t r0,
                             size_t r1, size_t r2) {
  syrah_accessor a;
  a.buffer = b;
  a.mode = m;
  a.offset[0] = o0;
  a.offset[1] = o1;
  a.offset[2] = o2;
  a.range[0] = r0;
  a.range[1] = r1;
  a.range[2] = r2;
  return a;
}

/* One shape: every rank sends `from` of its buffer to the next rank and
 * receives the previous rank's into `to`; the extents are [e0][e1][e2]
 * (leading ones 1 below three dimensions) in a buffer of [n0][n1][n2]. */
static void shape(const char *name, const syrah_queue *q, syrah_mpi_comm *c, uint32_t dims, const size_t n[3],
                  const size_t from[3], const size_t to[3], const size_t e[3], int tag) {
  int *host = (int *)malloc(n[0] * n[1] * n[2] * sizeof(int));
  int next = (rank + 1) % size, prev = (rank + size - 1) % size, wrong = 0;
  size_t z, y, x, i;
  syrah_buffer *b;
  syrah_accessor src, dst;
  size_t ext[3], off_from[3], off_to[3];
  if (!host) return;
  b = make(dims, dims == 1 ? n[2] : dims == 2 ? n[1] : n[0], dims == 2 ? n[2] : n[1], n[2], host);
  /* The accessors name the used dimensions first. */
  for (i = 0; i < 3; ++i) {
    size_t k = i + (3 - dims);
    ext[i] = i < dims ? e[k] : 0;
    off_from[i] = i < dims ? from[k] : 0;
    off_to[i] = i < dims ? to[k] : 0;
  }
  src = window(b, SYRAH_ACCESS_READ, off_from[0], off_from[1], off_from[2], ext[0], ext[1], ext[2]);
  dst = window(b, SYRAH_ACCESS_WRITE, off_to[0], off_to[1], off_to[2], ext[0], ext[1], ext[2]);
  OK(syrah_mpi_send(q, c, &src, next, tag, NULL, 0, NULL));
  OK(syrah_mpi_recv(q, c, &dst, prev, tag, NULL, 0, NULL));
  OK(syrah_queue_wait((syrah_queue *)q));
  OK(syrah_buffer_release(b));
  for (z = 0; z < n[0]; ++z)
    for (y = 0; y < n[1]; ++y)
      for (x = 0; x < n[2]; ++x) {
        size_t at = (z * n[1] + y) * n[2] + x;
        int inside = z >= to[0] && z < to[0] + e[0] && y >= to[1] && y < to[1] + e[1] && x >= to[2] && x < to[2] + e[2];
        int want = value(rank, at);
        if (inside) {
          size_t sz = z - to[0] + from[0], sy = y - to[1] + from[1], sx = x - to[2] + from[2];
          want = value(prev, (sz * n[1] + sy) * n[2] + sx);
        }
        wrong += host[at] != want;
      }
  CHECK(wrong == 0, "%s: %d elements wrong after receiving from rank %d", name, wrong, prev);
  if (!wrong) printf("rank %d: %s from rank %d: %zu elements right\n", rank, name, prev, e[0] * e[1] * e[2]);
  free(host);
}

static void usm(const syrah_device *d, const syrah_context *ctx, const syrah_queue *q, syrah_mpi_comm *c) {
  enum { N = 5000 };
  int next = (rank + 1) % size, prev = (rank + size - 1) % size, i, wrong = 0;
  int *in = (int *)malloc(N * sizeof(int)), *out = (int *)malloc(N * sizeof(int));
  bool dev = false;
  void *dsend = NULL, *drecv = NULL;
  if (!in || !out) return;
  for (i = 0; i < N; ++i) out[i] = value(rank, (size_t)i);
  /* Ordinary host memory: handed to MPI as it is. */
  memset(in, 0, N * sizeof(int));
  OK(syrah_mpi_send_usm(q, c, out, N * sizeof(int), next, 40, NULL, 0, NULL));
  OK(syrah_mpi_recv_usm(q, c, in, N * sizeof(int), prev, 40, NULL, 0, NULL));
  OK(syrah_queue_wait((syrah_queue *)q));
  OK(syrah_mpi_comm_wait(c));
  for (i = 0; i < N; ++i) wrong += in[i] != value(prev, (size_t)i);
  CHECK(wrong == 0, "host memory: %d of %d wrong", wrong, N);
  /* Device USM: staged through host memory. */
  syrah_device_has_aspect(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS, &dev);
  if (!dev) {
    printf("SKIP rank %d: device USM transfers: the device has no USM device allocations\n", rank);
  } else {
    syrah_event *sent = NULL, *got = NULL;
    OK(syrah_malloc_device(ctx, d, N * sizeof(int), &dsend));
    OK(syrah_malloc_device(ctx, d, N * sizeof(int), &drecv));
    OK(syrah_queue_memcpy(q, dsend, out, N * sizeof(int), NULL, 0, NULL));
    OK(syrah_queue_wait((syrah_queue *)q));
    OK(syrah_mpi_send_usm(q, c, dsend, N * sizeof(int), next, 41, NULL, 0, &sent));
    OK(syrah_mpi_recv_usm(q, c, drecv, N * sizeof(int), prev, 41, NULL, 0, &got));
    memset(in, 0, N * sizeof(int));
    OK(syrah_queue_memcpy(q, in, drecv, N * sizeof(int), (const syrah_event *const *)&got, 1, NULL));
    OK(syrah_queue_wait((syrah_queue *)q));
    wrong = 0;
    for (i = 0; i < N; ++i) wrong += in[i] != value(prev, (size_t)i);
    CHECK(wrong == 0, "device USM: %d of %d wrong", wrong, N);
    if (sent) syrah_event_release(sent);
    if (got) syrah_event_release(got);
    OK(syrah_mpi_comm_wait(c));
    OK(syrah_free(ctx, dsend));
    OK(syrah_free(ctx, drecv));
  }
  if (!wrong) printf("rank %d: USM and host memory from rank %d: %d ints right\n", rank, prev, N);
  free(in);
  free(out);
}

static void errors(const syrah_queue *q, syrah_mpi_comm *c) {
  int host[1000];
  syrah_buffer *b = make(1, 1000, 0, 0, host);
  syrah_accessor a = window(b, SYRAH_ACCESS_READ, 0, 0, 0, 0, 0, 0);
  syrah_accessor small = window(b, SYRAH_ACCESS_WRITE, 0, 0, 0, 500, 0, 0);
  syrah_status s;
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  char bad[64];
  snprintf(bad, sizeof bad, "rank %d is not a rank", size);
  s = syrah_mpi_send(q, c, &a, size, 0, NULL, 0, NULL);
  CHECK(s == SYRAH_ERROR_INVALID_ARGUMENT && strstr(syrah_last_error_message(), bad), "bad rank: %s: %s",
        syrah_status_name(s), syrah_last_error_message());
  s = syrah_mpi_send(q, c, &a, next, -3, NULL, 0, NULL);
  CHECK(s == SYRAH_ERROR_INVALID_ARGUMENT && strstr(syrah_last_error_message(), "tag -3"), "bad tag: %s: %s",
        syrah_status_name(s), syrah_last_error_message());
  s = syrah_mpi_recv(q, c, &a, prev, 0, NULL, 0, NULL);
  CHECK(s == SYRAH_ERROR_INVALID_ARGUMENT && strstr(syrah_last_error_message(), "mode 1"), "read mode: %s: %s",
        syrah_status_name(s), syrah_last_error_message());
  s = syrah_mpi_send(q, NULL, &a, next, 0, NULL, 0, NULL);
  CHECK(s == SYRAH_ERROR_NULL_ARGUMENT && strstr(syrah_last_error_message(), "comm"), "NULL comm: %s",
        syrah_last_error_message());
  s = syrah_mpi_send_usm(q, c, NULL, 4, next, 0, NULL, 0, NULL);
  CHECK(s == SYRAH_ERROR_NULL_ARGUMENT && strstr(syrah_last_error_message(), "pointer"), "NULL pointer: %s",
        syrah_last_error_message());
  /* A message of 1000 ints into a region of 500: MPI's own error, once. */
  OK(syrah_mpi_send(q, c, &a, next, 77, NULL, 0, NULL));
  OK(syrah_mpi_recv(q, c, &small, prev, 77, NULL, 0, NULL));
  s = syrah_queue_wait((syrah_queue *)q);
  CHECK(s == SYRAH_ERROR_EXECUTION_FAILED && strstr(syrah_last_error_message(), "MPI_Irecv"),
        "truncated message: %s: %s", syrah_status_name(s), syrah_last_error_message());
  if (s != SYRAH_SUCCESS) printf("rank %d: a message too large surfaced once: %s\n", rank, syrah_last_error_message());
  OK(syrah_queue_wait((syrah_queue *)q));
  OK(syrah_mpi_comm_wait(c));
  OK(syrah_buffer_release(b));
}

int main(int argc, char **argv) {
  int provided = 0, single = argc > 1 && strcmp(argv[1], "single") == 0;
  const syrah_device *devs[16];
  size_t ndev = 0;
  const syrah_device *d;
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_mpi_comm *c = NULL;
  uint64_t sent = 0, received = 0;
  watchdog(120);
  if (single) {
    syrah_status s;
    MPI_Init(&argc, &argv);
    s = syrah_mpi_comm_create(MPI_COMM_WORLD, &c);
    CHECK(s == SYRAH_ERROR_COMMUNICATION && strstr(syrah_last_error_message(), "MPI_THREAD_MULTIPLE"),
          "without threads: %s: %s", syrah_status_name(s), syrah_last_error_message());
    printf("test_mpi single: %d checks, %d passed, %d failed\n", checks, checks - failures, failures);
    MPI_Finalize();
    return failures ? 1 : 0;
  }
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  OK(syrah_get_devices(devs, 16, &ndev));
  if (ndev == 0) {
    fprintf(stderr, "FAIL rank %d: no device\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  d = devs[(size_t)rank % (ndev < 16 ? ndev : 16)];
  {
    char name[256] = "";
    syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL);
    printf("rank %d of %d on device %s\n", rank, size, name);
  }
  OK(syrah_context_create(&d, 1, &ctx));
  OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  OK(syrah_mpi_comm_create(MPI_COMM_WORLD, &c));
  if (q && c) {
    const size_t n1[3] = {1, 1, 1000}, f1[3] = {0, 0, 100}, t1[3] = {0, 0, 500}, e1[3] = {1, 1, 300};
    const size_t n2[3] = {1, 64, 48};
    const size_t fr[3] = {0, 5, 0}, tr[3] = {0, 60, 0}, er[3] = {1, 1, 48};
    const size_t fc[3] = {0, 0, 7}, tc[3] = {0, 0, 40}, ec[3] = {1, 64, 1};
    const size_t n3[3] = {8, 10, 12}, f3[3] = {1, 2, 3}, t3[3] = {3, 4, 5}, e3[3] = {4, 5, 6};
    shape("1D window", q, c, 1, n1, f1, t1, e1, 10);
    shape("2D halo row", q, c, 2, n2, fr, tr, er, 11);
    shape("2D halo column", q, c, 2, n2, fc, tc, ec, 12);
    shape("3D box", q, c, 3, n3, f3, t3, e3, 13);
    usm(d, ctx, q, c);
    errors(q, c);
    OK(syrah_mpi_comm_get_stats(c, &sent, &received));
    printf("rank %d: %llu bytes sent, %llu received\n", rank, (unsigned long long)sent,
           (unsigned long long)received);
    OK(syrah_mpi_comm_release(c));
  }
  if (q) OK(syrah_queue_release(q));
  if (ctx) OK(syrah_context_release(ctx));
  printf("test_mpi rank %d of %d: %d checks, %d passed, %d failed\n", rank, size, checks, checks - failures, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
