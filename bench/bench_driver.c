/* What a driver charges for things Syrah's design works around, in raw
 * OpenCL only (no Syrah), on one device:
 *   - resident host memory of 1,000 small (16 KiB) allocations: cl_mem
 *     against coarse-grain SVM (where the device has SVM);
 *   - a 16 MiB copy from ordinary host memory into a fresh allocation
 *     against the same copy again (cl_mem and SVM), three fresh rounds;
 *   - a 16 MiB copy from pinned memory ended by a blocking call, by
 *     clWaitForEvents, and by asking its status until it is complete;
 *   - a kernel then a 32 KiB read of its output into ordinary memory,
 *     ended by a blocking read, and by a non-blocking one followed by
 *     clWaitForEvents, clFinish or status questions; the same non-blocking
 *     read into pinned memory;
 *   - a 4 KiB copy (from pinned and from ordinary memory) released by
 *     completing the user event it waits on, and a kernel after it on the
 *     same queue or on another one;
 *   - a kernel that waits on another queue's kernel through an event,
 *     against kernels on one queue and on two queues without waits;
 *   - 64 MiB of ordinary memory given to a CL_MEM_USE_HOST_PTR buffer:
 *     creating it, copying it to a device buffer and releasing it, fresh
 *     each time; then one such buffer kept while the host changes its
 *     memory between copies, and whether the device saw the change;
 *   - whether the driver reads ordinary memory when a copy from it is
 *     enqueued rather than when the in-order queue gets there: a kernel,
 *     a non-blocking copy of its output into malloc'd memory, a
 *     non-blocking copy of that memory into another allocation, then a
 *     finish; the second allocation must hold the kernel's output
 *     (cl_mem and SVM, from 1,000 words to 3 MiB).
 *
 * usage: bench_driver P.D [steps per kernel, default 2000] */
#include "bench_common.h"

static const char *source =
    "__kernel void work(__global float *p, int n) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  float x = p[i];\n"
    "  for (int k = 0; k < n; ++k) x = x * 0.999f + 0.5f;\n"
    "  p[i] = x;\n"
    "}\n";

enum { SMALL = 1000, SMALL_BYTES = 16384, KERNELS = 40, ITEMS = 1 << 16 };

static int steps = 2000;

static void small_allocations(raw_env *e, int svm) {
  cl_mem m[SMALL];
  void *s[SMALL];
  double before = rss_mib(), after;
  int i, zero = 0;
  cl_int err;
  for (i = 0; i < SMALL; ++i) {
    if (svm) {
      s[i] = clSVMAlloc(e->ctx, CL_MEM_READ_WRITE, SMALL_BYTES, 0);
      if (!s[i]) {
        fprintf(stderr, "clSVMAlloc of %d bytes failed\n", SMALL_BYTES);
        exit(1);
      }
      CL_OK(clEnqueueSVMMemFill(e->q, s[i], &zero, sizeof zero, SMALL_BYTES, 0, NULL, NULL));
    } else {
      m[i] = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, SMALL_BYTES, NULL, &err);
      CL_OK(err);
      CL_OK(clEnqueueFillBuffer(e->q, m[i], &zero, sizeof zero, 0, SMALL_BYTES, 0, NULL, NULL));
    }
  }
  CL_OK(clFinish(e->q));
  after = rss_mib();
  for (i = 0; i < SMALL; ++i) {
    if (svm)
      clSVMFree(e->ctx, s[i]);
    else
      CL_OK(clReleaseMemObject(m[i]));
  }
  printf("| %d %s of %d KiB, used once | %+.1f MiB resident (%.1f KiB each) |\n", SMALL, svm ? "SVM allocations" : "cl_mem",
         SMALL_BYTES / 1024, after - before, (after - before) * 1024.0 / SMALL);
}

