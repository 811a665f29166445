/* Large copies between ordinary host memory and device memory: USM memcpy
 * both ways, buffer migration both ways, ordering on an in-order queue,
 * and a copy behind a failed dependency. Devices with memory of their own
 * copy these through pinned chunks; SYRAH_STAGING=on does so on every
 * device, and SYRAH_STAGING=probe sends them to the driver from a runtime
 * thread that times each (CTest runs this test all three ways). Sizes are not multiples of the
 * chunk, so the last chunk is partial. Forced either way, the test also
 * writes a trace and checks that each large copy took the route asked for
 * and carries its bytes there, and that the device's own copies for them
 * (chunks, or one direct copy each) are on the device's staging timeline
 * and add up to the same bytes. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <stdint.h>
#include <unistd.h>

static const char *kSource = "__kernel void add(__global uint *p, int v) { p[get_global_id(0)] += (uint)v; }\n";

static int forced;
/* How the trace names the forced route and the other, and how many large
 * copies ran (each a host job on the trace). */
static const char *route = NULL, *other = NULL;
static unsigned long long ran = 0;
static char kTrace[64];

/* 78 MiB and 12 bytes: more than the 64 MiB ring, so later chunks reuse its
 * space: the first of them that of the five small chunks a copy starts
 * with; towards the host, the small chunks it ends with (6 MiB and 12
 * bytes cut in halves) that of one large chunk. */
enum { WORDS = (78 << 20) / 4 + 3 };

static uint32_t word(size_t i, uint32_t seed) { return (uint32_t)(i * 2654435761u) ^ seed; }

static void fill(uint32_t *p, size_t n, uint32_t seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = word(i, seed);
}

/* Index of the first word that differs from the pattern plus `add`, or n. */
static size_t first_wrong(const uint32_t *p, size_t n, uint32_t seed, uint32_t add) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (p[i] != word(i, seed) + add) return i;
  return n;
}

static void test_usm(const syrah_device *d, syrah_context *ctx, syrah_kernel *k, uint32_t *host) {
  const size_t bytes = (size_t)WORDS * 4;
  syrah_queue *q = NULL;
  uint32_t *dev = NULL;
  syrah_event *user = NULL, *ev = NULL;
  syrah_event_status st = 0;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(WORDS);
  int v = 7;
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("staged USM copies", "the device has no USM (strategy none)");
    return;
  }
  REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_malloc_device(ctx, d, bytes, (void **)&dev));
  /* In order: to the device, a kernel, back to the host. */
  fill(host, WORDS, 11);
  args[0] = syrah_arg_usm(dev);
  args[1] = syrah_arg_value(&v, sizeof v);
  EXPECT_OK(syrah_queue_memcpy(q, dev, host, bytes, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, dev, bytes, NULL, 0, &ev));
  EXPECT_OK(syrah_event_wait(ev));
  EXPECT_EQ(first_wrong(host, WORDS, 11, 7), (size_t)WORDS);
  syrah_event_release(ev);
  /* A copy behind a failed dependency fails; a staged one also leaves the
   * host alone (OpenCL leaves it to the driver whether a command behind
   * a failed user event runs, and some do run it). */
  memset(host, 0xab, bytes);
  REQUIRE_OK(syrah_user_event_create(ctx, &user));
  EXPECT_OK(syrah_queue_memcpy(q, host, dev, bytes, (const syrah_event *const *)&user, 1, &ev));
  EXPECT_OK(syrah_user_event_complete(user, true));
  syrah_event_wait(ev);
  EXPECT_OK(syrah_event_get_status(ev, &st));
  EXPECT_EQ(st, SYRAH_EVENT_FAILED);
  if (forced) {
    EXPECT_EQ(host[0], 0xababababu);
    EXPECT_EQ(host[WORDS - 1], 0xababababu);
  } else {
    t_skip("host memory untouched behind a failed dependency",
           "without SYRAH_STAGING=on or probe the copy may be the driver's, which may run it");
  }
  ran += 2; /* there and back; the one behind the failed dependency never ran */
  syrah_event_release(ev);
  syrah_event_release(user);
  syrah_queue_wait(q);
  EXPECT_OK(syrah_free(ctx, dev));
  syrah_queue_release(q);
}

