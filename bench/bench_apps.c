/* Applications, Syrah against hand-written OpenCL on one device: a tiled
 * matrix multiply with group-local memory, n-body, a multi-pass reduction
 * and a 2D Jacobi stencil. Each application is a list of kernel launches
 * over a few buffers; Syrah runs it with accessors on an out-of-order
 * queue (dependencies inferred), the raw version with cl_mem arguments on
 * an in-order queue. Timed: inputs to the device, every launch, the result
 * back on the host (median of several runs). Every result is checked
 * against a host computation.
 *
 * With libsyrah_clcalls.so loaded (see clcalls.c), the OpenCL calls of
 * each path's last timed run are printed.
 *
 * Syrah and raw run in alternating rounds (machines drift between runs by
 * more than the differences measured), each side first in every other
 * round: the table gives the medians of their times and the median of the
 * rounds' ratios.
 *
 * With `aa` after the rounds, both sides of each round are the raw
 * version: how far this method's ratio moves with nothing to tell apart,
 * the finest difference it can resolve on this machine.
 *
 * usage: bench_apps P.D [scale] [rounds] [aa]   (scale 1: CI sizes; 4: GPU
 * sizes; rounds: default 5, at most 16) */
#include "bench_common.h"

#include <math.h>
#include <stdint.h>

static const char *source =
    "#define TILE 16\n"
    "__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {\n"
    "  __local float ta[TILE][TILE];\n"
    "  __local float tb[TILE][TILE];\n"
    "  int row = (int)get_global_id(0), col = (int)get_global_id(1);\n"
    "  int lr = (int)get_local_id(0), lc = (int)get_local_id(1);\n"
    "  float sum = 0.0f;\n"
    "  for (int t = 0; t < n; t += TILE) {\n"
    "    ta[lr][lc] = a[row * n + t + lc];\n"
    "    tb[lr][lc] = b[(t + lr) * n + col];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int k = 0; k < TILE; ++k) sum += ta[lr][k] * tb[k][lc];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  c[row * n + col] = sum;\n"
    "}\n"
    "__kernel void nbody(__global const float4 *p, __global float4 *v, __global float4 *q, int n) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  float4 me = p[i];\n"
    "  float3 acc = (float3)(0.0f);\n"
    "  for (int j = 0; j < n; ++j) {\n"
    "    float4 o = p[j];\n"
    "    float3 d = o.xyz - me.xyz;\n"
    "    float r2 = dot(d, d) + 0.01f;\n"
    "    float inv = rsqrt(r2);\n"
    "    acc += d * (o.w * inv * inv * inv);\n"
    "  }\n"
    "  float4 vel = v[i];\n"
    "  vel.xyz += acc * 0.001f;\n"
    "  v[i] = vel;\n"
    "  q[i] = (float4)(me.xyz + vel.xyz * 0.001f, me.w);\n"
    "}\n"
    "__kernel void reduce(__global const uint *in, __global uint *out, __local uint *s, int n) {\n"
    "  int l = (int)get_local_id(0), g = (int)get_group_id(0), w = (int)get_local_size(0);\n"
    "  int i = g * w * 2 + l;\n"
    "  uint x = 0;\n"
    "  if (i < n) x = in[i];\n"
    "  if (i + w < n) x += in[i + w];\n"
    "  s[l] = x;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int k = w / 2; k > 0; k /= 2) {\n"
    "    if (l < k) s[l] += s[l + k];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) out[g] = s[0];\n"
    "}\n"
    "__kernel void jacobi(__global const float *a, __global float *b, int w, int h) {\n"
    "  int x = (int)get_global_id(1), y = (int)get_global_id(0);\n"
    "  float c = a[y * w + x];\n"
    "  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { b[y * w + x] = c; return; }\n"
    "  b[y * w + x] = 0.25f * (a[y * w + x - 1] + a[y * w + x + 1] + a[(y - 1) * w + x] + a[(y + 1) * w + x]);\n"
    "}\n";