static void fresh_copies(raw_env *e, int svm) {
  size_t bytes = (size_t)16 << 20;
  char *h = (char *)malloc(bytes);
  int round;
  cl_int err;
  if (!h) exit(1);
  memset(h, 1, bytes);
  for (round = 0; round < 3; ++round) {
    double t0, t1, t2;
    void *s = NULL;
    cl_mem m = NULL;
    if (svm) {
      s = clSVMAlloc(e->ctx, CL_MEM_READ_WRITE, bytes, 0);
      if (!s) {
        fprintf(stderr, "clSVMAlloc of %zu bytes failed\n", bytes);
        exit(1);
      }
    } else {
      m = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
      CL_OK(err);
    }
    t0 = now_us();
    if (svm)
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_TRUE, s, h, bytes, 0, NULL, NULL));
    else
      CL_OK(clEnqueueWriteBuffer(e->q, m, CL_TRUE, 0, bytes, h, 0, NULL, NULL));
    t1 = now_us();
    if (svm)
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_TRUE, s, h, bytes, 0, NULL, NULL));
    else
      CL_OK(clEnqueueWriteBuffer(e->q, m, CL_TRUE, 0, bytes, h, 0, NULL, NULL));
    t2 = now_us();
    if (svm)
      clSVMFree(e->ctx, s);
    else
      CL_OK(clReleaseMemObject(m));
    printf("| 16 MiB into a fresh %s, round %d | first copy %.2f ms, second %.2f ms |\n", svm ? "SVM allocation" : "cl_mem",
           round + 1, (t1 - t0) / 1e3, (t2 - t1) / 1e3);
  }
  free(h);
}

static void early_reads(raw_env *e, int svm) {
  static const size_t words[] = {1000, 4096, 65536, 786432};
  size_t w, i;
  cl_int err;
  for (w = 0; w < sizeof words / sizeof words[0]; ++w) {
    size_t n = words[w], bytes = n * sizeof(float), stale = 0;
    float *h = (float *)calloc(n, sizeof(float)), *back = (float *)malloc(bytes), *init = (float *)malloc(bytes);
    void *a = NULL, *b = NULL;
    cl_mem ma = NULL, mb = NULL;
    /* Long enough that both copies are enqueued while the kernel runs. */
    int n_steps = steps * 50;
    cl_kernel k = clCreateKernel(e->prog, "work", &err);
    CL_OK(err);
    if (!h || !back || !init) exit(1);
    for (i = 0; i < n; ++i) init[i] = (float)(i % 1000);
    if (svm) {
      a = clSVMAlloc(e->ctx, CL_MEM_READ_WRITE, bytes, 0);
      b = clSVMAlloc(e->ctx, CL_MEM_READ_WRITE, bytes, 0);
      if (!a || !b) {
        fprintf(stderr, "clSVMAlloc of %zu bytes failed\n", bytes);
        exit(1);
      }
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_TRUE, a, init, bytes, 0, NULL, NULL));
      CL_OK(clSetKernelArgSVMPointer(k, 0, a));
    } else {
      ma = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
      CL_OK(err);
      mb = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
      CL_OK(err);
      CL_OK(clEnqueueWriteBuffer(e->q, ma, CL_TRUE, 0, bytes, init, 0, NULL, NULL));
      CL_OK(clSetKernelArg(k, 0, sizeof ma, &ma));
    }
    CL_OK(clSetKernelArg(k, 1, sizeof n_steps, &n_steps));
    CL_OK(clEnqueueNDRangeKernel(e->q, k, 1, NULL, &n, NULL, 0, NULL, NULL));
    if (svm) {
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_FALSE, h, a, bytes, 0, NULL, NULL));
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_FALSE, b, h, bytes, 0, NULL, NULL));
      CL_OK(clFinish(e->q));
      CL_OK(clEnqueueSVMMemcpy(e->q, CL_TRUE, back, b, bytes, 0, NULL, NULL));
      clSVMFree(e->ctx, a);
      clSVMFree(e->ctx, b);
    } else {
      CL_OK(clEnqueueReadBuffer(e->q, ma, CL_FALSE, 0, bytes, h, 0, NULL, NULL));
      CL_OK(clEnqueueWriteBuffer(e->q, mb, CL_FALSE, 0, bytes, h, 0, NULL, NULL));
      CL_OK(clFinish(e->q));
      CL_OK(clEnqueueReadBuffer(e->q, mb, CL_TRUE, 0, bytes, back, 0, NULL, NULL));
      CL_OK(clReleaseMemObject(ma));
      CL_OK(clReleaseMemObject(mb));
    }
    for (i = 0; i < n; ++i) stale += back[i] != h[i];
    printf("| a copy from malloc'd memory behind a copy into it, %zu words, %s | %s |\n", n,
           svm ? "SVM" : "cl_mem", stale ? "stale: the memory was read when the copy was enqueued" : "in order");
    if (stale) printf("|   (%zu of %zu words differ from what the copy into it left) | |\n", stale, n);
    CL_OK(clReleaseKernel(k));
    free(h);
    free(back);
    free(init);
  }
}

