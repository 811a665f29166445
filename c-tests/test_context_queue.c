/* Contexts, queues, events, user events, barriers and asynchronous errors. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <time.h>

static const char *kSource =
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n"
    "__kernel void set(__global int *p, int v) { p[get_global_id(0)] = v; }\n";


static int handler_calls = 0;
static syrah_status handler_status = SYRAH_SUCCESS;
static const syrah_queue *handler_queue = NULL;
static char handler_message[512];

static void on_error(const syrah_queue *q, syrah_status s, const char *msg, void *user) {
  ++handler_calls;
  handler_status = s;
  handler_queue = q;
  snprintf(handler_message, sizeof handler_message, "%s", msg);
  *(int *)user += 1;
}

static void test_contexts(void) {
  const syrah_device *all[64], *listed[8];
  size_t n = 0, count = 0, i;
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  REQUIRE_OK(syrah_get_devices(all, 64, &n));
  EXPECT_ERR(syrah_context_create(NULL, 1, &ctx), SYRAH_ERROR_NULL_ARGUMENT, "devices");
  EXPECT_ERR(syrah_context_create(all, 0, &ctx), SYRAH_ERROR_INVALID_ARGUMENT, "at least one");
  EXPECT_ERR(syrah_context_create(all, 1, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_context");
  {
    const syrah_device *twice[2];
    twice[0] = all[0];
    twice[1] = all[0];
    EXPECT_ERR(syrah_context_create(twice, 2, &ctx), SYRAH_ERROR_INVALID_ARGUMENT, "twice");
  }
  /* Devices of different platforms cannot share a context. */
  for (i = 1; i < n; ++i) {
    uint64_t p0 = 0, pi = 0;
    syrah_device_get_info_u64(all[0], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &p0);
    syrah_device_get_info_u64(all[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
    if (p0 != pi) {
      const syrah_device *mixed[2];
      mixed[0] = all[0];
      mixed[1] = all[i];
      EXPECT_ERR(syrah_context_create(mixed, 2, &ctx), SYRAH_ERROR_INVALID_ARGUMENT,
                 "share a platform");
      /* A queue for a device outside the context. */
      REQUIRE_OK(syrah_context_create(all, 1, &ctx));
      EXPECT_ERR(syrah_queue_create(ctx, all[i], 0, NULL, NULL, &q), SYRAH_ERROR_WRONG_CONTEXT,
                 "not part of context");
      EXPECT_OK(syrah_context_release(ctx));
      break;
    }
  }
  if (i == n) {
    t_skip("contexts across platforms", "only one platform found");
  }
  REQUIRE_OK(syrah_context_create(all, 1, &ctx));
  EXPECT_OK(syrah_context_get_devices(ctx, listed, 8, &count));
  EXPECT_EQ(count, 1);
  EXPECT_TRUE(listed[0] == all[0]);
  EXPECT_OK(syrah_context_get_devices(ctx, NULL, 0, &count));
  EXPECT_EQ(count, 1);
  EXPECT_ERR(syrah_context_get_devices(ctx, NULL, 3, &count), SYRAH_ERROR_NULL_ARGUMENT, "capacity is 3");
  EXPECT_ERR(syrah_context_get_devices(ctx, listed, 8, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_count");
  EXPECT_ERR(syrah_context_get_devices(NULL, listed, 8, &count), SYRAH_ERROR_NULL_ARGUMENT, "context");
  EXPECT_OK(syrah_context_retain(ctx));
  EXPECT_OK(syrah_context_release(ctx));
  EXPECT_ERR(syrah_context_retain(NULL), SYRAH_ERROR_NULL_ARGUMENT, "context");
  EXPECT_ERR(syrah_context_release(NULL), SYRAH_ERROR_NULL_ARGUMENT, "context");

  EXPECT_ERR(syrah_queue_create(ctx, all[0], 0x80, NULL, NULL, &q), SYRAH_ERROR_INVALID_ARGUMENT, "0x80");
  EXPECT_ERR(syrah_queue_create(ctx, NULL, 0, NULL, NULL, &q), SYRAH_ERROR_NULL_ARGUMENT, "device");
  EXPECT_ERR(syrah_queue_create(ctx, all[0], 0, NULL, NULL, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_queue");
  REQUIRE_OK(syrah_queue_create(ctx, all[0], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  {
    syrah_context *back = NULL;
    const syrah_device *dev = NULL;
    EXPECT_OK(syrah_queue_get_context(q, &back));
    EXPECT_TRUE(back == ctx);
    EXPECT_OK(syrah_context_release(back));
    EXPECT_OK(syrah_queue_get_device(q, &dev));
    EXPECT_TRUE(dev == all[0]);
    EXPECT_ERR(syrah_queue_get_context(q, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_context");
    EXPECT_ERR(syrah_queue_get_device(NULL, &dev), SYRAH_ERROR_NULL_ARGUMENT, "queue");
  }
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_ERR(syrah_queue_wait(NULL), SYRAH_ERROR_NULL_ARGUMENT, "queue");
  EXPECT_OK(syrah_queue_retain(q));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_OK(syrah_queue_release(q));
  /* The queue kept the context alive; this drops the last reference. */
  EXPECT_OK(syrah_context_release(ctx));
  /* A queue with no context makes its own. */
  REQUIRE_OK(syrah_queue_create(NULL, all[0], 0, NULL, NULL, &q));
  EXPECT_OK(syrah_queue_release(q));
}

typedef struct {
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *inc, *set;
  int *mem;
} fixture;

static bool setup(const syrah_device *d, syrah_queue *q, fixture *f, size_t n) {
  memset(f, 0, sizeof *f);
  if (syrah_queue_get_context(q, &f->ctx) != SYRAH_SUCCESS) return false;
  if (syrah_program_create_from_source(f->ctx, kSource, NULL, &f->prog) != SYRAH_SUCCESS) return false;
  if (syrah_kernel_create(f->prog, "inc", &f->inc) != SYRAH_SUCCESS) return false;
  if (syrah_kernel_create(f->prog, "set", &f->set) != SYRAH_SUCCESS) return false;
  return syrah_malloc_device(f->ctx, d, n * sizeof(int), (void **)&f->mem) == SYRAH_SUCCESS;
}

static void teardown(fixture *f) {
  if (f->mem) syrah_free(f->ctx, f->mem);
  if (f->inc) syrah_kernel_release(f->inc);
  if (f->set) syrah_kernel_release(f->set);
  if (f->prog) syrah_program_release(f->prog);
  if (f->ctx) syrah_context_release(f->ctx);
}

/* A queue on `d` with the fixture, or false after saying why not. */
static bool open_fixture(const syrah_device *d, const char *what, syrah_queue **q, fixture *f, size_t n) {
  memset(f, 0, sizeof *f);
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip(what, "the device has no USM, which these tests use for data");
    return false;
  }
  if (syrah_queue_create(NULL, d, 0, NULL, NULL, q) != SYRAH_SUCCESS) {
    T_FAIL("queue: %s", syrah_last_error_message());
    return false;
  }
  if (!setup(d, *q, f, n)) {
    T_FAIL("fixture: %s", syrah_last_error_message());
    teardown(f);
    syrah_queue_release(*q);
    return false;
  }
  return true;
}

static void test_events(const syrah_device *d) {
  enum { N = 256 };
  syrah_queue *q = NULL, *pq = NULL;
  fixture f;
  int host[N], i, seven = 7, ok;
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[2];
  syrah_event *user = NULL, *k = NULL, *c = NULL, *chain = NULL, *list[3];
  syrah_event_status st = 99;
  uint64_t profiling = 0;
  if (!open_fixture(d, "events", &q, &f, N)) return;
  args[0] = syrah_arg_usm(f.mem);
  args[1] = syrah_arg_value(&seven, sizeof seven);

  /* A user event holds back the command that depends on it. */
  REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
  EXPECT_OK(syrah_event_get_status(user, &st));
  EXPECT_EQ(st, SYRAH_EVENT_SUBMITTED);
  EXPECT_OK(syrah_queue_launch(q, f.set, &r, args, 2, (const syrah_event *const *)&user, 1, &k));
  EXPECT_OK(syrah_queue_memcpy(q, host, f.mem, sizeof host, (const syrah_event *const *)&k, 1, &c));
  t_sleep_ms(100);
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE && st != SYRAH_EVENT_FAILED);
  EXPECT_OK(syrah_event_get_status(c, &st));
  EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_user_event_complete(user, false));
  EXPECT_ERR(syrah_user_event_complete(user, false), SYRAH_ERROR_INVALID_ARGUMENT, "already");
  EXPECT_ERR(syrah_user_event_complete(k, false), SYRAH_ERROR_INVALID_ARGUMENT, "only user events");
  EXPECT_OK(syrah_event_wait(c));
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_EQ(st, SYRAH_EVENT_COMPLETE);
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 7;
  EXPECT_TRUE(ok);
  EXPECT_ERR(syrah_event_get_profiling(k, SYRAH_PROFILING_START, &profiling),
             SYRAH_ERROR_PROFILING_UNAVAILABLE, "SYRAH_QUEUE_PROFILING");
  syrah_event_release(user);
  syrah_event_release(k);
  syrah_event_release(c);

  /* An event of another context holds back a command without holding back
   * the thread that submits it; its failure reaches the command. */
  {
    syrah_context *other = NULL;
    int failed;
    REQUIRE_OK(syrah_context_create(&d, 1, &other));
    for (failed = 0; failed < 2; ++failed) {
      int zero = 0;
      syrah_kernel_arg zargs[2];
      zargs[0] = args[0];
      zargs[1] = syrah_arg_value(&zero, sizeof zero);
      EXPECT_OK(syrah_queue_launch(q, f.set, &r, zargs, 2, NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(q));
      REQUIRE_OK(syrah_user_event_create(other, &user));
      EXPECT_OK(syrah_queue_launch(q, f.set, &r, args, 2, (const syrah_event *const *)&user, 1, &k));
      t_sleep_ms(50);
      EXPECT_OK(syrah_event_get_status(k, &st));
      EXPECT_TRUE(st != SYRAH_EVENT_COMPLETE && st != SYRAH_EVENT_FAILED);
      EXPECT_OK(syrah_user_event_complete(user, failed != 0));
      if (failed) {
        EXPECT_ERR(syrah_event_wait(k), SYRAH_ERROR_EXECUTION_FAILED, "depends on a user event that failed");
      } else {
        EXPECT_OK(syrah_event_wait(k));
        EXPECT_OK(syrah_queue_memcpy(q, host, f.mem, sizeof host, NULL, 0, &c));
        EXPECT_OK(syrah_event_wait(c));
        for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 7;
        EXPECT_TRUE(ok);
        syrah_event_release(c);
      }
      EXPECT_OK(syrah_queue_wait(q));
      syrah_event_release(user);
      syrah_event_release(k);
    }
    syrah_context_release(other);
  }

  /* 40 dependent increments on an out-of-order queue, chained by events. */
  EXPECT_OK(syrah_queue_launch(q, f.set, &r, args, 2, NULL, 0, &chain));
  for (i = 0; i < 40; ++i) {
    syrah_event *next = NULL;
    EXPECT_OK(syrah_queue_launch(q, f.inc, &r, args, 1, (const syrah_event *const *)&chain, 1, &next));
    syrah_event_release(chain);
    chain = next;
  }
  EXPECT_OK(syrah_queue_memcpy(q, host, f.mem, sizeof host, (const syrah_event *const *)&chain, 1, &c));
  list[0] = chain;
  list[1] = c;
  EXPECT_OK(syrah_event_wait_list((const syrah_event *const *)list, 2));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 47;
  EXPECT_TRUE(ok);
  EXPECT_ERR(syrah_event_wait_list(NULL, 2), SYRAH_ERROR_NULL_ARGUMENT, "events");
  EXPECT_OK(syrah_event_wait_list(NULL, 0));
  EXPECT_OK(syrah_event_retain(c));
  EXPECT_OK(syrah_event_release(c));
  syrah_event_release(c);
  syrah_event_release(chain);

  /* A barrier orders everything after it. */
  EXPECT_OK(syrah_queue_launch(q, f.inc, &r, args, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_barrier(q, NULL, 0, &k));
  EXPECT_OK(syrah_queue_launch(q, f.inc, &r, args, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_barrier(q, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, f.mem, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 49;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_EQ(st, SYRAH_EVENT_COMPLETE);
  syrah_event_release(k);
  EXPECT_ERR(syrah_event_wait(NULL), SYRAH_ERROR_NULL_ARGUMENT, "event");
  EXPECT_ERR(syrah_event_get_status(NULL, &st), SYRAH_ERROR_NULL_ARGUMENT, "event");
  EXPECT_ERR(syrah_user_event_create(NULL, &user), SYRAH_ERROR_NULL_ARGUMENT, "context");
  EXPECT_ERR(syrah_user_event_create(f.ctx, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_event");

  /* An in-order queue chains without explicit dependencies. */
  {
    syrah_queue *io = NULL;
    REQUIRE_OK(syrah_queue_create(f.ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &io));
    EXPECT_OK(syrah_queue_launch(io, f.set, &r, args, 2, NULL, 0, NULL));
    for (i = 0; i < 25; ++i) EXPECT_OK(syrah_queue_launch(io, f.inc, &r, args, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(io, host, f.mem, sizeof host, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(io));
    for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 32;
    EXPECT_TRUE(ok);
    syrah_queue_release(io);
  }

  /* Profiling timestamps are ordered. */
  {
    uint64_t p = 0;
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_PROFILING, &p));
    if (p) {
      uint64_t queued = 0, submit = 0, start = 0, end = 0;
      REQUIRE_OK(syrah_queue_create(f.ctx, d, SYRAH_QUEUE_PROFILING, NULL, NULL, &pq));
      EXPECT_OK(syrah_queue_launch(pq, f.inc, &r, args, 1, NULL, 0, &k));
      EXPECT_ERR(syrah_event_get_profiling(k, 9, &end), SYRAH_ERROR_INVALID_ARGUMENT, "9");
      EXPECT_OK(syrah_event_wait(k));
      EXPECT_OK(syrah_event_get_profiling(k, SYRAH_PROFILING_QUEUED, &queued));
      EXPECT_OK(syrah_event_get_profiling(k, SYRAH_PROFILING_SUBMIT, &submit));
      EXPECT_OK(syrah_event_get_profiling(k, SYRAH_PROFILING_START, &start));
      EXPECT_OK(syrah_event_get_profiling(k, SYRAH_PROFILING_END, &end));
      EXPECT_TRUE(queued <= submit && submit <= start && start <= end && end > 0);
      EXPECT_ERR(syrah_event_get_profiling(k, SYRAH_PROFILING_END, NULL), SYRAH_ERROR_NULL_ARGUMENT,
                 "out_nanoseconds");
      syrah_event_release(k);
      /* A command still held back has no stamps yet; once a later command
       * behind it has completed (waited for, the earlier one not), its
       * stamps are there and come before the later one's. */
      {
        syrah_event *user = NULL, *first = NULL, *second = NULL;
        uint64_t end1 = 0, start2 = 0;
        REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
        EXPECT_OK(syrah_queue_launch(pq, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, &first));
        EXPECT_OK(syrah_queue_launch(pq, f.inc, &r, args, 1, (const syrah_event *const *)&first, 1, &second));
        EXPECT_ERR(syrah_event_get_profiling(first, SYRAH_PROFILING_END, &end1), SYRAH_ERROR_PROFILING_UNAVAILABLE,
                   "once it has completed");
        EXPECT_OK(syrah_user_event_complete(user, false));
        EXPECT_OK(syrah_event_wait(second));
        EXPECT_OK(syrah_event_get_profiling(first, SYRAH_PROFILING_END, &end1));
        EXPECT_OK(syrah_event_get_profiling(second, SYRAH_PROFILING_START, &start2));
        EXPECT_TRUE(end1 > 0 && end1 <= start2);
        syrah_event_release(second);
        syrah_event_release(first);
        syrah_event_release(user);
      }
      syrah_queue_release(pq);
    } else {
      t_skip("profiling", "the device does not support profiling queues");
    }
  }
  syrah_queue_release(q);
  teardown(&f);
}

/* A command whose dependency fails reports one asynchronous error. */
static void test_async_errors(const syrah_device *d) {
  enum { N = 64 };
  syrah_queue *q = NULL, *h = NULL;
  fixture f;
  syrah_range r = syrah_range_1d(N);
  syrah_kernel_arg args[1];
  syrah_event *user = NULL, *k = NULL;
  syrah_event_status st = 0;
  int user_count = 0;
  if (!open_fixture(d, "asynchronous errors", &q, &f, N)) return;
  args[0] = syrah_arg_usm(f.mem);

  /* No handler: the first wait returns the error, the next does not. */
  REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
  EXPECT_OK(syrah_queue_launch(q, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, &k));
  EXPECT_OK(syrah_user_event_complete(user, true));
  EXPECT_ERR(syrah_queue_wait(q), SYRAH_ERROR_EXECUTION_FAILED, "kernel 'inc' failed");
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_event_get_status(k, &st));
  EXPECT_EQ(st, SYRAH_EVENT_FAILED);
  /* Already reported through the queue: the event wait does not repeat it. */
  EXPECT_OK(syrah_event_wait(k));
  syrah_event_release(k);
  syrah_event_release(user);

  /* Waiting on the event first reports it there, and the queue stays quiet. */
  REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
  EXPECT_OK(syrah_queue_launch(q, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, &k));
  EXPECT_OK(syrah_user_event_complete(user, true));
  EXPECT_ERR(syrah_event_wait(k), SYRAH_ERROR_EXECUTION_FAILED, "kernel 'inc'");
  EXPECT_OK(syrah_event_wait(k));
  EXPECT_OK(syrah_queue_wait(q));
  syrah_event_release(k);
  syrah_event_release(user);

  /* With a handler: each error reaches it exactly once. */
  handler_calls = 0;
  REQUIRE_OK(syrah_queue_create(f.ctx, d, 0, on_error, &user_count, &h));
  REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
  EXPECT_OK(syrah_queue_launch(h, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, NULL));
  EXPECT_OK(syrah_queue_launch(h, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, NULL));
  EXPECT_OK(syrah_user_event_complete(user, true));
  EXPECT_OK(syrah_queue_wait(h));
  EXPECT_EQ(handler_calls, 2);
  EXPECT_EQ(user_count, 2);
  EXPECT_EQ(handler_status, SYRAH_ERROR_EXECUTION_FAILED);
  EXPECT_TRUE(handler_queue == h);
  EXPECT_TRUE(strstr(handler_message, "kernel 'inc' failed") != NULL);
  EXPECT_OK(syrah_queue_wait(h));
  EXPECT_EQ(handler_calls, 2);
  syrah_event_release(user);
  /* Errors nobody waited for reach the handler when the queue goes. */
  REQUIRE_OK(syrah_user_event_create(f.ctx, &user));
  EXPECT_OK(syrah_queue_launch(h, f.inc, &r, args, 1, (const syrah_event *const *)&user, 1, NULL));
  EXPECT_OK(syrah_user_event_complete(user, true));
  EXPECT_OK(syrah_queue_release(h));
  EXPECT_EQ(handler_calls, 3);
  EXPECT_EQ(user_count, 3);
  syrah_event_release(user);
  syrah_queue_release(q);
  teardown(&f);
}

int main(void) {
  test_contexts();
  t_for_each_device(test_events);
  t_for_each_device(test_async_errors);
  return t_finish("test_context_queue");
}
