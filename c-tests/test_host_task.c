/* Host tasks (ordering, threads, failures, native handles) and explicit
 * copies and fills of accessors, with the access-mode rules. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static const char *kSource =
    "__kernel void setv(__global int *p, int v) { p[get_global_id(0)] = v; }\n"
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n";

enum { N = 4096 };


typedef struct {
  pthread_t submitter;
  int ran_elsewhere;
  int log[8];
  int nlog;
  int seen_first;
  volatile int flag;
  syrah_status fail_with;
} state;

static syrah_status task_check_and_double(const syrah_host_task_context *ctx, void *user) {
  state *s = (state *)user;
  int *p = NULL, i;
  syrah_status st = syrah_host_task_get_pointer(ctx, 0, (void **)&p);
  if (st != SYRAH_SUCCESS) return st;
  s->ran_elsewhere = !pthread_equal(pthread_self(), s->submitter);
  s->seen_first = p[0];
  for (i = 0; i < N; ++i) p[i] *= 2;
  s->log[s->nlog++] = 1;
  return SYRAH_SUCCESS;
}

static syrah_status task_log2(const syrah_host_task_context *ctx, void *user) {
  state *s = (state *)user;
  (void)ctx;
  s->log[s->nlog++] = 2;
  return SYRAH_SUCCESS;
}

static syrah_status task_flag(const syrah_host_task_context *ctx, void *user) {
  (void)ctx;
  ((state *)user)->flag = 1;
  return SYRAH_SUCCESS;
}

static syrah_status task_fail(const syrah_host_task_context *ctx, void *user) {
  void *p = NULL;
  (void)user;
  /* A failing call inside the task: its message travels with the error. */
  syrah_host_task_get_pointer(ctx, 99, &p);
  return SYRAH_ERROR_INVALID_ARGUMENT;
}

static syrah_status task_native(const syrah_host_task_context *ctx, void *user) {
  state *s = (state *)user;
  void *q = NULL, *c = NULL, *d = NULL, *b = NULL;
  bool usm = false;
  int ok = syrah_host_task_get_native(ctx, SYRAH_NATIVE_QUEUE, &q) == SYRAH_SUCCESS && q &&
           syrah_host_task_get_native(ctx, SYRAH_NATIVE_CONTEXT, &c) == SYRAH_SUCCESS && c &&
           syrah_host_task_get_native(ctx, SYRAH_NATIVE_DEVICE, &d) == SYRAH_SUCCESS && d &&
           syrah_host_task_get_native_buffer(ctx, 0, &b, &usm) == SYRAH_SUCCESS && b &&
           syrah_host_task_get_native(ctx, 77, &q) == SYRAH_ERROR_INVALID_ARGUMENT &&
           syrah_host_task_get_native_buffer(ctx, 5, &b, &usm) == SYRAH_ERROR_INVALID_ARGUMENT;
  s->flag = ok ? 2 : -1;
  return SYRAH_SUCCESS;
}

static int released = 0;
static void count_release(void *user) {
  (void)user;
  ++released;
}

