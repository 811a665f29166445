/* What knowing each command's completion costs the driver, in raw OpenCL
 * alone: 10,000 tiny in-order kernels (SVM pointer argument, flush per
 * launch) with no event, with an event released at once, with events kept
 * and released later, with each event's status asked once (in groups of
 * 8), and with that and the release together. Host µs per launch, each
 * case twice.
 *
 * usage: bench_event_cost P.D */
#include "bench_common.h"

enum { N = 10000, GROUP = 8 };

static const char *source = "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n";

static cl_event events[N];

static void ask(cl_event e) {
  cl_int st;
  CL_OK(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
}

int main(int argc, char **argv) {
  static const char *names[] = {"no event", "an event, released at once", "events kept, released later",
                                "events kept, each one's status asked once",
                                "each one's status asked, then released"};
  raw_env e;
  unsigned p = 0, d = 0;
  int *m, mode, rep, i, j;
  size_t global = 64;
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2) {
    fprintf(stderr, "usage: bench_event_cost P.D\n");
    return 2;
  }
  raw_open(p, d, 0, source, "inc", &e);
  m = (int *)clSVMAlloc(e.ctx, CL_MEM_READ_WRITE, global * sizeof(int), 0);
  if (!m) {
    fprintf(stderr, "clSVMAlloc failed: the device has no SVM\n");
    return 1;
  }
  printf("| per launch | µs |\n|---|---|\n");
  for (mode = 0; mode < 5; ++mode)
    for (rep = 0; rep < 2; ++rep) {
      double t0 = now_us(), t1;
      for (i = 0; i < N; ++i) {
        CL_OK(clSetKernelArgSVMPointer(e.k, 0, m));
        CL_OK(clEnqueueNDRangeKernel(e.q, e.k, 1, NULL, &global, NULL, 0, NULL, mode ? &events[i] : NULL));
        CL_OK(clFlush(e.q));
        if (mode == 1) CL_OK(clReleaseEvent(events[i]));
        if (mode >= 3 && i % GROUP == GROUP - 1)
          for (j = i - GROUP + 1; j <= i; ++j) {
            ask(events[j]);
            if (mode == 4) CL_OK(clReleaseEvent(events[j]));
          }
      }
      t1 = now_us();
      CL_OK(clFinish(e.q));
      if (mode == 2 || mode == 3)
        for (i = 0; i < N; ++i) CL_OK(clReleaseEvent(events[i]));
      if (mode == 4)
        for (i = N - N % GROUP; i < N; ++i) CL_OK(clReleaseEvent(events[i]));
      printf("| %s | %.2f |\n", names[mode], (t1 - t0) / N);
    }
  clSVMFree(e.ctx, m);
  raw_close(&e);
  return 0;
}
