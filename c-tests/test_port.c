/* What ports of ordinary OpenCL programs lean on, on every device with or
 * without USM: memcpy between two host arrays, a null global pointer
 * argument, ranged accessors at any element offset, and the one-line
 * constructors for buffers, accessors,
 * accessor arguments, 3D nd-ranges and dependency lists. */
#include "testing.h"

#define N 1024

static const char *kSource =
    "__kernel void axpy(__global const float *x, __global float *y, __global int *unused,\n"
    "                   float a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (unused) y[i] = -1.0f; else y[i] += a * x[i];\n"
    "}\n"
    "__kernel void box(__global int *p, int row_pitch, int slice_pitch, int v) {\n"
    "  size_t x = get_global_id(2), y = get_global_id(1), z = get_global_id(0);\n"
    "  p[z * slice_pitch + y * row_pitch + x] += v;\n"
    "}\n"
    "__kernel void copy(__global const int *a, __global int *b) {\n"
    "  b[get_global_id(0)] = a[get_global_id(0)];\n"
    "}\n"
    "__kernel void scale(__global float *p, float f, int n) {\n"
    "  size_t i = get_global_id(0); if (i < (size_t)n) p[i] *= f;\n"
    "}\n"
    "__kernel void add2d(__global int *p, int row_pitch, int slice_pitch, int v) {\n"
    "  p[get_global_id(0) * row_pitch + get_global_id(1)] += v + slice_pitch - slice_pitch;\n"
    "}\n"
    "__kernel void inc(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void inc2(__global int *p, int v) { p[get_global_id(0) * 12 + get_global_id(1)] += v; }\n";

/* A queue on a device, its context and kSource built there. */
typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
} env;

static int env_open(env *e, const syrah_device *d, syrah_queue_flags flags) {
  memset(e, 0, sizeof *e);
  if (syrah_queue_create(NULL, d, flags, NULL, NULL, &e->q) != SYRAH_SUCCESS ||
      syrah_queue_get_context(e->q, &e->ctx) != SYRAH_SUCCESS ||
      syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    return 0;
  }
  return 1;
}

/* Kernel `name` of the program, or NULL after a reported failure. */
static syrah_kernel *env_kernel(env *e, const char *name) {
  syrah_kernel *k = NULL;
  if (syrah_kernel_create(e->prog, name, &k) != SYRAH_SUCCESS)
    T_FAIL("kernel %s: %s", name, syrah_last_error_message());
  return k;
}

/* Waits for the queue's work, then releases it all. */
static void env_close(env *e) {
  if (e->q) EXPECT_OK(syrah_queue_wait(e->q));
  if (e->prog) syrah_program_release(e->prog);
  if (e->q) syrah_queue_release(e->q);
  if (e->ctx) syrah_context_release(e->ctx);
}