static void host_ptr_copies(raw_env *e) {
  enum { FRESH = 4, KEPT = 4 };
  size_t bytes = (size_t)64 << 20, k;
  unsigned char *h = NULL, *back = NULL;
  cl_mem dev, b;
  cl_int err;
  int rep, seen = 1;
  if (posix_memalign((void **)&h, 4096, bytes) || posix_memalign((void **)&back, 4096, bytes)) exit(1);
  for (k = 0; k < bytes; ++k) h[k] = (unsigned char)(k * 7 + 1);
  dev = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  CL_OK(err);
  for (rep = 0; rep < FRESH; ++rep) {
    double t0 = now_us(), t1, t2, t3;
    b = clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes, h, &err);
    CL_OK(err);
    t1 = now_us();
    CL_OK(clEnqueueCopyBuffer(e->q, b, dev, 0, 0, bytes, 0, NULL, NULL));
    CL_OK(clFinish(e->q));
    t2 = now_us();
    CL_OK(clReleaseMemObject(b));
    t3 = now_us();
    printf("| 64 MiB of ordinary memory through a fresh CL_MEM_USE_HOST_PTR buffer, round %d | create %.2f ms, "
           "copy %.2f ms (%.1f GB/s), release %.2f ms: %.1f GB/s in all |\n",
           rep + 1, (t1 - t0) / 1e3, (t2 - t1) / 1e3, bytes / ((t2 - t1) * 1e3), (t3 - t2) / 1e3,
           bytes / ((t3 - t0) * 1e3));
  }
  b = clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes, h, &err);
  CL_OK(err);
  for (rep = 0; rep < KEPT; ++rep) {
    double t0;
    h[rep] ^= 0xff; /* the host changes the buffer's memory */
    t0 = now_us();
    CL_OK(clEnqueueCopyBuffer(e->q, b, dev, 0, 0, bytes, 0, NULL, NULL));
    CL_OK(clFinish(e->q));
    printf("| the same, one buffer kept, host changed it, copy %d | %.3f ms |\n", rep + 1, (now_us() - t0) / 1e3);
  }
  CL_OK(clEnqueueReadBuffer(e->q, dev, CL_TRUE, 0, bytes, back, 0, NULL, NULL));
  for (rep = 0; rep < KEPT; ++rep) seen &= back[rep] == h[rep];
  printf("| the device saw the host's changes to the kept buffer | %s |\n", seen ? "yes" : "no");
  CL_OK(clReleaseMemObject(b));
  CL_OK(clReleaseMemObject(dev));
  free(h);
  free(back);
}

/* KERNELS kernels over one buffer: on one queue, alternating between two
 * queues with no waits, or alternating with each waiting on the previous. */
