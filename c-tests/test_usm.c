/* Unified shared memory: allocation kinds against aspects, pointer
 * queries, memcpy, memset, fill of every pattern size, prefetch, advice,
 * and the errors for bad sizes, unknown and foreign pointers. */
#include "testing.h"

#include <stdint.h>

static const char *kSource =
    "__kernel void twice(__global int *p) { p[get_global_id(0)] *= 2; }\n"
    "__kernel void inc(__global int *p) { p[get_global_id(0)] += 1; }\n";

static void test_alloc_kinds(const syrah_device *d) {
  syrah_context *ctx = NULL;
  void *p = NULL;
  syrah_usm_alloc t = 99;
  const syrah_device *owner = NULL;
  uint64_t max_alloc = 0;
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_MEM_ALLOC_SIZE, &max_alloc));

  /* Each kind works exactly when its aspect says so. */
  if (t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    EXPECT_OK(syrah_malloc_device(ctx, d, 4096, &p));
    EXPECT_OK(syrah_get_pointer_type(ctx, p, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_DEVICE);
    EXPECT_OK(syrah_get_pointer_type(ctx, (char *)p + 4095, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_DEVICE);
    EXPECT_OK(syrah_get_pointer_type(ctx, (char *)p + 4096, &t));
    EXPECT_TRUE(t != SYRAH_USM_ALLOC_DEVICE || (char *)p + 4096 == NULL);
    EXPECT_OK(syrah_get_pointer_device(ctx, (char *)p + 100, &owner));
    EXPECT_TRUE(owner == d);
    EXPECT_ERR(syrah_free(ctx, (char *)p + 8), SYRAH_ERROR_INVALID_POINTER, "not at its start");
    EXPECT_OK(syrah_free(ctx, p));
    EXPECT_ERR(syrah_free(ctx, p), SYRAH_ERROR_INVALID_POINTER, "not a USM allocation");
    EXPECT_OK(syrah_get_pointer_type(ctx, p, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_UNKNOWN);
  } else {
    EXPECT_ERR(syrah_malloc_device(ctx, d, 4096, &p), SYRAH_ERROR_FEATURE_NOT_SUPPORTED, "device USM");
  }
  if (t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS)) {
    int *h = NULL;
    EXPECT_OK(syrah_malloc_host(ctx, 1024, (void **)&h));
    if (h) {
      h[0] = 5;
      h[255] = 6;
      EXPECT_EQ(h[0] + h[255], 11);
    }
    EXPECT_OK(syrah_get_pointer_type(ctx, h, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_HOST);
    EXPECT_OK(syrah_get_pointer_device(ctx, h, &owner));
    EXPECT_TRUE(owner == d);
    EXPECT_OK(syrah_free(ctx, h));
  } else {
    EXPECT_ERR(syrah_malloc_host(ctx, 1024, &p), SYRAH_ERROR_FEATURE_NOT_SUPPORTED, "host USM");
  }
  if (t_has(d, SYRAH_ASPECT_USM_SHARED_ALLOCATIONS)) {
    EXPECT_OK(syrah_malloc_shared(ctx, d, 1024, &p));
    EXPECT_OK(syrah_get_pointer_type(ctx, p, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_SHARED);
    EXPECT_OK(syrah_free(ctx, p));
  } else {
    EXPECT_ERR(syrah_malloc_shared(ctx, d, 1024, &p), SYRAH_ERROR_FEATURE_NOT_SUPPORTED, "shared USM");
  }
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    syrah_context_release(ctx);
    return;
  }

  /* Alignment. */
  EXPECT_OK(syrah_aligned_alloc_device(ctx, d, 4096, 100, &p));
  EXPECT_EQ(((uintptr_t)p) % 4096, 0);
  EXPECT_OK(syrah_free(ctx, p));
  if (t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS)) {
    EXPECT_OK(syrah_aligned_alloc_host(ctx, 256, 100, &p));
    EXPECT_EQ(((uintptr_t)p) % 256, 0);
    EXPECT_OK(syrah_free(ctx, p));
  }
  if (t_has(d, SYRAH_ASPECT_USM_SHARED_ALLOCATIONS)) {
    EXPECT_OK(syrah_aligned_alloc_shared(ctx, d, 1024, 100, &p));
    EXPECT_EQ(((uintptr_t)p) % 1024, 0);
    EXPECT_OK(syrah_free(ctx, p));
  }
  EXPECT_ERR(syrah_aligned_alloc_device(ctx, d, 3, 100, &p), SYRAH_ERROR_INVALID_ARGUMENT, "alignment 3");

  /* Bad sizes, NULL arguments. */
  EXPECT_ERR(syrah_malloc_device(ctx, d, 0, &p), SYRAH_ERROR_INVALID_ARGUMENT, "size 0");
  EXPECT_ERR(syrah_malloc_device(ctx, d, (size_t)-1, &p), SYRAH_ERROR_INVALID_ARGUMENT, "exceeds the maximum");
  EXPECT_ERR(syrah_malloc_device(ctx, d, (size_t)max_alloc + 1, &p), SYRAH_ERROR_INVALID_ARGUMENT,
             "exceeds the maximum");
  EXPECT_ERR(syrah_malloc_device(ctx, d, 64, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_pointer");
  EXPECT_ERR(syrah_malloc_device(NULL, d, 64, &p), SYRAH_ERROR_NULL_ARGUMENT, "context");
  EXPECT_ERR(syrah_malloc_device(ctx, NULL, 64, &p), SYRAH_ERROR_NULL_ARGUMENT, "device");
  EXPECT_ERR(syrah_get_pointer_type(ctx, &t, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_type");
  EXPECT_ERR(syrah_get_pointer_device(ctx, &t, &owner), SYRAH_ERROR_INVALID_POINTER, "not inside");
  EXPECT_OK(syrah_get_pointer_type(ctx, &t, &t));
  EXPECT_EQ(t, SYRAH_USM_ALLOC_UNKNOWN);
  EXPECT_OK(syrah_free(ctx, NULL));
  EXPECT_ERR(syrah_free(ctx, &t), SYRAH_ERROR_INVALID_POINTER, "not a USM allocation");
  EXPECT_ERR(syrah_free(NULL, &t), SYRAH_ERROR_NULL_ARGUMENT, "context");

  /* Pointers of another context are named as such. */
  {
    syrah_context *other = NULL;
    void *foreign = NULL;
    syrah_queue *q = NULL;
    int x = 0;
    REQUIRE_OK(syrah_context_create(&d, 1, &other));
    REQUIRE_OK(syrah_malloc_device(other, d, 64, &foreign));
    EXPECT_ERR(syrah_free(ctx, foreign), SYRAH_ERROR_WRONG_CONTEXT, "belongs to context");
    EXPECT_OK(syrah_get_pointer_type(ctx, foreign, &t));
    EXPECT_EQ(t, SYRAH_USM_ALLOC_UNKNOWN);
    REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
    EXPECT_ERR(syrah_queue_memcpy(q, &x, foreign, sizeof x, NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT,
               "memcpy source");
    EXPECT_ERR(syrah_queue_memset(q, foreign, 0, 4, NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT,
               "fill destination");
    EXPECT_OK(syrah_queue_release(q));
    EXPECT_OK(syrah_free(other, foreign));
    /* A context frees what is left when it goes. */
    REQUIRE_OK(syrah_malloc_device(other, d, 64, &foreign));
    EXPECT_OK(syrah_context_release(other));
  }
  EXPECT_OK(syrah_context_release(ctx));
}

static void check_fill(syrah_queue *q, unsigned char *dev, unsigned char *host, size_t psize, size_t total,
                       size_t at) {
  unsigned char pattern[256];
  size_t i;
  int ok = 1;
  for (i = 0; i < psize; ++i) pattern[i] = (unsigned char)(i * 7 + psize);
  EXPECT_OK(syrah_queue_memset(q, dev, 0, total + at + 64, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_fill(q, dev + at, pattern, psize, total, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, dev, total + at + 64, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0; i < total + at + 64; ++i) {
    unsigned char want = (i >= at && i < at + total) ? pattern[(i - at) % psize] : 0;
    if (host[i] != want) {
      ok = 0;
      break;
    }
  }
  if (!ok)
    T_FAIL("fill with a %zu-byte pattern over %zu bytes at offset %zu: byte %zu is %u", psize, total, at, i,
           host[i]);
  ++t_checks;
}

static void test_operations(const syrah_device *d) {
  enum { N = 1 << 16 };
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *twice = NULL;
  unsigned char *a = NULL, *b = NULL;
  unsigned char *host = (unsigned char *)malloc(N + 4096);
  int *ints = (int *)malloc(N * sizeof(int));
  size_t i;
  int ok;
  syrah_event *e1 = NULL, *e2 = NULL;
  syrah_kernel_arg arg;
  syrah_range r;
  static const size_t sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 3, 5, 12, 24, 100, 200, 256};
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("USM operations", "the device has no USM (strategy none)");
    free(host);
    free(ints);
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, 0, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N + 4096, (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N + 4096, (void **)&b));

  /* memcpy host -> device -> device -> host, ordered by events. */
  for (i = 0; i < N; ++i) host[i] = (unsigned char)(i * 13 + 1);
  EXPECT_OK(syrah_queue_memcpy(q, a, host, N, NULL, 0, &e1));
  EXPECT_OK(syrah_queue_memcpy(q, b, a, N, (const syrah_event *const *)&e1, 1, &e2));
  syrah_event_release(e1);
  EXPECT_OK(syrah_event_wait(e2));
  memset(host, 0, N);
  EXPECT_OK(syrah_queue_memcpy(q, host, b, N, (const syrah_event *const *)&e2, 1, &e1));
  EXPECT_OK(syrah_event_wait(e1));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == (unsigned char)(i * 13 + 1);
  EXPECT_TRUE(ok);
  syrah_event_release(e1);
  syrah_event_release(e2);
  EXPECT_OK(syrah_queue_memcpy(q, a, host, 0, NULL, 0, NULL));
  EXPECT_ERR(syrah_queue_memcpy(q, a, a + 16, 64, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT, "overlap");
  EXPECT_ERR(syrah_queue_memcpy(q, a + N, host, 4097, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "runs past the end");
  EXPECT_ERR(syrah_queue_memcpy(q, NULL, host, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "destination");
  EXPECT_ERR(syrah_queue_memcpy(q, a, NULL, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "source");
  EXPECT_ERR(syrah_queue_memcpy(NULL, a, host, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "queue");

  /* Fill with every native pattern size and with odd ones, at an aligned
   * and at an unaligned destination, on an in-order queue. */
  {
    syrah_queue *io = NULL;
    REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &io));
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
      size_t total = sizes[i] * (N / 256 / sizes[i] * 256 / 4 + 3);
      check_fill(io, a, host, sizes[i], total, 16);
      check_fill(io, a, host, sizes[i], total, 256);
    }
    check_fill(io, a, host, 3, 3, 16);
    check_fill(io, a, host, 1, 1, 0);
    syrah_queue_release(io);
  }
  EXPECT_ERR(syrah_queue_fill(q, a, host, 3, 10, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "not a whole number of 3-byte patterns");
  EXPECT_ERR(syrah_queue_fill(q, a, host, 0, 10, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT, "pattern_size is 0");
  EXPECT_ERR(syrah_queue_fill(q, a, NULL, 4, 16, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "pattern");
  EXPECT_ERR(syrah_queue_fill(q, a + N + 4000, host, 4, 128, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "96 bytes available");
  EXPECT_ERR(syrah_queue_fill(q, host, host, 4, 16, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER,
             "not inside a USM allocation");
  EXPECT_ERR(syrah_queue_memset(q, NULL, 0, 16, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "pointer");
  EXPECT_OK(syrah_queue_fill(q, a, host, 4, 0, NULL, 0, NULL));

  /* memset sets bytes; a kernel then sees them. */
  EXPECT_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  EXPECT_OK(syrah_kernel_create(prog, "twice", &twice));
  EXPECT_OK(syrah_queue_memset(q, a, 0x01, N, NULL, 0, &e1));
  arg = syrah_arg_usm(a);
  r = syrah_range_1d(N / sizeof(int));
  EXPECT_OK(syrah_queue_launch(q, twice, &r, &arg, 1, (const syrah_event *const *)&e1, 1, &e2));
  EXPECT_OK(syrah_queue_memcpy(q, ints, a, N, (const syrah_event *const *)&e2, 1, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N / sizeof(int); ++i) ok &= ints[i] == 2 * 0x01010101;
  EXPECT_TRUE(ok);
  syrah_event_release(e1);
  syrah_event_release(e2);

  /* Prefetch and advice. */
  EXPECT_OK(syrah_queue_prefetch(q, a, N, NULL, 0, &e1));
  EXPECT_OK(syrah_event_wait(e1));
  syrah_event_release(e1);
  EXPECT_OK(syrah_queue_prefetch(q, a, 0, NULL, 0, NULL));
  EXPECT_ERR(syrah_queue_prefetch(q, host, 16, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER, "prefetch address");
  EXPECT_ERR(syrah_queue_prefetch(q, NULL, 16, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "pointer");
  EXPECT_OK(syrah_queue_mem_advise(q, a, N, 0, NULL, 0, &e1));
  EXPECT_OK(syrah_event_wait(e1));
  syrah_event_release(e1);
  {
    /* Advice values are the driver's: SVM defines none, the Intel extension
     * passes them to the driver, which accepts or refuses them. */
    uint64_t strategy = 0;
    syrah_status s = syrah_queue_mem_advise(q, a, N, 0x7fff, NULL, 0, NULL);
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_USM_STRATEGY, &strategy));
    ++t_checks;
    if (strategy == SYRAH_USM_STRATEGY_SVM) {
      if (s != SYRAH_ERROR_FEATURE_NOT_SUPPORTED || !strstr(syrah_last_error_message(), "32767"))
        T_FAIL("mem_advise 0x7fff on SVM -> %s: %s", syrah_status_name(s), syrah_last_error_message());
    } else if (s != SYRAH_SUCCESS && (s != SYRAH_ERROR_INVALID_ARGUMENT || !strstr(syrah_last_error_message(), "32767"))) {
      T_FAIL("mem_advise 0x7fff -> %s: %s", syrah_status_name(s), syrah_last_error_message());
    }
    EXPECT_OK(syrah_queue_wait(q));
  }
  EXPECT_ERR(syrah_queue_mem_advise(q, host, 16, 0, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER,
             "mem_advise address");

  /* Shared allocations are read and written by host and kernel alike. */
  if (t_has(d, SYRAH_ASPECT_USM_SHARED_ALLOCATIONS)) {
    int *s = NULL;
    EXPECT_OK(syrah_malloc_shared(ctx, d, 256 * sizeof(int), (void **)&s));
    if (s) {
      for (i = 0; i < 256; ++i) s[i] = (int)i;
      arg = syrah_arg_usm(s);
      r = syrah_range_1d(256);
      EXPECT_OK(syrah_queue_launch(q, twice, &r, &arg, 1, NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(q));
      for (i = 0, ok = 1; i < 256; ++i) ok &= s[i] == 2 * (int)i;
      EXPECT_TRUE(ok);
      EXPECT_OK(syrah_queue_prefetch(q, s, 256 * sizeof(int), NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(q));
      EXPECT_OK(syrah_free(ctx, s));
    }
  } else {
    t_skip("shared USM with kernels", "the device has no usm_shared_allocations");
  }
  /* Host allocations are read by kernels directly. */
  if (t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS)) {
    int *h = NULL;
    EXPECT_OK(syrah_malloc_host(ctx, 64 * sizeof(int), (void **)&h));
    if (h) {
      for (i = 0; i < 64; ++i) h[i] = 21;
      arg = syrah_arg_usm(h);
      r = syrah_range_1d(64);
      EXPECT_OK(syrah_queue_launch(q, twice, &r, &arg, 1, NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(q));
      for (i = 0, ok = 1; i < 64; ++i) ok &= h[i] == 42;
      EXPECT_TRUE(ok);
      EXPECT_OK(syrah_free(ctx, h));
    }
  } else {
    t_skip("host USM with kernels", "the device has no usm_host_allocations");
  }
  /* Freeing while a kernel is queued is safe: free waits. */
  arg = syrah_arg_usm(a);
  r = syrah_range_1d(N / sizeof(int));
  EXPECT_OK(syrah_queue_launch(q, twice, &r, &arg, 1, NULL, 0, NULL));
  syrah_kernel_release(twice);
  syrah_program_release(prog);
  EXPECT_OK(syrah_free(ctx, a));
  EXPECT_OK(syrah_free(ctx, b));
  syrah_queue_release(q);
  syrah_context_release(ctx);
  free(host);
  free(ints);
}

/* Launches on an in-order queue with no event asked for run without an
 * OpenCL event of their own; later copies, host tasks, waits and frees
 * still come after them. */
static int seen_by_task = -1;
static syrah_status read_first(const syrah_host_task_context *c, void *user) {
  (void)c;
  seen_by_task = *(const int *)user;
  return SYRAH_SUCCESS;
}

static void test_quiet_launches(const syrah_device *d) {
  enum { M = 256 };
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *inc = NULL;
  int *a = NULL, host[M], i, ok;
  syrah_kernel_arg arg;
  syrah_range r = syrah_range_1d(M);
  syrah_event *ev = NULL;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("launches without events", "the device has no USM (strategy none)");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "inc", &inc));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof host, (void **)&a));
  memset(host, 0, sizeof host);
  EXPECT_OK(syrah_queue_memcpy(q, a, host, sizeof host, NULL, 0, NULL));
  arg = syrah_arg_usm(a);
  for (i = 0; i < 300; ++i) EXPECT_OK(syrah_queue_launch(q, inc, &r, &arg, 1, NULL, 0, NULL));
  /* A copy after them, waited for through its own event. */
  EXPECT_OK(syrah_queue_memcpy(q, host, a, sizeof host, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  for (i = 0, ok = 1; i < M; ++i) ok &= host[i] == 300;
  EXPECT_TRUE(ok);
  /* A queue wait covers them. */
  for (i = 0; i < 100; ++i) EXPECT_OK(syrah_queue_launch(q, inc, &r, &arg, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_queue_memcpy(q, host, a, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < M; ++i) ok &= host[i] == 400;
  EXPECT_TRUE(ok);
  /* A host task after them sees their writes (host USM, where there is). */
  if (t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS)) {
    int *h = NULL;
    syrah_host_task task;
    syrah_kernel_arg harg;
    REQUIRE_OK(syrah_malloc_host(ctx, sizeof host, (void **)&h));
    memset(h, 0, sizeof host);
    harg = syrah_arg_usm(h);
    for (i = 0; i < 50; ++i) EXPECT_OK(syrah_queue_launch(q, inc, &r, &harg, 1, NULL, 0, NULL));
    memset(&task, 0, sizeof task);
    task.run = read_first;
    task.user_data = h;
    EXPECT_OK(syrah_queue_submit_host_tasks(q, NULL, 0, &task, 1, NULL, 0, &ev));
    EXPECT_OK(syrah_event_wait(ev));
    syrah_event_release(ev);
    EXPECT_EQ(seen_by_task, 50);
    EXPECT_OK(syrah_free(ctx, h));
  } else {
    t_skip("host task after launches without events", "the device has no usm_host_allocations");
  }
  /* Freeing right after them waits for them. */
  for (i = 0; i < 50; ++i) EXPECT_OK(syrah_queue_launch(q, inc, &r, &arg, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_free(ctx, a));
  syrah_kernel_release(inc);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

/* Copies asked for no event go without one where they can; what follows
 * them must still see their bytes. */
static void test_quiet_copies(const syrah_device *d) {
  enum { M = 4096 };
  syrah_queue *q = NULL, *oq = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *inc = NULL;
  int *a = NULL, *b = NULL, *host = NULL, *back = NULL, i, ok;
  syrah_kernel_arg arg;
  syrah_range r = syrah_range_1d(M);
  syrah_event *ev = NULL;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("copies without events", "the device has no USM (strategy none)");
    return;
  }
  host = (int *)malloc(sizeof(int) * M);
  back = (int *)malloc(sizeof(int) * M);
  if (!host || !back) {
    T_FAIL("out of host memory");
    free(host);
    free(back);
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &oq));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "inc", &inc));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof(int) * M, (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof(int) * M, (void **)&b));
  for (i = 0; i < M; ++i) host[i] = i;
  /* In order: host to a, then 100 times a kernel on a and a copy between
   * the two allocations, each without an event; the last copy back has
   * one. */
  EXPECT_OK(syrah_queue_memcpy(q, a, host, sizeof(int) * M, NULL, 0, NULL));
  for (i = 0; i < 100; ++i) {
    int *from = i % 2 ? b : a, *to = i % 2 ? a : b;
    arg = syrah_arg_usm(from);
    EXPECT_OK(syrah_queue_launch(q, inc, &r, &arg, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, to, from, sizeof(int) * M, NULL, 0, NULL));
  }
  memset(back, 0, sizeof(int) * M);
  EXPECT_OK(syrah_queue_memcpy(q, back, a, sizeof(int) * M, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == i + 100;
  EXPECT_TRUE(ok);
  /* A memset and a fill without events, a kernel after the memset. */
  {
    int seven = 7;
    EXPECT_OK(syrah_queue_memset(q, a, 0x11, sizeof(int) * M, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_fill(q, b, &seven, sizeof seven, sizeof(int) * M, NULL, 0, NULL));
    arg = syrah_arg_usm(a);
    EXPECT_OK(syrah_queue_launch(q, inc, &r, &arg, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_memcpy(q, back, a, sizeof(int) * M, NULL, 0, &ev));
    EXPECT_OK(syrah_event_wait(ev));
    syrah_event_release(ev);
    for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == 0x11111111 + 1;
    EXPECT_TRUE(ok);
    EXPECT_OK(syrah_queue_memcpy(q, back, b, sizeof(int) * M, NULL, 0, &ev));
    EXPECT_OK(syrah_event_wait(ev));
    syrah_event_release(ev);
    for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == 7;
    EXPECT_TRUE(ok);
  }
  /* Out of order: a barrier orders a later copy after copies without
   * events. */
  for (i = 0; i < M; ++i) host[i] = 7 * i;
  EXPECT_OK(syrah_queue_memcpy(oq, b, host, sizeof(int) * M, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_barrier(oq, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(oq, a, b, sizeof(int) * M, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_barrier(oq, NULL, 0, NULL));
  memset(back, 0, sizeof(int) * M);
  EXPECT_OK(syrah_queue_memcpy(oq, back, a, sizeof(int) * M, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  syrah_event_release(ev);
  for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == 7 * i;
  EXPECT_TRUE(ok);
  /* A queue wait covers a copy to the host without an event. */
  memset(back, 0, sizeof(int) * M);
  EXPECT_OK(syrah_queue_memcpy(oq, back, b, sizeof(int) * M, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(oq));
  for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == 7 * i;
  EXPECT_TRUE(ok);
  /* Freeing the source right after such a copy waits for it. */
  memset(back, 0, sizeof(int) * M);
  EXPECT_OK(syrah_queue_memcpy(q, back, b, sizeof(int) * M, NULL, 0, NULL));
  EXPECT_OK(syrah_free(ctx, b));
  for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == 7 * i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_free(ctx, a));
  syrah_kernel_release(inc);
  syrah_program_release(prog);
  syrah_queue_release(oq);
  syrah_queue_release(q);
  syrah_context_release(ctx);
  free(host);
  free(back);
}

int main(void) {
  t_for_each_device(test_alloc_kinds);
  t_for_each_device(test_operations);
  t_for_each_device(test_quiet_launches);
  t_for_each_device(test_quiet_copies);
  return t_finish("test_usm");
}