static void host_memcpy(const syrah_device *d, syrah_queue_flags flags) {
  syrah_queue *q = NULL;
  static int a[N], b[N], c[N];
  int i, ok;
  syrah_event *e1 = NULL, *e2 = NULL;
  REQUIRE_OK(syrah_queue_create(NULL, d, flags, NULL, NULL, &q));
  for (i = 0; i < N; ++i) {
    a[i] = i * 3 + 1;
    b[i] = c[i] = -1;
  }
  /* a -> b, then b -> c after it (dependency list from plain events). */
  EXPECT_OK(syrah_queue_memcpy(q, b, a, sizeof a, NULL, 0, &e1));
  EXPECT_OK(syrah_queue_memcpy(q, c, b, sizeof b, syrah_events(&e1), 1, &e2));
  EXPECT_OK(syrah_event_wait(e2));
  for (i = 0, ok = 1; i < N; ++i) ok &= b[i] == i * 3 + 1 && c[i] == i * 3 + 1;
  EXPECT_TRUE(ok);
  /* A part, at an odd offset, with no event: the queue wait covers it. */
  EXPECT_OK(syrah_queue_memcpy(q, c + 7, a + 100, 13 * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N; ++i) ok &= c[i] == (i >= 7 && i < 20 ? (i + 93) * 3 + 1 : i * 3 + 1);
  EXPECT_TRUE(ok);
  EXPECT_ERR(syrah_queue_memcpy(q, a + 4, a, 8 * sizeof(int), NULL, 0, NULL),
             SYRAH_ERROR_INVALID_ARGUMENT, "overlap");
  syrah_event_release(e1);
  syrah_event_release(e2);
  syrah_queue_release(q);
}

static void kernels(const syrah_device *d) {
  env e;
  syrah_queue *q;
  syrah_kernel *axpy, *box;
  static float x[N], y[N];
  static int cube[4 * 6 * 8];
  float a = 2.0f;
  int i, ok, one = 1, pitch_row = 8, pitch_slice = 48;
  syrah_buffer *bx = NULL, *by = NULL, *bz = NULL, *bc = NULL;
  syrah_buffer_desc dx, dy;
  syrah_accessor acc[3];
  syrah_kernel_arg args[4];
  syrah_range r;
  syrah_host_accessor *ha = NULL;
  float *p = NULL;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    env_close(&e);
    return;
  }
  q = e.q;
  axpy = env_kernel(&e, "axpy");
  box = env_kernel(&e, "box");
  for (i = 0; i < N; ++i) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  /* const input, read-only; output written back into the user's array. */
  dx = syrah_buffer_desc_1d(sizeof(float), N, (const float *)x, SYRAH_HOST_READ_ONLY);
  dy = syrah_buffer_desc_1d(sizeof(float), N, y, SYRAH_HOST_WRITE_BACK);
  EXPECT_EQ(dx.dimensions, 1);
  EXPECT_EQ(dx.range[0], N);
  EXPECT_EQ(dx.page_size[0], 0);
  EXPECT_TRUE(dx.allocator == NULL && dx.still_shared == NULL);
  REQUIRE_OK(syrah_buffer_create(&dx, &bx));
  REQUIRE_OK(syrah_buffer_create(&dy, &by));
  acc[0] = syrah_accessor_whole(bx, SYRAH_ACCESS_READ);
  acc[1] = syrah_accessor_range_1d(by, SYRAH_ACCESS_READ_WRITE, 0, N);
  args[0] = syrah_arg_accessor(0);
  args[1] = syrah_arg_accessor(1);
  args[2] = syrah_arg_usm(NULL); /* an unused pointer parameter */
  args[3] = syrah_arg_value(&a, sizeof a);
  EXPECT_EQ(args[1].kind, SYRAH_ARG_ACCESSOR);
  EXPECT_EQ(args[1].size, 1);
  r = syrah_range_1d(N);
  EXPECT_OK(syrah_queue_submit_kernel(q, axpy, &r, acc, 2, args, 4, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(by, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; p && i < N; ++i) ok &= p[i] == 1.0f + 2.0f * (float)i;
  EXPECT_TRUE(p && ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(bx));
  EXPECT_OK(syrah_buffer_release(by));
  for (i = 0, ok = 1; i < N; ++i) ok &= y[i] == 1.0f + 2.0f * (float)i && x[i] == (float)i;
  EXPECT_TRUE(ok);

  /* A box of a 3D buffer, launched as a 3D nd-range. */
  {
    syrah_buffer_desc dc = syrah_buffer_desc_3d(sizeof(int), 4, 6, 8, cube, SYRAH_HOST_WRITE_BACK);
    size_t origin[3] = {0, 0, 0}, extent[3] = {4, 6, 8};
    syrah_kernel_arg bargs[4];
    memset(cube, 0, sizeof cube);
    EXPECT_EQ(dc.dimensions, 3);
    EXPECT_TRUE(dc.range[0] == 4 && dc.range[1] == 6 && dc.range[2] == 8);
    REQUIRE_OK(syrah_buffer_create(&dc, &bc));
    acc[0] = syrah_accessor_range_3d(bc, SYRAH_ACCESS_READ_WRITE, origin, extent);
    bargs[0] = syrah_arg_accessor(0);
    bargs[1] = syrah_arg_value(&pitch_row, sizeof pitch_row);
    bargs[2] = syrah_arg_value(&pitch_slice, sizeof pitch_slice);
    bargs[3] = syrah_arg_value(&one, sizeof one);
    r = syrah_nd_range_3d(4, 6, 8, 2, 3, 4);
    EXPECT_EQ(r.dimensions, 3);
    EXPECT_TRUE(r.local_size[0] == 2 && r.local_size[1] == 3 && r.local_size[2] == 4);
    EXPECT_OK(syrah_queue_submit_kernel(q, box, &r, acc, 1, bargs, 4, NULL, 0, NULL));
    EXPECT_OK(syrah_buffer_release(bc));
    for (i = 0, ok = 1; i < 4 * 6 * 8; ++i) ok &= cube[i] == 1;
    EXPECT_TRUE(ok);
  }
  /* 2D constructor and a 2D ranged accessor. */
  {
    syrah_buffer_desc d2 = syrah_buffer_desc_2d(sizeof(int), 6, 8, NULL, SYRAH_HOST_NONE);
    syrah_accessor a2 = syrah_accessor_range_2d(NULL, SYRAH_ACCESS_READ, 2, 3, 4, 5);
    EXPECT_TRUE(d2.dimensions == 2 && d2.range[0] == 6 && d2.range[1] == 8 && d2.host_pointer == NULL);
    EXPECT_TRUE(a2.offset[0] == 2 && a2.offset[1] == 3 && a2.range[0] == 4 && a2.range[1] == 5);
    REQUIRE_OK(syrah_buffer_create(&d2, &bz));
    EXPECT_OK(syrah_buffer_release(bz));
  }
  syrah_kernel_release(axpy);
  syrah_kernel_release(box);
  env_close(&e);
}

/* Ranged accessors at element offsets that are not 128-byte aligned, in
 * 1, 2 and 3 dimensions: on devices without USM their windows are staged. */
static void offsets(const syrah_device *d) {
  env e;
  syrah_queue *q;
  syrah_kernel *box, *copy;
  static int one[64], two[8 * 16], three[5 * 6 * 7], out[16];
  int i, ok, v = 100, pr, ps;
  syrah_buffer *b = NULL, *c = NULL;
  syrah_buffer_desc bd;
  syrah_accessor acc[2];
  syrah_kernel_arg args[4];
  syrah_range r;
  if (!env_open(&e, d, 0)) {
    env_close(&e);
    return;
  }
  q = e.q;
  box = env_kernel(&e, "box");
  copy = env_kernel(&e, "copy");
  args[0] = syrah_arg_accessor(0);
  args[1] = syrah_arg_value(&pr, sizeof pr);
  args[2] = syrah_arg_value(&ps, sizeof ps);
  args[3] = syrah_arg_value(&v, sizeof v);

  /* 1D: ten elements from element 3. */
  for (i = 0; i < 64; ++i) one[i] = i;
  bd = syrah_buffer_desc_1d(sizeof(int), 64, one, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  acc[0] = syrah_accessor_range_1d(b, SYRAH_ACCESS_READ_WRITE, 3, 10);
  pr = ps = 0;
  r = syrah_range_3d(1, 1, 10);
  EXPECT_OK(syrah_queue_submit_kernel(q, box, &r, acc, 1, args, 4, NULL, 0, NULL));
  /* Read from element 5 into another buffer. */
  bd = syrah_buffer_desc_1d(sizeof(int), 16, out, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  acc[0] = syrah_accessor_range_1d(b, SYRAH_ACCESS_READ, 5, 16);
  acc[1] = syrah_accessor_whole(c, SYRAH_ACCESS_DISCARD_WRITE);
  {
    syrah_kernel_arg cargs[2];
    cargs[0] = syrah_arg_accessor(0);
    cargs[1] = syrah_arg_accessor(1);
    r = syrah_range_1d(16);
    EXPECT_OK(syrah_queue_submit_kernel(q, copy, &r, acc, 2, cargs, 2, NULL, 0, NULL));
  }
  EXPECT_OK(syrah_buffer_release(c));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < 64; ++i) ok &= one[i] == i + (i >= 3 && i < 13 ? 100 : 0);
  EXPECT_TRUE(ok);
  for (i = 0, ok = 1; i < 16; ++i) ok &= out[i] == i + 5 + (i + 5 < 13 ? 100 : 0);
  EXPECT_TRUE(ok);

  /* The same 1D window in a graph, replayed three times. */
  {
    syrah_queue *iq = NULL;
    syrah_graph *g = NULL;
    syrah_graph_exec *x = NULL;
    int rep;
    for (i = 0; i < 64; ++i) one[i] = i;
    bd = syrah_buffer_desc_1d(sizeof(int), 64, one, SYRAH_HOST_WRITE_BACK);
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    REQUIRE_OK(syrah_queue_create(e.ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &iq));
    EXPECT_OK(syrah_queue_begin_recording(iq));
    acc[0] = syrah_accessor_range_1d(b, SYRAH_ACCESS_READ_WRITE, 3, 10);
    pr = ps = 0;
    r = syrah_range_3d(1, 1, 10);
    EXPECT_OK(syrah_queue_submit_kernel(iq, box, &r, acc, 1, args, 4, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_end_recording(iq, &g));
    EXPECT_OK(syrah_graph_finalize(g, &x));
    for (rep = 0; rep < 3; ++rep) EXPECT_OK(syrah_queue_submit_graph(iq, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(iq));
    EXPECT_OK(syrah_buffer_release(b));
    for (i = 0, ok = 1; i < 64; ++i) ok &= one[i] == i + (i >= 3 && i < 13 ? 300 : 0);
    EXPECT_TRUE(ok);
    if (x) syrah_graph_exec_release(x);
    if (g) syrah_graph_release(g);
    syrah_queue_release(iq);
  }

  /* 2D: rows 5 and 6, columns 3 to 6, of 8 rows of 16. */
  for (i = 0; i < 8 * 16; ++i) two[i] = i;
  bd = syrah_buffer_desc_2d(sizeof(int), 8, 16, two, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  acc[0] = syrah_accessor_range_2d(b, SYRAH_ACCESS_READ_WRITE, 5, 3, 2, 4);
  pr = 16;
  ps = 0;
  r = syrah_range_3d(1, 2, 4);
  EXPECT_OK(syrah_queue_submit_kernel(q, box, &r, acc, 1, args, 4, NULL, 0, NULL));
  /* The columns beside it, written at the same time, are kept. */
  acc[0] = syrah_accessor_range_2d(b, SYRAH_ACCESS_READ_WRITE, 5, 9, 2, 2);
  r = syrah_range_3d(1, 2, 2);
  EXPECT_OK(syrah_queue_submit_kernel(q, box, &r, acc, 1, args, 4, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < 8 * 16; ++i) {
    int row = i / 16, col = i % 16;
    int in = row >= 5 && row < 7 && ((col >= 3 && col < 7) || (col >= 9 && col < 11));
    ok &= two[i] == i + (in ? 100 : 0);
  }
  EXPECT_TRUE(ok);

  /* 3D: the box of 2 x 3 x 4 at (1, 2, 3) of 5 x 6 x 7. */
  for (i = 0; i < 5 * 6 * 7; ++i) three[i] = i;
  bd = syrah_buffer_desc_3d(sizeof(int), 5, 6, 7, three, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  {
    size_t origin[3] = {1, 2, 3}, extent[3] = {2, 3, 4};
    acc[0] = syrah_accessor_range_3d(b, SYRAH_ACCESS_READ_WRITE, origin, extent);
  }
  pr = 7;
  ps = 42;
  r = syrah_range_3d(2, 3, 4);
  EXPECT_OK(syrah_queue_submit_kernel(q, box, &r, acc, 1, args, 4, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < 5 * 6 * 7; ++i) {
    int z = i / 42, y = (i / 7) % 6, x = i % 7;
    int in = z >= 1 && z < 3 && y >= 2 && y < 5 && x >= 3 && x < 7;
    ok &= three[i] == i + (in ? 100 : 0);
  }
  EXPECT_TRUE(ok);
  syrah_kernel_release(box);
  syrah_kernel_release(copy);
  env_close(&e);
}

/* Arguments bound to a kernel once, overridden per launch; and accessor
 * pitches passed as arguments. */
static void bound_args(const syrah_device *d) {
  env e;
  syrah_queue *q;
  syrah_kernel *scale, *add2d;
  static float v[64];
  static int m[6 * 10];
  float f = 2.0f, g = 3.0f;
  int n = 64, i, ok, plus = 1000;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_accessor acc;
  syrah_kernel_arg a[3];
  syrah_range r = syrah_range_1d(64);
  syrah_host_accessor *ha = NULL;
  float *p = NULL;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    env_close(&e);
    return;
  }
  q = e.q;
  scale = env_kernel(&e, "scale");
  add2d = env_kernel(&e, "add2d");
  for (i = 0; i < 64; ++i) v[i] = 1.0f;
  bd = syrah_buffer_desc_1d(sizeof(float), 64, v, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  acc = syrah_accessor_whole(b, SYRAH_ACCESS_READ_WRITE);
  a[0] = syrah_arg_value(&f, sizeof f);
  EXPECT_OK(syrah_kernel_set_arg(scale, 1, &a[0]));
  a[0] = syrah_arg_value(&n, sizeof n);
  EXPECT_OK(syrah_kernel_set_arg(scale, 2, &a[0]));
  f = 100.0f; /* bound by value: the kernel keeps 2 */
  /* Only the accessor given: x2. */
  a[0] = syrah_arg_accessor(0);
  EXPECT_OK(syrah_queue_submit_kernel(q, scale, &r, &acc, 1, a, 1, NULL, 0, NULL));
  /* The factor given, the count bound: x3. */
  a[1] = syrah_arg_value(&g, sizeof g);
  EXPECT_OK(syrah_queue_submit_kernel(q, scale, &r, &acc, 1, a, 2, NULL, 0, NULL));
  /* Kind SYRAH_ARG_BOUND in the middle: x2 again. */
  a[1] = syrah_arg_bound();
  a[2] = syrah_arg_value(&n, sizeof n);
  EXPECT_OK(syrah_queue_submit_kernel(q, scale, &r, &acc, 1, a, 3, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; p && i < 64; ++i) ok &= p[i] == 12.0f;
  EXPECT_TRUE(p && ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  /* Unbound again: the launch says which argument is missing. */
  EXPECT_OK(syrah_kernel_set_arg(scale, 1, NULL));
  EXPECT_ERR(syrah_queue_submit_kernel(q, scale, &r, &acc, 1, a, 1, NULL, 0, NULL),
             SYRAH_ERROR_KERNEL_ARGUMENTS, "kernel 'scale' takes 3 arguments, 1 given, and argument 1 is not bound");
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < 64; ++i) ok &= v[i] == 12.0f;
  EXPECT_TRUE(ok);

  /* The row pitch of a ranged 2D accessor, 3 x 4 at (2, 3) of 6 x 10. */
  for (i = 0; i < 60; ++i) m[i] = i;
  bd = syrah_buffer_desc_2d(sizeof(int), 6, 10, m, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  acc = syrah_accessor_range_2d(b, SYRAH_ACCESS_READ_WRITE, 2, 3, 3, 4);
  a[0] = syrah_arg_accessor(0);
  a[1] = syrah_arg_accessor_row_pitch(0);
  a[2] = syrah_arg_accessor_slice_pitch(0);
  EXPECT_OK(syrah_kernel_set_arg(add2d, 3, &(syrah_kernel_arg){SYRAH_ARG_VALUE, sizeof plus, &plus}));
  r = syrah_range_2d(3, 4);
  EXPECT_OK(syrah_queue_submit_kernel(q, add2d, &r, &acc, 1, a, 3, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < 60; ++i) {
    int row = i / 10, col = i % 10;
    ok &= m[i] == i + (row >= 2 && row < 5 && col >= 3 && col < 7 ? 1000 : 0);
  }
  EXPECT_TRUE(ok);
  syrah_kernel_release(scale);
  syrah_kernel_release(add2d);
  env_close(&e);
}

/* One element read in one call, moving exactly its bytes. */
static void small_reads(const syrah_device *d) {
  env e;
  syrah_queue *q;
  syrah_kernel *inc, *inc2;
  static int data[4096], grid[8 * 12];
  int i, got = 0, box[2 * 3], ok, one = 1;
  size_t at[3] = {1234, 0, 0}, n1[3] = {1, 0, 0}, o2[3] = {2, 1, 0}, r2[3] = {2, 3, 0};
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_accessor acc;
  syrah_kernel_arg a[2];
  syrah_range r = syrah_range_1d(4096);
  syrah_buffer_stats st0, st1;
  syrah_host_accessor *ha = NULL;
  int *p = NULL;
  if (!env_open(&e, d, 0)) {
    env_close(&e);
    return;
  }
  q = e.q;
  inc = env_kernel(&e, "inc");
  inc2 = env_kernel(&e, "inc2");
  for (i = 0; i < 4096; ++i) data[i] = i;
  bd = syrah_buffer_desc_1d(sizeof(int), 4096, data, SYRAH_HOST_COPY_IN);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* Current on the host: read there, nothing moves. */
  EXPECT_OK(syrah_buffer_read(b, at, n1, &got));
  EXPECT_EQ(got, 1234);
  acc = syrah_accessor_whole(b, SYRAH_ACCESS_READ_WRITE);
  a[0] = syrah_arg_accessor(0);
  a[1] = syrah_arg_value(&one, sizeof one);
  EXPECT_OK(syrah_queue_submit_kernel(q, inc, &r, &acc, 1, a, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_get_stats(b, &st0));
  /* Written on the device: after the kernel, exactly 4 bytes come back. */
  EXPECT_OK(syrah_buffer_read(b, at, n1, &got));
  EXPECT_EQ(got, 1235);
  EXPECT_OK(syrah_buffer_get_stats(b, &st1));
  EXPECT_EQ(st1.device_to_host_bytes - st0.device_to_host_bytes, 4);
  EXPECT_EQ(st1.device_to_host_copies - st0.device_to_host_copies, 1);
  /* Again in the middle of a loop of launches. */
  for (i = 0; i < 5; ++i) {
    EXPECT_OK(syrah_queue_submit_kernel(q, inc, &r, &acc, 1, a, 2, NULL, 0, NULL));
    EXPECT_OK(syrah_buffer_read(b, at, n1, &got));
    EXPECT_EQ(got, 1236 + i);
  }
  /* A held writing host accessor: the read is refused, naming it. */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, at, n1, &ha, (void **)&p));
  EXPECT_ERR(syrah_buffer_read(b, at, n1, &got), SYRAH_ERROR_INVALID_ARGUMENT,
             "a read conflicts with another host accessor");
  if (p) *p = -7;
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_read(b, at, n1, &got));
  EXPECT_EQ(got, -7);
  EXPECT_OK(syrah_buffer_release(b));

  /* A 2 x 3 box of a 2D buffer, packed. */
  for (i = 0; i < 8 * 12; ++i) grid[i] = i;
  bd = syrah_buffer_desc_2d(sizeof(int), 8, 12, grid, SYRAH_HOST_COPY_IN);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  acc = syrah_accessor_whole(b, SYRAH_ACCESS_READ_WRITE);
  r = syrah_range_2d(8, 12);
  {
    EXPECT_OK(syrah_queue_submit_kernel(q, inc2, &r, &acc, 1, a, 2, NULL, 0, NULL));
    EXPECT_OK(syrah_buffer_get_stats(b, &st0));
    EXPECT_OK(syrah_buffer_read(b, o2, r2, box));
    EXPECT_OK(syrah_buffer_get_stats(b, &st1));
    for (i = 0, ok = 1; i < 6; ++i) ok &= box[i] == (2 + i / 3) * 12 + 1 + i % 3 + 1;
    EXPECT_TRUE(ok);
    EXPECT_EQ(st1.device_to_host_bytes - st0.device_to_host_bytes, 6 * sizeof(int));
  }
  EXPECT_ERR(syrah_buffer_read(b, o2, r2, NULL), SYRAH_ERROR_NULL_ARGUMENT, "destination");
  EXPECT_OK(syrah_buffer_release(b));
  syrah_kernel_release(inc);
  syrah_kernel_release(inc2);
  env_close(&e);
}

static void per_device(const syrah_device *d) {
  host_memcpy(d, SYRAH_QUEUE_IN_ORDER);
  host_memcpy(d, 0);
  kernels(d);
  offsets(d);
  bound_args(d);
  small_reads(d);
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_port");
}
