/* Buffers: the dependencies inferred from accessors, with and without
 * events, around host tasks, queue waits and gated commands. */
#define _POSIX_C_SOURCE 200112L
#include "buffer_env.h"

static void test_dependencies(const syrah_device *d) {
  env e;
  int *p = NULL, i, ok, one = 1;
  syrah_buffer *a = NULL, *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *ha = NULL, *hb = NULL;
  syrah_event *k = NULL, *k2 = NULL;
  syrah_event_status st = 0;
  syrah_accessor accs[2];
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  if (!env_open(&e, d, 0)) { /* out of order: only dependencies order */
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* a = 1; a *= 2 (x3); b = a + 1: ordered by conflicts alone. */
  EXPECT_OK(run1(&e, e.setv, t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), N, &one, NULL));
  for (i = 0; i < 3; ++i) EXPECT_OK(run1(&e, e.twice, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  accs[0] = t_window(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &hb, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 9;
  EXPECT_TRUE(ok);
  /* Two read host accessors of one buffer coexist. */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_OK(syrah_host_accessor_release(ha));
  /* A conflicting host accessor while one is held is refused, not a deadlock. */
  EXPECT_ERR(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, NULL, NULL, &ha, (void **)&p),
             SYRAH_ERROR_INVALID_ARGUMENT, "still held");
  /* A kernel writing b waits for the held read accessor; one reading a does not. */
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, &k));
  EXPECT_OK(run1(&e, e.twice, t_window(a, SYRAH_ACCESS_READ, 0, 0), N, NULL, &k2));
  EXPECT_OK(syrah_event_wait(k2));
  t_sleep_ms(50);
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_host_accessor_release(hb));
  EXPECT_OK(syrah_event_wait(k));
  EXPECT_TRUE(all_equal(b, N, 18));
  syrah_event_release(k);
  syrah_event_release(k2);

  /* update_host brings data home; a later host read moves nothing more. */
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  {
    syrah_buffer_stats before = stats(b);
    EXPECT_OK(syrah_buffer_update_host(b, &k));
    EXPECT_TRUE(k != NULL);
    if (k) {
      EXPECT_OK(syrah_event_wait(k));
      syrah_event_release(k);
    }
    EXPECT_EQ(stats(b).device_to_host_bytes, before.device_to_host_bytes + N * sizeof(int));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    EXPECT_EQ(stats(b).device_to_host_bytes, before.device_to_host_bytes + N * sizeof(int));
    for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 36;
    EXPECT_TRUE(ok);
    EXPECT_OK(syrah_host_accessor_release(ha));
    k = (syrah_event *)&ok;
    EXPECT_OK(syrah_buffer_update_host(b, &k));
    EXPECT_TRUE(k == NULL);
  }
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  env_close(&e);
}

static syrah_status task_read_first(const syrah_host_task_context *ctx, void *user) {
  int *p = NULL;
  syrah_status st = syrah_host_task_get_pointer(ctx, 0, (void **)&p);
  if (st != SYRAH_SUCCESS) return st;
  *(int *)user = p[0];
  return SYRAH_SUCCESS;
}

static syrah_status task_refuse(const syrah_host_task_context *ctx, void *user) {
  (void)ctx;
  (void)user;
  return SYRAH_ERROR_INVALID_ARGUMENT;
}

/* Kernels with accessors and no event asked for, on an in-order queue (which
 * may enqueue them without OpenCL events): other queues, host accessors,
 * host tasks, the write-back at release and failures before them all see
 * them, across more of them than one marker run. */
