/* When a released buffer gives its memory back: once the last command
 * using it is done, without any later call into the library. A user
 * allocator records every block it hands out; each must be deallocated
 * exactly once with its size, and the allocator released, within a
 * bounded time after the release and the end of the last command, on
 * in-order and out-of-order queues of every device. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <time.h>

#define N 256
#define MAX_BLOCKS 16

static const char *kSource =
    "__kernel void twice(__global int *p) { p[get_global_id(0)] *= 2; }\n"
    "__kernel void slow_twice(__global int *p, int n, int zero) {\n"
    "  size_t i = get_global_id(0);\n"
    "  int x = p[i];\n"
    "  for (int j = 0; j < n; ++j) x = (x * 1103515245 + 12345) & 0x7fffffff;\n"
    "  p[i] = 2 * p[i] + zero * x;\n"
    "}\n";

/* What the allocator saw; written from the library's threads. */
typedef struct {
  void *ptr[MAX_BLOCKS];
  size_t size[MAX_BLOCKS];
  int freed[MAX_BLOCKS];
  int allocs, bad_frees, releases;
} ledger;

static void *led_alloc(size_t size, size_t align, void *user) {
  ledger *l = (ledger *)user;
  void *p = NULL;
  int i = __atomic_load_n(&l->allocs, __ATOMIC_ACQUIRE);
  if (i >= MAX_BLOCKS) return NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0) return NULL;
  l->ptr[i] = p;
  l->size[i] = size;
  __atomic_store_n(&l->allocs, i + 1, __ATOMIC_RELEASE);
  return p;
}

static void led_free(void *p, size_t size, void *user) {
  ledger *l = (ledger *)user;
  int i, n = __atomic_load_n(&l->allocs, __ATOMIC_ACQUIRE), found = 0;
  for (i = 0; i < n; ++i)
    if (l->ptr[i] == p && l->size[i] == size) {
      __atomic_add_fetch(&l->freed[i], 1, __ATOMIC_ACQ_REL);
      found = 1;
    }
  if (!found) __atomic_add_fetch(&l->bad_frees, 1, __ATOMIC_ACQ_REL);
  free(p);
}

