/* Host-side cost of submitting a kernel command group with two buffer
 * accessors on data already current on the device, against a raw OpenCL
 * enqueue of the same kernel with the same two buffers (clSetKernelArg x 2
 * + clEnqueueNDRangeKernel) on the same device, in one run.
 *
 * usage: bench_submit P.D [submissions] [batch]
 * Prints a Markdown table and writes bench_submit.json: the mean enqueue
 * cost per submission for each batch, so flatness over the run shows. */
#include "bench_common.h"

static const char *source =
    "__kernel void touch(__global const int *a, __global int *b) {\n"
    "  size_t i = get_global_id(0);\n"
    "  b[i] = a[i] + 1;\n"
    "}\n";

enum { ELEMS = 64 };

/* Raw OpenCL: per-batch mean microseconds per enqueue; with `svm`, the two
 * buffers are coarse-grain SVM allocations passed as SVM pointers (what
 * Syrah's buffers are on SVM devices), else cl_mem objects. */
static void run_raw(unsigned p, unsigned d, int total, int batch, double *out, int svm) {
  raw_env e;
  cl_int err;
  cl_context ctx;
  cl_command_queue q;
  cl_kernel k;
  cl_mem a, b;
  void *sa, *sb;
  size_t global = ELEMS;
  int i, j, flush;
  raw_open(p, d, 0, source, "touch", &e);
  flush = raw_flushes(e.dev);
  ctx = e.ctx;
  q = e.q;
  k = e.k;
  a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ELEMS * sizeof(int), NULL, &err);
  CL_OK(err);
  b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ELEMS * sizeof(int), NULL, &err);
  CL_OK(err);
  sa = svm ? clSVMAlloc(ctx, CL_MEM_READ_WRITE, ELEMS * sizeof(int), 0) : NULL;
  sb = svm ? clSVMAlloc(ctx, CL_MEM_READ_WRITE, ELEMS * sizeof(int), 0) : NULL;
  if (svm && (!sa || !sb)) {
    fprintf(stderr, "clSVMAlloc failed\n");
    exit(1);
  }
  for (i = 0; i < total / batch; ++i) {
    double t0 = now_us();
    for (j = 0; j < batch; ++j) {
      cl_event ev;
      if (svm) {
        CL_OK(clSetKernelArgSVMPointer(k, 0, sa));
        CL_OK(clSetKernelArgSVMPointer(k, 1, sb));
      } else {
        CL_OK(clSetKernelArg(k, 0, sizeof a, &a));
        CL_OK(clSetKernelArg(k, 1, sizeof b, &b));
      }
      CL_OK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, &ev));
      if (flush) CL_OK(clFlush(q));
      CL_OK(clReleaseEvent(ev));
    }
    out[i] = (now_us() - t0) / batch;
    CL_OK(clFinish(q));
  }
  if (sa) clSVMFree(ctx, sa);
  if (sb) clSVMFree(ctx, sb);
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  raw_close(&e);
}

/* Syrah: per-batch mean microseconds per command-group submission. */
static void run_syrah(const char *spec, int total, int batch, double *out) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  syrah_buffer *a, *b;
  syrah_buffer_desc bd;
  syrah_accessor acc[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(ELEMS);
  int i, j;
  SY_OK(syrah_device_select_by_string(spec, &dev));
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "touch", &k));
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 1;
  bd.range[0] = ELEMS;
  SY_OK(syrah_buffer_create(&bd, &a));
  SY_OK(syrah_buffer_create(&bd, &b));
  memset(acc, 0, sizeof acc);
  acc[0].buffer = a;
  acc[0].mode = SYRAH_ACCESS_READ;
  acc[1].buffer = b;
  acc[1].mode = SYRAH_ACCESS_READ_WRITE;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = args[0];
  args[1].size = 1;
  /* Make the data current on the device first. */
  SY_OK(syrah_queue_submit_kernel(q, k, &r, acc, 2, args, 2, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(q));
  for (i = 0; i < total / batch; ++i) {
    double t0 = now_us();
    for (j = 0; j < batch; ++j) SY_OK(syrah_queue_submit_kernel(q, k, &r, acc, 2, args, 2, NULL, 0, NULL));
    out[i] = (now_us() - t0) / batch;
    SY_OK(syrah_queue_wait(q));
  }
  SY_OK(syrah_buffer_release(a));
  SY_OK(syrah_buffer_release(b));
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  int total = argc > 2 ? atoi(argv[2]) : 100000, batch = argc > 3 ? atoi(argv[3]) : 10000, nb, i;
  double *raw, *rsvm, *sy;
  char name[256];
  const syrah_device *dev;
  FILE *f;
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || batch <= 0 || total < batch) {
    fprintf(stderr, "usage: bench_submit P.D [submissions] [batch]\n");
    return 2;
  }
  nb = total / batch;
  raw = (double *)calloc((size_t)nb, sizeof(double));
  sy = (double *)calloc((size_t)nb, sizeof(double));
  rsvm = (double *)calloc((size_t)nb, sizeof(double));
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  run_raw(p, d, total, batch, raw, 0);
  run_raw(p, d, total, batch, rsvm, 1);
  run_syrah(argv[1], total, batch, sy);
  printf("## Submission cost, two accessors, device %s (%s)\n\n", argv[1], name);
  printf("| batch | submissions so far | raw OpenCL µs (cl_mem) | raw OpenCL µs (SVM pointers) | Syrah µs | "
         "Syrah - raw µs |\n|---|---|---|---|---|---|\n");
  for (i = 0; i < nb; ++i) {
    printf("| %d | %d | %.2f | %.2f | %.2f | %+.2f |\n", i, (i + 1) * batch, raw[i], rsvm[i], sy[i], sy[i] - raw[i]);
    bench_json("{\"bench\":\"submit\",\"device\":\"%s\",\"device_name\":\"%s\",\"submissions\":%d,"
               "\"raw_us\":%.4f,\"raw_svm_us\":%.4f,\"syrah_us\":%.4f}",
               argv[1], name, (i + 1) * batch, raw[i], rsvm[i], sy[i]);
  }
  printf("\nmedian: raw %.2f µs (SVM pointers %.2f µs), Syrah %.2f µs, difference %+.2f µs; last batch / first batch "
         "(Syrah): %.2f\n",
         median(raw, nb), median(rsvm, nb), median(sy, nb), median(sy, nb) - median(raw, nb), sy[nb - 1] / sy[0]);
  f = fopen("bench_submit.json", "w");
  if (f) {
    fprintf(f, "{\"device\": \"%s\", \"name\": \"%s\", \"batch\": %d, \"raw_us\": [", argv[1], name, batch);
    for (i = 0; i < nb; ++i) fprintf(f, "%s%.3f", i ? ", " : "", raw[i]);
    fprintf(f, "], \"raw_svm_us\": [");
    for (i = 0; i < nb; ++i) fprintf(f, "%s%.3f", i ? ", " : "", rsvm[i]);
    fprintf(f, "], \"syrah_us\": [");
    for (i = 0; i < nb; ++i) fprintf(f, "%s%.3f", i ? ", " : "", sy[i]);
    fprintf(f, "]}\n");
    fclose(f);
  }
  free(raw);
  free(rsvm);
  free(sy);
  return 0;
}