enum { MAX_BUFS = 4, MAX_ARGS = 5, ARG_BUF = 0, ARG_INT = 1, ARG_LOCAL = 2, REPS = 3 };

typedef struct {
  int kind, buf, ival;
  syrah_access_mode mode;
  size_t local;
} app_arg;

typedef struct {
  const char *kernel;
  syrah_range range;
  app_arg args[MAX_ARGS];
  int nargs;
} launch;

typedef struct {
  const char *name;
  int nbufs;
  size_t bytes[MAX_BUFS];
  const void *init[MAX_BUFS]; /* NULL: no initial data */
  launch *launches;
  int nlaunches;
  int out;           /* the buffer read back */
  size_t out_offset; /* bytes into it */
  size_t out_bytes;
} app;

static app_arg buf(int b, syrah_access_mode m) {
  app_arg a;
  memset(&a, 0, sizeof a);
  a.kind = ARG_BUF;
  a.buf = b;
  a.mode = m;
  return a;
}
static app_arg ival(int v) {
  app_arg a;
  memset(&a, 0, sizeof a);
  a.kind = ARG_INT;
  a.ival = v;
  return a;
}
static app_arg local_bytes(size_t n) {
  app_arg a;
  memset(&a, 0, sizeof a);
  a.kind = ARG_LOCAL;
  a.local = n;
  return a;
}

/* ---- Syrah ---- */

static double run_syrah(const char *spec, const app *ap, void *result) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k[16];
  const char *names[16];
  int nk = 0, i, j, rep;
  double t[REPS];
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, 0, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  for (rep = -1; rep < REPS; ++rep) {
    syrah_buffer *b[MAX_BUFS];
    syrah_host_accessor *ha;
    void *p;
    size_t off = ap->out_offset / 4, range = ap->out_bytes / 4;
    double t0;
    for (i = 0; i < ap->nbufs; ++i) {
      syrah_buffer_desc bd;
      memset(&bd, 0, sizeof bd);
      bd.element_size = 4;
      bd.dimensions = 1;
      bd.range[0] = ap->bytes[i] / 4;
      bd.host_pointer = (void *)(uintptr_t)ap->init[i];
      bd.ownership = ap->init[i] ? SYRAH_HOST_READ_ONLY : SYRAH_HOST_NONE;
      SY_OK(syrah_buffer_create(&bd, &b[i]));
    }
    if (rep == REPS - 1) calls_begin();
    t0 = now_us();
    for (i = 0; i < ap->nlaunches; ++i) {
      const launch *l = &ap->launches[i];
      syrah_accessor acc[MAX_ARGS];
      syrah_kernel_arg args[MAX_ARGS];
      syrah_kernel *kern = NULL;
      size_t na = 0;
      for (j = 0; j < nk; ++j)
        if (strcmp(names[j], l->kernel) == 0) kern = k[j];
      if (!kern) {
        SY_OK(syrah_kernel_create(prog, l->kernel, &k[nk]));
        names[nk] = l->kernel;
        kern = k[nk++];
      }
      for (j = 0; j < l->nargs; ++j) {
        const app_arg *a = &l->args[j];
        if (a->kind == ARG_BUF) {
          memset(&acc[na], 0, sizeof acc[na]);
          acc[na].buffer = b[a->buf];
          acc[na].mode = a->mode;
          args[j].kind = SYRAH_ARG_ACCESSOR;
          args[j].size = na++;
          args[j].value = NULL;
        } else if (a->kind == ARG_INT) {
          args[j] = syrah_arg_value(&a->ival, sizeof a->ival);
        } else {
          args[j] = syrah_arg_local(a->local);
        }
      }
      SY_OK(syrah_queue_submit_kernel(q, kern, &l->range, acc, na, args, (size_t)l->nargs, NULL, 0, NULL));
    }
    SY_OK(syrah_buffer_host_access(b[ap->out], SYRAH_ACCESS_READ, &off, &range, &ha, &p));
    if (rep >= 0) t[rep] = now_us() - t0;
    if (rep == REPS - 1) calls_end("Syrah, one run of the application", 1, t[rep]);
    memcpy(result, p, ap->out_bytes);
    SY_OK(syrah_host_accessor_release(ha));
    for (i = 0; i < ap->nbufs; ++i) SY_OK(syrah_buffer_release(b[i]));
  }
  for (j = 0; j < nk; ++j) SY_OK(syrah_kernel_release(k[j]));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  return median(t, REPS) / 1e3;
}