static double kernels(raw_env *e, int mode) {
  cl_command_queue q2;
  cl_mem m;
  cl_int err;
  cl_event prev = NULL;
  size_t g = ITEMS;
  int i, n = steps;
  double t0;
  float *init = (float *)calloc(ITEMS, sizeof(float));
  if (!init) exit(1);
  q2 = clCreateCommandQueueWithProperties(e->ctx, e->dev, NULL, &err);
  CL_OK(err);
  m = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(float) * ITEMS, init, &err);
  CL_OK(err);
  CL_OK(clSetKernelArg(e->k, 0, sizeof m, &m));
  CL_OK(clSetKernelArg(e->k, 1, sizeof n, &n));
  /* One untimed launch builds and warms the kernel. */
  CL_OK(clEnqueueNDRangeKernel(e->q, e->k, 1, NULL, &g, NULL, 0, NULL, NULL));
  CL_OK(clFinish(e->q));
  t0 = now_us();
  for (i = 0; i < KERNELS; ++i) {
    cl_command_queue q = mode == 0 || i % 2 == 0 ? e->q : q2;
    cl_event ev;
    CL_OK(clEnqueueNDRangeKernel(q, e->k, 1, NULL, &g, NULL, mode == 2 && prev ? 1 : 0,
                                 mode == 2 && prev ? &prev : NULL, &ev));
    CL_OK(clFlush(q));
    if (prev) CL_OK(clReleaseEvent(prev));
    prev = ev;
  }
  CL_OK(clFinish(e->q));
  CL_OK(clFinish(q2));
  t0 = (now_us() - t0) / KERNELS / 1e3;
  CL_OK(clReleaseEvent(prev));
  CL_OK(clReleaseMemObject(m));
  CL_OK(clReleaseCommandQueue(q2));
  free(init);
  return t0;
}

/* Copies from pinned memory to the device of 64 KiB, 1 MiB and 16 MiB,
 * ended five ways: a blocking write; a non-blocking one followed by
 * clFinish; one with an event waited for with clWaitForEvents; one with an
 * event whose status is asked until it is complete; one without an event
 * followed by a marker with an event, waited for with clWaitForEvents (as
 * a queue wait after commands without events goes). Median µs of 15. */
static void copy_waits(raw_env *e) {
  enum { REPS = 15, MODES = 5, SIZES = 3 };
  const char *how[MODES] = {"blocking write", "clFinish", "clWaitForEvents", "status asked until complete",
                            "marker, clWaitForEvents"};
  const size_t sizes[SIZES] = {(size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20};
  const char *size_name[SIZES] = {"64 KiB", "1 MiB", "16 MiB"};
  size_t bytes = sizes[SIZES - 1];
  cl_int err;
  cl_mem pinned = clCreateBuffer(e->ctx, CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err), dev;
  double t[MODES][REPS];
  void *h;
  int mode, rep, si;
  CL_OK(err);
  dev = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  CL_OK(err);
  h = clEnqueueMapBuffer(e->q, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
  CL_OK(err);
  memset(h, 1, bytes);
  for (si = 0; si < SIZES; ++si) {
    size_t n = sizes[si];
    for (rep = -1; rep < REPS; ++rep)
      for (mode = 0; mode < MODES; ++mode) {
        cl_event ev;
        cl_int st = CL_QUEUED;
        double t0 = now_us();
        if (mode == 0) {
          CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_TRUE, 0, n, h, 0, NULL, NULL));
        } else if (mode == 1) {
          CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_FALSE, 0, n, h, 0, NULL, NULL));
          CL_OK(clFinish(e->q));
        } else if (mode == 4) {
          CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_FALSE, 0, n, h, 0, NULL, NULL));
          CL_OK(clEnqueueMarkerWithWaitList(e->q, 0, NULL, &ev));
          CL_OK(clWaitForEvents(1, &ev));
          CL_OK(clReleaseEvent(ev));
        } else {
          CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_FALSE, 0, n, h, 0, NULL, &ev));
          CL_OK(clFlush(e->q));
          if (mode == 2)
            CL_OK(clWaitForEvents(1, &ev));
          else
            while (st > CL_COMPLETE)
              CL_OK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
          CL_OK(clReleaseEvent(ev));
        }
        if (rep >= 0) t[mode][rep] = now_us() - t0;
      }
    for (mode = 0; mode < MODES; ++mode)
      printf("| %s from pinned memory to the device, %s | %.1f µs |\n", size_name[si], how[mode],
             median(t[mode], REPS));
  }
  CL_OK(clEnqueueUnmapMemObject(e->q, pinned, h, 0, NULL, NULL));
  CL_OK(clFinish(e->q));
  CL_OK(clReleaseMemObject(pinned));
  CL_OK(clReleaseMemObject(dev));
}