static void test_buffer(const syrah_device *d, syrah_context *ctx, syrah_kernel *k, uint32_t *host) {
  const size_t bytes = (size_t)WORDS * 4;
  syrah_queue *q = NULL;
  syrah_buffer *b = NULL;
  syrah_buffer_desc bd;
  syrah_buffer_stats s;
  syrah_host_accessor *ha = NULL;
  uint32_t *p = NULL;
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  fill(host, WORDS, 5);
  bd = t_desc1(WORDS, host, SYRAH_HOST_WRITE_BACK);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  /* To the device for a kernel, home for a host accessor. */
  EXPECT_OK(t_launch_rw(q, k, b, WORDS, 3, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  EXPECT_TRUE(p != NULL);
  if (p) EXPECT_EQ(first_wrong(p, WORDS, 5, 3), (size_t)WORDS);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_buffer_get_stats(b, &s));
  EXPECT_EQ(s.host_to_device_bytes, (uint64_t)bytes);
  EXPECT_EQ(s.host_to_device_copies, 1u);
  EXPECT_EQ(s.device_to_host_bytes, (uint64_t)bytes);
  EXPECT_EQ(s.device_to_host_copies, 1u);
  /* Again from the device, then written back at release. */
  EXPECT_OK(t_launch_rw(q, k, b, WORDS, 4, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(first_wrong(host, WORDS, 5, 7), (size_t)WORDS);
  ran += 3; /* to the device, home for the accessor, home at release */
  syrah_queue_release(q);
}

/* The unsigned number after "bytes": in a trace record, 0 if none. */
static unsigned long long bytes_of(const char *line) {
  const char *at = strstr(line, "\"bytes\":");
  return at ? strtoull(at + 8, NULL, 10) : 0;
}

/* Every large copy is on the trace by the route forced, with its bytes;
 * none by the other. The device copies that made them are there too. */
static void check_routes(void) {
  size_t len = 0;
  char *text = t_slurp(kTrace, &len), *line;
  char bytes[64], mine[64], theirs[64];
  unsigned long long by_route = 0, by_other = 0, chunks = 0, directs = 0, device_bytes = 0;
  EXPECT_TRUE(text != NULL);
  if (!text) return;
  snprintf(bytes, sizeof bytes, "\"bytes\":%llu", (unsigned long long)WORDS * 4);
  snprintf(mine, sizeof mine, " bytes (%s)\"", route);
  snprintf(theirs, sizeof theirs, " bytes (%s)\"", other);
  for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (strstr(line, "\"cat\":\"staging\"")) {
      chunks += strstr(line, "\"name\":\"chunk copy\"") != NULL;
      directs += strstr(line, "\"name\":\"direct copy\"") != NULL;
      device_bytes += bytes_of(line);
    }
    if (!strstr(line, "\"cat\":\"copy\"")) continue;
    if (strstr(line, mine) && strstr(line, bytes)) ++by_route;
    if (strstr(line, theirs)) ++by_other;
  }
  EXPECT_EQ(by_route, ran);
  EXPECT_EQ(by_other, 0);
  EXPECT_EQ(device_bytes, ran * (unsigned long long)WORDS * 4);
  if (strcmp(route, "staged") == 0) {
    /* More than one chunk each: the copies are larger than a chunk. */
    EXPECT_TRUE(chunks > ran);
    EXPECT_EQ(directs, 0);
  } else {
    EXPECT_EQ(directs, ran);
    EXPECT_EQ(chunks, 0);
  }
  printf("trace: %llu large copies (%s) with their bytes, %llu (%s); on the staging timelines %llu chunk copies "
         "and %llu direct copies of %llu bytes\n",
         by_route, route, by_other, other, chunks, directs, device_bytes);
  free(text);
}

static void run(const syrah_device *d) {
  uint32_t *host = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL;
  uint64_t backend = 0;
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
  if (backend == SYRAH_BACKEND_CUDA) {
    t_skip("copies staged through pinned chunks",
           "staging is the OpenCL back end's; the CUDA back end bounces ordinary host memory itself");
    return;
  }
  host = (uint32_t *)malloc((size_t)WORDS * 4);
  if (!host) {
    T_FAIL("cannot allocate %zu bytes", (size_t)WORDS * 4);
    return;
  }
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "add", &k));
  test_usm(d, ctx, k, host);
  test_buffer(d, ctx, k, host);
  syrah_kernel_release(k);
  syrah_program_release(prog);
  syrah_context_release(ctx);
  free(host);
}

int main(void) {
  const char *s = getenv("SYRAH_STAGING");
  /* "probe" sends those copies to the driver from a runtime thread that
   * waits for each, as the default does when it measures the driver's
   * path: a host job too, so it also leaves the host alone behind a failed
   * dependency. */
  forced = s && (strcmp(s, "on") == 0 || strcmp(s, "1") == 0 || strcmp(s, "probe") == 0);
  printf("staging: %s\n", s && *s ? s : "default (devices with memory of their own)");
  if (forced) {
    int probe = strcmp(s, "probe") == 0;
    route = probe ? "direct, timed" : "staged";
    other = probe ? "staged" : "direct, timed";
    snprintf(kTrace, sizeof kTrace, "syrah_test_staging_%ld.json", (long)getpid());
    setenv("SYRAH_TRACE", kTrace, 1);
  }
  t_for_each_device(run);
  if (forced) {
    check_routes();
    if (t_failures == 0) remove(kTrace);
  } else {
    t_skip("each copy's route and bytes in a trace",
           "only with SYRAH_STAGING=on or probe, where the route of every copy is known beforehand");
  }
  return t_finish("test_staging");
}