/* ---- raw OpenCL ---- */

static double run_raw(unsigned p, unsigned d, const app *ap, void *result) {
  raw_env e;
  cl_kernel k[16];
  const char *names[16];
  cl_int err;
  int nk = 0, i, j, rep;
  double t[REPS];
  raw_open(p, d, 0, source, "matmul", &e);
  /* Device memory made once and used by every run, as an application
   * that runs repeatedly keeps it (Syrah reuses released buffers' device
   * memory the same way; fresh memory costs NVIDIA's driver several times
   * more at its first use). */
  cl_mem m[MAX_BUFS];
  for (i = 0; i < ap->nbufs; ++i) {
    m[i] = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, ap->bytes[i], NULL, &err);
    CL_OK(err);
  }
  for (rep = -1; rep < REPS; ++rep) {
    double t0;
    if (rep == REPS - 1) calls_begin();
    t0 = now_us();
    for (i = 0; i < ap->nbufs; ++i)
      if (ap->init[i]) CL_OK(clEnqueueWriteBuffer(e.q, m[i], CL_FALSE, 0, ap->bytes[i], ap->init[i], 0, NULL, NULL));
    for (i = 0; i < ap->nlaunches; ++i) {
      const launch *l = &ap->launches[i];
      cl_kernel kern = NULL;
      const size_t *local = l->range.local_size[0] ? l->range.local_size : NULL;
      for (j = 0; j < nk; ++j)
        if (strcmp(names[j], l->kernel) == 0) kern = k[j];
      if (!kern) {
        k[nk] = clCreateKernel(e.prog, l->kernel, &err);
        CL_OK(err);
        names[nk] = l->kernel;
        kern = k[nk++];
      }
      for (j = 0; j < l->nargs; ++j) {
        const app_arg *a = &l->args[j];
        if (a->kind == ARG_BUF)
          CL_OK(clSetKernelArg(kern, (cl_uint)j, sizeof(cl_mem), &m[a->buf]));
        else if (a->kind == ARG_INT)
          CL_OK(clSetKernelArg(kern, (cl_uint)j, sizeof(int), &a->ival));
        else
          CL_OK(clSetKernelArg(kern, (cl_uint)j, a->local, NULL));
      }
      CL_OK(clEnqueueNDRangeKernel(e.q, kern, l->range.dimensions, NULL, l->range.global_size, local, 0, NULL,
                                   NULL));
    }
    CL_OK(clEnqueueReadBuffer(e.q, m[ap->out], CL_TRUE, ap->out_offset, ap->out_bytes, result, 0, NULL, NULL));
    if (rep >= 0) t[rep] = now_us() - t0;
    if (rep == REPS - 1) calls_end("raw, one run of the application", 1, t[rep]);
  }
  for (i = 0; i < ap->nbufs; ++i) CL_OK(clReleaseMemObject(m[i]));
  for (j = 0; j < nk; ++j) CL_OK(clReleaseKernel(k[j]));
  raw_close(&e);
  return median(t, REPS) / 1e3;
}

/* ---- the applications and their host checks ---- */

static int scale = 1;

