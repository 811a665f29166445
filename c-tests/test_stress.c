/* Concurrency stress: 16 threads submit kernels, USM copies, host tasks,
 * buffer accesses, host accessors and graphs to queues they share (one
 * in-order and one out-of-order queue per device) and to queues of their
 * own, on every device at once, for SYRAH_STRESS_SECONDS (default 30).
 * Every private result is checked as it comes; a buffer all threads add to
 * (from kernels on every device, host tasks, host accessors and one graph
 * per device, whose arguments are set again meanwhile) must end with
 * exactly the sum of what they added. A watchdog fails the test on a
 * deadlock. */
#define _POSIX_C_SOURCE 200809L
#include "testing.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

enum { THREADS = 16, SHARED = 4096, PRIVATE = 8192, MAX_DEVICES = 8 };

static const char *SRC = "__kernel void add(__global int *p, int v) { p[get_global_id(0)] += v; }";

typedef struct {
  const syrah_device *d;
  syrah_context *ctx;
  syrah_queue *in_order, *out_of_order;
  syrah_kernel *add;
  /* Two kernels adding 2 each to the shared buffer, recorded once. */
  syrah_graph *graph;
  syrah_graph_exec *exec;
  bool usm;
} dev_env;

static dev_env devs[MAX_DEVICES];
static size_t ndev = 0;
static syrah_buffer *shared_buf = NULL;
static int shared_host[SHARED];
static double deadline = 0;
static int op_mask = 0x7f; /* SYRAH_STRESS_OPS: which of the seven operations run */
static pthread_mutex_t report = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  int id;
  long checks, failures, ops[7];
  long long added; /* added to every element of the shared buffer */
} worker;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(worker *w, const char *what, const char *detail) {
  ++w->failures;
  pthread_mutex_lock(&report);
  fprintf(stderr, "FAIL thread %d: %s: %s\n", w->id, what, detail);
  pthread_mutex_unlock(&report);
}

