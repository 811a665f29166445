/* Fault injection: runs with SYRAH_OPENCL_LIBRARY and SYRAH_CUDA_LIBRARY
 * naming the faultcl library, which fails one chosen OpenCL or CUDA call
 * on its N-th use (CUDA's on devices the CUDA back end drives). For each
 * kind of call (allocations, kernel enqueues, copies both ways, builds,
 * queue and event creation) a scenario checks that the failure surfaces
 * exactly once, as the call's status or as an asynchronous error, naming
 * the OpenCL call and its error; that later commands still work; and that
 * a buffer's data is written back intact. A watchdog fails the test on a
 * hang. */
#define _POSIX_C_SOURCE 200809L
#include "faultcl.h"
#include "testing.h"

#include <signal.h>
#include <unistd.h>

#define CL_OUT_OF_RESOURCES (-5)
#define CL_OUT_OF_HOST_MEMORY (-6)
#define CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701
#define CUDA_ERROR_NOT_SUPPORTED 801

/* Elements of the first buffer: large enough that SVM allocations are not
 * carved from shared blocks. */
#define N (128 * 1024)

/* Faults injected; those that surfaced exactly once; those a fallback
 * absorbed by design, checked by what it did instead. */
static int injected = 0, surfaced = 0, absorbed = 0, intact = 0;
static const char *scenario = "start";

static void watchdog(int sig) {
  static const char msg[] = "FAIL watchdog: the fault test hung (more than 300 s)\n";
  (void)sig;
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}

static const char *SRC = "__kernel void add(__global int *p, int v) { p[get_global_id(0)] += v; }";

typedef struct {
  const syrah_device *d;
  syrah_context *ctx;
  syrah_queue *q;
  syrah_kernel *k;
  uint64_t strategy;
  int cuda;    /* the CUDA back end drives the device */
  int buf_mem; /* buffers on the device are memory objects */
} env;

/* The driver's codes for memory running out, and for a command it cannot
 * take. */
static int oom(const env *e) { return e->cuda ? CUDA_ERROR_OUT_OF_MEMORY : CL_MEM_OBJECT_ALLOCATION_FAILURE; }
static int busy(const env *e) { return e->cuda ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES : CL_OUT_OF_RESOURCES; }

/* The driver call that allocates device memory, and the one that copies
 * from the host to it, under the device's back end and USM strategy. */
static const char *alloc_call(const env *e) {
  if (e->cuda) return "cuMemAlloc";
  return e->strategy == SYRAH_USM_STRATEGY_INTEL ? "clDeviceMemAllocINTEL"
         : e->strategy == SYRAH_USM_STRATEGY_SVM ? "clSVMAlloc"
                                                 : "clCreateBuffer";
}

static const char *h2d_call(const env *e) {
  if (e->cuda) return "cuMemcpyAsync";
  return e->strategy == SYRAH_USM_STRATEGY_INTEL ? "clEnqueueMemcpyINTEL"
         : e->strategy == SYRAH_USM_STRATEGY_SVM ? "clEnqueueSVMMemcpy"
                                                 : "clEnqueueWriteBuffer";
}

/* The same for a buffer's storage, which is USM or a memory object. */
static const char *buf_alloc_call(const env *e) { return e->buf_mem && !e->cuda ? "clCreateBuffer" : alloc_call(e); }

static const char *buf_h2d_call(const env *e) { return e->buf_mem && !e->cuda ? "clEnqueueWriteBuffer" : h2d_call(e); }

static const char *buf_d2h_call(const env *e) { return e->buf_mem && !e->cuda ? "clEnqueueReadBuffer" : h2d_call(e); }

/* Arms a fault for one scenario: `call` fails on its next use, or on
 * every use until disarmed when `persistent` (as when memory runs out:
 * Syrah frees what it keeps for reuse and tries again). */
static void arm(const char *what, const char *call, int persistent, int code) {
  scenario = what;
  printf("-- %s: %s fails %s\n", what, call, persistent ? "until disarmed" : "once");
  fflush(stdout);
  faultcl_arm(call, 1, persistent ? 0 : 1, code);
}

/* Ends a scenario: the fault must have been injected (once unless
 * persistent). */
