/* A trip through the host every step, as a halo exchange makes one: a
 * kernel updates a row, the row is copied to host memory, the host changes
 * it (adds 1: where an exchange hands it to MPI and takes the neighbour's),
 * and it is copied back into the buffer for the next step's kernel.
 *
 * Syrah submits the steps ahead (at most `ahead` of them in flight): the
 * copy out's release callback changes the row and completes a user event,
 * which the copy back waits for, so the runtime's own path from a copy's
 * end to the next commands is what is measured (callbacks, held commands,
 * events). Raw OpenCL does what a careful programmer writes for the same
 * work on one in-order queue: kernel, blocking read, change, non-blocking
 * write, next kernel. Both sides copy to and from pinned host memory
 * (Syrah's `syrah_malloc_pinned`, raw's mapped `CL_MEM_ALLOC_HOST_PTR`
 * buffer). Microseconds per step over the rounds, Syrah and raw
 * alternating; the final row is checked against a host model on both.
 *
 * usage: bench_hop P.D [steps] [rounds] [row floats] [ahead] */
#include "bench_common.h"

#include <stdint.h>

static const char *source =
    "__kernel void advance(__global float *a) { size_t x = get_global_id(0); a[x] = a[x] * 0.5f + 1.0f; }\n";

enum { MAX_AHEAD = 64, MAX_ROUNDS = 16 };

static int steps = 2000, rounds = 5, width = 1024, ahead = 4;

/* The row each side must end with. */
static float *model(void) {
  float *m = (float *)malloc(sizeof(float) * (size_t)width);
  int i, x;
  if (!m) exit(1);
  for (x = 0; x < width; ++x) {
    m[x] = (float)(x % 7);
    for (i = 0; i < steps; ++i) m[x] = m[x] * 0.5f + 1.0f + 1.0f;
  }
  return m;
}

static int same(const float *a, const float *b) { return memcmp(a, b, sizeof(float) * (size_t)width) == 0; }

/* ---- Syrah ---- */

typedef struct {
  float *row;
  syrah_event *back; /* completed by the release */
} hop;

/* The copy out's release: the row is the host's until the user event
 * completes, after which the slot may be reused (so `back` is read first). */
static void changed(void *packed, void *user) {
  hop *h = (hop *)user;
  syrah_event *back = h->back;
  int x;
  for (x = 0; x < width; ++x) h->row[x] += 1.0f;
  (void)packed;
  SY_OK(syrah_user_event_complete(back, false));
  SY_OK(syrah_event_release(back));
}