static void test_host_tasks(const syrah_device *d) {
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *setv = NULL, *addv = NULL;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_host_task tasks[2];
  syrah_accessor a;
  syrah_event *ev = NULL, *k = NULL, *user = NULL;
  syrah_event_status st = 0;
  syrah_host_accessor *ha = NULL;
  int *p = NULL, i, ok;
  state s;
  memset(&s, 0, sizeof s);
  memset(tasks, 0, sizeof tasks);
  s.submitter = pthread_self();
  REQUIRE_OK(syrah_queue_create(NULL, d, 0, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "setv", &setv));
  REQUIRE_OK(syrah_kernel_create(prog, "addv", &addv));
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));

  /* kernel (= 5) -> two host tasks (x2, log) -> kernel (+1), ordered by the
   * buffer alone on an out-of-order queue. */
  EXPECT_OK(t_launch_rw(q, setv, b, N, 5, NULL));
  a = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  tasks[0].run = task_check_and_double;
  tasks[0].user_data = &s;
  tasks[1].run = task_log2;
  tasks[1].user_data = &s;
  EXPECT_OK(syrah_queue_submit_host_tasks(q, &a, 1, tasks, 2, NULL, 0, &ev));
  EXPECT_OK(t_launch_rw(q, addv, b, N, 1, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 11;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_EQ(s.seen_first, 5);
  EXPECT_EQ(s.ran_elsewhere, 1);
  EXPECT_EQ(s.nlog, 2);
  EXPECT_EQ(s.log[0], 1);
  EXPECT_EQ(s.log[1], 2);
  EXPECT_OK(syrah_event_get_status(ev, &st));
  EXPECT_EQ(st, SYRAH_EVENT_COMPLETE);
  syrah_event_release(ev);

  /* Submission returns at once; the group waits for its dependency. */
  REQUIRE_OK(syrah_user_event_create(ctx, &user));
  tasks[0].run = task_flag;
  s.flag = 0;
  EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 1, (const syrah_event *const *)&user, 1, &ev));
  t_sleep_ms(50);
  EXPECT_EQ(s.flag, 0);
  EXPECT_OK(syrah_event_get_status(ev, &st));
  EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_user_event_complete(user, false));
  /* It runs without anyone waiting on the queue. */
  for (i = 0; i < 200 && !s.flag; ++i) t_sleep_ms(10);
  EXPECT_EQ(s.flag, 1);
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  syrah_event_release(user);

  /* Release callbacks: once per task, whether it ran or a failed
   * dependency kept it from running. */
  released = 0;
  tasks[0].run = task_flag;
  tasks[0].release = count_release;
  EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 1, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  REQUIRE_OK(syrah_user_event_create(ctx, &user));
  EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 1, (const syrah_event *const *)&user, 1, &ev));
  EXPECT_OK(syrah_user_event_complete(user, true));
  EXPECT_ERR(syrah_event_wait(ev), SYRAH_ERROR_EXECUTION_FAILED, "host task did not run");
  EXPECT_EQ(released, 2);
  syrah_event_release(ev);
  syrah_event_release(user);
  tasks[0].release = NULL;

  /* A user event failed with a message: a host task and a device copy
   * after it fail, quoting the message. */
  {
    static int source[N];
    syrah_event *copy = NULL;
    syrah_buffer *other = NULL;
    syrah_buffer_desc od = t_desc1(N, NULL, SYRAH_HOST_NONE);
    REQUIRE_OK(syrah_buffer_create(&od, &other));
    REQUIRE_OK(syrah_user_event_create(ctx, &user));
    EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 1, (const syrah_event *const *)&user, 1, &ev));
    a = t_whole(other, SYRAH_ACCESS_DISCARD_WRITE);
    EXPECT_OK(syrah_queue_copy_to_accessor(q, source, &a, NULL, NULL, (const syrah_event *const *)&user, 1, &copy));
    EXPECT_ERR(syrah_user_event_fail(NULL, "x"), SYRAH_ERROR_NULL_ARGUMENT, "event");
    EXPECT_ERR(syrah_user_event_fail(user, NULL), SYRAH_ERROR_NULL_ARGUMENT, "message");
    EXPECT_OK(syrah_user_event_fail(user, "the peer went away at step 7"));
    EXPECT_ERR(syrah_user_event_fail(user, "again"), SYRAH_ERROR_INVALID_ARGUMENT, "already");
    EXPECT_ERR(syrah_event_wait(ev), SYRAH_ERROR_EXECUTION_FAILED, "the peer went away at step 7");
    EXPECT_ERR(syrah_event_wait(copy), SYRAH_ERROR_EXECUTION_FAILED, "the peer went away at step 7");
    EXPECT_OK(syrah_event_get_status(user, &st));
    EXPECT_EQ(st, SYRAH_EVENT_FAILED);
    syrah_event_release(copy);
    syrah_event_release(ev);
    syrah_event_release(user);
    (void)syrah_queue_wait(q);
    EXPECT_OK(syrah_buffer_release(other));
  }

  /* A failing task: one asynchronous error, and its dependents fail too. */
  tasks[0].run = task_fail;
  a = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  EXPECT_OK(syrah_queue_submit_host_tasks(q, &a, 1, tasks, 1, NULL, 0, &ev));
  EXPECT_OK(t_launch_rw(q, addv, b, N, 1, &k));
  EXPECT_ERR(syrah_queue_wait(q), SYRAH_ERROR_EXECUTION_FAILED,
             "host task 0 of the group reported failure: SYRAH_ERROR_INVALID_ARGUMENT (2): accessor index 99");
  EXPECT_TRUE(strstr(syrah_last_error_message(), "1 more") != NULL);
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_EQ(st, SYRAH_EVENT_FAILED);
  syrah_event_release(ev);
  syrah_event_release(k);

  /* Native handles. */
  tasks[0].run = task_native;
  s.flag = 0;
  a = t_whole(b, SYRAH_ACCESS_READ);
  EXPECT_OK(syrah_queue_submit_host_tasks(q, &a, 1, tasks, 1, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  EXPECT_EQ(s.flag, 2);
  syrah_event_release(ev);

  /* An in-order queue keeps host tasks in submission order. */
  {
    syrah_queue *io = NULL;
    REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &io));
    s.nlog = 0;
    tasks[0].run = task_log2;
    EXPECT_OK(t_launch_rw(io, setv, b, N, 3, NULL));
    EXPECT_OK(syrah_queue_submit_host_tasks(io, NULL, 0, tasks, 1, NULL, 0, NULL));
    EXPECT_OK(t_launch_rw(io, addv, b, N, 4, NULL));
    EXPECT_OK(syrah_queue_wait(io));
    EXPECT_EQ(s.nlog, 1);
    syrah_queue_release(io);
  }

  /* Bad groups. */
  tasks[0].run = NULL;
  EXPECT_ERR(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 1, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT,
             "tasks[0].run");
  EXPECT_ERR(syrah_queue_submit_host_tasks(q, NULL, 0, tasks, 0, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "at least one task");
  EXPECT_ERR(syrah_host_task_get_pointer(NULL, 0, (void **)&p), SYRAH_ERROR_NULL_ARGUMENT, "context");

  EXPECT_OK(syrah_buffer_release(b));
  syrah_kernel_release(setv);
  syrah_kernel_release(addv);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

static int releases = 0;
static void on_release(void *ptr, void *user) {
  (void)ptr;
  ++*(int *)user;
}

static void test_copies(const syrah_device *d) {
  enum { R = 32, C = 48 };
  syrah_queue *q = NULL;
  syrah_buffer *b = NULL, *b2 = NULL;
  syrah_buffer_desc bd;
  syrah_accessor a, a2;
  syrah_event *ev = NULL;
  syrah_host_accessor *ha = NULL;
  int *grid = (int *)malloc(R * C * sizeof(int)), *out = (int *)malloc(R * C * sizeof(int)), *p = NULL;
  int i, y, x, ok, seven = 7;
  releases = 0;
  REQUIRE_OK(syrah_queue_create(NULL, d, 0, NULL, NULL, &q));
  for (i = 0; i < R * C; ++i) grid[i] = i;
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 2;
  bd.range[0] = R;
  bd.range[1] = C;
  bd.page_size[0] = 8;
  bd.page_size[1] = 16;
  bd.host_pointer = grid;
  bd.ownership = SYRAH_HOST_COPY_IN;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  bd.host_pointer = NULL;
  bd.ownership = SYRAH_HOST_NONE;
  REQUIRE_OK(syrah_buffer_create(&bd, &b2));

  /* A 2D window (rows 4..13, cols 10..29) out, packed. */
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = SYRAH_ACCESS_READ;
  a.offset[0] = 4;
  a.offset[1] = 10;
  a.range[0] = 10;
  a.range[1] = 20;
  memset(out, 0, R * C * sizeof(int));
  EXPECT_OK(syrah_queue_copy_from_accessor(q, &a, out, on_release, &releases, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  for (y = 0, ok = 1; y < 10; ++y)
    for (x = 0; x < 20; ++x) ok &= out[y * 20 + x] == (4 + y) * C + 10 + x;
  EXPECT_TRUE(ok);
  EXPECT_EQ(out[200], 0); /* nothing past the packed window */
  /* ... and in again, negated, into the same window. */
  for (i = 0; i < 200; ++i) out[i] = -out[i];
  a.mode = SYRAH_ACCESS_WRITE;
  EXPECT_OK(syrah_queue_copy_to_accessor(q, out, &a, on_release, &releases, NULL, 0, NULL));
  /* Window to window, into another buffer. */
  a.mode = SYRAH_ACCESS_READ;
  memset(&a2, 0, sizeof a2);
  a2.buffer = b2;
  a2.mode = SYRAH_ACCESS_DISCARD_WRITE;
  a2.offset[0] = 20;
  a2.offset[1] = 0;
  a2.range[0] = 10;
  a2.range[1] = 20;
  EXPECT_OK(syrah_queue_copy_accessor(q, &a, &a2, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < R * C; ++i) {
    int row = i / C, col = i % C;
    ok &= p[i] == ((row >= 4 && row < 14 && col >= 10 && col < 30) ? -i : i);
  }
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_host_access(b2, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (y = 0, ok = 1; y < 10; ++y)
    for (x = 0; x < 20; ++x) ok &= p[(20 + y) * C + x] == -((4 + y) * C + 10 + x);
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));

  /* Fill a window with a 4-byte pattern. */
  a.mode = SYRAH_ACCESS_DISCARD_WRITE;
  EXPECT_OK(syrah_queue_fill_accessor(q, &a, &seven, sizeof seven, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < R * C; ++i) {
    int row = i / C, col = i % C;
    ok &= p[i] == ((row >= 4 && row < 14 && col >= 10 && col < 30) ? 7 : i);
  }
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(releases, 2);

  /* The access-mode rules of explicit copies, and sizes. */
  a.mode = SYRAH_ACCESS_WRITE;
  EXPECT_ERR(syrah_queue_copy_from_accessor(q, &a, out, NULL, NULL, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "mode is 'write'");
  a.mode = SYRAH_ACCESS_DISCARD_WRITE;
  EXPECT_ERR(syrah_queue_copy_from_accessor(q, &a, out, NULL, NULL, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "mode is 'discard_write'");
  a.mode = SYRAH_ACCESS_READ;
  EXPECT_ERR(syrah_queue_copy_to_accessor(q, out, &a, NULL, NULL, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "mode is 'read'");
  EXPECT_ERR(syrah_queue_fill_accessor(q, &a, &seven, 4, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "mode is 'read'");
  a.mode = SYRAH_ACCESS_WRITE;
  EXPECT_ERR(syrah_queue_fill_accessor(q, &a, &seven, 3, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "pattern size 3");
  EXPECT_ERR(syrah_queue_fill_accessor(q, &a, out, 8, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "does not divide the element size 4");
  a.mode = SYRAH_ACCESS_READ_WRITE;
  a2.range[1] = 19;
  EXPECT_ERR(syrah_queue_copy_accessor(q, &a, &a2, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "do not match");
  a2 = a;
  a2.offset[0] = 5;
  EXPECT_ERR(syrah_queue_copy_accessor(q, &a, &a2, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT, "overlap");
  EXPECT_ERR(syrah_queue_copy_from_accessor(q, &a, NULL, NULL, NULL, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT,
             "destination");
  EXPECT_ERR(syrah_queue_copy_to_accessor(q, out, NULL, NULL, NULL, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT,
             "accessor");
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_buffer_release(b2));
  syrah_queue_release(q);
  free(grid);
  free(out);
}

/* Host tasks alone on an in-order queue run one after another, in order. */
typedef struct {
  pthread_mutex_t lock;
  int running, overlaps, next, out_of_order;
} serial_state;

typedef struct {
  serial_state *s;
  int index;
} serial_task;

static syrah_status task_serial(const syrah_host_task_context *ctx, void *user) {
  serial_task *t = (serial_task *)user;
  serial_state *s = t->s;
  (void)ctx;
  pthread_mutex_lock(&s->lock);
  if (s->running) ++s->overlaps;
  s->running = 1;
  if (s->next != t->index) ++s->out_of_order;
  s->next = t->index + 1;
  pthread_mutex_unlock(&s->lock);
  t_sleep_ms(1);
  pthread_mutex_lock(&s->lock);
  s->running = 0;
  pthread_mutex_unlock(&s->lock);
  return SYRAH_SUCCESS;
}

static void test_in_order_host_tasks(const syrah_device *d) {
  enum { TASKS = 40 };
  syrah_queue *q = NULL;
  serial_state s;
  serial_task items[TASKS];
  syrah_host_task task;
  int i;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.lock, NULL);
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  memset(&task, 0, sizeof task);
  task.run = task_serial;
  for (i = 0; i < TASKS; ++i) {
    items[i].s = &s;
    items[i].index = i;
    task.user_data = &items[i];
    EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, &task, 1, NULL, 0, NULL));
  }
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(s.next, TASKS);
  EXPECT_EQ(s.overlaps, 0);
  EXPECT_EQ(s.out_of_order, 0);
  syrah_queue_release(q);
  pthread_mutex_destroy(&s.lock);
}

/* A host task that reads buffer `a` through a host accessor of its own. */
typedef struct {
  syrah_buffer *a;
  syrah_status got;
  int first;
} nested;

static syrah_status task_nested_access(const syrah_host_task_context *ctx, void *user) {
  nested *n = (nested *)user;
  syrah_host_accessor *ha = NULL;
  void *p = NULL;
  (void)ctx;
  t_sleep_ms(300);
  n->got = syrah_buffer_host_access(n->a, SYRAH_ACCESS_READ, NULL, NULL, &ha, &p);
  if (n->got == SYRAH_SUCCESS) {
    n->first = *(int *)p;
    syrah_host_accessor_release(ha);
  }
  return SYRAH_SUCCESS;
}

typedef struct {
  syrah_buffer *b;
  syrah_status got;
} waiter;

static void *host_access_b(void *user) {
  waiter *w = (waiter *)user;
  syrah_host_accessor *ha = NULL;
  void *p = NULL;
  w->got = syrah_buffer_host_access(w->b, SYRAH_ACCESS_READ, NULL, NULL, &ha, &p);
  if (w->got == SYRAH_SUCCESS) syrah_host_accessor_release(ha);
  return NULL;
}

/* No thread waits for one buffer's turn while holding another's: a host
 * task writing B that takes a host accessor on A, a thread whose host
 * accessor on B waits for that task, and a kernel over A and B submitted
 * meanwhile all finish (with turns held while waiting, the submission
 * would hold A's turn waiting for B's, and the task would wait for A's). */
static void test_nested_turns(const syrah_device *d) {
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *addv = NULL;
  static int ha_host[N], hb_host[N];
  syrah_buffer_desc da = t_desc1(N, ha_host, SYRAH_HOST_WRITE_BACK), db = t_desc1(N, hb_host, SYRAH_HOST_WRITE_BACK);
  syrah_buffer *a = NULL, *b = NULL;
  syrah_accessor acc[2];
  syrah_host_task t;
  nested n;
  waiter w;
  pthread_t th;
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  int i, v = 5;
  alarm(60); /* a deadlock ends the test (SIGALRM's default action) */
  for (i = 0; i < N; ++i) ha_host[i] = hb_host[i] = 1;
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "addv", &addv));
  REQUIRE_OK(syrah_buffer_create(&da, &a));
  REQUIRE_OK(syrah_buffer_create(&db, &b));
  n.a = a;
  n.got = SYRAH_ERROR_INTERNAL;
  n.first = 0;
  acc[0] = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  t.run = task_nested_access;
  t.user_data = &n;
  t.release = NULL;
  REQUIRE_OK(syrah_queue_submit_host_tasks(q, acc, 1, &t, 1, NULL, 0, NULL));
  w.b = b;
  w.got = SYRAH_ERROR_INTERNAL;
  if (pthread_create(&th, NULL, host_access_b, &w) != 0) {
    T_FAIL("pthread_create");
    return;
  }
  t_sleep_ms(100);
  acc[0] = t_whole(a, SYRAH_ACCESS_READ_WRITE);
  acc[1] = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&v, sizeof v);
  EXPECT_OK(syrah_queue_submit_kernel(q, addv, &r, acc, 2, args, 2, NULL, 0, NULL));
  pthread_join(th, NULL);
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(w.got, SYRAH_SUCCESS);
  EXPECT_EQ(n.got, SYRAH_SUCCESS);
  EXPECT_EQ(n.first, 1);
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(ha_host[0], 6);
  EXPECT_EQ(hb_host[N - 1], 1);
  EXPECT_OK(syrah_kernel_release(addv));
  EXPECT_OK(syrah_program_release(prog));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_OK(syrah_context_release(ctx));
  alarm(0);
}

static syrah_status task_fill_k(const syrah_host_task_context *ctx, void *user) {
  int *p = NULL, i, k = *(int *)user;
  syrah_status st = syrah_host_task_get_pointer(ctx, 0, (void **)&p);
  if (st != SYRAH_SUCCESS) return st;
  for (i = 0; i < N; ++i) p[i] = k + i;
  return SYRAH_SUCCESS;
}

/* A buffer released right after the queue wait that saw its host task
 * finish writes its data back before the release returns, every time:
 * the finished task does not keep the buffer alive on its runtime thread. */
static void test_release_after_task(const syrah_device *d) {
  syrah_queue *q = NULL;
  static int host[N];
  int round, wrong = 0, i;
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  for (round = 0; round < 200; ++round) {
    syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
    syrah_buffer *b = NULL;
    syrah_accessor a;
    syrah_host_task t;
    int k = round * 10;
    memset(host, 0, sizeof host);
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    a = t_whole(b, SYRAH_ACCESS_DISCARD_WRITE);
    t.run = task_fill_k;
    t.user_data = &k;
    t.release = NULL;
    EXPECT_OK(syrah_queue_submit_host_tasks(q, &a, 1, &t, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_buffer_release(b));
    for (i = 0; i < N; ++i) wrong += host[i] != k + i;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_OK(syrah_queue_release(q));
}

int main(void) {
  t_for_each_device(test_host_tasks);
  t_for_each_device(test_in_order_host_tasks);
  t_for_each_device(test_copies);
  t_for_each_device(test_nested_turns);
  t_for_each_device(test_release_after_task);
  return t_finish("test_host_task");
}
