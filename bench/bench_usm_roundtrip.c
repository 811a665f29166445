/* A USM round trip as real programs do it, step by step, against its raw
 * OpenCL counterpart in the same run: allocate an input and an output on
 * the device, copy the input in from malloc'd memory, launch a kernel,
 * copy the output back, free both; a wait after each step. Syrah uses
 * syrah_malloc_device, syrah_queue_memcpy and syrah_free; raw OpenCL
 * clCreateBuffer, clEnqueueWriteBuffer/ReadBuffer (blocking) and
 * clReleaseMemObject, as a careful programmer writes it. Sizes 64 KiB to
 * 64 MiB; the two sides alternate over the rounds; medians per step, and
 * the whole round trip's ratio. Then the same trip queued: the copy in,
 * the launch and the copy out enqueued back to back with one wait at the
 * end (raw: a non-blocking write, the kernel, a blocking read), the
 * allocations made and freed outside the time. Results are checked, the
 * output cleared before each trip.
 *
 * usage: bench_usm_roundtrip P.D [rounds] [max MiB] */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include "bench_common.h"

static const char *source =
    "__kernel void twice(__global const uint *in, __global uint *out) {\n"
    "  size_t i = get_global_id(0); out[i] = 2u * in[i] + 1u;\n"
    "}\n";

enum { STEPS = 5, MAX_ROUNDS = 31 };
static const char *step_names[STEPS] = {"malloc", "copy in", "launch", "copy out", "free"};

typedef struct {
  double us[STEPS];
  int ok;
} trip;

static int check(const cl_uint *out, const cl_uint *in, size_t n) {
  size_t i;
  for (i = 0; i < n; i += 997)
    if (out[i] != 2u * in[i] + 1u) return 0;
  return out[n - 1] == 2u * in[n - 1] + 1u;
}