static double sy_run(const char *spec, const float *want, int *ok) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  syrah_buffer *b;
  syrah_buffer_desc bd;
  syrah_accessor rw, rd, wr;
  syrah_kernel_arg arg;
  syrah_range range = syrah_range_1d((size_t)width);
  syrah_event *done[MAX_AHEAD];
  hop hops[MAX_AHEAD];
  float *init = (float *)malloc(sizeof(float) * (size_t)width), *out = (float *)malloc(sizeof(float) * (size_t)width);
  double t0, t;
  int i, x;
  if (!init || !out) exit(1);
  for (x = 0; x < width; ++x) init[x] = (float)(x % 7);
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "advance", &k));
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(float);
  bd.dimensions = 1;
  bd.range[0] = (size_t)width;
  bd.host_pointer = init;
  bd.ownership = SYRAH_HOST_COPY_IN;
  SY_OK(syrah_buffer_create(&bd, &b));
  memset(&rw, 0, sizeof rw);
  rw.buffer = b;
  rw.mode = SYRAH_ACCESS_READ_WRITE;
  rd = wr = rw;
  rd.mode = SYRAH_ACCESS_READ;
  wr.mode = SYRAH_ACCESS_DISCARD_WRITE;
  arg.kind = SYRAH_ARG_ACCESSOR;
  arg.size = 0;
  arg.value = NULL;
  for (i = 0; i < ahead; ++i) {
    SY_OK(syrah_malloc_pinned(ctx, sizeof(float) * (size_t)width, (void **)&hops[i].row));
    done[i] = NULL;
  }
  t0 = now_us();
  for (i = 0; i < steps; ++i) {
    hop *h = &hops[i % ahead];
    syrah_event **slot = &done[i % ahead];
    if (*slot) {
      SY_OK(syrah_event_wait(*slot));
      SY_OK(syrah_event_release(*slot));
      *slot = NULL;
    }
    SY_OK(syrah_user_event_create(ctx, &h->back));
    SY_OK(syrah_event_retain(h->back)); /* the release's reference */
    SY_OK(syrah_queue_submit_kernel(q, k, &range, &rw, 1, &arg, 1, NULL, 0, NULL));
    SY_OK(syrah_queue_copy_from_accessor(q, &rd, h->row, changed, h, NULL, 0, NULL));
    SY_OK(syrah_queue_copy_to_accessor(q, h->row, &wr, NULL, NULL, (const syrah_event *const *)&h->back, 1, slot));
    SY_OK(syrah_event_release(h->back));
  }
  SY_OK(syrah_queue_wait(q));
  t = (now_us() - t0) / steps;
  SY_OK(syrah_queue_copy_from_accessor(q, &rd, out, NULL, NULL, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  *ok = same(out, want);
  for (i = 0; i < ahead; ++i) {
    if (done[i]) SY_OK(syrah_event_release(done[i]));
    SY_OK(syrah_free(ctx, hops[i].row));
  }
  SY_OK(syrah_buffer_release(b));
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  free(init);
  free(out);
  return t;
}

/* ---- raw OpenCL ---- */

static double raw_run(unsigned p, unsigned d, const float *want, int *ok) {
  raw_env e;
  cl_int err;
  cl_mem m, pin;
  float *row, *init = (float *)malloc(sizeof(float) * (size_t)width);
  size_t global = (size_t)width, bytes = sizeof(float) * (size_t)width;
  double t0, t;
  int i, x;
  if (!init) exit(1);
  for (x = 0; x < width; ++x) init[x] = (float)(x % 7);
  raw_open(p, d, 0, source, "advance", &e);
  m = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, init, &err);
  CL_OK(err);
  pin = clCreateBuffer(e.ctx, CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
  CL_OK(err);
  row = (float *)clEnqueueMapBuffer(e.q, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
  CL_OK(err);
  CL_OK(clSetKernelArg(e.k, 0, sizeof m, &m));
  CL_OK(clFinish(e.q));
  t0 = now_us();
  for (i = 0; i < steps; ++i) {
    CL_OK(clEnqueueNDRangeKernel(e.q, e.k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CL_OK(clEnqueueReadBuffer(e.q, m, CL_TRUE, 0, bytes, row, 0, NULL, NULL));
    for (x = 0; x < width; ++x) row[x] += 1.0f;
    CL_OK(clEnqueueWriteBuffer(e.q, m, CL_FALSE, 0, bytes, row, 0, NULL, NULL));
  }
  CL_OK(clFinish(e.q));
  t = (now_us() - t0) / steps;
  CL_OK(clEnqueueReadBuffer(e.q, m, CL_TRUE, 0, bytes, init, 0, NULL, NULL));
  *ok = same(init, want);
  CL_OK(clEnqueueUnmapMemObject(e.q, pin, row, 0, NULL, NULL));
  CL_OK(clFinish(e.q));
  CL_OK(clReleaseMemObject(pin));
  CL_OK(clReleaseMemObject(m));
  raw_close(&e);
  free(init);
  return t;
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256];
  const syrah_device *dev;
  double s[MAX_ROUNDS], r[MAX_ROUNDS], lo, hi;
  float *want;
  int i, ok = 1, sok, rok;
  if (argc > 2) steps = atoi(argv[2]);
  if (argc > 3) rounds = atoi(argv[3]);
  if (argc > 4) width = atoi(argv[4]);
  if (argc > 5) ahead = atoi(argv[5]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || steps < 1 || rounds < 1 || rounds > MAX_ROUNDS ||
      width < 1 || ahead < 1 || ahead > MAX_AHEAD) {
    fprintf(stderr, "usage: bench_hop P.D [steps] [rounds, 1 to %d] [row floats] [ahead, 1 to %d]\n", MAX_ROUNDS,
            MAX_AHEAD);
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  want = model();
  printf("## A trip through the host every step, device %s (%s)\n\n", argv[1], name);
  printf("%d steps of a %d-float row, Syrah at most %d steps ahead; µs per step, rounds alternating.\n\n", steps,
         width, ahead);
  printf("| round | Syrah µs | raw µs | Syrah / raw | results |\n|---|---|---|---|---|\n");
  for (i = 0; i < rounds; ++i) {
    s[i] = sy_run(argv[1], want, &sok);
    r[i] = raw_run(p, d, want, &rok);
    ok &= sok && rok;
    printf("| %d | %.2f | %.2f | %.3f | %s |\n", i + 1, s[i], r[i], s[i] / r[i],
           sok && rok ? "ok" : (sok ? "raw wrong" : "Syrah wrong"));
  }
  ratio_spread(s, r, rounds, &lo, &hi);
  printf("\nMedian: Syrah %.2f µs, raw %.2f µs per step; Syrah / raw %.3f (rounds %.3f to %.3f).\n", median(s, rounds),
         median(r, rounds), median_ratio(s, r, rounds), lo, hi);
  bench_json("{\"bench\":\"hop\",\"device\":\"%s\",\"name\":\"%s\",\"steps\":%d,\"width\":%d,\"syrah_us\":%.3f,"
             "\"raw_us\":%.3f,\"ratio\":%.4f,\"ok\":%s}",
             argv[1], name, steps, width, median(s, rounds), median(r, rounds), median_ratio(s, r, rounds),
             ok ? "true" : "false");
  free(want);
  return ok ? 0 : 1;
}