static void test_without_events(const syrah_device *d) {
  enum { M = 4096 };
  static int home[M];
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *b = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE), cd = t_desc1(M, home, SYRAH_HOST_WRITE_BACK);
  syrah_host_accessor *ha = NULL;
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_host_task task;
  syrah_event *ev = NULL;
  int *p = NULL, i, ok, zero = 0, seen = -1;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.setv, t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  for (i = 0; i < 200; ++i) EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  /* Another queue reads a after them: b = a + 1 there. */
  accs[0] = t_window(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(b, M, 201));
  EXPECT_EQ(stats(a).device_to_host_bytes + stats(a).host_to_device_bytes, 0);
  EXPECT_EQ(stats(b).device_to_host_bytes, M * sizeof(int));
  /* A host accessor after more of them: one copy home. */
  for (i = 0; i < 100; ++i) EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_TRUE(all_equal(a, M, 300));
  EXPECT_EQ(stats(a).device_to_host_bytes, M * sizeof(int));
  EXPECT_EQ(stats(a).device_to_host_copies, 1);
  /* A host task on another queue after more of them. */
  for (i = 0; i < 10; ++i) EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  memset(&task, 0, sizeof task);
  task.run = task_read_first;
  task.user_data = &seen;
  accs[0] = t_window(a, SYRAH_ACCESS_READ, 0, 0);
  EXPECT_OK(syrah_queue_submit_host_tasks(q2, accs, 1, &task, 1, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  EXPECT_EQ(seen, 310);
  EXPECT_EQ(stats(a).device_to_host_bytes, 2 * M * sizeof(int));
  /* Releasing a write-back buffer right after them writes their result. */
  memset(home, 0, sizeof home);
  REQUIRE_OK(syrah_buffer_create(&cd, &c));
  for (i = 0; i < 100; ++i) EXPECT_OK(run1(&e, e.inc, t_window(c, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(c));
  for (i = 0, ok = 1; i < M; ++i) ok &= home[i] == 100;
  EXPECT_TRUE(ok);
  /* A command gated by a held host accessor, after some of them, does not
   * hold back another queue's command that waits only for them. */
  {
    syrah_buffer *f = NULL;
    syrah_event *cev = NULL;
    REQUIRE_OK(syrah_buffer_create(&bd, &f));
    for (i = 0; i < 5; ++i) EXPECT_OK(run1(&e, e.inc, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    EXPECT_OK(syrah_buffer_host_access(a, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    accs[0] = t_window(b, SYRAH_ACCESS_READ, 0, 0);
    accs[1] = t_window(f, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, &cev));
    EXPECT_EQ(status_within_5s(cev), SYRAH_EVENT_COMPLETE);
    EXPECT_OK(syrah_host_accessor_release(ha));
    syrah_event_release(cev);
    EXPECT_TRUE(all_equal(f, M, 207));
    EXPECT_TRUE(all_equal(a, M, 311));
    EXPECT_OK(syrah_buffer_release(f));
  }
  /* A failure before them: the queue's wait reports it once. */
  task.run = task_refuse;
  accs[0] = t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_host_tasks(e.q, accs, 1, &task, 1, NULL, 0, NULL));
  t_sleep_ms(50);
  EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  EXPECT_ERR(syrah_queue_wait(e.q), SYRAH_ERROR_EXECUTION_FAILED, "reported failure");
  /* The kernel after the task fails with it. */
  EXPECT_TRUE(strstr(syrah_last_error_message(), "1 more") != NULL);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  syrah_queue_release(q2);
  env_close(&e);
}

/* Copies between accessors asked for no event, mixed with launches that
 * also go without: what reads after them, on this queue, another queue or
 * the host, sees their bytes, and the data moves home exactly once. */
static void copies_without_events(const syrah_device *d, syrah_queue_flags flags) {
  enum { M = 4096 };
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *b = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_accessor accs[2], wa, wb;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  int i, zero = 0;
  if (!env_open(&e, d, flags) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.setv, t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  /* a += 1, b = a, b += 1, a = b: each round adds 2. */
  for (i = 0; i < 50; ++i) {
    EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    wa = t_window(a, SYRAH_ACCESS_READ, 0, 0);
    wb = t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_copy_accessor(e.q, &wa, &wb, NULL, 0, NULL));
    EXPECT_OK(run1(&e, e.inc, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    wb.mode = SYRAH_ACCESS_READ;
    wa.mode = SYRAH_ACCESS_DISCARD_WRITE;
    EXPECT_OK(syrah_queue_copy_accessor(e.q, &wb, &wa, NULL, 0, NULL));
  }
  /* Another queue reads b after them: c = b + 1 there. */
  accs[0] = t_window(b, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = t_window(c, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(args);
  EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(c, M, 101));
  /* The host reads a right after a last copy into it. */
  wb = t_window(b, SYRAH_ACCESS_READ, 0, 0);
  wa = t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_copy_accessor(e.q, &wb, &wa, NULL, 0, NULL));
  EXPECT_TRUE(all_equal(a, M, 100));
  EXPECT_EQ(stats(a).device_to_host_bytes, M * sizeof(int));
  EXPECT_EQ(stats(a).device_to_host_copies, 1);
  EXPECT_EQ(stats(a).host_to_device_bytes, 0);
  EXPECT_EQ(stats(b).device_to_host_bytes + stats(b).host_to_device_bytes, 0);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_buffer_release(c));
  syrah_queue_release(q2);
  env_close(&e);
}

static void test_copies_without_events(const syrah_device *d) {
  copies_without_events(d, SYRAH_QUEUE_IN_ORDER);
  copies_without_events(d, 0);
}

/* A queue wait may finish a lane of launches without events as a whole:
 * what ran there before the wait is then finished for every later reader,
 * on another queue or the host, and what runs there after it is still
 * waited for. */
static void quiet_work_around_a_queue_wait(const syrah_device *d, syrah_queue_flags flags) {
  enum { M = 4096 };
  env e;
  syrah_queue *q2 = NULL;
  syrah_buffer *a = NULL, *c = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_event *ev = NULL;
  int i, zero = 0, round;
  if (!env_open(&e, d, flags) || syrah_queue_create(e.ctx, d, 0, NULL, NULL, &q2) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(run1(&e, e.setv, t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  two_accessor_args(args);
  /* Round 0: ten launches, a queue wait, then c = a + 1 on the other
   * queue. Round 1: five more launches and c = a + 1 with no wait between.
   * Round 2: a queue wait with nothing new to wait for, then the same. */
  for (round = 0; round < 3; ++round) {
    int launches = round == 0 ? 10 : round == 1 ? 5 : 0, want;
    for (i = 0; i < launches; ++i)
      EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
    if (round != 1) EXPECT_OK(syrah_queue_wait(e.q));
    want = round == 0 ? 11 : 16;
    accs[0] = t_window(a, SYRAH_ACCESS_READ, 0, 0);
    accs[1] = t_window(c, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
    EXPECT_OK(syrah_queue_submit_kernel(q2, e.copyk, &r, accs, 2, args, 2, NULL, 0, &ev));
    EXPECT_EQ(status_within_5s(ev), SYRAH_EVENT_COMPLETE);
    syrah_event_release(ev);
    ev = NULL;
    EXPECT_TRUE(all_equal(c, M, want));
    EXPECT_TRUE(all_equal(a, M, want - 1));
  }
  /* a comes to the host after rounds 0 and 1 (round 2 finds it current),
   * c after every round; nothing goes the other way. */
  EXPECT_EQ(stats(a).device_to_host_copies, 2);
  EXPECT_EQ(stats(a).device_to_host_bytes, 2 * M * sizeof(int));
  EXPECT_EQ(stats(c).device_to_host_copies, 3);
  EXPECT_EQ(stats(a).host_to_device_bytes + stats(c).host_to_device_bytes, 0);
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_queue_wait(q2));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(c));
  syrah_queue_release(q2);
  env_close(&e);
}

static void test_quiet_work_around_a_queue_wait(const syrah_device *d) {
  quiet_work_around_a_queue_wait(d, SYRAH_QUEUE_IN_ORDER);
  quiet_work_around_a_queue_wait(d, 0);
}

/* On an out-of-order queue: a launch that a held host accessor gates does
 * not hold back a later one of the same queue that follows only launches
 * without events, on whatever lane each went, even when that later one
 * goes without an event itself (it must then not join the gated lane). */
static void test_gate_beside_quiet_launches(const syrah_device *d) {
  enum { M = 4096 };
  env e;
  syrah_buffer *a = NULL, *b = NULL, *f = NULL, *g = NULL;
  syrah_buffer_desc bd = t_desc1(M, NULL, SYRAH_HOST_NONE);
  syrah_host_accessor *hb = NULL;
  syrah_accessor accs[2];
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(M);
  syrah_event *cev = NULL;
  int *pb = NULL, i, ok, zero = 0;
  if (!env_open(&e, d, 0)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  REQUIRE_OK(syrah_buffer_create(&bd, &a));
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_buffer_create(&bd, &f));
  REQUIRE_OK(syrah_buffer_create(&bd, &g));
  EXPECT_OK(run1(&e, e.setv, t_window(a, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0), M, &zero, NULL));
  for (i = 0; i < 5; ++i) EXPECT_OK(run1(&e, e.inc, t_window(a, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  /* The host reads b; b = a + 1, which follows the launches on a, waits
   * for the release (and may go on their lane). */
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &hb, (void **)&pb));
  two_accessor_args(args);
  accs[0] = t_window(a, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  /* f = a + 1 needs only the launches on a, and goes without an event: it
   * must not join b's lane, behind the gate. g = f + 1, with an event,
   * shows that f finished. */
  accs[1] = t_window(f, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, NULL));
  accs[0] = t_window(f, SYRAH_ACCESS_READ, 0, 0);
  accs[1] = t_window(g, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  EXPECT_OK(syrah_queue_submit_kernel(e.q, e.copyk, &r, accs, 2, args, 2, NULL, 0, &cev));
  EXPECT_EQ(status_within_5s(cev), SYRAH_EVENT_COMPLETE);
  syrah_event_release(cev);
  for (i = 0, ok = 1; i < M; ++i) ok &= pb[i] == 0;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(hb));
  EXPECT_TRUE(all_equal(f, M, 6));
  EXPECT_TRUE(all_equal(g, M, 7));
  EXPECT_TRUE(all_equal(b, M, 6));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_OK(syrah_buffer_release(a));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_buffer_release(f));
  EXPECT_OK(syrah_buffer_release(g));
  env_close(&e);
}

int main(void) {
  t_for_each_device(test_dependencies);
  t_for_each_device(test_without_events);
  t_for_each_device(test_copies_without_events);
  t_for_each_device(test_gate_beside_quiet_launches);
  t_for_each_device(test_quiet_work_around_a_queue_wait);
  return t_finish("test_buffer_order");
}