static app make_matmul(float **a, float **b, int *n_out) {
  static launch l;
  app ap;
  int n = 256 * scale, i;
  *a = (float *)malloc(sizeof(float) * (size_t)n * (size_t)n);
  *b = (float *)malloc(sizeof(float) * (size_t)n * (size_t)n);
  if (!*a || !*b) exit(1);
  for (i = 0; i < n * n; ++i) {
    (*a)[i] = (float)((i * 7) % 13) / 13.0f;
    (*b)[i] = (float)((i * 5) % 11) / 11.0f;
  }
  memset(&l, 0, sizeof l);
  l.kernel = "matmul";
  l.range = syrah_nd_range_2d((size_t)n, (size_t)n, 16, 16);
  l.args[0] = buf(0, SYRAH_ACCESS_READ);
  l.args[1] = buf(1, SYRAH_ACCESS_READ);
  l.args[2] = buf(2, SYRAH_ACCESS_DISCARD_WRITE);
  l.args[3] = ival(n);
  l.nargs = 4;
  memset(&ap, 0, sizeof ap);
  ap.name = "tiled matrix multiply";
  ap.nbufs = 3;
  for (i = 0; i < 3; ++i) ap.bytes[i] = sizeof(float) * (size_t)n * (size_t)n;
  ap.init[0] = *a;
  ap.init[1] = *b;
  ap.launches = &l;
  ap.nlaunches = 1;
  ap.out = 2;
  ap.out_bytes = ap.bytes[2];
  *n_out = n;
  return ap;
}

static int check_matmul(const float *a, const float *b, const float *c, int n) {
  int s;
  for (s = 0; s < 256; ++s) {
    int r = (s * 37) % n, col = (s * 91) % n, k;
    double sum = 0;
    for (k = 0; k < n; ++k) sum += (double)a[r * n + k] * b[k * n + col];
    if (fabs(sum - c[r * n + col]) > 1e-3 * (1 + fabs(sum))) return 0;
  }
  return 1;
}

static void nbody_host(float *p, float *v, int n, int steps) {
  float *q = (float *)malloc(sizeof(float) * 4 * (size_t)n);
  int s, i, j;
  if (!q) exit(1);
  for (s = 0; s < steps; ++s) {
    for (i = 0; i < n; ++i) {
      float ax = 0, ay = 0, az = 0;
      for (j = 0; j < n; ++j) {
        float dx = p[4 * j] - p[4 * i], dy = p[4 * j + 1] - p[4 * i + 1], dz = p[4 * j + 2] - p[4 * i + 2];
        float r2 = dx * dx + dy * dy + dz * dz + 0.01f, inv = 1.0f / sqrtf(r2), f = p[4 * j + 3] * inv * inv * inv;
        ax += dx * f;
        ay += dy * f;
        az += dz * f;
      }
      v[4 * i] += ax * 0.001f;
      v[4 * i + 1] += ay * 0.001f;
      v[4 * i + 2] += az * 0.001f;
      q[4 * i] = p[4 * i] + v[4 * i] * 0.001f;
      q[4 * i + 1] = p[4 * i + 1] + v[4 * i + 1] * 0.001f;
      q[4 * i + 2] = p[4 * i + 2] + v[4 * i + 2] * 0.001f;
      q[4 * i + 3] = p[4 * i + 3];
    }
    memcpy(p, q, sizeof(float) * 4 * (size_t)n);
  }
  free(q);
}

/* One row of the table and one JSON record. */
static int rounds = 5;
/* Raw against raw (see the top). */
static int aa;
static const char *side[2] = {"Syrah", "raw"};

/* Each application's round times, listed under the table. */
enum { APPS = 4 };
static char round_times[APPS][640];
static const char *round_app[APPS];
static int apps_done;

/* Runs the application with Syrah and raw, alternating, `rounds` times;
 * `ts` and `tr` get the medians of their times, `spread` the smallest and
 * largest of the rounds' ratios, the result the median of those ratios. */
