/* Buffers shared with the host and with allocators, pinned host memory, and
 * buffers used by several devices in one context and in two. */
#define _POSIX_C_SOURCE 200112L
#include "buffer_env.h"

static bool still_shared_answer = true;
static int still_shared_calls = 0;
static bool still_shared(void *user) {
  ++still_shared_calls;
  return *(bool *)user;
}

typedef struct {
  int allocs, frees, releases;
  bool fail;
} counting;

static void *count_alloc(size_t size, size_t align, void *user) {
  counting *c = (counting *)user;
  void *p = NULL;
  if (c->fail) return NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0) return NULL;
  ++c->allocs;
  return p;
}
static void count_free(void *p, size_t size, void *user) {
  (void)size;
  ++((counting *)user)->frees;
  free(p);
}
static void count_release(void *user) { ++((counting *)user)->releases; }

/* The runtime gives the memory back from its own thread once the last
 * command is done: waits up to 2 s for `*c` to reach `want`. */
static int settled(int *c, int want) {
  struct timespec nap = {0, 1000000};
  int i;
  for (i = 0; i < 2000 && __atomic_load_n(c, __ATOMIC_ACQUIRE) != want; ++i) nanosleep(&nap, NULL);
  return __atomic_load_n(c, __ATOMIC_ACQUIRE);
}

static void test_shared_and_allocators(const syrah_device *d) {
  env e;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, i, ok;
  syrah_buffer *b = NULL, *view = NULL;
  syrah_buffer_desc bd;
  syrah_host_accessor *ha = NULL;
  syrah_allocator alloc;
  counting cnt;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    free(host);
    return;
  }
  /* Shared: the callback decides at release. */
  still_shared_calls = 0;
  for (i = 0; i < N; ++i) host[i] = 1;
  bd = t_desc1(N, host, SYRAH_HOST_SHARED);
  bd.still_shared = still_shared;
  bd.shared_user_data = &still_shared_answer;
  still_shared_answer = true;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(still_shared_calls, 1);
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 2;
  EXPECT_TRUE(ok);
  still_shared_answer = false;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(still_shared_calls, 2);
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 2;
  EXPECT_TRUE(ok);

  /* A user allocator serves the host storage and is released last. */
  memset(&cnt, 0, sizeof cnt);
  alloc.allocate = count_alloc;
  alloc.deallocate = count_free;
  alloc.release = count_release;
  alloc.user_data = &cnt;
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  bd.allocator = &alloc;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_EQ(cnt.allocs, 0);
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&p));
  EXPECT_EQ(cnt.allocs, 1);
  for (i = 0; i < N; ++i) p[i] = i;
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  /* A view of 16-byte elements over the same storage. */
  {
    size_t r = N / 4;
    EXPECT_OK(syrah_buffer_reinterpret(b, 16, 1, &r, &view));
    r = N;
    EXPECT_ERR(syrah_buffer_reinterpret(b, 16, 1, &r, &view), SYRAH_ERROR_INVALID_ARGUMENT, "bytes");
  }
  EXPECT_OK(syrah_buffer_release(b)); /* the view keeps the storage */
  EXPECT_EQ(cnt.releases, 0);
  EXPECT_OK(syrah_buffer_host_access(view, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 2 * i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_release(view));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(settled(&cnt.releases, 1), 1);
  EXPECT_EQ(cnt.allocs, 1);
  EXPECT_EQ(cnt.frees, 1);

  /* An allocator that returns NULL: the operation needing host memory
   * fails, nothing crashes or leaks. */
  memset(&cnt, 0, sizeof cnt);
  cnt.fail = true;
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_ERR(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p),
             SYRAH_ERROR_OUT_OF_HOST_MEMORY, "user's allocator returned no memory");
  EXPECT_OK(run1(&e, e.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_queue_wait(e.q));
  EXPECT_EQ(settled(&cnt.releases, 1), 1);
  alloc.allocate = NULL;
  EXPECT_ERR(syrah_buffer_create(&bd, &b), SYRAH_ERROR_NULL_ARGUMENT, "allocator->allocate");
  env_close(&e);
  free(host);
}


/* Pinned host memory: as a buffer's host memory (moved in and out with the
 * exact counts) and as the host side of USM copies; what kind of pointer
 * it is; the errors for bad arguments and a second free. */
