/* A device that faults in a kernel, on the CUDA back end: the fault is
 * reported to the program, and a copy into ordinary memory queued behind
 * the kernel (landed by Syrah's landing thread, chunk by chunk as the
 * device marks them) is let go of once the fault is known, instead of
 * being looked for forever. CUDA keeps such a fault for the whole
 * context, so this runs in a process of its own.
 *
 * The landing thread's context switches are counted from /proc while the
 * program does nothing: a thread still looking for the lost copy wakes
 * every 50 µs. */
#define _POSIX_C_SOURCE 200809L
#include "testing.h"

#include <dirent.h>
#include <stdint.h>

static const char *SRC =
    "__kernel void spin(__global uint *s, uint n) {\n"
    "  uint x = s[get_global_id(0)];\n"
    "  for (uint k = 0; k < n; ++k) x = x * 1664525u + 1013904223u;\n"
    "  s[get_global_id(0)] = x;\n"
    "}\n"
    "__kernel void fault(__global uint *s, __global uint *bad, uint n) {\n"
    "  uint x = s[get_global_id(0)];\n"
    "  for (uint k = 0; k < n; ++k) x = x * 1664525u + 1013904223u;\n"
    "  bad[get_global_id(0) * 1024u] = x;\n"
    "}\n";

/* The context switches of this process's threads named `name`, summed;
 * `*threads` gets how many there are. */
static long switches_of(const char *name, int *threads) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  long total = 0;
  *threads = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL) {
    char path[300], line[256];
    FILE *f;
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    if (strcmp(line, name) != 0) continue;
    ++*threads;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f)) {
      long v;
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
          sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
        total += v;
    }
    fclose(f);
  }
  closedir(d);
  return total;
}


static void test_device(const syrah_device *d) {
  enum { N = 1 << 20, GROUPS = 4096 };
  uint64_t backend = 0;
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *p = NULL;
  syrah_kernel *k = NULL, *spin = NULL;
  void *m = NULL, *s = NULL;
  int *back = NULL, threads = 0, i;
  uint32_t iters = 20000000;
  syrah_kernel_arg args[3];
  syrah_range r = syrah_range_1d(GROUPS);
  syrah_status st;
  long before, after;
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
  if (backend != SYRAH_BACKEND_CUDA) {
    t_skip("a kernel that faults", "only the CUDA back end is tested: elsewhere a wild write may end the process");
    return;
  }
  back = (int *)malloc(N * sizeof(int));
  if (!back) {
    T_FAIL("out of host memory");
    return;
  }
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_program_create_from_source(ctx, SRC, NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "fault", &k));
  REQUIRE_OK(syrah_kernel_create(p, "spin", &spin));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N * sizeof(int), &m));
  REQUIRE_OK(syrah_malloc_device(ctx, d, GROUPS * sizeof(uint32_t), &s));
  EXPECT_OK(syrah_queue_memset(q, s, 0, GROUPS * sizeof(uint32_t), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memset(q, m, 0, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  /* A first copy landed behind a kernel that runs well: what landing
   * takes the first time (pinned memory, the thread) is ready before the
   * kernel below can fault. */
  args[0] = syrah_arg_usm(s);
  args[1] = syrah_arg_value(&iters, sizeof iters);
  EXPECT_OK(syrah_queue_launch(q, spin, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, back, m, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  ++t_checks;
  if (back[0] != 0 || back[N - 1] != 0)
    T_FAIL("the copy landed behind a kernel that ran well gave %d, %d, expected 0", back[0], back[N - 1]);
  for (i = 0; i < N; ++i) back[i] = -7;
  /* A kernel that spins for milliseconds, then writes far outside any
   * allocation; the copy behind it goes to the landing thread. */
  args[0] = syrah_arg_usm(s);
  args[1] = syrah_arg_usm((void *)(uintptr_t)4096);
  args[2] = syrah_arg_value(&iters, sizeof iters);
  EXPECT_OK(syrah_queue_launch(q, k, &r, args, 3, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, back, m, N * sizeof(int), NULL, 0, NULL));
  st = syrah_queue_wait(q);
  ++t_checks;
  if (st == SYRAH_SUCCESS)
    T_FAIL("waiting for a kernel that wrote outside every allocation succeeded");
  else
    printf("-- the fault was reported: %s: %s\n", syrah_status_name(st), syrah_last_error_message());
  ++t_checks;
  if (back[0] != -7 || back[N - 1] != -7)
    T_FAIL("the copy behind the fault wrote the destination (%d, %d), expected it left at -7", back[0], back[N - 1]);
  /* The landing thread learns of the loss at its next look. */
  t_sleep_ms(20);
  before = switches_of("syrah-landing", &threads);
  t_sleep_ms(300);
  after = switches_of("syrah-landing", &threads);
  ++t_checks;
  if (threads != 1)
    T_FAIL("%d landing threads, expected 1 (the copy was not landed by it)", threads);
  ++t_checks;
  if (before < 0 || after - before > 30)
    T_FAIL("the landing thread switched %ld times in 300 ms of nothing to land, expected at most 30", after - before);
  else
    printf("-- the landing thread switched %ld times in 300 ms after the fault\n", after - before);
  /* The context is lost: its calls may fail now, but must not crash. */
  syrah_free(ctx, m);
  syrah_free(ctx, s);
  syrah_kernel_release(k);
  syrah_kernel_release(spin);
  syrah_program_release(p);
  syrah_queue_release(q);
  syrah_context_release(ctx);
  free(back);
}

int main(void) {
  t_for_each_device(test_device);
  return t_finish("test_device_lost");
}
