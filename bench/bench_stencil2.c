/* A 2D Jacobi stencil split over two devices, Syrah against hand-written
 * OpenCL. Each device updates half of the rows every iteration and needs
 * one row of the other half's previous result.
 *   Syrah: two grids (ping-pong) of pages of 8 rows; each part's kernel
 *          reads its rows and the neighbouring row through an accessor
 *          and writes its rows; Syrah moves the halo pages (directly
 *          between devices of one context, else through the host).
 *   raw:   each device keeps its rows plus one halo row on each side in
 *          two cl_mem; after every iteration the two boundary rows are
 *          read to the host and written into the other device's halo.
 * Timed: from the first command to the whole result on the host (median
 * of three runs after one untimed), in `rounds` alternating rounds of
 * Syrah and raw (machines drift between runs by more than the differences
 * measured): medians of the rounds, and the median of their ratios. Both
 * results are checked against the host computation. The same device twice
 * runs the two parts on two queues of it.
 *
 * With `aa` after the rounds, both sides of each round are the raw
 * version: how far the ratio moves with nothing to tell apart.
 *
 * usage: bench_stencil2 P.D P2.D2 [size] [iterations] [rounds, default 5] [aa] */
#include "bench_common.h"

#include <math.h>

static const char *source =
    "__kernel void jacobi(__global const float *in, __global float *out, int width) {\n"
    "  /* `in` starts one row above this part's first row, `out` at it. */\n"
    "  int y = (int)get_global_id(0), x = (int)get_global_id(1);\n"
    "  const __global float *c = in + (y + 1) * width;\n"
    "  float v = c[x];\n"
    "  if (x > 0 && x < width - 1)\n"
    "    v = 0.25f * (c[x - 1] + c[x + 1] + c[x - width] + c[x + width]);\n"
    "  out[y * width + x] = v;\n"
    "}\n"
    "__kernel void jacobi_halo(__global const float *in, __global float *out, int width) {\n"
    "  /* Both start one row above this part's first row. */\n"
    "  int y = (int)get_global_id(0), x = (int)get_global_id(1);\n"
    "  const __global float *c = in + (y + 1) * width;\n"
    "  float v = c[x];\n"
    "  if (x > 0 && x < width - 1)\n"
    "    v = 0.25f * (c[x - 1] + c[x + 1] + c[x - width] + c[x + width]);\n"
    "  out[(y + 1) * width + x] = v;\n"
    "}\n";

enum { BAND = 8, REPS = 3 };

static int H = 2048, W = 2048, ITERS = 20;
/* Raw against raw (see the top), and the two sides' names. */
static int aa;
static const char *side[2] = {"Syrah", "raw"};

/* Work-groups of one row of this many cells, the same on both sides: left
 * to the driver, PoCL 3.1 picked sizes that made either side several
 * times slower, and differently for each. */
static size_t group_width(void) { return W % 64 == 0 ? 64 : 16; }

/* Rows [r0, r1) that part p updates (the outermost rows never change). */
static void part_rows(int p, int *r0, int *r1) {
  *r0 = p == 0 ? 1 : H / 2;
  *r1 = p == 0 ? H / 2 : H - 1;
}