static int fired_before = 0;
static void disarm(const char *call, int persistent) {
  int used = faultcl_disarm();
  int fired = faultcl_fired() - fired_before;
  fired_before = faultcl_fired();
  if (fired >= 1) ++injected;
  ++t_checks;
  if (fired < 1 || (!persistent && fired != 1))
    T_FAIL("%s: %d faults injected into %s (used %d times), expected %s", scenario, fired, call, used,
           persistent ? "at least 1" : "1");
  else if (fired > 1)
    printf("   %s failed %d times before it surfaced\n", call, fired);
}

/* The failure of a call (`s`) or of what it submitted must surface once:
 * as `s` itself, or as the queue's next wait; the wait after that has
 * nothing left to report. Its message names `call`. */
static void once(syrah_status s, syrah_queue *q, const char *call) {
  const char *how = "status";
  char msg[1024];
  if (s == SYRAH_SUCCESS) {
    how = "asynchronous error";
    s = syrah_queue_wait(q);
  }
  snprintf(msg, sizeof msg, "%s", syrah_last_error_message());
  ++t_checks;
  if (s == SYRAH_SUCCESS) {
    T_FAIL("%s: the fault in %s never surfaced", scenario, call);
    return;
  }
  if (!strstr(msg, call)) {
    T_FAIL("%s: the %s %s does not name %s: %s", scenario, how, syrah_status_name(s), call, msg);
    return;
  }
  ++t_checks;
  if (syrah_queue_wait(q) != SYRAH_SUCCESS) {
    T_FAIL("%s: the fault in %s was reported twice: %s", scenario, call, syrah_last_error_message());
    return;
  }
  printf("   surfaced once as %s %s: %s\n", how, syrah_status_name(s), msg);
  ++surfaced;
}

/* host[i] must be i + add for each of the `n` elements. */
static void expect_data(const int *host, size_t n, int add, const char *what) {
  size_t i, wrong = 0;
  for (i = 0; i < n; ++i)
    if (host[i] != (int)i + add) ++wrong;
  ++t_checks;
  if (wrong) {
    T_FAIL("%s: %zu of %zu elements are not index + %d (first: %d)", what, wrong, n, add, host[0]);
    return;
  }
  ++intact;
}

/* Each buffer is larger than the last, so that none gets the memory of a
 * released one (which Syrah reuses) instead of a fresh allocation. */
static size_t grow = 0;

static int *fresh_host(size_t *n) {
  int *h;
  size_t i;
  *n = N + (grow += 4096);
  h = (int *)malloc(*n * sizeof(int));
  for (i = 0; h && i < *n; ++i) h[i] = (int)i;
  return h;
}

/* A write-back buffer over fresh host data (see fresh_host); NULL, with
 * the failure counted, if it cannot be made. */
static syrah_buffer *new_buffer(size_t *n, int **host) {
  syrah_buffer_desc desc;
  syrah_buffer *b = NULL;
  *host = fresh_host(n);
  if (!*host) return NULL;
  desc = t_desc1(*n, *host, SYRAH_HOST_WRITE_BACK);
  if (syrah_buffer_create(&desc, &b) != SYRAH_SUCCESS) {
    T_FAIL("buffer: %s", syrah_last_error_message());
    free(*host);
    *host = NULL;
  }
  return b;
}

/* A buffer whose first device use fails to allocate, then to copy in:
 * the host data stays as it was, and a retry works. */