static void test_pinned(const syrah_device *d) {
  enum { M = 1 << 14 };
  env e;
  int *pin = NULL, *back = NULL, i, ok;
  void *p = NULL;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_usm_alloc t = 99;
  syrah_buffer_stats st;
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  EXPECT_ERR(syrah_malloc_pinned(e.ctx, 0, &p), SYRAH_ERROR_INVALID_ARGUMENT, "size 0");
  EXPECT_ERR(syrah_malloc_pinned(e.ctx, 64, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_pointer");
  EXPECT_ERR(syrah_malloc_pinned(NULL, 64, &p), SYRAH_ERROR_NULL_ARGUMENT, "context");
  REQUIRE_OK(syrah_malloc_pinned(e.ctx, M * sizeof(int), (void **)&pin));
  REQUIRE_OK(syrah_malloc_pinned(e.ctx, M * sizeof(int), (void **)&back));
  EXPECT_OK(syrah_get_pointer_type(e.ctx, pin, &t));
  EXPECT_EQ(t, t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS) ? SYRAH_USM_ALLOC_HOST : SYRAH_USM_ALLOC_UNKNOWN);
  for (i = 0; i < M; ++i) pin[i] = i;
  bd = t_desc1(M, pin, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  for (i = 0; i < 3; ++i) EXPECT_OK(run1(&e, e.inc, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), M, NULL, NULL));
  st = stats(b);
  EXPECT_EQ(st.host_to_device_bytes, M * sizeof(int));
  EXPECT_EQ(st.host_to_device_copies, 1);
  if (t_buffer_pointers(d)) {
    void *dev = NULL;
    EXPECT_OK(syrah_buffer_get_device_pointer(b, e.q, &dev));
    EXPECT_OK(syrah_queue_wait(e.q));
    EXPECT_OK(syrah_queue_memcpy(e.q, back, dev, M * sizeof(int), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e.q));
    for (i = 0, ok = 1; i < M; ++i) ok &= back[i] == i + 3;
    EXPECT_TRUE(ok);
  } else {
    t_skip("USM copies of a buffer's device memory into pinned memory", "buffers on the device are memory objects, without addresses");
  }
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < M; ++i) ok &= pin[i] == i + 3;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_free(e.ctx, pin));
  EXPECT_OK(syrah_free(e.ctx, back));
  EXPECT_ERR(syrah_free(e.ctx, pin), SYRAH_ERROR_INVALID_POINTER, "");
  env_close(&e);
}

/* One kernel object shared by USM pointers and buffer accessors, in turn:
 * a pointer, the whole buffer, a window inside it, a pointer again. Where
 * buffers are memory objects and kernels take offsets (NVIDIA's OpenCL),
 * the driver refuses a memory object for an argument that was an SVM
 * pointer, so the kernel object is replaced; every element must be right. */