/* A kernel over 8192 floats (`steps` steps each), then a read of its output (32 KiB) into
 * ordinary (malloc'd) memory, ended five ways: a blocking read; a
 * non-blocking read with an event, then clWaitForEvents, clFinish or its
 * status asked until complete; and the non-blocking read into pinned
 * memory, then clWaitForEvents. µs from the kernel's enqueue until the
 * data is there, median of 25: what waiting for data brought home costs
 * beyond the copy. */
static void read_waits(raw_env *e) {
  enum { REPS = 25, MODES = 5, FLOATS = 8192 };
  const char *how[MODES] = {"blocking read", "non-blocking read, clWaitForEvents", "non-blocking read, clFinish",
                            "non-blocking read, status asked until complete",
                            "non-blocking read into pinned memory, clWaitForEvents"};
  const size_t bytes = sizeof(float) * FLOATS, global = FLOATS;
  const int n = steps;
  cl_int err;
  cl_mem dev = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err), pinned;
  float *ordinary = (float *)calloc(FLOATS, sizeof(float)), *pin;
  double t[MODES][REPS];
  int mode, rep;
  CL_OK(err);
  if (!ordinary) exit(1);
  pinned = clCreateBuffer(e->ctx, CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
  CL_OK(err);
  pin = (float *)clEnqueueMapBuffer(e->q, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
  CL_OK(err);
  CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_TRUE, 0, bytes, ordinary, 0, NULL, NULL));
  CL_OK(clSetKernelArg(e->k, 0, sizeof dev, &dev));
  CL_OK(clSetKernelArg(e->k, 1, sizeof n, &n));
  for (rep = -1; rep < REPS; ++rep)
    for (mode = 0; mode < MODES; ++mode) {
      cl_event ev;
      cl_int st = CL_QUEUED;
      double t0 = now_us();
      CL_OK(clEnqueueNDRangeKernel(e->q, e->k, 1, NULL, &global, NULL, 0, NULL, NULL));
      if (mode == 0) {
        CL_OK(clEnqueueReadBuffer(e->q, dev, CL_TRUE, 0, bytes, ordinary, 0, NULL, NULL));
      } else {
        CL_OK(clEnqueueReadBuffer(e->q, dev, CL_FALSE, 0, bytes, mode == 4 ? pin : ordinary, 0, NULL, &ev));
        CL_OK(clFlush(e->q));
        if (mode == 2)
          CL_OK(clFinish(e->q));
        else if (mode == 3)
          while (st > CL_COMPLETE)
            CL_OK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        else
          CL_OK(clWaitForEvents(1, &ev));
        CL_OK(clReleaseEvent(ev));
      }
      if (rep >= 0) t[mode][rep] = now_us() - t0;
    }
  for (mode = 0; mode < MODES; ++mode)
    printf("| a kernel of %d steps, then 32 KiB of its output home: %s | %.1f µs |\n", steps, how[mode],
           median(t[mode], REPS));
  CL_OK(clEnqueueUnmapMemObject(e->q, pinned, pin, 0, NULL, NULL));
  CL_OK(clFinish(e->q));
  CL_OK(clReleaseMemObject(pinned));
  CL_OK(clReleaseMemObject(dev));
  free(ordinary);
}

/* A 4 KiB copy to the device enqueued behind a user event: µs from
 * clSetUserEventStatus until the copy's status says complete, against the
 * same copy enqueued then (no user event) until complete; from pinned and
 * from ordinary (malloc'd) memory. Median of 25: what a command held back
 * by the host costs. */