static double run_syrah(const char *spec[2], const float *init, float *result) {
  const syrah_device *dev[2];
  syrah_queue *q[2];
  syrah_kernel *k[2];
  uint64_t plat[2];
  double t[REPS];
  int p, rep, it, width = W;
  for (p = 0; p < 2; ++p) {
    SY_OK(syrah_device_select_by_string(spec[p], &dev[p]));
    SY_OK(syrah_device_get_info_u64(dev[p], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &plat[p]));
  }
  if (plat[0] == plat[1]) {
    /* One context (over one device, or two of one platform): pages move
     * between the parts directly. */
    syrah_context *shared;
    SY_OK(syrah_context_create(dev, dev[0] == dev[1] ? 1 : 2, &shared));
    for (p = 0; p < 2; ++p) SY_OK(syrah_queue_create(shared, dev[p], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[p]));
    SY_OK(syrah_context_release(shared));
  } else {
    for (p = 0; p < 2; ++p) SY_OK(syrah_queue_create(NULL, dev[p], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[p]));
  }
  for (p = 0; p < 2; ++p) {
    syrah_context *ctx;
    syrah_program *prog;
    SY_OK(syrah_queue_get_context(q[p], &ctx));
    SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
    SY_OK(syrah_kernel_create(prog, "jacobi", &k[p]));
    SY_OK(syrah_program_release(prog));
    SY_OK(syrah_context_release(ctx));
  }
  for (rep = -1; rep < REPS; ++rep) {
    syrah_buffer *grid[2];
    syrah_host_accessor *ha;
    float *data;
    double t0;
    for (p = 0; p < 2; ++p) {
      syrah_buffer_desc d;
      memset(&d, 0, sizeof d);
      d.element_size = sizeof(float);
      d.dimensions = 2;
      d.range[0] = (size_t)H;
      d.range[1] = (size_t)W;
      d.page_size[0] = BAND;
      d.page_size[1] = (size_t)W;
      d.host_pointer = (void *)(uintptr_t)init;
      d.ownership = SYRAH_HOST_READ_ONLY;
      SY_OK(syrah_buffer_create(&d, &grid[p]));
    }
    t0 = now_us();
    for (it = 0; it < ITERS; ++it) {
      syrah_buffer *in = grid[it % 2], *out = grid[(it + 1) % 2];
      for (p = 0; p < 2; ++p) {
        int r0, r1;
        syrah_accessor acc[2];
        syrah_kernel_arg args[3];
        syrah_range r;
        part_rows(p, &r0, &r1);
        r = syrah_nd_range_2d((size_t)(r1 - r0), (size_t)W, 1, group_width());
        memset(acc, 0, sizeof acc);
        acc[0].buffer = in;
        acc[0].mode = SYRAH_ACCESS_READ;
        acc[0].offset[0] = (size_t)(r0 - 1);
        acc[0].range[0] = (size_t)(r1 - r0 + 2);
        acc[0].range[1] = (size_t)W;
        acc[1].buffer = out;
        acc[1].mode = SYRAH_ACCESS_DISCARD_WRITE;
        acc[1].offset[0] = (size_t)r0;
        acc[1].range[0] = (size_t)(r1 - r0);
        acc[1].range[1] = (size_t)W;
        args[0].kind = SYRAH_ARG_ACCESSOR;
        args[0].size = 0;
        args[0].value = NULL;
        args[1] = args[0];
        args[1].size = 1;
        args[2] = syrah_arg_value(&width, sizeof width);
        SY_OK(syrah_queue_submit_kernel(q[p], k[p], &r, acc, 2, args, 3, NULL, 0, NULL));
      }
    }
    SY_OK(syrah_buffer_host_access(grid[ITERS % 2], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&data));
    if (rep >= 0) t[rep] = now_us() - t0;
    /* Rows 0 and H-1 were never written in this grid: they are the
     * initial data either way. */
    memcpy(result, data, sizeof(float) * (size_t)H * (size_t)W);
    SY_OK(syrah_host_accessor_release(ha));
    for (p = 0; p < 2; ++p) SY_OK(syrah_buffer_release(grid[p]));
  }
  for (p = 0; p < 2; ++p) {
    SY_OK(syrah_kernel_release(k[p]));
    SY_OK(syrah_queue_release(q[p]));
  }
  return median(t, REPS) / 1e3;
}