#define STRESS_OK(w, call)                                                               \
  do {                                                                              \
    syrah_status s_ = (call);                                                       \
    ++(w)->checks;                                                                  \
    if (s_ != SYRAH_SUCCESS) {                                                      \
      char m_[1200];                                                                \
      snprintf(m_, sizeof m_, "%s: %s", syrah_status_name(s_), syrah_last_error_message()); \
      fail((w), #call, m_);                                                         \
    }                                                                               \
  } while (0)

/* host[i] must be base + i + add for `n` elements. */
static void check_values(worker *w, const char *what, const int *p, int n, int base, int add) {
  int i, wrong = 0;
  for (i = 0; i < n; ++i)
    if (p[i] != base + i + add) ++wrong;
  ++w->checks;
  if (wrong) {
    char m[160];
    snprintf(m, sizeof m, "%d of %d elements wrong (first %d, expected %d)", wrong, n, p[0], base + add);
    fail(w, what, m);
  }
}

typedef struct {
  int add;
} task_data;

static syrah_status task_add(const syrah_host_task_context *c, void *u) {
  int *p = NULL, i;
  syrah_status s = syrah_host_task_get_pointer(c, 0, (void **)&p);
  if (s != SYRAH_SUCCESS) return s;
  for (i = 0; i < SHARED; ++i) p[i] += ((task_data *)u)->add;
  return SYRAH_SUCCESS;
}

static void task_free(void *u) { free(u); }

static void *run(void *arg) {
  worker *w = (worker *)arg;
  dev_env *e = &devs[(size_t)w->id % ndev];
  syrah_queue *own = NULL;
  int *host = (int *)malloc(PRIVATE * sizeof(int));
  void *dev = NULL;
  long iter = 0;
  int i;
  if (!host) return NULL;
  STRESS_OK(w, syrah_queue_create(e->ctx, e->d, w->id % 2 ? SYRAH_QUEUE_IN_ORDER : 0, NULL, NULL, &own));
  if (e->usm) STRESS_OK(w, syrah_malloc_device(e->ctx, e->d, PRIVATE * sizeof(int), &dev));
  while (own && now() < deadline) {
    int op = (int)(iter++ % 7), base = w->id * 1000 + (int)(iter % 97);
    if (!(op_mask & (1 << op))) continue;
    syrah_queue *shared_q = iter % 2 ? e->in_order : e->out_of_order;
    int ran = 1;
    switch (op) {
    case 0: /* private USM round trip: copy in, add, copy out */
      if (!dev) {
        ran = 0;
        break;
      }
      {
        syrah_kernel_arg args[2];
        syrah_range r = syrah_range_1d(PRIVATE);
        int v = 7;
        for (i = 0; i < PRIVATE; ++i) host[i] = base + i;
        args[0] = syrah_arg_usm(dev);
        args[1] = syrah_arg_value(&v, sizeof v);
        /* Events order the three on an out-of-order queue. */
        {
          syrah_event *in = NULL, *k = NULL;
          STRESS_OK(w, syrah_queue_memcpy(own, dev, host, PRIVATE * sizeof(int), NULL, 0, &in));
          STRESS_OK(w, syrah_queue_launch(own, e->add, &r, args, 2, (const syrah_event *const *)&in, 1, &k));
          STRESS_OK(w, syrah_queue_memcpy(own, host, dev, PRIVATE * sizeof(int), (const syrah_event *const *)&k, 1,
                                          NULL));
          STRESS_OK(w, syrah_queue_wait(own));
          if (in) STRESS_OK(w, syrah_event_release(in));
          if (k) STRESS_OK(w, syrah_event_release(k));
        }
        check_values(w, "USM round trip", host, PRIVATE, base, 7);
      }
      break;
    case 1: /* a kernel adding 1 to the shared buffer, on a shared queue */
      STRESS_OK(w, t_launch_rw(shared_q, e->add, shared_buf, SHARED, 1, NULL));
      w->added += 1;
      break;
    case 2: /* a host task adding 2 to the shared buffer */
      {
        syrah_accessor a = t_whole(shared_buf, SYRAH_ACCESS_READ_WRITE);
        task_data *td = (task_data *)malloc(sizeof *td);
        syrah_host_task t;
        if (!td) break;
        td->add = 2;
        t.run = task_add;
        t.user_data = td;
        t.release = task_free;
        STRESS_OK(w, syrah_queue_submit_host_tasks(shared_q, &a, 1, &t, 1, NULL, 0, NULL));
        w->added += 2;
      }
      break;
    case 3: /* a host accessor adding 3 to the shared buffer */
      {
        syrah_host_accessor *ha = NULL;
        int *p = NULL;
        syrah_status s = syrah_buffer_host_access(shared_buf, SYRAH_ACCESS_READ_WRITE, NULL, NULL, &ha, (void **)&p);
        ++w->checks;
        if (s == SYRAH_SUCCESS) {
          for (i = 0; i < SHARED; ++i) p[i] += 3;
          w->added += 3;
          STRESS_OK(w, syrah_host_accessor_release(ha));
        } else if (s != SYRAH_ERROR_INVALID_ARGUMENT || !strstr(syrah_last_error_message(), "host accessor")) {
          /* Only a conflicting host accessor held by another thread may refuse it. */
          char m[1200];
          snprintf(m, sizeof m, "%s: %s", syrah_status_name(s), syrah_last_error_message());
          fail(w, "host access of the shared buffer", m);
        }
      }
      break;
    case 4: /* a private buffer: kernel, then a host accessor reads it */
      {
        syrah_buffer *b = NULL;
        syrah_buffer_desc desc = t_desc1(PRIVATE, host, SYRAH_HOST_WRITE_BACK);
        for (i = 0; i < PRIVATE; ++i) host[i] = base + i;
        STRESS_OK(w, syrah_buffer_create(&desc, &b));
        if (!b) break;
        STRESS_OK(w, t_launch_rw(own, e->add, b, PRIVATE, 5, NULL));
        {
          syrah_host_accessor *ha = NULL;
          int *p = NULL;
          STRESS_OK(w, syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
          if (ha) {
            check_values(w, "private buffer through a host accessor", p, PRIVATE, base, 5);
            STRESS_OK(w, syrah_host_accessor_release(ha));
          }
        }
        STRESS_OK(w, t_launch_rw(own, e->add, b, PRIVATE, 1, NULL));
        STRESS_OK(w, syrah_buffer_release(b));
        check_values(w, "private buffer written back", host, PRIVATE, base, 6);
      }
      break;
    case 5: /* USM copies with events on a shared queue */
      if (!dev) {
        ran = 0;
        break;
      }
      {
        syrah_event *in = NULL, *out = NULL;
        for (i = 0; i < PRIVATE; ++i) host[i] = base + i;
        STRESS_OK(w, syrah_queue_memcpy(shared_q, dev, host, PRIVATE * sizeof(int), NULL, 0, &in));
        if (!in) break;
        STRESS_OK(w, syrah_event_wait(in));
        for (i = 0; i < PRIVATE; ++i) host[i] = -1;
        STRESS_OK(w, syrah_queue_memcpy(shared_q, host, dev, PRIVATE * sizeof(int), (const syrah_event *const *)&in,
                                   1, &out));
        if (out) {
          STRESS_OK(w, syrah_event_wait(out));
          check_values(w, "USM copies with events", host, PRIVATE, base, 0);
          STRESS_OK(w, syrah_event_release(out));
        }
        STRESS_OK(w, syrah_event_release(in));
      }
      break;
    case 6: /* the device's graph (adds 4 to the shared buffer) on a shared queue;
             * every third time one of its nodes gets its argument set again
             * (to the same 2), while other threads submit it */
      if (w->ops[6] % 3 == 0) {
        int two = 2;
        syrah_kernel_arg a = syrah_arg_value(&two, sizeof two);
        STRESS_OK(w, syrah_graph_exec_set_arg(e->exec, (size_t)(w->ops[6] % 2), 1, &a));
      }
      STRESS_OK(w, syrah_queue_submit_graph(shared_q, e->exec, NULL, 0, NULL));
      w->added += 4;
      break;
    }
    w->ops[op] += ran;
  }
  if (own) {
    STRESS_OK(w, syrah_queue_wait(own));
    STRESS_OK(w, syrah_queue_release(own));
  }
  if (dev) STRESS_OK(w, syrah_free(e->ctx, dev));
  free(host);
  return NULL;
}

static void watchdog(int sig) {
  static const char msg[] = "FAIL watchdog: the stress test did not finish in time (deadlock?)\n";
  (void)sig;
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}

int main(void) {
  const syrah_device *list[MAX_DEVICES];
  const char *env = getenv("SYRAH_STRESS_SECONDS");
  double seconds = env ? atof(env) : 30.0;
  worker workers[THREADS];
  pthread_t threads[THREADS];
  long long total = 0;
  long ops[7] = {0};
  size_t i;
  int t, j, wrong = 0;
  syrah_buffer_desc desc;
  if (seconds <= 0) seconds = 30.0;
  if (getenv("SYRAH_STRESS_OPS")) op_mask = (int)strtol(getenv("SYRAH_STRESS_OPS"), NULL, 0);
  signal(SIGALRM, watchdog);
  alarm((unsigned)seconds + 300);

  if (syrah_get_devices(list, MAX_DEVICES, &ndev) != SYRAH_SUCCESS || ndev == 0) {
    printf("FAIL no device: %s\n", syrah_last_error_message());
    return 1;
  }
  if (ndev > MAX_DEVICES) ndev = MAX_DEVICES;
  for (i = 0; i < ndev; ++i) {
    syrah_program *p = NULL;
    char name[256] = "";
    dev_env *e = &devs[i];
    e->d = list[i];
    e->usm = t_has(e->d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS);
    syrah_device_get_info_string(e->d, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL);
    printf("device %zu: %s%s\n", i, name, e->usm ? "" : " (no USM: its threads skip the USM operations)");
    if (!e->usm) t_skip("USM operations", "the device has no USM device allocations");
    EXPECT_OK(syrah_context_create(&e->d, 1, &e->ctx));
    EXPECT_OK(syrah_queue_create(e->ctx, e->d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e->in_order));
    EXPECT_OK(syrah_queue_create(e->ctx, e->d, 0, NULL, NULL, &e->out_of_order));
    EXPECT_OK(syrah_program_create_from_source(e->ctx, SRC, NULL, &p));
    EXPECT_OK(syrah_kernel_create(p, "add", &e->add));
    EXPECT_OK(syrah_program_release(p));
    if (t_failures) return t_finish("test_stress");
  }
  for (j = 0; j < SHARED; ++j) shared_host[j] = j;
  desc = t_desc1(SHARED, shared_host, SYRAH_HOST_WRITE_BACK);
  EXPECT_OK(syrah_buffer_create(&desc, &shared_buf));
  if (!shared_buf) return t_finish("test_stress");
  for (i = 0; i < ndev; ++i) {
    dev_env *e = &devs[i];
    EXPECT_OK(syrah_queue_begin_recording(e->in_order));
    EXPECT_OK(t_launch_rw(e->in_order, e->add, shared_buf, SHARED, 2, NULL));
    EXPECT_OK(t_launch_rw(e->in_order, e->add, shared_buf, SHARED, 2, NULL));
    EXPECT_OK(syrah_queue_end_recording(e->in_order, &e->graph));
    if (e->graph) EXPECT_OK(syrah_graph_finalize(e->graph, &e->exec));
    if (!e->exec) return t_finish("test_stress");
  }

  printf("%d threads over %zu devices for %.0f s\n", THREADS, ndev, seconds);
  fflush(stdout);
  deadline = now() + seconds;
  for (t = 0; t < THREADS; ++t) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].id = t;
    if (pthread_create(&threads[t], NULL, run, &workers[t]) != 0) {
      T_FAIL("pthread_create failed for thread %d", t);
      return t_finish("test_stress");
    }
  }
  for (t = 0; t < THREADS; ++t) {
    pthread_join(threads[t], NULL);
    t_checks += (int)workers[t].checks;
    t_failures += (int)workers[t].failures;
    total += workers[t].added;
    for (j = 0; j < 7; ++j) ops[j] += workers[t].ops[j];
  }
  for (i = 0; i < ndev; ++i) {
    EXPECT_OK(syrah_queue_wait(devs[i].in_order));
    EXPECT_OK(syrah_queue_wait(devs[i].out_of_order));
  }
  {
    uint64_t submitted = 0;
    for (i = 0; i < ndev; ++i) {
      syrah_graph_exec_stats st;
      memset(&st, 0, sizeof st);
      EXPECT_OK(syrah_graph_exec_get_stats(devs[i].exec, &st));
      printf("device %zu graph: %llu submissions, %llu command-buffers recorded, %llu updated in place\n", i,
             (unsigned long long)st.submissions, (unsigned long long)st.command_buffer_recordings,
             (unsigned long long)st.command_buffer_updates);
      submitted += st.submissions;
      EXPECT_OK(syrah_graph_exec_release(devs[i].exec));
      EXPECT_OK(syrah_graph_release(devs[i].graph));
    }
    /* Every graph submission of every thread, counted once. */
    EXPECT_EQ(submitted, (uint64_t)ops[6]);
  }
  EXPECT_OK(syrah_buffer_release(shared_buf));
  for (j = 0; j < SHARED; ++j)
    if ((long long)shared_host[j] != j + total) ++wrong;
  ++t_checks;
  if (wrong)
    T_FAIL("shared buffer: %d of %d elements are not index + %lld (element 0 holds %d)", wrong, SHARED, total,
           shared_host[0]);
  printf("operations: %ld USM round trips, %ld shared kernels, %ld shared host tasks, %ld shared host accesses, "
         "%ld private buffers, %ld USM copies with events, %ld graphs; shared buffer elements each gained %lld\n",
         ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], total);
  for (i = 0; i < ndev; ++i) {
    EXPECT_OK(syrah_kernel_release(devs[i].add));
    EXPECT_OK(syrah_queue_release(devs[i].in_order));
    EXPECT_OK(syrah_queue_release(devs[i].out_of_order));
    EXPECT_OK(syrah_context_release(devs[i].ctx));
  }
  return t_finish("test_stress");
}