static void user_event_gate(raw_env *e, int svm_ok) {
  enum { REPS = 25, BYTES = 4096, CASES = 8 };
  /* Each case: the source (pinned or ordinary memory), whether the copy
   * goes through SVM, whether a user event holds it back, and whether its
   * status is asked only every 20 µs. */
  static const struct {
    int ordinary, svm, gated, slow_poll;
  } cases[CASES] = {{0, 0, 0, 0}, {0, 0, 1, 0}, {1, 0, 0, 0}, {1, 0, 1, 0},
                    {0, 0, 0, 1}, {0, 0, 1, 1}, {1, 1, 0, 0}, {1, 1, 1, 0}};
  cl_int err;
  cl_mem pinned = clCreateBuffer(e->ctx, CL_MEM_ALLOC_HOST_PTR, BYTES, NULL, &err), dev;
  double t[CASES][REPS];
  void *h, *ordinary = malloc(BYTES), *svm = NULL;
  int rep, c, count;
  CL_OK(err);
  if (!ordinary) exit(1);
  dev = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, BYTES, NULL, &err);
  CL_OK(err);
  h = clEnqueueMapBuffer(e->q, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, BYTES, 0, NULL, NULL, &err);
  CL_OK(err);
  memset(h, 2, BYTES);
  memset(ordinary, 3, BYTES);
  if (svm_ok) svm = clSVMAlloc(e->ctx, CL_MEM_READ_WRITE, BYTES, 0);
  count = svm ? CASES : CASES - 2; /* the SVM cases come last */
  for (rep = -1; rep < REPS; ++rep)
    for (c = 0; c < count; ++c) {
      cl_event user = NULL, ev;
      cl_int st = CL_QUEUED;
      const void *src = cases[c].ordinary ? ordinary : h;
      cl_uint waits = cases[c].gated ? 1 : 0;
      double t0 = now_us();
      if (waits) {
        user = clCreateUserEvent(e->ctx, &err);
        CL_OK(err);
      }
      if (cases[c].svm)
        CL_OK(clEnqueueSVMMemcpy(e->q, CL_FALSE, svm, src, BYTES, waits, waits ? &user : NULL, &ev));
      else
        CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_FALSE, 0, BYTES, src, waits, waits ? &user : NULL, &ev));
      CL_OK(clFlush(e->q));
      if (waits) { /* timed from the event's completion */
        t0 = now_us();
        CL_OK(clSetUserEventStatus(user, CL_COMPLETE));
      }
      for (;;) {
        struct timespec ts = {0, 20000};
        CL_OK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st <= CL_COMPLETE) break;
        if (cases[c].slow_poll) nanosleep(&ts, NULL);
      }
      if (rep >= 0) t[c][rep] = now_us() - t0;
      CL_OK(clReleaseEvent(ev));
      if (user) CL_OK(clReleaseEvent(user));
    }
  for (c = 0; c < count; ++c)
    printf("| 4 KiB from %s memory to the device%s, %s%s | %.1f µs |\n", cases[c].ordinary ? "ordinary" : "pinned",
           cases[c].svm ? " (SVM memcpy)" : "",
           cases[c].gated ? "behind a user event, from completing the event to the copy complete"
                          : "enqueued and waited for",
           cases[c].slow_poll ? ", its status asked every 20 µs" : "", median(t[c], REPS));
  if (svm) clSVMFree(e->ctx, svm);
  CL_OK(clEnqueueUnmapMemObject(e->q, pinned, h, 0, NULL, NULL));
  CL_OK(clFinish(e->q));
  CL_OK(clReleaseMemObject(pinned));
  CL_OK(clReleaseMemObject(dev));
  free(ordinary);
}

/* A chain held back by the host: a 4 KiB copy behind a user event on one
 * queue and a kernel on another queue waiting on that copy's event; µs
 * from completing the user event until the kernel is complete, against
 * the same copy and kernel on one queue behind the user event. Median of
 * 25, the status asked in a tight loop. */