static void test_usm_then_accessor(const syrah_device *d) {
  enum { M = 4096, AT = 1001, LEN = 100 };
  env e;
  int *u = NULL, *host = NULL, v = 7, i, ok;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_kernel_arg arg;
  syrah_range r = syrah_range_1d(M);
  syrah_host_accessor *ha = NULL;
  int *p = NULL;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("one kernel given USM pointers and accessors in turn", "the device has no USM");
    return;
  }
  if (!env_open(&e, d, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  host = (int *)calloc(M, sizeof(int));
  REQUIRE_OK(syrah_malloc_device(e.ctx, d, M * sizeof(int), (void **)&u));
  EXPECT_OK(syrah_queue_memset(e.q, u, 0, M * sizeof(int), NULL, 0, NULL));
  arg = syrah_arg_usm(u);
  EXPECT_OK(syrah_queue_launch(e.q, e.inc, &r, &arg, 1, NULL, 0, NULL));
  bd = t_desc1(M, host, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  EXPECT_OK(run1(&e, e.setv, t_window(b, SYRAH_ACCESS_DISCARD_WRITE, 0, M), M, &v, NULL));
  EXPECT_OK(run1(&e, e.inc, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, M), M, NULL, NULL));
  EXPECT_OK(run1(&e, e.inc, t_window(b, SYRAH_ACCESS_READ_WRITE, AT, LEN), LEN, NULL, NULL));
  EXPECT_OK(syrah_queue_launch(e.q, e.inc, &r, &arg, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; p && i < M; ++i) ok &= p[i] == ((i >= AT && i < AT + LEN) ? 9 : 8);
  EXPECT_TRUE(p != NULL && ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_queue_memcpy(e.q, host, u, M * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e.q));
  for (i = 0, ok = 1; i < M; ++i) ok &= host[i] == 2;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_OK(syrah_free(e.ctx, u));
  free(host);
  env_close(&e);
}

/* Two devices: pages move between them, within one context directly and
 * between contexts through the host, exactly as the page bits require. */
/* `b` (N ints) holds host[i] + 1 everywhere. */
static void expect_host_plus_one(syrah_buffer *b, const int *host) {
  syrah_host_accessor *ha = NULL;
  int *p = NULL, ok = 1;
  size_t i;
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0; p && i < N; ++i) ok &= p[i] == host[i] + 1;
  EXPECT_TRUE(p && ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
}

/* Device 1 (`e1`) writes the data of `a` plus one into `dd` while `gate`
 * holds device 2's queue (`e2`) back: that must complete on its own; then
 * the gate opens and device 2's queue finishes. */
static void copy_while_held(env *e1, env *e2, syrah_accessor a, syrah_buffer *dd, syrah_event *gate) {
  syrah_accessor two[2];
  syrah_kernel_arg cargs[2];
  syrah_range rn = syrah_range_1d(N);
  syrah_event *k1 = NULL;
  two[0] = a;
  two[1] = t_window(dd, SYRAH_ACCESS_DISCARD_WRITE, 0, 0);
  two_accessor_args(cargs);
  EXPECT_OK(syrah_queue_submit_kernel(e1->q, e1->copyk, &rn, two, 2, cargs, 2, NULL, 0, &k1));
  EXPECT_EQ(status_within_5s(k1), SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_user_event_complete(gate, false));
  EXPECT_OK(syrah_queue_wait(e2->q));
  syrah_event_release(k1);
}

static void two_devices(const syrah_device *d1, const syrah_device *d2, bool one_context) {
  env e1, e2;
  syrah_context *shared = NULL;
  int *host = (int *)malloc(N * sizeof(int)), *p = NULL, ok;
  size_t i;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd = t_desc1(N, host, SYRAH_HOST_WRITE_BACK);
  syrah_host_accessor *ha = NULL;
  syrah_buffer_stats s;
  const size_t half = N / 2 * sizeof(int);
  t_device = one_context ? "two devices, one context" : "two devices, two contexts";
  printf("== %s\n", t_device);
  if (one_context) {
    const syrah_device *pair[2];
    pair[0] = d1;
    pair[1] = d2;
    REQUIRE_OK(syrah_context_create(pair, 2, &shared));
  }
  if (!env_open_in(&e1, shared, d1, SYRAH_QUEUE_IN_ORDER) || !env_open_in(&e2, shared, d2, SYRAH_QUEUE_IN_ORDER)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    free(host);
    return;
  }
  for (i = 0; i < N; ++i) host[i] = (int)i;
  bd.page_size[0] = N / 2; /* two pages */
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* Device 1 doubles the first half, device 2 the second: no conflict. */
  EXPECT_OK(run1(&e1, e1.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, N / 2), N / 2, NULL, NULL));
  EXPECT_OK(run1(&e2, e2.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, N / 2, N / 2), N / 2, NULL, NULL));
  s = stats(b);
  EXPECT_EQ(s.host_to_device_bytes, 2 * half);
  EXPECT_EQ(s.host_to_device_copies, 2);
  /* Device 2 then uses everything: the first half comes from device 1. */
  EXPECT_OK(run1(&e2, e2.twice, t_window(b, SYRAH_ACCESS_READ_WRITE, 0, 0), N, NULL, NULL));
  s = stats(b);
  if (one_context) {
    EXPECT_EQ(s.device_to_device_bytes, half);
    EXPECT_EQ(s.device_to_device_copies, 1);
    EXPECT_EQ(s.host_to_device_bytes, 2 * half);
    EXPECT_EQ(s.device_to_host_bytes, 0);
  } else {
    EXPECT_EQ(s.device_to_device_bytes, 0);
    EXPECT_EQ(s.device_to_host_bytes, half);
    EXPECT_EQ(s.host_to_device_bytes, 3 * half);
  }
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  for (i = 0, ok = 1; i < N; ++i) ok &= p[i] == 4 * (int)i;
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_host_accessor_release(ha));
  s = stats(b);
  /* Both pages come home from device 2 in one copy. */
  EXPECT_EQ(s.device_to_host_bytes, (one_context ? 0 : half) + 2 * half);
  EXPECT_EQ(s.device_to_host_copies, (one_context ? 0 : 1) + 1);
  EXPECT_OK(syrah_buffer_release(b));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 4 * (int)i;
  EXPECT_TRUE(ok);
  /* Copying pages to device 1 does not wait for a kernel that reads them
   * on device 2 (held back here by a user event). */
  {
    syrah_buffer *c = NULL, *dd = NULL;
    syrah_event *gate = NULL;
    syrah_kernel_arg args[2];
    syrah_range r = syrah_range_1d(1);
    syrah_accessor a = t_window(NULL, SYRAH_ACCESS_READ, 0, 0);
    const syrah_event *deps[1];
    int pitch = 0;
    bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
    REQUIRE_OK(syrah_buffer_create(&bd, &c));
    REQUIRE_OK(syrah_user_event_create(e2.ctx, &gate));
    a.buffer = c;
    args[0].kind = SYRAH_ARG_ACCESSOR;
    args[0].size = 0;
    args[0].value = NULL;
    args[1] = syrah_arg_value(&pitch, sizeof pitch);
    deps[0] = gate;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, deps, 1, NULL));
    {
      /* Device 1 copies the pages it got into dd: they must be the data. */
      syrah_buffer_desc dd_desc = t_desc1(N, NULL, SYRAH_HOST_NONE);
      REQUIRE_OK(syrah_buffer_create(&dd_desc, &dd));
      copy_while_held(&e1, &e2, a, dd, gate);
    }
    /* Within a context device 1 takes the pages from device 2. */
    EXPECT_EQ(stats(c).host_to_device_bytes, (one_context ? 1 : 2) * N * sizeof(int));
    EXPECT_EQ(stats(c).device_to_device_bytes, one_context ? N * sizeof(int) : 0);
    expect_host_plus_one(dd, host);
    syrah_event_release(gate);
    EXPECT_OK(syrah_buffer_release(dd));
    EXPECT_OK(syrah_buffer_release(c));
  }
  /* Between contexts, copying pages from the host to device 1 does not
   * wait for a copy of them from the host to device 2, held back here
   * behind a kernel that waits for a user event on device 2's in-order
   * queue, and device 1's kernel reading them does not wait for it
   * either. */
  if (!one_context) {
    syrah_buffer *c = NULL, *other = NULL, *dd = NULL;
    syrah_event *gate = NULL;
    syrah_kernel_arg args[2];
    syrah_range r = syrah_range_1d(1);
    syrah_accessor a = t_window(NULL, SYRAH_ACCESS_READ, 0, 0);
    syrah_buffer_desc dd_desc = t_desc1(N, NULL, SYRAH_HOST_NONE);
    const syrah_event *deps[1];
    int pitch = 0;
    bd = t_desc1(N, host, SYRAH_HOST_COPY_IN);
    REQUIRE_OK(syrah_buffer_create(&bd, &c));
    REQUIRE_OK(syrah_buffer_create(&bd, &other));
    REQUIRE_OK(syrah_buffer_create(&dd_desc, &dd));
    REQUIRE_OK(syrah_user_event_create(e2.ctx, &gate));
    args[0].kind = SYRAH_ARG_ACCESSOR;
    args[0].size = 0;
    args[0].value = NULL;
    args[1] = syrah_arg_value(&pitch, sizeof pitch);
    deps[0] = gate;
    a.buffer = other;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, deps, 1, NULL));
    a.buffer = c;
    EXPECT_OK(syrah_queue_submit_kernel(e2.q, e2.peek, &r, &a, 1, args, 2, NULL, 0, NULL));
    copy_while_held(&e1, &e2, a, dd, gate);
    EXPECT_OK(syrah_queue_wait(e1.q));
    /* Each device got the pages from the host once. */
    EXPECT_EQ(stats(c).host_to_device_bytes, 2 * N * sizeof(int));
    EXPECT_EQ(stats(c).host_to_device_copies, 2);
    EXPECT_EQ(stats(c).device_to_host_bytes, 0);
    expect_host_plus_one(dd, host);
    syrah_event_release(gate);
    EXPECT_OK(syrah_buffer_release(dd));
    EXPECT_OK(syrah_buffer_release(other));
    EXPECT_OK(syrah_buffer_release(c));
  }
  env_close(&e1);
  env_close(&e2);
  if (shared) syrah_context_release(shared);
  free(host);
  t_device = "";
}

static void test_two_devices(void) {
  const syrah_device *all[64];
  size_t n = 0, i, j;
  bool same = false, cross = false;
  syrah_get_devices(all, 64, &n);
  for (i = 0; i < n; ++i) {
    for (j = i + 1; j < n; ++j) {
      uint64_t pi = 0, pj = 0;
      syrah_device_get_info_u64(all[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
      syrah_device_get_info_u64(all[j], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pj);
      if (pi == pj && !same) {
        same = true;
        two_devices(all[i], all[j], true);
      }
      if (!cross) {
        cross = true;
        two_devices(all[i], all[j], false);
      }
    }
  }
  if (!same) t_skip("two devices in one context", "no platform with two devices (POCL_DEVICES=\"pthread pthread\" gives two)");
  if (!cross) t_skip("two devices in two contexts", "fewer than two devices");
}

int main(void) {
  t_for_each_device(test_shared_and_allocators);
  t_for_each_device(test_pinned);
  t_for_each_device(test_usm_then_accessor);
  test_two_devices();
  return t_finish("test_buffer_share");
}