static double compare(const char *spec, unsigned p, unsigned d, const app *ap, void *rs, void *rr, double *ts,
                      double *tr, double spread[2]) {
  double s[16], r[16];
  int i;
  /* Syrah first in the even rounds, raw in the odd ones: the side run
   * first can run at another speed. */
  for (i = 0; i < rounds; ++i) {
    if (i % 2) r[i] = run_raw(p, d, ap, rr);
    s[i] = aa ? run_raw(p, d, ap, rs) : run_syrah(spec, ap, rs);
    if (i % 2 == 0) r[i] = run_raw(p, d, ap, rr);
  }
  *ts = median(s, rounds);
  *tr = median(r, rounds);
  ratio_spread(s, r, rounds, &spread[0], &spread[1]);
  if (apps_done < APPS) {
    round_app[apps_done] = ap->name;
    format_rounds(round_times[apps_done++], sizeof round_times[0], s, r, rounds);
  }
  return median_ratio(s, r, rounds);
}

static void report(const char *spec, const char *name, const char *app_name, const char *size, double ts, double tr,
                   double ratio, const double spread[2], int ok) {
  printf("| %s | %s | %.3f | %.3f | %.3f | %.3f to %.3f | %d | %s |\n", app_name, size, ts, tr, ratio, spread[0],
         spread[1], rounds, ok ? "ok" : "WRONG");
  bench_json("{\"bench\":\"%s\",\"device\":\"%s\",\"device_name\":\"%s\",\"app\":\"%s\",\"size\":\"%s\","
             "\"syrah_ms\":%.4f,\"raw_ms\":%.4f,\"ratio\":%.4f,\"ratio_min\":%.4f,\"ratio_max\":%.4f,"
             "\"rounds\":%d,\"ok\":%s}",
             aa ? "apps_aa" : "apps", spec, name, app_name, size, ts, tr, ratio, spread[0], spread[1], rounds, ok ? "true" : "false");
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  char name[256];
  const syrah_device *dev;
  int all_ok = 1;
  if (argc > 2) scale = atoi(argv[2]);
  if (argc > 3) rounds = atoi(argv[3]);
  aa = parse_aa(argc, argv, 4, side);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || scale < 1 || scale > 16 || rounds < 1 || rounds > 16 ||
      aa < 0 || argc > 5) {
    fprintf(stderr, "usage: bench_apps P.D [scale 1..16] [rounds 1..16] [aa]\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  printf("## Applications%s, device %s (%s), scale %d\n\nMedians over the rounds, %s and %s alternating; %s / %s: "
         "median of the rounds' ratios.\n\n| application | size | %s ms | %s ms | %s / %s | rounds' ratios | "
         "rounds | result |\n|---|---|---|---|---|---|---|---|\n",
         aa ? ", raw against raw" : "", argv[1], name, scale, side[0], side[1], side[0], side[1], side[0], side[1],
         side[0], side[1]);
  {
    /* Tiled matrix multiply. */
    float *a, *b, *cs, *cr;
    int n, ok;
    app ap = make_matmul(&a, &b, &n);
    double ts, tr, ratio, spread[2];
    char size[64];
    cs = (float *)malloc(ap.out_bytes);
    cr = (float *)malloc(ap.out_bytes);
    if (!cs || !cr) exit(1);
    ratio = compare(argv[1], p, d, &ap, cs, cr, &ts, &tr, spread);
    ok = check_matmul(a, b, cs, n) && check_matmul(a, b, cr, n);
    snprintf(size, sizeof size, "%dx%d", n, n);
    report(argv[1], name, ap.name, size, ts, tr, ratio, spread, ok);
    all_ok &= ok;
    free(a);
    free(b);
    free(cs);
    free(cr);
  }
  {
    /* N-body: positions ping-pong between buffers 0 and 2. */
    int n = 1024 * scale, steps = 8, i, ok;
    size_t bytes = sizeof(float) * 4 * (size_t)n;
    float *pos = (float *)malloc(bytes), *vel = (float *)malloc(bytes), *ps = (float *)malloc(bytes);
    float *pr = (float *)malloc(bytes);
    launch l[8];
    app ap;
    double ts, tr, ratio, spread[2], err = 0;
    char size[64];
    if (!pos || !vel || !ps || !pr) exit(1);
    for (i = 0; i < n; ++i) {
      pos[4 * i] = (float)((i * 37) % 101) / 10.0f;
      pos[4 * i + 1] = (float)((i * 53) % 103) / 10.0f;
      pos[4 * i + 2] = (float)((i * 71) % 107) / 10.0f;
      pos[4 * i + 3] = 1.0f + (float)(i % 7) / 7.0f;
      vel[4 * i] = vel[4 * i + 1] = vel[4 * i + 2] = vel[4 * i + 3] = 0;
    }
    memset(l, 0, sizeof l);
    for (i = 0; i < steps; ++i) {
      l[i].kernel = "nbody";
      l[i].range = syrah_nd_range_1d((size_t)n, 64);
      l[i].args[0] = buf(i % 2 ? 2 : 0, SYRAH_ACCESS_READ);
      l[i].args[1] = buf(1, SYRAH_ACCESS_READ_WRITE);
      l[i].args[2] = buf(i % 2 ? 0 : 2, SYRAH_ACCESS_DISCARD_WRITE);
      l[i].args[3] = ival(n);
      l[i].nargs = 4;
    }
    memset(&ap, 0, sizeof ap);
    ap.name = "n-body";
    ap.nbufs = 3;
    ap.bytes[0] = ap.bytes[1] = ap.bytes[2] = bytes;
    ap.init[0] = pos;
    ap.init[1] = vel;
    ap.launches = l;
    ap.nlaunches = steps;
    ap.out = steps % 2 ? 2 : 0;
    ap.out_bytes = bytes;
    ratio = compare(argv[1], p, d, &ap, ps, pr, &ts, &tr, spread);
    nbody_host(pos, vel, n, steps);
    for (i = 0; i < 4 * n; ++i) {
      /* Relative: rsqrt and the order of 1000s of additions differ. */
      double e1 = fabs(ps[i] - pos[i]) / (1 + fabs(pos[i])), e2 = fabs(pr[i] - pos[i]) / (1 + fabs(pos[i]));
      if (e1 > err) err = e1;
      if (e2 > err) err = e2;
    }
    ok = err < 1e-3;
    if (!ok) fprintf(stderr, "%s: largest difference from the host %g\n", ap.name, err);
    snprintf(size, sizeof size, "%d bodies, %d steps", n, steps);
    report(argv[1], name, ap.name, size, ts, tr, ratio, spread, ok);
    all_ok &= ok;
    free(pos);
    free(vel);
    free(ps);
    free(pr);
  }
  {
    /* Multi-pass reduction: 512 elements become one per pass, between
     * buffers 1 and 2 after the first. */
    int n = (1 << 22) * scale, m = n, pass = 0, ok;
    uint32_t *in = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)n), sum = 0, rs = 0, rr = 0;
    launch l[8];
    app ap;
    double ts, tr, ratio, spread[2];
    char size[64];
    int i;
    if (!in) exit(1);
    for (i = 0; i < n; ++i) {
      in[i] = (uint32_t)i * 2654435761u;
      sum += in[i];
    }
    memset(l, 0, sizeof l);
    while (m > 1) {
      int groups = (m + 511) / 512;
      l[pass].kernel = "reduce";
      l[pass].range = syrah_nd_range_1d((size_t)groups * 256, 256);
      l[pass].args[0] = buf(pass == 0 ? 0 : (pass % 2 ? 1 : 2), SYRAH_ACCESS_READ);
      l[pass].args[1] = buf(pass % 2 ? 2 : 1, SYRAH_ACCESS_DISCARD_WRITE);
      l[pass].args[2] = local_bytes(256 * sizeof(uint32_t));
      l[pass].args[3] = ival(m);
      l[pass].nargs = 4;
      m = groups;
      ++pass;
    }
    memset(&ap, 0, sizeof ap);
    ap.name = "multi-pass reduction";
    ap.nbufs = 3;
    ap.bytes[0] = sizeof(uint32_t) * (size_t)n;
    ap.bytes[1] = ap.bytes[2] = sizeof(uint32_t) * (size_t)((n + 511) / 512);
    ap.init[0] = in;
    ap.launches = l;
    ap.nlaunches = pass;
    ap.out = pass % 2 ? 1 : 2;
    ap.out_bytes = sizeof(uint32_t);
    ratio = compare(argv[1], p, d, &ap, &rs, &rr, &ts, &tr, spread);
    ok = rs == sum && rr == sum;
    snprintf(size, sizeof size, "%d uints, %d passes", n, pass);
    report(argv[1], name, ap.name, size, ts, tr, ratio, spread, ok);
    all_ok &= ok;
    free(in);
  }
  {
    /* 2D Jacobi: ping-pong between buffers 0 and 1. */
    int w = 512 * scale, h = 512 * scale, iters = 20, i, x, y, ok;
    size_t cells = (size_t)w * (size_t)h;
    float *g = (float *)malloc(sizeof(float) * cells), *ref = (float *)malloc(sizeof(float) * cells);
    float *tmp = (float *)malloc(sizeof(float) * cells), *gs = (float *)malloc(sizeof(float) * cells);
    float *gr = (float *)malloc(sizeof(float) * cells);
    launch l[20];
    app ap;
    double ts, tr, ratio, spread[2], err = 0;
    char size[64];
    if (!g || !ref || !tmp || !gs || !gr) exit(1);
    for (i = 0; i < (int)cells; ++i) g[i] = (float)((i * 13) % 17);
    memset(l, 0, sizeof l);
    for (i = 0; i < iters; ++i) {
      l[i].kernel = "jacobi";
      l[i].range = syrah_nd_range_2d((size_t)h, (size_t)w, 8, 32);
      l[i].args[0] = buf(i % 2, SYRAH_ACCESS_READ);
      l[i].args[1] = buf(1 - i % 2, SYRAH_ACCESS_DISCARD_WRITE);
      l[i].args[2] = ival(w);
      l[i].args[3] = ival(h);
      l[i].nargs = 4;
    }
    memset(&ap, 0, sizeof ap);
    ap.name = "2D Jacobi stencil";
    ap.nbufs = 2;
    ap.bytes[0] = ap.bytes[1] = sizeof(float) * cells;
    ap.init[0] = g;
    ap.launches = l;
    ap.nlaunches = iters;
    ap.out = iters % 2;
    ap.out_bytes = sizeof(float) * cells;
    ratio = compare(argv[1], p, d, &ap, gs, gr, &ts, &tr, spread);
    memcpy(ref, g, sizeof(float) * cells);
    for (i = 0; i < iters; ++i) {
      for (y = 0; y < h; ++y)
        for (x = 0; x < w; ++x) {
          size_t c = (size_t)y * (size_t)w + (size_t)x;
          tmp[c] = (x == 0 || y == 0 || x == w - 1 || y == h - 1)
                       ? ref[c]
                       : 0.25f * (ref[c - 1] + ref[c + 1] + ref[c - (size_t)w] + ref[c + (size_t)w]);
        }
      memcpy(ref, tmp, sizeof(float) * cells);
    }
    for (i = 0; i < (int)cells; ++i) {
      double e1 = fabs(gs[i] - ref[i]), e2 = fabs(gr[i] - ref[i]);
      if (e1 > err) err = e1;
      if (e2 > err) err = e2;
    }
    ok = err < 1e-3;
    if (!ok) fprintf(stderr, "%s: largest difference from the host %g\n", ap.name, err);
    snprintf(size, sizeof size, "%dx%d, %d iterations", w, h, iters);
    report(argv[1], name, ap.name, size, ts, tr, ratio, spread, ok);
    all_ok &= ok;
    free(g);
    free(ref);
    free(tmp);
    free(gs);
    free(gr);
  }
  {
    int i;
    printf("\nRound times in order, %s / %s ms:\n\n", side[0], side[1]);
    for (i = 0; i < apps_done; ++i) printf("- %s: %s\n", round_app[i], round_times[i]);
  }
  return !all_ok;
}