static double run_raw(const unsigned pd[2][2], const float *init, float *result) {
  raw_env e[2];
  cl_kernel k[2];
  cl_int err;
  double t[REPS];
  float *row[2];
  int p, rep, it;
  size_t rowb = sizeof(float) * (size_t)W;
  row[0] = (float *)malloc(rowb);
  row[1] = (float *)malloc(rowb);
  if (!row[0] || !row[1]) exit(1);
  for (p = 0; p < 2; ++p) {
    raw_open(pd[p][0], pd[p][1], 0, source, "jacobi_halo", &e[p]);
    k[p] = e[p].k;
  }
  for (rep = -1; rep < REPS; ++rep) {
    cl_mem m[2][2];
    double t0;
    int r0[2], r1[2];
    for (p = 0; p < 2; ++p) {
      size_t rows;
      int b;
      part_rows(p, &r0[p], &r1[p]);
      rows = (size_t)(r1[p] - r0[p] + 2);
      for (b = 0; b < 2; ++b) {
        m[p][b] = clCreateBuffer(e[p].ctx, CL_MEM_READ_WRITE, rows * rowb, NULL, &err);
        CL_OK(err);
      }
    }
    t0 = now_us();
    for (p = 0; p < 2; ++p) {
      size_t rows = (size_t)(r1[p] - r0[p] + 2);
      const float *from = init + (size_t)(r0[p] - 1) * (size_t)W;
      CL_OK(clEnqueueWriteBuffer(e[p].q, m[p][0], CL_FALSE, 0, rows * rowb, from, 0, NULL, NULL));
      CL_OK(clEnqueueWriteBuffer(e[p].q, m[p][1], CL_FALSE, 0, rows * rowb, from, 0, NULL, NULL));
    }
    for (it = 0; it < ITERS; ++it) {
      int w = W;
      for (p = 0; p < 2; ++p) {
        size_t g[2], l[2];
        g[0] = (size_t)(r1[p] - r0[p]);
        g[1] = (size_t)W;
        l[0] = 1;
        l[1] = group_width();
        CL_OK(clSetKernelArg(k[p], 0, sizeof(cl_mem), &m[p][it % 2]));
        CL_OK(clSetKernelArg(k[p], 1, sizeof(cl_mem), &m[p][(it + 1) % 2]));
        CL_OK(clSetKernelArg(k[p], 2, sizeof(int), &w));
        CL_OK(clEnqueueNDRangeKernel(e[p].q, k[p], 2, NULL, g, l, 0, NULL, NULL));
      }
      /* Part 0's last row goes to part 1's upper halo, part 1's first row
       * to part 0's lower halo. */
      CL_OK(clEnqueueReadBuffer(e[0].q, m[0][(it + 1) % 2], CL_FALSE, (size_t)(r1[0] - r0[0]) * rowb, rowb, row[0],
                                0, NULL, NULL));
      CL_OK(clEnqueueReadBuffer(e[1].q, m[1][(it + 1) % 2], CL_FALSE, rowb, rowb, row[1], 0, NULL, NULL));
      CL_OK(clFinish(e[0].q));
      CL_OK(clFinish(e[1].q));
      CL_OK(clEnqueueWriteBuffer(e[1].q, m[1][(it + 1) % 2], CL_TRUE, 0, rowb, row[0], 0, NULL, NULL));
      CL_OK(clEnqueueWriteBuffer(e[0].q, m[0][(it + 1) % 2], CL_TRUE, (size_t)(r1[0] - r0[0] + 1) * rowb, rowb,
                                 row[1], 0, NULL, NULL));
    }
    for (p = 0; p < 2; ++p)
      CL_OK(clEnqueueReadBuffer(e[p].q, m[p][ITERS % 2], CL_TRUE, rowb, (size_t)(r1[p] - r0[p]) * rowb,
                                result + (size_t)r0[p] * (size_t)W, 0, NULL, NULL));
    if (rep >= 0) t[rep] = now_us() - t0;
    memcpy(result, init, rowb);
    memcpy(result + (size_t)(H - 1) * (size_t)W, init + (size_t)(H - 1) * (size_t)W, rowb);
    for (p = 0; p < 2; ++p) {
      CL_OK(clReleaseMemObject(m[p][0]));
      CL_OK(clReleaseMemObject(m[p][1]));
    }
  }
  for (p = 0; p < 2; ++p) raw_close(&e[p]);
  free(row[0]);
  free(row[1]);
  return median(t, REPS) / 1e3;
}

static double max_error(const float *a, const float *ref) {
  double m = 0;
  size_t i, n = (size_t)H * (size_t)W;
  for (i = 0; i < n; ++i) {
    double e = fabs((double)a[i] - (double)ref[i]);
    if (e > m) m = e;
  }
  return m;
}