static void user_event_chain(raw_env *e) {
  enum { REPS = 25, BYTES = 4096 };
  cl_int err;
  cl_command_queue q2 = clCreateCommandQueueWithProperties(e->ctx, e->dev, NULL, &err);
  cl_mem dev;
  double t[2][REPS];
  char host[BYTES];
  size_t g = BYTES / sizeof(float);
  int rep, mode, n = 1;
  CL_OK(err);
  memset(host, 0, sizeof host);
  dev = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, BYTES, NULL, &err);
  CL_OK(err);
  CL_OK(clSetKernelArg(e->k, 0, sizeof dev, &dev));
  CL_OK(clSetKernelArg(e->k, 1, sizeof n, &n));
  for (rep = -1; rep < REPS; ++rep)
    for (mode = 0; mode < 2; ++mode) {
      cl_command_queue qk = mode ? q2 : e->q;
      cl_event user, ce, ke;
      cl_int st = CL_QUEUED;
      double t0;
      user = clCreateUserEvent(e->ctx, &err);
      CL_OK(err);
      CL_OK(clEnqueueWriteBuffer(e->q, dev, CL_FALSE, 0, BYTES, host, 1, &user, &ce));
      CL_OK(clFlush(e->q));
      CL_OK(clEnqueueNDRangeKernel(qk, e->k, 1, NULL, &g, NULL, mode ? 1 : 0, mode ? &ce : NULL, &ke));
      CL_OK(clFlush(qk));
      t0 = now_us();
      CL_OK(clSetUserEventStatus(user, CL_COMPLETE));
      while (st > CL_COMPLETE) CL_OK(clGetEventInfo(ke, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
      if (rep >= 0) t[mode][rep] = now_us() - t0;
      CL_OK(clReleaseEvent(ke));
      CL_OK(clReleaseEvent(ce));
      CL_OK(clReleaseEvent(user));
    }
  printf("| a 4 KiB copy behind a user event, then a kernel on the same queue: from completing the event to the "
         "kernel complete | %.1f µs |\n"
         "| the same with the kernel on another queue, waiting on the copy's event | %.1f µs |\n",
         median(t[0], REPS), median(t[1], REPS));
  CL_OK(clFinish(e->q));
  CL_OK(clFinish(q2));
  CL_OK(clReleaseMemObject(dev));
  CL_OK(clReleaseCommandQueue(q2));
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  raw_env e;
  char name[256];
  cl_device_svm_capabilities caps = 0;
  double one, two, waits;
  if (argc > 2) steps = atoi(argv[2]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || steps < 1) {
    fprintf(stderr, "usage: bench_driver P.D [steps per kernel, at least 1]\n");
    return 2;
  }
  raw_open(p, d, 0, source, "work", &e);
  CL_OK(clGetDeviceInfo(e.dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  json_safe(name);
  clGetDeviceInfo(e.dev, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL);
  printf("## Driver costs (raw OpenCL), device %s (%s)\n\n| what | measured |\n|---|---|\n", argv[1], name);
  small_allocations(&e, 0);
  if (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)
    small_allocations(&e, 1);
  else
    printf("| SVM allocations | skipped: the device has no SVM |\n");
  fresh_copies(&e, 0);
  if (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)
    fresh_copies(&e, 1);
  else
    printf("| 16 MiB into a fresh SVM allocation | skipped: the device has no SVM |\n");
  copy_waits(&e);
  read_waits(&e);
  user_event_gate(&e, (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0);
  user_event_chain(&e);
  host_ptr_copies(&e);
  early_reads(&e, 0);
  if (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)
    early_reads(&e, 1);
  else
    printf("| a copy from malloc'd memory behind a copy into it, SVM | skipped: the device has no SVM |\n");
  one = kernels(&e, 0);
  two = kernels(&e, 1);
  waits = kernels(&e, 2);
  printf("| %d kernels on one queue | %.3f ms each |\n| alternating over two queues, no waits | %.3f ms each |\n"
         "| alternating, each waiting on the previous (other queue) | %.3f ms each (%+.3f ms per wait) |\n",
         KERNELS, one, two, waits, waits - one);
  bench_json("{\"bench\":\"driver\",\"device\":\"%s\",\"device_name\":\"%s\",\"kernel_one_queue_ms\":%.4f,"
             "\"kernel_two_queues_ms\":%.4f,\"kernel_cross_queue_wait_ms\":%.4f}",
             argv[1], name, one, two, waits);
  raw_close(&e);
  return 0;
}