static void buffer_to_device(env *e, const char *what, const char *call, int persistent, int code, int retry) {
  size_t n = 0;
  int *host = NULL;
  syrah_buffer *b = new_buffer(&n, &host);
  if (!b) return;
  arm(what, call, persistent, code);
  once(t_launch_rw(e->q, e->k, b, n, 1, NULL), e->q, call);
  disarm(call, persistent);
  if (retry) {
    EXPECT_OK(t_launch_rw(e->q, e->k, b, n, 1, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
  }
  EXPECT_OK(syrah_buffer_release(b));
  expect_data(host, n, retry ? 1 : 0, what);
  free(host);
}

/* A buffer the device wrote; the copy back to the host fails once, a
 * second host access gets the device's data, and so does the write-back. */
static void buffer_to_host(env *e) {
  size_t n = 0;
  int *host = NULL;
  syrah_buffer *b = new_buffer(&n, &host);
  syrah_host_accessor *ha = NULL;
  void *p = NULL;
  const char *call = buf_d2h_call(e);
  if (!b) return;
  EXPECT_OK(t_launch_rw(e->q, e->k, b, n, 2, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  arm("buffer copy back to the host", call, 0, busy(e));
  {
    syrah_status s = syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, &p);
    ++t_checks;
    if (s == SYRAH_SUCCESS) {
      T_FAIL("host access after a failed copy succeeded");
      syrah_host_accessor_release(ha);
    } else {
      once(s, e->q, call);
    }
  }
  disarm(call, 0);
  if (syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, &p) == SYRAH_SUCCESS) {
    ++t_checks;
    expect_data((const int *)p, n, 2, "host access after a failed copy back");
    EXPECT_OK(syrah_host_accessor_release(ha));
  } else {
    T_FAIL("second host access: %s", syrah_last_error_message());
  }
  EXPECT_OK(syrah_buffer_release(b));
  expect_data(host, n, 2, "write-back after a failed copy back");
  free(host);
}

/* A kernel whose enqueue fails between two that work: the buffer ends
 * with the two increments. */
static void kernel_enqueue(env *e) {
  size_t n = 0;
  int *host = NULL;
  syrah_buffer *b = new_buffer(&n, &host);
  const char *call = e->cuda ? "cuLaunchKernel" : "clEnqueueNDRangeKernel";
  if (!b) return;
  EXPECT_OK(t_launch_rw(e->q, e->k, b, n, 1, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  arm("kernel enqueue", call, 0, busy(e));
  once(t_launch_rw(e->q, e->k, b, n, 100, NULL), e->q, call);
  disarm(call, 0);
  EXPECT_OK(t_launch_rw(e->q, e->k, b, n, 1, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  EXPECT_OK(syrah_buffer_release(b));
  expect_data(host, n, 2, "kernel enqueue failure");
  free(host);
}

/* Two USM launches behind a user event on the in-order queue, neither
 * with an event: the first waits for the user event, the second for the
 * first, and the second's enqueue fails. OpenCL enqueues both at once
 * (the second's status is the failure); the CUDA back end holds both
 * until the user event completes, when nobody can be told of the
 * second's failure at once. Either way it surfaces exactly once, naming
 * the call, and the memory keeps the data of the launches that ran. */
static void held_launch(env *e) {
  size_t n = 0;
  int *host = fresh_host(&n), *back = (int *)calloc(n, sizeof(int)), one = 1, hundred = 100;
  void *m = NULL;
  syrah_event *ue = NULL;
  const syrah_event *dep;
  syrah_status s;
  const char *call = e->cuda ? "cuLaunchKernel" : "clEnqueueNDRangeKernel";
  syrah_range r;
  syrah_kernel_arg args[2];
  if (!host || !back || syrah_malloc_device(e->ctx, e->d, n * sizeof(int), &m) != SYRAH_SUCCESS ||
      syrah_user_event_create(e->ctx, &ue) != SYRAH_SUCCESS) {
    T_FAIL("launches behind a held one: %s", syrah_last_error_message());
    free(host);
    free(back);
    return;
  }
  EXPECT_OK(syrah_queue_memcpy(e->q, m, host, n * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  r = syrah_range_1d(n);
  args[0] = syrah_arg_usm(m);
  args[1] = syrah_arg_value(&one, sizeof one);
  dep = ue;
  scenario = "kernel enqueue behind a held one";
  printf("-- %s: %s fails once, at its second use\n", scenario, call);
  faultcl_arm(call, 2, 1, busy(e));
  EXPECT_OK(syrah_queue_launch(e->q, e->k, &r, args, 2, &dep, 1, NULL));
  args[1] = syrah_arg_value(&hundred, sizeof hundred);
  s = syrah_queue_launch(e->q, e->k, &r, args, 2, NULL, 0, NULL);
  EXPECT_OK(syrah_user_event_complete(ue, false));
  once(s, e->q, call);
  disarm(call, 0);
  EXPECT_OK(syrah_event_release(ue));
  args[1] = syrah_arg_value(&one, sizeof one);
  EXPECT_OK(syrah_queue_launch(e->q, e->k, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, back, m, n * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  expect_data(back, n, 2, "a failed launch behind a held one");
  EXPECT_OK(syrah_free(e->ctx, m));
  free(host);
  free(back);
}

/* USM: an allocation and a copy that fail once, then work. */
static void usm(env *e) {
  size_t n = 0;
  int *host = fresh_host(&n), *back = (int *)calloc(n, sizeof(int));
  void *m = NULL;
  const char *call = alloc_call(e);
  if (!host || !back) {
    free(host);
    free(back);
    return;
  }
  arm("USM device allocation", call, 1, oom(e));
  {
    syrah_status s = syrah_malloc_device(e->ctx, e->d, n * sizeof(int), &m);
    ++t_checks;
    if (s == SYRAH_SUCCESS)
      T_FAIL("USM allocation succeeded under a fault");
    else
      once(s, e->q, call);
  }
  disarm(call, 1);
  if (syrah_malloc_device(e->ctx, e->d, n * sizeof(int), &m) != SYRAH_SUCCESS) {
    T_FAIL("USM allocation after a fault: %s", syrah_last_error_message());
    free(host);
    free(back);
    return;
  }
  call = h2d_call(e);
  if (e->strategy == SYRAH_USM_STRATEGY_NONE && !e->cuda) call = "clEnqueueSVMMemcpy";
  arm("USM copy to the device", call, 0, busy(e));
  once(syrah_queue_memcpy(e->q, m, host, n * sizeof(int), NULL, 0, NULL), e->q, call);
  disarm(call, 0);
  EXPECT_OK(syrah_queue_memcpy(e->q, m, host, n * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, back, m, n * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  expect_data(back, n, 0, "USM copy after a failed copy");
  EXPECT_OK(syrah_free(e->ctx, m));
  free(host);
  free(back);
}

/* Builds, queues and events whose creation fails once. */
static void creation(env *e) {
  syrah_program *p = NULL;
  syrah_queue *q = NULL;
  syrah_event *ev = NULL;
  syrah_status s;
  const char *src = "__kernel void only_here(__global int *p) { p[0] = 7; }";
  /* On CUDA, OpenCL C is compiled by NVIDIA's OpenCL, then loaded. */
  const char *build = e->cuda ? "cuModuleLoadDataEx" : "clBuildProgram";
  const char *queue = e->cuda ? "cuStreamCreate" : "clCreateCommandQueueWithProperties";

  arm("program build", build, 0, e->cuda ? CUDA_ERROR_OUT_OF_MEMORY : CL_OUT_OF_HOST_MEMORY);
  s = syrah_program_create_from_source(e->ctx, src, NULL, &p);
  ++t_checks;
  if (s == SYRAH_SUCCESS) T_FAIL("a build succeeded under a fault");
  else once(s, e->q, build);
  disarm(build, 0);
  /* The failure was not cached: the same source builds now. */
  EXPECT_OK(syrah_program_create_from_source(e->ctx, src, NULL, &p));
  if (p) EXPECT_OK(syrah_program_release(p));

  arm("queue creation", queue, 0, busy(e));
  s = syrah_queue_create(e->ctx, e->d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q);
  ++t_checks;
  if (s == SYRAH_SUCCESS) T_FAIL("a queue was created under a fault");
  else once(s, e->q, queue);
  disarm(queue, 0);
  EXPECT_OK(syrah_queue_create(e->ctx, e->d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  if (q) EXPECT_OK(syrah_queue_release(q));

  if (e->cuda) {
    t_skip("user event creation fault", "on CUDA a user event is the host's alone: no driver call makes it");
    return;
  }

  arm("user event creation", "clCreateUserEvent", 0, CL_OUT_OF_HOST_MEMORY);
  s = syrah_user_event_create(e->ctx, &ev);
  ++t_checks;
  if (s == SYRAH_SUCCESS) T_FAIL("a user event was created under a fault");
  else once(s, e->q, "clCreateUserEvent");
  disarm("clCreateUserEvent", 0);
  EXPECT_OK(syrah_user_event_create(e->ctx, &ev));
  if (ev) {
    EXPECT_OK(syrah_user_event_complete(ev, false));
    EXPECT_OK(syrah_event_release(ev));
  }
}

/* A graph of three kernels on a buffer: its lanes fail to be made once
 * when it is finalized, and its replay fails once (a kernel's enqueue, or
 * with SYRAH_COMMAND_BUFFER=on the command-buffer's enqueue); the failures
 * surface once each, later submissions work and the buffer ends with
 * exactly the replays that ran. With command-buffers, also: recording one
 * fails once, and an argument update the driver refuses to apply in place
 * is recorded again instead, without an error. */
static void graph(env *e) {
  size_t n = 0;
  int *host = NULL, i, expect = 6;
  syrah_buffer *b = new_buffer(&n, &host);
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_graph_backend backend = 0;
  syrah_status s;
  const char *replay_call;
  const char *lanes = e->cuda ? "cuStreamCreate" : "clCreateCommandQueueWithProperties";
  const char *update = e->cuda ? "cuGraphExecKernelNodeSetParams" : "clUpdateMutableCommandsKHR";
  const char *record = e->cuda ? "cuGraphCreate" : "clCreateCommandBufferKHR";
  if (!b) return;
  EXPECT_OK(syrah_queue_begin_recording(e->q));
  for (i = 0; i < 3; ++i) EXPECT_OK(t_launch_rw(e->q, e->k, b, n, 1, NULL));
  REQUIRE_OK(syrah_queue_end_recording(e->q, &g));

  arm("graph finalize", lanes, 0, busy(e));
  s = syrah_graph_finalize(g, &x);
  ++t_checks;
  if (s == SYRAH_SUCCESS) T_FAIL("a graph was finalized under a fault");
  else once(s, e->q, lanes);
  disarm(lanes, 0);
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  EXPECT_OK(syrah_graph_exec_get_backend(x, &backend));
  if (backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER)
    replay_call = e->cuda ? "cuGraphLaunch" : "clEnqueueCommandBufferKHR";
  else
    replay_call = e->cuda ? "cuLaunchKernel" : "clEnqueueNDRangeKernel";

  EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  arm("graph replay", replay_call, 0, busy(e));
  once(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL), e->q, replay_call);
  disarm(replay_call, 0);
  EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  if (backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER) {
    uint64_t in_place = 0;
    int two = 2, one = 1;
    syrah_kernel_arg a = syrah_arg_value(&two, sizeof two);
    syrah_graph_exec_stats st;
    EXPECT_OK(syrah_device_get_info_u64(e->d, SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE, &in_place));
    EXPECT_OK(syrah_graph_exec_get_stats(x, &st));
    EXPECT_EQ(st.command_buffer_recordings, 1);
    if (in_place) arm("graph update in place", update, 0, busy(e));
    EXPECT_OK(syrah_graph_exec_set_arg(x, 0, 1, &a));
    if (in_place) {
      disarm(update, 0);
      ++absorbed; /* checked below: one more recording, no update counted */
    }
    /* The copy took no update: the next submission replays the nodes,
     * the one after records a copy (trying fewer flags when the driver
     * refuses some, hence a lasting fault). */
    EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
    arm("graph command-buffer recording", record, 1, busy(e));
    once(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL), e->q, record);
    disarm(record, 1);
    EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
    a = syrah_arg_value(&one, sizeof one);
    EXPECT_OK(syrah_graph_exec_set_arg(x, 0, 1, &a));
    EXPECT_OK(syrah_queue_submit_graph(e->q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
    EXPECT_OK(syrah_graph_exec_get_stats(x, &st));
    /* Submitted: twice, twice with 2 + 1 + 1, then three 1s again (in
     * place, or by the nodes after the copy went stale). */
    expect += 4 + 4 + 3;
    EXPECT_EQ(st.submissions, 5);
    EXPECT_EQ(st.command_buffer_recordings, 2);
    EXPECT_EQ(st.command_buffer_updates, in_place ? 1 : 0);
  }
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_buffer_release(b));
  /* Whole replays of three increments; the failed ones ran none. */
  expect_data(host, n, expect, "graph replays around failed ones");
  free(host);
}

/* A graph of a kernel, a device-to-device USM copy and a kernel, all of
 * which the graph enqueues itself; the copy's enqueue fails once in the
 * middle of a replay. The failure surfaces once naming the call; the
 * kernel enqueued before it still runs, as eager commands before a failed
 * one do; later replays work. Three replays, the second cut short: `a`
 * ends as 3 and `b` as 4 in every element. Where the graph is recorded
 * whole (CUDA graphs, with SYRAH_COMMAND_BUFFER=on), its launch fails
 * instead and runs nothing: `a` ends as 2 and `b` as 3. */
static void graph_copy(env *e) {
  enum { M = 256 };
  int *a = NULL, *b = NULL, one = 1, i, wrong = 0;
  static int got[2][M];
  syrah_range r = syrah_range_1d(M);
  syrah_kernel_arg x[2];
  syrah_graph *g = NULL;
  syrah_graph_exec *ex = NULL;
  syrah_graph_backend backend = 0;
  const char *call = h2d_call(e);
  int whole;
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, sizeof got[0], (void **)&a));
  REQUIRE_OK(syrah_malloc_device(e->ctx, e->d, sizeof got[0], (void **)&b));
  EXPECT_OK(syrah_queue_memset(e->q, a, 0, sizeof got[0], NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memset(e->q, b, 0, sizeof got[0], NULL, 0, NULL));
  EXPECT_OK(syrah_queue_begin_recording(e->q));
  x[0] = syrah_arg_usm(a);
  x[1] = syrah_arg_value(&one, sizeof one);
  EXPECT_OK(syrah_queue_launch(e->q, e->k, &r, x, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, b, a, sizeof got[0], NULL, 0, NULL));
  x[0] = syrah_arg_usm(b);
  EXPECT_OK(syrah_queue_launch(e->q, e->k, &r, x, 2, NULL, 0, NULL));
  REQUIRE_OK(syrah_queue_end_recording(e->q, &g));
  REQUIRE_OK(syrah_graph_finalize(g, &ex));
  EXPECT_OK(syrah_graph_exec_get_backend(ex, &backend));
  whole = backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER;
  if (whole) call = e->cuda ? "cuGraphLaunch" : "clEnqueueCommandBufferKHR";
  EXPECT_OK(syrah_queue_submit_graph(e->q, ex, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  arm(whole ? "graph with a copy, launched whole" : "graph copy", call, 0, busy(e));
  once(syrah_queue_submit_graph(e->q, ex, NULL, 0, NULL), e->q, call);
  disarm(call, 0);
  EXPECT_OK(syrah_queue_submit_graph(e->q, ex, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, got[0], a, sizeof got[0], NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(e->q, got[1], b, sizeof got[1], NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  for (i = 0; i < M; ++i) wrong += got[0][i] != 3 - whole || got[1][i] != 4 - whole;
  ++t_checks;
  if (wrong)
    T_FAIL("graph copy: %d of %d elements wrong (a[0] = %d, expected %d; b[0] = %d, expected %d)", wrong, M,
           got[0][0], 3 - whole, got[1][0], 4 - whole);
  else
    ++intact;
  EXPECT_OK(syrah_graph_exec_release(ex));
  EXPECT_OK(syrah_graph_release(g));
  EXPECT_OK(syrah_free(e->ctx, a));
  EXPECT_OK(syrah_free(e->ctx, b));
}

/* CUDA: a copy into ordinary memory behind running work, landed through
 * a pinned block (the device marks each chunk, the stream waits for the
 * host's copy), whose marking or waiting fails once. A failed mark fails
 * the copy; a failed wait fails it after the data has landed. Either
 * way a second copy works. */
static void landing(env *e) {
  static const char *spin_src =
      "__kernel void spin(__global uint *s, uint n) {\n"
      "  uint x = s[get_global_id(0)];\n"
      "  for (uint k = 0; k < n; ++k) x = x * 1664525u + 1013904223u;\n"
      "  s[get_global_id(0)] = x;\n"
      "}\n";
  static const char *calls[2] = {"cuStreamWriteValue32", "cuStreamWaitValue32"};
  size_t n = 0;
  int *host = fresh_host(&n), *back = (int *)malloc(n * sizeof(int)), c;
  void *m = NULL, *scratch = NULL;
  syrah_program *p = NULL;
  syrah_kernel *spin = NULL;
  uint32_t iters = 200000;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(4096);
  if (!host || !back || syrah_malloc_device(e->ctx, e->d, n * sizeof(int), &m) != SYRAH_SUCCESS ||
      syrah_malloc_device(e->ctx, e->d, 4096 * sizeof(uint32_t), &scratch) != SYRAH_SUCCESS ||
      syrah_program_create_from_source(e->ctx, spin_src, NULL, &p) != SYRAH_SUCCESS ||
      syrah_kernel_create(p, "spin", &spin) != SYRAH_SUCCESS) {
    T_FAIL("landing setup: %s", syrah_last_error_message());
    goto out;
  }
  args[0] = syrah_arg_usm(scratch);
  args[1] = syrah_arg_value(&iters, sizeof iters);
  EXPECT_OK(syrah_queue_memcpy(e->q, m, host, n * sizeof(int), NULL, 0, NULL));
  for (c = 0; c < 2; ++c) {
    syrah_status s;
    memset(back, 0, n * sizeof(int));
    EXPECT_OK(syrah_queue_launch(e->q, spin, &r, args, 2, NULL, 0, NULL));
    arm(c ? "a copy into ordinary memory, the stream's wait for it" : "a copy into ordinary memory, its marks",
        calls[c], 0, busy(e));
    s = syrah_queue_memcpy(e->q, back, m, n * sizeof(int), NULL, 0, NULL);
    once(s, e->q, calls[c]);
    disarm(calls[c], 0);
    /* The stream waited for nothing: the data landed before the failure
     * was reported. */
    if (c) expect_data(back, n, 0, "copy whose stream wait failed");
    memset(back, 0, n * sizeof(int));
    EXPECT_OK(syrah_queue_launch(e->q, spin, &r, args, 2, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(e->q, back, m, n * sizeof(int), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
    expect_data(back, n, 0, "copy into ordinary memory after a failed one");
  }
  /* A driver without stream memory operations: the copy goes through a
   * host function on the stream instead, and so do later ones (the
   * process keeps to that way, so this comes last). */
  memset(back, 0, n * sizeof(int));
  EXPECT_OK(syrah_queue_launch(e->q, spin, &r, args, 2, NULL, 0, NULL));
  arm("a copy into ordinary memory, stream memory operations unsupported", calls[0], 1,
      CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_OK(syrah_queue_memcpy(e->q, back, m, n * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  disarm(calls[0], 1);
  expect_data(back, n, 0, "copy through a host function after stream memory operations were refused");
  ++absorbed;
out:
  if (spin) syrah_kernel_release(spin);
  if (p) syrah_program_release(p);
  if (m) EXPECT_OK(syrah_free(e->ctx, m));
  if (scratch) EXPECT_OK(syrah_free(e->ctx, scratch));
  free(host);
  free(back);
}

/* How often CUDA is asked what a pointer is: never for a buffer's copies
 * to and from its host storage (the buffer vouches that it is host
 * memory), once for a USM copy from malloc'd memory (which others may
 * have pinned). Counted through the faultcl library, which fails nothing
 * here. */
static void pointer_queries(env *e) {
  enum { SMALL = 4096 };
  int *host = (int *)malloc(SMALL * sizeof(int)), *plain = (int *)malloc(SMALL * sizeof(int)), i, used;
  void *m = NULL, *p = NULL;
  syrah_buffer *b = NULL;
  syrah_host_accessor *ha = NULL;
  syrah_buffer_desc desc;
  if (!host || !plain) {
    T_FAIL("pointer queries: out of host memory");
    goto out;
  }
  for (i = 0; i < SMALL; ++i) host[i] = plain[i] = i;
  desc = t_desc1(SMALL, host, SYRAH_HOST_WRITE_BACK);
  if (syrah_buffer_create(&desc, &b) != SYRAH_SUCCESS ||
      syrah_malloc_device(e->ctx, e->d, SMALL * sizeof(int), &m) != SYRAH_SUCCESS) {
    T_FAIL("pointer queries setup: %s", syrah_last_error_message());
    goto out;
  }
  printf("-- pointer queries: cuPointerGetAttribute counted\n");
  faultcl_arm("cuPointerGetAttribute", 1 << 30, 1, 0);
  EXPECT_OK(t_launch_rw(e->q, e->k, b, SMALL, 5, NULL));
  if (syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, &p) == SYRAH_SUCCESS) {
    expect_data((const int *)p, SMALL, 5, "buffer read back after a copy in");
    EXPECT_OK(syrah_host_accessor_release(ha));
  } else {
    T_FAIL("pointer queries host access: %s", syrah_last_error_message());
  }
  used = faultcl_disarm();
  ++t_checks;
  if (used != 0) T_FAIL("CUDA was asked %d times what a buffer's host storage is, expected 0", used);
  faultcl_arm("cuPointerGetAttribute", 1 << 30, 1, 0);
  EXPECT_OK(syrah_queue_memcpy(e->q, m, plain, SMALL * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  used = faultcl_disarm();
  ++t_checks;
  if (used != 1) T_FAIL("CUDA was asked %d times what the source of a USM copy is, expected 1", used);
  memset(plain, 0, SMALL * sizeof(int));
  EXPECT_OK(syrah_queue_memcpy(e->q, plain, m, SMALL * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q));
  expect_data(plain, SMALL, 0, "USM copy back");
out:
  if (b) EXPECT_OK(syrah_buffer_release(b));
  if (host) expect_data(host, SMALL, 5, "write-back of the buffer");
  if (m) EXPECT_OK(syrah_free(e->ctx, m));
  free(host);
  free(plain);
}

static void test_device(const syrah_device *d) {
  env e;
  syrah_program *p = NULL;
  uint64_t backend = 0;
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
  memset(&e, 0, sizeof e);
  e.d = d;
  e.cuda = backend == SYRAH_BACKEND_CUDA;
  if (e.cuda && (!getenv("SYRAH_CUDA_LIBRARY") || !strstr(getenv("SYRAH_CUDA_LIBRARY"), "faultcl"))) {
    t_skip("faults injected into CUDA", "SYRAH_CUDA_LIBRARY does not name the faultcl library (CTest sets it)");
    return;
  }
  REQUIRE_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_USM_STRATEGY, &e.strategy));
  e.buf_mem = !t_buffer_pointers(d);
  REQUIRE_OK(syrah_context_create(&d, 1, &e.ctx));
  REQUIRE_OK(syrah_queue_create(e.ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e.q));
  REQUIRE_OK(syrah_program_create_from_source(e.ctx, SRC, NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "add", &e.k));
  EXPECT_OK(syrah_program_release(p));

  buffer_to_device(&e, "buffer allocation on first use", buf_alloc_call(&e), 1, oom(&e), 0);
  buffer_to_device(&e, "buffer allocation, then a retry", buf_alloc_call(&e), 1, oom(&e), 1);
  buffer_to_device(&e, "buffer copy to the device", buf_h2d_call(&e), 0, busy(&e), 0);
  buffer_to_device(&e, "buffer copy to the device, then a retry", buf_h2d_call(&e), 0, busy(&e), 1);
  buffer_to_host(&e);
  kernel_enqueue(&e);
  if (e.strategy != SYRAH_USM_STRATEGY_NONE) {
    usm(&e);
    graph_copy(&e);
    held_launch(&e);
  } else {
    t_skip("USM allocation and copy faults", "the device has no USM");
  }
  creation(&e);
  graph(&e);
  if (e.cuda) {
    pointer_queries(&e);
    landing(&e);
  } else {
    t_skip("landed copies into ordinary memory", "only the CUDA back end lands copies through marks");
    t_skip("CUDA pointer queries", "only the CUDA back end asks what a pointer is");
  }

  EXPECT_OK(syrah_kernel_release(e.k));
  EXPECT_OK(syrah_queue_release(e.q));
  EXPECT_OK(syrah_context_release(e.ctx));
}

int main(void) {
  const char *lib = getenv("SYRAH_OPENCL_LIBRARY");
  if (!lib || !strstr(lib, "faultcl")) {
    printf("test_faults needs SYRAH_OPENCL_LIBRARY naming the faultcl library (CTest sets it)\n");
    return 1;
  }
  /* Graphs enqueue their kernels one by one (see `graph`), unless
   * command-buffers are asked for. */
  if (!getenv("SYRAH_COMMAND_BUFFER") || strcmp(getenv("SYRAH_COMMAND_BUFFER"), "on") != 0)
    setenv("SYRAH_COMMAND_BUFFER", "off", 1);
  signal(SIGALRM, watchdog);
  alarm(300);
  t_for_each_device(test_device);
  printf("faults: %d injected, %d surfaced exactly once, %d absorbed by a fallback, %d buffers and copies with "
         "their data intact\n",
         injected, surfaced, absorbed, intact);
  EXPECT_TRUE(injected > 0 && surfaced + absorbed == injected);
  return t_finish("test_faults");
}