static void led_release(void *user) {
  __atomic_add_fetch(&((ledger *)user)->releases, 1, __ATOMIC_ACQ_REL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits up to `limit` seconds, calling nothing in the library, for every
 * block to be freed once and the allocator released; returns the time it
 * took, or a negative value. */
static double wait_freed(ledger *l, double limit) {
  double t0 = now_s();
  struct timespec nap = {0, 1000000};
  for (;;) {
    int i, n = __atomic_load_n(&l->allocs, __ATOMIC_ACQUIRE), done = n > 0;
    for (i = 0; i < n; ++i) done &= __atomic_load_n(&l->freed[i], __ATOMIC_ACQUIRE) >= 1;
    done &= __atomic_load_n(&l->releases, __ATOMIC_ACQUIRE) >= 1;
    if (done) return now_s() - t0;
    if (now_s() - t0 > limit) return -1.0;
    nanosleep(&nap, NULL);
  }
}

static void check_ledger(ledger *l, const char *what) {
  int i;
  double t = wait_freed(l, 5.0);
  ++t_checks;
  if (t < 0)
    T_FAIL("%s: after 5 s, %d block(s) allocated, %d of them freed, allocator released %d time(s)",
           what, l->allocs, l->freed[0] + (l->allocs > 1 ? l->freed[1] : 0), l->releases);
  else
    printf("%s: memory back %.1f ms after the release\n", what, t * 1e3);
  /* A little longer: nothing is freed twice or released twice. */
  {
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);
  }
  EXPECT_EQ(l->allocs, 1);
  for (i = 0; i < l->allocs; ++i) EXPECT_EQ(l->freed[i], 1);
  EXPECT_EQ(l->bad_frees, 0);
  EXPECT_EQ(l->releases, 1);
}

static syrah_accessor whole(syrah_buffer *b, syrah_access_mode m) {
  syrah_accessor a;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = m;
  return a;
}

static void on_queue(const syrah_device *d, syrah_queue_flags flags) {
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *twice = NULL, *slow = NULL;
  int host[N], i, ok, steps = 200000;
  const char *order = flags & SYRAH_QUEUE_IN_ORDER ? "in-order" : "out-of-order";
  char what[160];
  syrah_allocator alloc;
  syrah_buffer_desc bd;
  syrah_kernel_arg arg;
  syrah_range r = syrah_range_1d(N);
  syrah_accessor a;
  if (syrah_queue_create(NULL, d, flags, NULL, NULL, &q) != SYRAH_SUCCESS ||
      syrah_queue_get_context(q, &ctx) != SYRAH_SUCCESS ||
      syrah_program_create_from_source(ctx, kSource, NULL, &prog) != SYRAH_SUCCESS ||
      syrah_kernel_create(prog, "twice", &twice) != SYRAH_SUCCESS ||
      syrah_kernel_create(prog, "slow_twice", &slow) != SYRAH_SUCCESS) {
    T_FAIL("setup: %s", syrah_last_error_message());
    goto out;
  }
  arg.kind = SYRAH_ARG_ACCESSOR;
  arg.size = 0;
  arg.value = NULL;
  memset(&alloc, 0, sizeof alloc);
  alloc.allocate = led_alloc;
  alloc.deallocate = led_free;
  alloc.release = led_release;
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = 1;
  bd.range[0] = N;
  bd.host_pointer = host;
  bd.ownership = SYRAH_HOST_COPY_IN;
  bd.allocator = &alloc;

  /* A kernel, then a host accessor that sees it finished, then the
   * release: the memory goes at once. */
  {
    static ledger l;
    syrah_buffer *b = NULL;
    syrah_host_accessor *ha = NULL;
    int *p = NULL;
    memset(&l, 0, sizeof l);
    alloc.user_data = &l;
    for (i = 0; i < N; ++i) host[i] = i;
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    a = whole(b, SYRAH_ACCESS_READ_WRITE);
    EXPECT_OK(syrah_queue_submit_kernel(q, twice, &r, &a, 1, &arg, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    for (i = 0, ok = 1; p && i < N; ++i) ok &= p[i] == 2 * i;
    EXPECT_TRUE(p && ok);
    EXPECT_OK(syrah_host_accessor_release(ha));
    EXPECT_OK(syrah_buffer_release(b));
    snprintf(what, sizeof what, "%s queue, released after a host accessor", order);
    check_ledger(&l, what);
  }
  /* Released while a long kernel still runs: the memory goes once it ends,
   * and the kernel saw the data (checked through a second buffer it
   * writes back into the user's array). */
  {
    static ledger l;
    syrah_buffer *b = NULL, *out = NULL;
    syrah_buffer_desc od = bd;
    syrah_accessor two[2];
    syrah_kernel_arg args[3];
    int result[N], zero = 0;
    memset(&l, 0, sizeof l);
    alloc.user_data = &l;
    for (i = 0; i < N; ++i) host[i] = 3 * i;
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    a = whole(b, SYRAH_ACCESS_READ_WRITE);
    args[0] = arg;
    args[1] = syrah_arg_value(&steps, sizeof steps);
    args[2] = syrah_arg_value(&zero, sizeof zero);
    EXPECT_OK(syrah_queue_submit_kernel(q, slow, &r, &a, 1, args, 3, NULL, 0, NULL));
    EXPECT_OK(syrah_buffer_release(b));
    snprintf(what, sizeof what, "%s queue, released while its kernel ran", order);
    check_ledger(&l, what);
    /* The same with the result copied out by a second kernel first. */
    memset(&l, 0, sizeof l);
    REQUIRE_OK(syrah_buffer_create(&bd, &b));
    od.host_pointer = result;
    od.ownership = SYRAH_HOST_WRITE_BACK;
    od.allocator = NULL;
    REQUIRE_OK(syrah_buffer_create(&od, &out));
    a = whole(b, SYRAH_ACCESS_READ_WRITE);
    EXPECT_OK(syrah_queue_submit_kernel(q, slow, &r, &a, 1, args, 3, NULL, 0, NULL));
    two[0] = whole(b, SYRAH_ACCESS_READ);
    two[1] = whole(out, SYRAH_ACCESS_DISCARD_WRITE);
    {
      syrah_program *cp = NULL;
      syrah_kernel *copyk = NULL;
      syrah_kernel_arg cargs[2];
      cargs[0] = arg;
      cargs[1] = arg;
      cargs[1].size = 1;
      EXPECT_OK(syrah_program_create_from_source(
          ctx, "__kernel void copyk(__global const int *a, __global int *b)"
               "{ b[get_global_id(0)] = a[get_global_id(0)]; }",
          NULL, &cp));
      EXPECT_OK(syrah_kernel_create(cp, "copyk", &copyk));
      EXPECT_OK(syrah_queue_submit_kernel(q, copyk, &r, two, 2, cargs, 2, NULL, 0, NULL));
      EXPECT_OK(syrah_buffer_release(b));
      check_ledger(&l, what);
      EXPECT_OK(syrah_buffer_release(out)); /* writes back */
      for (i = 0, ok = 1; i < N; ++i) ok &= result[i] == 6 * i;
      EXPECT_TRUE(ok);
      syrah_kernel_release(copyk);
      syrah_program_release(cp);
    }
  }
  EXPECT_OK(syrah_queue_wait(q));
out:
  if (slow) syrah_kernel_release(slow);
  if (twice) syrah_kernel_release(twice);
  if (prog) syrah_program_release(prog);
  if (q) syrah_queue_release(q);
  if (ctx) syrah_context_release(ctx);
}

static void per_device(const syrah_device *d) {
  on_queue(d, SYRAH_QUEUE_IN_ORDER);
  on_queue(d, 0);
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_release");
}