static trip syrah_trip(syrah_queue *q, syrah_context *ctx, const syrah_device *dev, syrah_kernel *k,
                       const cl_uint *in, cl_uint *out, size_t bytes) {
  trip t;
  void *din = NULL, *dout = NULL;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(bytes / 4);
  double t0, t1;
  memset(out, 0, bytes);
  t0 = now_us();
  SY_OK(syrah_malloc_device(ctx, dev, bytes, &din));
  SY_OK(syrah_malloc_device(ctx, dev, bytes, &dout));
  t1 = now_us();
  t.us[0] = t1 - t0;
  SY_OK(syrah_queue_memcpy(q, din, in, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  t0 = now_us();
  t.us[1] = t0 - t1;
  args[0] = syrah_arg_usm(din);
  args[1] = syrah_arg_usm(dout);
  SY_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  t1 = now_us();
  t.us[2] = t1 - t0;
  SY_OK(syrah_queue_memcpy(q, out, dout, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  t0 = now_us();
  t.us[3] = t0 - t1;
  SY_OK(syrah_free(ctx, din));
  SY_OK(syrah_free(ctx, dout));
  t.us[4] = now_us() - t0;
  t.ok = check(out, in, bytes / 4);
  return t;
}

static trip raw_trip(raw_env *e, const cl_uint *in, cl_uint *out, size_t bytes) {
  trip t;
  cl_int err;
  size_t global = bytes / 4;
  double t0, t1;
  cl_mem din, dout;
  memset(out, 0, bytes);
  t0 = now_us();
  din = clCreateBuffer(e->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
  CL_OK(err);
  dout = clCreateBuffer(e->ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
  CL_OK(err);
  t1 = now_us();
  t.us[0] = t1 - t0;
  CL_OK(clEnqueueWriteBuffer(e->q, din, CL_TRUE, 0, bytes, in, 0, NULL, NULL));
  t0 = now_us();
  t.us[1] = t0 - t1;
  CL_OK(clSetKernelArg(e->k, 0, sizeof din, &din));
  CL_OK(clSetKernelArg(e->k, 1, sizeof dout, &dout));
  CL_OK(clEnqueueNDRangeKernel(e->q, e->k, 1, NULL, &global, NULL, 0, NULL, NULL));
  CL_OK(clFinish(e->q));
  t1 = now_us();
  t.us[2] = t1 - t0;
  CL_OK(clEnqueueReadBuffer(e->q, dout, CL_TRUE, 0, bytes, out, 0, NULL, NULL));
  t0 = now_us();
  t.us[3] = t0 - t1;
  CL_OK(clReleaseMemObject(din));
  CL_OK(clReleaseMemObject(dout));
  t.us[4] = now_us() - t0;
  t.ok = check(out, in, bytes / 4);
  return t;
}

/* The trip queued back to back on Syrah: µs from the copy in to the end
 * of the wait; `*ok` cleared if the result is wrong. */
static double syrah_queued(syrah_queue *q, syrah_context *ctx, const syrah_device *dev, syrah_kernel *k,
                           const cl_uint *in, cl_uint *out, size_t bytes, int *ok) {
  void *din = NULL, *dout = NULL;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(bytes / 4);
  double t0, t;
  SY_OK(syrah_malloc_device(ctx, dev, bytes, &din));
  SY_OK(syrah_malloc_device(ctx, dev, bytes, &dout));
  memset(out, 0, bytes);
  args[0] = syrah_arg_usm(din);
  args[1] = syrah_arg_usm(dout);
  t0 = now_us();
  SY_OK(syrah_queue_memcpy(q, din, in, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
  SY_OK(syrah_queue_memcpy(q, out, dout, bytes, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  t = now_us() - t0;
  SY_OK(syrah_free(ctx, din));
  SY_OK(syrah_free(ctx, dout));
  *ok &= check(out, in, bytes / 4);
  return t;
}

/* The same on raw OpenCL. */
static double raw_queued(raw_env *e, const cl_uint *in, cl_uint *out, size_t bytes, int *ok) {
  cl_int err;
  size_t global = bytes / 4;
  double t0, t;
  cl_mem din = clCreateBuffer(e->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
  CL_OK(err);
  cl_mem dout = clCreateBuffer(e->ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
  CL_OK(err);
  memset(out, 0, bytes);
  CL_OK(clSetKernelArg(e->k, 0, sizeof din, &din));
  CL_OK(clSetKernelArg(e->k, 1, sizeof dout, &dout));
  t0 = now_us();
  CL_OK(clEnqueueWriteBuffer(e->q, din, CL_FALSE, 0, bytes, in, 0, NULL, NULL));
  CL_OK(clEnqueueNDRangeKernel(e->q, e->k, 1, NULL, &global, NULL, 0, NULL, NULL));
  CL_OK(clEnqueueReadBuffer(e->q, dout, CL_TRUE, 0, bytes, out, 0, NULL, NULL));
  t = now_us() - t0;
  CL_OK(clReleaseMemObject(din));
  CL_OK(clReleaseMemObject(dout));
  *ok &= check(out, in, bytes / 4);
  return t;
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  int rounds = 9, max_mib = 64, r, s, ok = 1, nsizes = 0;
  size_t bytes, qsize[16];
  double qsy[16], qrw[16], qratio[16];
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  raw_env e;
  char name[256];
  if (argc > 2) rounds = atoi(argv[2]);
  if (argc > 3) max_mib = atoi(argv[3]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || rounds < 1 || rounds > MAX_ROUNDS ||
      max_mib < 1) {
    fprintf(stderr, "usage: bench_usm_roundtrip P.D [rounds, 1 to %d] [max MiB]\n", MAX_ROUNDS);
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  {
    bool usm = false;
    SY_OK(syrah_device_has_aspect(dev, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS, &usm));
    if (!usm) {
      printf("## USM round trips, device %s (%s): skipped, the device has no device USM\n",
             argv[1], name);
      bench_json("{\"bench\":\"usm_roundtrip\",\"device\":\"%s\",\"name\":\"%s\","
                 "\"skipped\":\"the device has no device USM\"}",
                 argv[1], name);
      return 0;
    }
  }
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "twice", &k));
  raw_open(p, d, 0, source, "twice", &e);
  printf("## USM round trips, device %s (%s)\n\n", argv[1], name);
  printf("Medians of %d rounds, Syrah and raw OpenCL alternating; µs per step (two allocations, "
         "two frees).\n\n",
         rounds);
  printf("| size | side | malloc | copy in | launch | copy out | free | round trip | Syrah / raw |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (bytes = 64 << 10; bytes <= ((size_t)max_mib << 20); bytes *= 4) {
    cl_uint *in = (cl_uint *)malloc(bytes), *out = (cl_uint *)malloc(bytes);
    double sy[STEPS][MAX_ROUNDS], rw[STEPS][MAX_ROUNDS], st[MAX_ROUNDS], rt[MAX_ROUNDS];
    double msy[STEPS], mrw[STEPS], ratio, qs[MAX_ROUNDS], qr[MAX_ROUNDS];
    size_t i;
    if (!in || !out) return 1;
    for (i = 0; i < bytes / 4; ++i) in[i] = (cl_uint)(i * 2654435761u);
    /* One of each first: fresh memory and first-use costs settle. */
    ok &= syrah_trip(q, ctx, dev, k, in, out, bytes).ok && raw_trip(&e, in, out, bytes).ok;
    for (r = 0; r < rounds; ++r) {
      trip a = (r % 2) ? raw_trip(&e, in, out, bytes) : syrah_trip(q, ctx, dev, k, in, out, bytes);
      trip b = (r % 2) ? syrah_trip(q, ctx, dev, k, in, out, bytes) : raw_trip(&e, in, out, bytes);
      const trip *ts = (r % 2) ? &b : &a, *tr = (r % 2) ? &a : &b;
      ok &= a.ok && b.ok;
      if (r % 2) {
        qr[r] = raw_queued(&e, in, out, bytes, &ok);
        qs[r] = syrah_queued(q, ctx, dev, k, in, out, bytes, &ok);
      } else {
        qs[r] = syrah_queued(q, ctx, dev, k, in, out, bytes, &ok);
        qr[r] = raw_queued(&e, in, out, bytes, &ok);
      }
      st[r] = rt[r] = 0;
      for (s = 0; s < STEPS; ++s) {
        sy[s][r] = ts->us[s];
        rw[s][r] = tr->us[s];
        st[r] += ts->us[s];
        rt[r] += tr->us[s];
      }
    }
    for (s = 0; s < STEPS; ++s) {
      msy[s] = median(sy[s], rounds);
      mrw[s] = median(rw[s], rounds);
    }
    ratio = median_ratio(st, rt, rounds);
    if (nsizes < 16) {
      qsize[nsizes] = bytes;
      qsy[nsizes] = median(qs, rounds);
      qrw[nsizes] = median(qr, rounds);
      qratio[nsizes++] = median_ratio(qs, qr, rounds);
    }
    printf("| %zu KiB | Syrah | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |\n", bytes >> 10,
           msy[0], msy[1], msy[2], msy[3], msy[4], median(st, rounds), ratio);
    printf("| %zu KiB | raw | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | |\n", bytes >> 10, mrw[0],
           mrw[1], mrw[2], mrw[3], mrw[4], median(rt, rounds));
    bench_json("{\"bench\":\"usm_roundtrip\",\"device\":\"%s\",\"name\":\"%s\",\"bytes\":%zu,"
               "\"syrah_us\":[%.2f,%.2f,%.2f,%.2f,%.2f],\"raw_us\":[%.2f,%.2f,%.2f,%.2f,%.2f],"
               "\"ratio\":%.4f,\"ok\":%s}",
               argv[1], name, bytes, msy[0], msy[1], msy[2], msy[3], msy[4], mrw[0], mrw[1],
               mrw[2], mrw[3], mrw[4], ratio, ok ? "true" : "false");
    free(in);
    free(out);
  }
  printf("\nSteps: %s, %s, %s, %s, %s. Results: %s\n", step_names[0], step_names[1],
         step_names[2], step_names[3], step_names[4], ok ? "ok" : "WRONG");
  printf("\nThe trip queued: copy in, launch and copy out back to back, one wait at the end "
         "(allocations outside the time); medians, µs.\n\n");
  printf("| size | Syrah | raw | Syrah / raw |\n|---|---|---|---|\n");
  for (s = 0; s < nsizes; ++s) {
    printf("| %zu KiB | %.1f | %.1f | %.3f |\n", qsize[s] >> 10, qsy[s], qrw[s], qratio[s]);
    bench_json("{\"bench\":\"usm_roundtrip\",\"queued\":true,\"device\":\"%s\",\"name\":\"%s\","
               "\"bytes\":%zu,\"syrah_us\":%.2f,\"raw_us\":%.2f,\"ratio\":%.4f,\"ok\":%s}",
               argv[1], name, qsize[s], qsy[s], qrw[s], qratio[s], ok ? "true" : "false");
  }
  raw_close(&e);
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_queue_release(q));
  SY_OK(syrah_context_release(ctx));
  return ok ? 0 : 1;
}