int main(int argc, char **argv) {
  unsigned pd[2][2];
  const char *spec[2];
  char name[2][256];
  float *init, *ref, *tmp, *sy, *raw;
  size_t n;
  int y, x, it, p, ok, rounds = 5, r;
  double ts, tr, es, er, ratio, lo, hi, st[16], rt[16];
  if (argc > 3) H = W = atoi(argv[3]);
  if (argc > 4) ITERS = atoi(argv[4]);
  if (argc > 5) rounds = atoi(argv[5]);
  aa = parse_aa(argc, argv, 6, side);
  if (argc < 3 || sscanf(argv[1], "%u.%u", &pd[0][0], &pd[0][1]) != 2 ||
      sscanf(argv[2], "%u.%u", &pd[1][0], &pd[1][1]) != 2 || H < 4 * BAND || H % (2 * BAND) || ITERS < 1 || rounds < 1 || rounds > 16 ||
      aa < 0 || argc > 7) {
    fprintf(stderr,
            "usage: bench_stencil2 P.D P2.D2 [size, a multiple of %d, at least %d] [iterations] [rounds 1..16] [aa]\n",
            2 * BAND, 4 * BAND);
    return 2;
  }
  spec[0] = argv[1];
  spec[1] = argv[2];
  for (p = 0; p < 2; ++p) {
    const syrah_device *d;
    SY_OK(syrah_device_select_by_string(spec[p], &d));
    SY_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, name[p], sizeof name[p], NULL));
    json_safe(name[p]);
  }
  n = (size_t)H * (size_t)W;
  init = (float *)malloc(sizeof(float) * n);
  ref = (float *)malloc(sizeof(float) * n);
  tmp = (float *)malloc(sizeof(float) * n);
  sy = (float *)malloc(sizeof(float) * n);
  raw = (float *)malloc(sizeof(float) * n);
  if (!init || !ref || !tmp || !sy || !raw) return 1;
  for (y = 0; y < H; ++y)
    for (x = 0; x < W; ++x)
      init[y * W + x] = (y == 0 || y == H - 1 || x == 0 || x == W - 1) ? 100.0f : (float)((y * 7 + x * 13) % 17);
  memcpy(ref, init, sizeof(float) * n);
  for (it = 0; it < ITERS; ++it) {
    memcpy(tmp, ref, sizeof(float) * n);
    for (y = 1; y < H - 1; ++y)
      for (x = 1; x < W - 1; ++x)
        ref[y * W + x] = 0.25f * (tmp[y * W + x - 1] + tmp[y * W + x + 1] + tmp[(y - 1) * W + x] + tmp[(y + 1) * W + x]);
  }
  for (r = 0; r < rounds; ++r) {
    st[r] = aa ? run_raw((const unsigned(*)[2])pd, init, sy) : run_syrah(spec, init, sy);
    rt[r] = run_raw((const unsigned(*)[2])pd, init, raw);
  }
  ts = median(st, rounds);
  tr = median(rt, rounds);
  ratio = median_ratio(st, rt, rounds);
  ratio_spread(st, rt, rounds, &lo, &hi);
  es = max_error(sy, ref);
  er = max_error(raw, ref);
  ok = es < 1e-3 && er < 1e-3;
  printf("## 2D stencil over two devices%s: %s (%s) and %s (%s)\n\n", aa ? ", raw against raw" : "", spec[0], name[0],
         spec[1], name[1]);
  printf("Medians over the rounds, %s and %s alternating; %s / %s: median of the rounds' ratios.\n\n", side[0], side[1],
         side[0], side[1]);
  printf("| grid | iterations | %s ms | %s ms | %s / %s | rounds' ratios | rounds | largest error %s / %s "
         "| result |\n|---|---|---|---|---|---|---|---|---|\n| %dx%d | %d | %.3f | %.3f | %.3f | %.3f to %.3f | %d | %.1e "
         "/ %.1e | %s |\n",
         side[0], side[1], side[0], side[1], side[0], side[1], H, W, ITERS, ts, tr, ratio, lo, hi, rounds, es, er, ok ? "ok" : "WRONG");
  {
    char times[640];
    format_rounds(times, sizeof times, st, rt, rounds);
    printf("\nRound times in order, %s / %s ms: %s\n", side[0], side[1], times);
  }
  bench_json("{\"bench\":\"%s\",\"device\":\"%s+%s\",\"device_name\":\"%s + %s\",\"size\":%d,"
             "\"iterations\":%d,\"syrah_ms\":%.4f,\"raw_ms\":%.4f,\"ratio\":%.4f,\"ratio_min\":%.4f,"
             "\"ratio_max\":%.4f,\"rounds\":%d,\"ok\":%s}",
             aa ? "stencil2_aa" : "stencil2", spec[0], spec[1], name[0], name[1], H, ITERS, ts, tr, ratio, lo, hi, rounds, ok ? "true" : "false");
  free(init);
  free(ref);
  free(tmp);
  free(sy);
  free(raw);
  return !ok;
}
