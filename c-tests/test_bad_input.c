/* Bad input to every exported function: NULL handles and outputs, zero
 * and huge sizes, unknown enumeration values, misaligned and foreign
 * pointers, ranges and offsets outside their buffer, and (with
 * SYRAH_VALIDATE=1) released handles and double releases. Every call must
 * fail with the expected status and a message naming the bad argument and
 * its value; the closing line gives the number of bad calls tried. A CTest
 * check makes sure every function of the header appears here. */
#include "testing.h"

#include <stdint.h>

static int bad_calls = 0;

/* One bad call: it must return `expected` with `needle` in its message. */
#define BAD(call, expected, needle) \
  do {                              \
    ++bad_calls;                    \
    EXPECT_ERR(call, expected, needle); \
  } while (0)

#define NUL SYRAH_ERROR_NULL_ARGUMENT
#define INV SYRAH_ERROR_INVALID_ARGUMENT

static const char *SRC =
    "__kernel void add(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void loc(__global int *p, __local int *l) { l[get_local_id(0)] = 1;"
    " barrier(CLK_LOCAL_MEM_FENCE); p[get_global_id(0)] = l[0]; }\n";

static syrah_status noop_task(const syrah_host_task_context *c, void *u) {
  (void)c;
  (void)u;
  return SYRAH_SUCCESS;
}

/* Bad calls from inside a running task of a group with one accessor. */
static syrah_status bad_task(const syrah_host_task_context *c, void *u) {
  void *p = NULL;
  bool is_usm = false;
  (void)u;
  BAD(syrah_host_task_get_pointer(c, 1, &p), INV, "index 1");
  BAD(syrah_host_task_get_pointer(c, 0, NULL), NUL, "out_pointer");
  BAD(syrah_host_task_get_native(c, 77, &p), INV, "77");
  BAD(syrah_host_task_get_native(c, SYRAH_NATIVE_QUEUE, NULL), NUL, "out_object");
  BAD(syrah_host_task_get_native_buffer(c, 3, &p, &is_usm), INV, "index 3");
  BAD(syrah_host_task_get_native_buffer(c, 0, NULL, &is_usm), NUL, "out_object");
  BAD(syrah_host_task_get_native_buffer(c, 0, &p, NULL), NUL, "out_is_usm");
  return SYRAH_SUCCESS;
}

static bool t_has_intel_usm(const syrah_device *d) {
  uint64_t s = 0;
  return syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_USM_STRATEGY, &s) == SYRAH_SUCCESS &&
         s == SYRAH_USM_STRATEGY_INTEL;
}

static int32_t score_none(const syrah_device *d, void *u) {
  (void)d;
  (void)u;
  return -1;
}

/* Calls that need no device: NULL everywhere, unknown values. */
static void test_without_device(void) {
  const syrah_platform *plats[4];
  const syrah_device *devs[4];
  const syrah_device *dev = NULL;
  const syrah_platform *plat = NULL;
  size_t n = 0;
  int32_t score = 0;
  syrah_buffer *buf = NULL;
  syrah_buffer_desc desc;
  syrah_context *ctx = NULL;

  EXPECT_TRUE(strcmp(syrah_status_name(12345), "SYRAH_STATUS_UNKNOWN") == 0);
  BAD(syrah_set_error_message(NULL), NUL, "message");
  EXPECT_OK(syrah_set_error_message("set by the caller"));
  EXPECT_TRUE(strcmp(syrah_last_error_message(), "set by the caller") == 0);
  EXPECT_TRUE(strcmp(syrah_status_name(-1), "SYRAH_STATUS_UNKNOWN") == 0);
  EXPECT_EQ(syrah_api_version(), SYRAH_VERSION);

  BAD(syrah_get_platforms(plats, 4, NULL), NUL, "out_count");
  BAD(syrah_get_platforms(NULL, 4, &n), NUL, "capacity is 4");
  BAD(syrah_get_devices(devs, 4, NULL), NUL, "out_count");
  BAD(syrah_get_devices(NULL, 3, &n), NUL, "capacity is 3");
  BAD(syrah_platform_get_info(NULL, SYRAH_PLATFORM_INFO_NAME, NULL, 0, &n), NUL, "platform");
  BAD(syrah_platform_get_devices(NULL, devs, 4, &n), NUL, "platform");
  BAD(syrah_device_get_platform(NULL, &plat), NUL, "device");
  BAD(syrah_device_get_info_string(NULL, SYRAH_DEVICE_INFO_NAME, NULL, 0, &n), NUL, "device");
  BAD(syrah_device_get_info_u64(NULL, SYRAH_DEVICE_INFO_TYPE, NULL), NUL, "");
  BAD(syrah_device_has_aspect(NULL, SYRAH_ASPECT_CPU, NULL), NUL, "");
  BAD(syrah_device_select(SYRAH_SELECTOR_DEFAULT, NULL), NUL, "out_device");
  BAD(syrah_device_select(77, &dev), INV, "77");
  BAD(syrah_device_select_by_string(NULL, &dev), NUL, "spec");
  BAD(syrah_device_select_by_string("gpu", NULL), NUL, "out_device");
  BAD(syrah_device_select_by_string("warpdrive:9", &dev), SYRAH_ERROR_INVALID_ARGUMENT, "warpdrive");
  BAD(syrah_device_select_by_string("7.7", &dev), SYRAH_ERROR_DEVICE_NOT_FOUND, "7.7");
  BAD(syrah_device_select_by_score(NULL, NULL, &dev), NUL, "score");
  BAD(syrah_device_select_by_score(score_none, NULL, NULL), NUL, "out_device");
  BAD(syrah_device_select_by_score(score_none, NULL, &dev), SYRAH_ERROR_DEVICE_NOT_FOUND, "score");
  BAD(syrah_device_default_score(NULL, &score), NUL, "device");

  BAD(syrah_context_create(NULL, 1, &ctx), NUL, "count is 1");
  BAD(syrah_context_create(NULL, 0, &ctx), INV, "0");
  BAD(syrah_context_retain(NULL), NUL, "context");
  BAD(syrah_context_release(NULL), NUL, "context");
  BAD(syrah_context_get_devices(NULL, devs, 4, &n), NUL, "context");
  BAD(syrah_context_get_program_count(NULL, &n), NUL, "context");
  BAD(syrah_context_trim(NULL, &n), NUL, "context");

  BAD(syrah_queue_create(NULL, NULL, 0, NULL, NULL, NULL), NUL, "out_queue");
  BAD(syrah_queue_retain(NULL), NUL, "queue");
  BAD(syrah_queue_release(NULL), NUL, "queue");
  BAD(syrah_queue_get_context(NULL, &ctx), NUL, "queue");
  BAD(syrah_queue_get_device(NULL, &dev), NUL, "queue");
  BAD(syrah_queue_wait(NULL), NUL, "queue");
  BAD(syrah_queue_barrier(NULL, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_launch(NULL, NULL, NULL, NULL, 0, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_submit_kernel(NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_single_task(NULL, NULL, NULL, 0, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_memcpy(NULL, &n, &n, sizeof n, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_memset(NULL, &n, 0, sizeof n, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_fill(NULL, &n, &n, sizeof n, sizeof n, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_prefetch(NULL, &n, sizeof n, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_mem_advise(NULL, &n, sizeof n, 0, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_submit_host_tasks(NULL, NULL, 0, NULL, 0, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_copy_from_accessor(NULL, NULL, &n, NULL, NULL, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_copy_to_accessor(NULL, &n, NULL, NULL, NULL, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_copy_accessor(NULL, NULL, NULL, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_fill_accessor(NULL, NULL, &n, 4, NULL, 0, NULL), NUL, "queue");

  BAD(syrah_event_wait(NULL), NUL, "event");
  BAD(syrah_event_wait_list(NULL, 2), NUL, "count is 2");
  BAD(syrah_event_get_status(NULL, NULL), NUL, "");
  BAD(syrah_event_get_profiling(NULL, SYRAH_PROFILING_END, NULL), NUL, "");
  BAD(syrah_user_event_create(NULL, NULL), NUL, "");
  BAD(syrah_user_event_complete(NULL, false), NUL, "event");
  BAD(syrah_user_event_fail(NULL, "lost"), NUL, "event");
  BAD(syrah_event_retain(NULL), NUL, "event");
  BAD(syrah_event_release(NULL), NUL, "event");

  BAD(syrah_program_create_from_source(NULL, SRC, NULL, NULL), NUL, "");
  BAD(syrah_program_create_from_il(NULL, SRC, 4, NULL, NULL), NUL, "");
  BAD(syrah_program_create_from_binary(NULL, NULL, SRC, 4, NULL, NULL), NUL, "");
  BAD(syrah_program_get_binary(NULL, NULL, NULL, 0, &n), NUL, "program");
  BAD(syrah_program_get_build_log(NULL, NULL, NULL, 0, &n), NUL, "program");
  BAD(syrah_program_retain(NULL), NUL, "program");
  BAD(syrah_program_release(NULL), NUL, "program");
  BAD(syrah_kernel_create(NULL, "add", NULL), NUL, "");
  BAD(syrah_kernel_get_info(NULL, NULL, SYRAH_KERNEL_INFO_NUM_ARGS, NULL), NUL, "");
  BAD(syrah_kernel_set_arg(NULL, 0, NULL), NUL, "kernel");
  BAD(syrah_kernel_retain(NULL), NUL, "kernel");
  BAD(syrah_kernel_release(NULL), NUL, "kernel");

  BAD(syrah_malloc_device(NULL, NULL, 64, NULL), NUL, "");
  BAD(syrah_malloc_host(NULL, 64, NULL), NUL, "");
  BAD(syrah_malloc_pinned(NULL, 64, NULL), NUL, "");
  BAD(syrah_malloc_shared(NULL, NULL, 64, NULL), NUL, "");
  BAD(syrah_aligned_alloc_device(NULL, NULL, 64, 64, NULL), NUL, "");
  BAD(syrah_aligned_alloc_host(NULL, 64, 64, NULL), NUL, "");
  BAD(syrah_aligned_alloc_shared(NULL, NULL, 64, 64, NULL), NUL, "");
  BAD(syrah_free(NULL, &n), NUL, "context");
  BAD(syrah_get_pointer_type(NULL, &n, NULL), NUL, "");
  BAD(syrah_get_pointer_device(NULL, &n, NULL), NUL, "");

  BAD(syrah_host_task_get_pointer(NULL, 0, NULL), NUL, "");
  BAD(syrah_host_task_get_native(NULL, SYRAH_NATIVE_QUEUE, NULL), NUL, "");
  BAD(syrah_host_task_get_native_buffer(NULL, 0, NULL, NULL), NUL, "");

  /* Buffers need no device until they are used. */
  BAD(syrah_buffer_create(NULL, &buf), NUL, "desc");
  desc = t_desc1(16, NULL, SYRAH_HOST_NONE);
  BAD(syrah_buffer_create(&desc, NULL), NUL, "out_buffer");
  desc.element_size = 0;
  BAD(syrah_buffer_create(&desc, &buf), INV, "element size is 0");
  desc = t_desc1(16, NULL, SYRAH_HOST_NONE);
  desc.dimensions = 0;
  BAD(syrah_buffer_create(&desc, &buf), INV, "not 0");
  desc.dimensions = 4;
  BAD(syrah_buffer_create(&desc, &buf), INV, "not 4");
  desc = t_desc1(0, NULL, SYRAH_HOST_NONE);
  BAD(syrah_buffer_create(&desc, &buf), INV, "range");
  desc = t_desc1(SIZE_MAX / 2, NULL, SYRAH_HOST_NONE);
  BAD(syrah_buffer_create(&desc, &buf), INV, "overflow");
  desc = t_desc1(16, NULL, 99);
  BAD(syrah_buffer_create(&desc, &buf), INV, "ownership 99");
  desc = t_desc1(16, NULL, SYRAH_HOST_WRITE_BACK);
  BAD(syrah_buffer_create(&desc, &buf), NUL, "host_pointer");
  BAD(syrah_buffer_reinterpret(NULL, 4, 1, &n, &buf), NUL, "buffer");
  BAD(syrah_buffer_retain(NULL), NUL, "buffer");
  BAD(syrah_buffer_release(NULL), NUL, "buffer");
  BAD(syrah_buffer_get_info(NULL, NULL), NUL, "");
  BAD(syrah_buffer_get_device_pointer(NULL, NULL, NULL), NUL, "");
  BAD(syrah_buffer_get_stats(NULL, NULL), NUL, "");
  BAD(syrah_buffer_set_final_data(NULL, &n), NUL, "buffer");
  BAD(syrah_buffer_set_write_back(NULL, true), NUL, "buffer");
  BAD(syrah_buffer_update_host(NULL, NULL), NUL, "buffer");
  BAD(syrah_buffer_host_access(NULL, SYRAH_ACCESS_READ, NULL, NULL, NULL, NULL), NUL, "");
  BAD(syrah_host_accessor_release(NULL), NUL, "accessor");
}

/* A buffer of 64 ints and its handle checks. */
static void test_buffer_input(const syrah_queue *q, const syrah_kernel *k) {
  int host[64];
  syrah_buffer_desc desc = t_desc1(64, host, SYRAH_HOST_WRITE_BACK);
  syrah_buffer *b = NULL, *view = NULL;
  syrah_buffer_info info;
  syrah_buffer_stats stats;
  syrah_host_accessor *ha = NULL;
  void *p = NULL;
  size_t off[3] = {60, 0, 0}, rng[3] = {8, 0, 0}, huge[3] = {SIZE_MAX, 0, 0};
  syrah_accessor acc, acc2;
  syrah_range r = syrah_range_1d(64);
  syrah_kernel_arg args[2];
  int v = 1;
  memset(host, 0, sizeof host);
  REQUIRE_OK(syrah_buffer_create(&desc, &b));

  BAD(syrah_buffer_get_info(b, NULL), NUL, "out_info");
  BAD(syrah_buffer_get_stats(b, NULL), NUL, "out_stats");
  BAD(syrah_buffer_get_device_pointer(b, NULL, &p), NUL, "queue");
  BAD(syrah_buffer_get_device_pointer(b, q, NULL), NUL, "out_pointer");
  BAD(syrah_buffer_reinterpret(b, 0, 1, rng, &view), INV, "element size is 0");
  BAD(syrah_buffer_reinterpret(b, 4, 5, rng, &view), INV, "not 5");
  BAD(syrah_buffer_reinterpret(b, 4, 1, NULL, &view), NUL, "range");
  BAD(syrah_buffer_reinterpret(b, 4, 1, rng, NULL), NUL, "out_buffer");
  BAD(syrah_buffer_reinterpret(b, 4, 1, rng, &view), INV, "32");
  BAD(syrah_buffer_reinterpret(b, 4, 1, huge, &view), INV, "");

  BAD(syrah_buffer_host_access(b, 0, NULL, NULL, &ha, &p), INV, "mode 0");
  BAD(syrah_buffer_host_access(b, 42, NULL, NULL, &ha, &p), INV, "mode 42");
  BAD(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, NULL, &p), NUL, "out_accessor");
  BAD(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, NULL), NUL, "out_pointer");
  BAD(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, off, rng, &ha, &p), INV, "60");
  BAD(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, huge, NULL, &ha, &p), INV, "");
  BAD(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, huge, &ha, &p), INV, "");
  BAD(syrah_buffer_read(NULL, NULL, NULL, host), NUL, "buffer");
  BAD(syrah_buffer_read(b, NULL, NULL, NULL), NUL, "destination");
  BAD(syrah_buffer_read(b, off, rng, host), INV, "60");
  BAD(syrah_buffer_read(b, huge, NULL, host), INV, "");
  BAD(syrah_buffer_read(b, NULL, huge, host), INV, "");

  /* Accessors out of the buffer, with bad modes or indices. */
  acc = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  acc.offset[0] = 60;
  acc.range[0] = 8;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&v, sizeof v);
  BAD(syrah_queue_submit_kernel(q, k, &r, &acc, 1, args, 2, NULL, 0, NULL), INV, "60");
  acc = t_whole(b, 17);
  BAD(syrah_queue_submit_kernel(q, k, &r, &acc, 1, args, 2, NULL, 0, NULL), INV, "17");
  acc = t_whole(NULL, SYRAH_ACCESS_READ);
  BAD(syrah_queue_submit_kernel(q, k, &r, &acc, 1, args, 2, NULL, 0, NULL), NUL, "buffer");
  acc = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  BAD(syrah_queue_submit_kernel(q, k, &r, NULL, 1, args, 2, NULL, 0, NULL), NUL, "accessors");
  args[0].size = 5;
  BAD(syrah_queue_submit_kernel(q, k, &r, &acc, 1, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
      "accessor 5");
  args[0].size = 0;

  BAD(syrah_queue_copy_from_accessor(q, NULL, host, NULL, NULL, NULL, 0, NULL), NUL, "source");
  BAD(syrah_queue_copy_from_accessor(q, &acc, NULL, NULL, NULL, NULL, 0, NULL), NUL, "destination");
  acc.mode = SYRAH_ACCESS_DISCARD_WRITE;
  BAD(syrah_queue_copy_from_accessor(q, &acc, host, NULL, NULL, NULL, 0, NULL), INV, "discard_write");
  acc.mode = SYRAH_ACCESS_READ;
  BAD(syrah_queue_copy_to_accessor(q, host, &acc, NULL, NULL, NULL, 0, NULL), INV, "read");
  BAD(syrah_queue_copy_to_accessor(q, NULL, &acc, NULL, NULL, NULL, 0, NULL), NUL, "source");
  BAD(syrah_queue_copy_to_accessor(q, host, NULL, NULL, NULL, NULL, 0, NULL), NUL, "destination");
  acc2 = t_whole(b, SYRAH_ACCESS_WRITE);
  acc2.range[0] = 32;
  BAD(syrah_queue_copy_accessor(q, &acc, &acc2, NULL, 0, NULL), INV, "32");
  BAD(syrah_queue_copy_accessor(q, NULL, &acc2, NULL, 0, NULL), NUL, "source");
  BAD(syrah_queue_copy_accessor(q, &acc, NULL, NULL, 0, NULL), NUL, "destination");
  acc2 = t_whole(b, SYRAH_ACCESS_WRITE);
  BAD(syrah_queue_fill_accessor(q, &acc2, NULL, 4, NULL, 0, NULL), NUL, "pattern");
  BAD(syrah_queue_fill_accessor(q, &acc2, &v, 3, NULL, 0, NULL), INV, "3");
  BAD(syrah_queue_fill_accessor(q, &acc2, &v, 0, NULL, 0, NULL), INV, "0");
  BAD(syrah_queue_fill_accessor(q, &acc2, host, 256, NULL, 0, NULL), INV, "256");
  BAD(syrah_queue_fill_accessor(q, NULL, &v, 4, NULL, 0, NULL), NUL, "destination");
  BAD(syrah_queue_fill_accessor(q, &acc, &v, 4, NULL, 0, NULL), INV, "read");
  BAD(syrah_queue_submit_host_tasks(q, &acc, 1, NULL, 1, NULL, 0, NULL), NUL, "tasks");
  BAD(syrah_queue_submit_host_tasks(q, NULL, 1, NULL, 0, NULL, 0, NULL), NUL, "accessors");

  EXPECT_OK(syrah_buffer_get_info(b, &info));
  EXPECT_EQ(info.size_bytes, sizeof host);
  EXPECT_OK(syrah_buffer_get_stats(b, &stats));
  EXPECT_OK(syrah_buffer_set_write_back(b, true));
  EXPECT_OK(syrah_buffer_set_final_data(b, host));
  /* Nothing above reached the device: the host data is untouched. */
  EXPECT_OK(syrah_buffer_release(b));
  EXPECT_EQ(host[63], 0);
}

/* Launch shapes, argument lists and events that are wrong. */
static void test_launch_input(const syrah_device *d, const syrah_context *ctx, const syrah_queue *q,
                              const syrah_kernel *add, const syrah_kernel *loc) {
  syrah_range r = syrah_range_1d(64);
  syrah_kernel_arg args[3];
  int v = 1;
  uint64_t local_mem = 0, value = 0;
  const syrah_event *deps[2] = {NULL, NULL};
  syrah_event *ev = NULL;
  syrah_event_status st;
  uint64_t ns = 0;
  int fake = 0;
  void *dptr = NULL;
  bool usm = t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS);
  char name[64];

  args[0] = syrah_arg_usm(NULL);
  args[1] = syrah_arg_value(&v, sizeof v);
  BAD(syrah_queue_launch(q, NULL, &r, args, 2, NULL, 0, NULL), NUL, "kernel");
  BAD(syrah_queue_launch(q, add, NULL, args, 2, NULL, 0, NULL), NUL, "range");
  BAD(syrah_queue_launch(q, add, &r, NULL, 2, NULL, 0, NULL), NUL, "args");
  BAD(syrah_queue_launch(q, add, &r, args, 1, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "1");
  BAD(syrah_queue_launch(q, add, &r, args, 3, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "3");
  args[1].kind = 9;
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "kind 9");
  args[1] = syrah_arg_value(NULL, 4);
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), NUL, "args[1]");
  args[1] = syrah_arg_value(&v, 0);
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "size 0");
  args[1] = syrah_arg_value(&v, sizeof v);
  r.dimensions = 0;
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), INV, "not 0");
  r.dimensions = 4;
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), INV, "not 4");
  r = syrah_nd_range_1d(64, 7);
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_INVALID_WORK_GROUP, "7");
  r = syrah_nd_range_1d(1 << 20, 1 << 20);
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_INVALID_WORK_GROUP, "1048576");
  r = syrah_range_1d(SIZE_MAX);
  r.global_offset[0] = 16;
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 0, NULL), INV, "offset");
  r = syrah_range_1d(64);
  BAD(syrah_queue_launch(q, add, &r, args, 2, deps, 1, NULL), NUL, "dependencies[0]");
  BAD(syrah_queue_launch(q, add, &r, args, 2, NULL, 2, NULL), NUL, "count is 2");
  BAD(syrah_queue_single_task(q, NULL, args, 2, NULL, 0, NULL), NUL, "kernel");
  BAD(syrah_queue_single_task(q, add, args, 1, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "1");
  BAD(syrah_queue_barrier(q, deps, 1, NULL), NUL, "dependencies[0]");
  BAD(syrah_queue_barrier(q, NULL, 5, NULL), NUL, "count is 5");

  if (syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE, &local_mem) == SYRAH_SUCCESS) {
    r = syrah_nd_range_1d(4, 4);
    args[0] = syrah_arg_usm(NULL);
    args[1] = syrah_arg_local((size_t)local_mem * 2);
    BAD(syrah_queue_launch(q, loc, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_OUT_OF_LOCAL_MEMORY, "");
    args[1] = syrah_arg_local(0);
    BAD(syrah_queue_launch(q, loc, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "0");
  }

  {
    /* Binding: an index past the parameters, kinds that cannot be bound,
     * a NULL value; then a launch missing an argument nothing bound. */
    syrah_kernel_arg bad_arg = syrah_arg_accessor(0);
    uint64_t nargs = 0;
    EXPECT_OK(syrah_kernel_get_info(add, d, SYRAH_KERNEL_INFO_NUM_ARGS, &nargs));
    BAD(syrah_kernel_set_arg(add, (uint32_t)nargs, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "no argument");
    BAD(syrah_kernel_set_arg(add, 0, &bad_arg), SYRAH_ERROR_KERNEL_ARGUMENTS, "cannot be bound");
    bad_arg.kind = 77;
    BAD(syrah_kernel_set_arg(add, 0, &bad_arg), SYRAH_ERROR_KERNEL_ARGUMENTS, "77");
    bad_arg = syrah_arg_value(NULL, 4);
    BAD(syrah_kernel_set_arg(add, 0, &bad_arg), NUL, "NULL value");
    bad_arg = syrah_arg_local(0);
    BAD(syrah_kernel_set_arg(add, 0, &bad_arg), SYRAH_ERROR_KERNEL_ARGUMENTS, "0 bytes");
    r = syrah_range_1d(4);
    BAD(syrah_queue_launch(q, add, &r, NULL, 0, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
        "argument 0 is not bound");
    bad_arg = syrah_arg_bound();
    BAD(syrah_queue_launch(q, add, &r, &bad_arg, 1, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
        "args[0] is SYRAH_ARG_BOUND but argument 0");
    bad_arg.kind = SYRAH_ARG_ACCESSOR_ROW_PITCH;
    bad_arg.size = 0;
    BAD(syrah_queue_launch(q, add, &r, &bad_arg, 1, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
        "pitch of accessor 0");
  }
  BAD(syrah_kernel_get_info(add, d, 99, &value), INV, "99");
  BAD(syrah_kernel_get_info(add, d, SYRAH_KERNEL_INFO_NUM_ARGS, NULL), NUL, "out_value");
  BAD(syrah_kernel_get_info(add, NULL, SYRAH_KERNEL_INFO_NUM_ARGS, &value), NUL, "device");
  BAD(syrah_kernel_create(NULL, "add", (syrah_kernel **)&dptr), NUL, "program");

  /* Events. */
  REQUIRE_OK(syrah_user_event_create(ctx, &ev));
  BAD(syrah_event_get_status(ev, NULL), NUL, "out_status");
  BAD(syrah_event_get_profiling(ev, SYRAH_PROFILING_END, NULL), NUL, "out_nanoseconds");
  BAD(syrah_event_get_profiling(ev, 9, &ns), INV, "9");
  BAD(syrah_event_get_profiling(ev, SYRAH_PROFILING_END, &ns), SYRAH_ERROR_PROFILING_UNAVAILABLE, "");
  deps[0] = ev;
  BAD(syrah_event_wait_list(deps, 2), NUL, "events[1]");
  BAD(syrah_user_event_create(ctx, NULL), NUL, "out_event");
  BAD(syrah_user_event_fail(ev, NULL), NUL, "message");
  EXPECT_OK(syrah_user_event_complete(ev, false));
  BAD(syrah_user_event_complete(ev, false), INV, "already");
  BAD(syrah_user_event_fail(ev, "lost"), INV, "already");
  EXPECT_OK(syrah_event_get_status(ev, &st));
  EXPECT_EQ(st, SYRAH_EVENT_COMPLETE);
  EXPECT_OK(syrah_event_release(ev));

  /* USM: sizes, alignments, pointers that are not allocations. */
  BAD(syrah_malloc_device(ctx, d, 0, &dptr), INV, "size 0");
  BAD(syrah_malloc_device(ctx, d, SIZE_MAX, &dptr), INV, "18446744073709551615");
  BAD(syrah_malloc_device(ctx, NULL, 64, &dptr), NUL, "device");
  BAD(syrah_malloc_device(ctx, d, 64, NULL), NUL, "out_pointer");
  BAD(syrah_aligned_alloc_device(ctx, d, 3, 64, &dptr), INV, "alignment 3");
  BAD(syrah_aligned_alloc_host(ctx, 24, 64, &dptr), INV, "alignment 24");
  BAD(syrah_aligned_alloc_shared(ctx, d, 7, 64, &dptr), INV, "alignment 7");
  BAD(syrah_malloc_host(ctx, 0, &dptr), INV, "size 0");
  BAD(syrah_malloc_shared(ctx, d, 0, &dptr), INV, "size 0");
  BAD(syrah_malloc_pinned(ctx, 0, &dptr), INV, "size 0");
  BAD(syrah_malloc_pinned(ctx, SIZE_MAX, &dptr), INV, "18446744073709551615");
  BAD(syrah_free(ctx, &fake), SYRAH_ERROR_INVALID_POINTER, "0x");
  BAD(syrah_get_pointer_type(ctx, &fake, NULL), NUL, "out_type");
  BAD(syrah_get_pointer_device(ctx, &fake, (const syrah_device **)&dptr), SYRAH_ERROR_INVALID_POINTER, "0x");
  BAD(syrah_queue_memset(q, NULL, 0, 4, NULL, 0, NULL), NUL, "pointer");
  BAD(syrah_queue_fill(q, &fake, NULL, 4, 4, NULL, 0, NULL), NUL, "pattern");
  BAD(syrah_queue_memcpy(q, NULL, &fake, 4, NULL, 0, NULL), NUL, "destination");
  BAD(syrah_queue_memcpy(q, &fake, NULL, 4, NULL, 0, NULL), NUL, "source");
  BAD(syrah_queue_prefetch(q, NULL, 4, NULL, 0, NULL), NUL, "pointer");
  BAD(syrah_queue_mem_advise(q, NULL, 4, 0, NULL, 0, NULL), NUL, "pointer");
  if (usm) {
    char *m = NULL;
    REQUIRE_OK(syrah_malloc_device(ctx, d, 256, (void **)&m));
    BAD(syrah_free(ctx, m + 1), SYRAH_ERROR_INVALID_POINTER, "not at its start");
    BAD(syrah_queue_memcpy(q, m + 200, name, 64, NULL, 0, NULL), INV, "+ 64 bytes runs past");
    BAD(syrah_queue_memcpy(q, name, m, SIZE_MAX / 2, NULL, 0, NULL), INV, "");
    BAD(syrah_queue_memcpy(q, m, m + 8, 16, NULL, 0, NULL), INV, "overlap");
    BAD(syrah_queue_memset(q, m, 0, 512, NULL, 0, NULL), INV, "+ 512 bytes runs past");
    BAD(syrah_queue_memset(q, &fake, 0, 4, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER, "0x");
    BAD(syrah_queue_fill(q, m, &v, 0, 16, NULL, 0, NULL), INV, "0");
    BAD(syrah_queue_fill(q, m, &v, 4, 6, NULL, 0, NULL), INV, "6");
    BAD(syrah_queue_fill(q, m, &v, 4, 1024, NULL, 0, NULL), INV, "+ 1024 bytes runs past");
    BAD(syrah_queue_prefetch(q, m, 4096, NULL, 0, NULL), INV, "+ 4096 bytes runs past");
    BAD(syrah_queue_mem_advise(q, m, 4096, 0, NULL, 0, NULL), INV, "+ 4096 bytes runs past");
    if (!t_has_intel_usm(d))
      BAD(syrah_queue_mem_advise(q, m, 64, 0x7fff, NULL, 0, NULL), SYRAH_ERROR_FEATURE_NOT_SUPPORTED,
          "mem_advise 32767");
    else
      t_skip("mem_advise with an unknown value", "Intel's USM passes advice values to the driver, which defines them");
    EXPECT_OK(syrah_queue_wait((syrah_queue *)q));
    EXPECT_OK(syrah_free(ctx, m));
    BAD(syrah_free(ctx, m), SYRAH_ERROR_INVALID_POINTER, "0x");
  } else {
    t_skip("USM operations on allocations", "the device has no USM device allocations");
  }
}

/* Graphs: NULL handles and outputs, bad node and argument indices, ending
 * a recording never begun, a graph submitted to a queue of another
 * context. */
static void test_graph_input(const syrah_device *d, const syrah_queue *q, const syrah_kernel *k) {
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_queue *other = NULL;
  syrah_graph_backend b = 0;
  syrah_graph_exec_stats st;
  size_t n = 0;
  bool rec = true;
  int v = 1;
  syrah_kernel_arg arg = syrah_arg_value(&v, sizeof v), bad = arg;
  syrah_range r = syrah_range_1d(4);
  syrah_kernel_arg args[2];
  int *p = NULL;

  BAD(syrah_queue_begin_recording(NULL), NUL, "queue");
  BAD(syrah_queue_end_recording(NULL, &g), NUL, "queue");
  BAD(syrah_queue_end_recording(q, NULL), NUL, "out_graph");
  BAD(syrah_queue_end_recording(q, &g), INV, "the queue is not recording");
  BAD(syrah_queue_is_recording(NULL, &rec), NUL, "queue");
  BAD(syrah_queue_is_recording(q, NULL), NUL, "out_recording");
  EXPECT_OK(syrah_queue_is_recording(q, &rec));
  EXPECT_TRUE(!rec);
  BAD(syrah_graph_get_node_count(NULL, &n), NUL, "graph");
  BAD(syrah_graph_retain(NULL), NUL, "graph");
  BAD(syrah_graph_release(NULL), NUL, "graph");
  BAD(syrah_graph_finalize(NULL, &x), NUL, "graph");
  BAD(syrah_graph_exec_retain(NULL), NUL, "exec");
  BAD(syrah_graph_exec_release(NULL), NUL, "exec");
  BAD(syrah_graph_exec_get_backend(NULL, &b), NUL, "exec");
  BAD(syrah_graph_exec_set_arg(NULL, 0, 0, &arg), NUL, "exec");
  BAD(syrah_graph_exec_get_stats(NULL, &st), NUL, "exec");
  BAD(syrah_device_get_graph_backend(NULL, &b), NUL, "device");
  BAD(syrah_device_get_graph_backend(d, NULL), NUL, "out_backend");
  BAD(syrah_queue_submit_graph(NULL, NULL, NULL, 0, NULL), NUL, "queue");
  BAD(syrah_queue_submit_graph(q, NULL, NULL, 0, NULL), NUL, "exec");

  /* A one-node graph: add(p, v) on a host USM pointer or NULL. */
  EXPECT_OK(syrah_queue_begin_recording(q));
  EXPECT_OK(syrah_queue_is_recording(q, &rec));
  EXPECT_TRUE(rec);
  args[0] = syrah_arg_usm(p);
  args[1] = arg;
  BAD(syrah_queue_launch(q, k, &r, args, 1, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "takes 2 arguments, 1 given");
  bad.kind = 77;
  args[1] = bad;
  BAD(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "args[1] has the unknown kind 77");
  args[1] = arg;
  EXPECT_OK(syrah_queue_barrier(q, NULL, 0, NULL));
  REQUIRE_OK(syrah_queue_end_recording(q, &g));
  BAD(syrah_graph_get_node_count(g, NULL), NUL, "out_count");
  BAD(syrah_graph_finalize(g, NULL), NUL, "out_exec");
  REQUIRE_OK(syrah_graph_finalize(g, &x));
  BAD(syrah_graph_exec_get_backend(x, NULL), NUL, "out_backend");
  BAD(syrah_graph_exec_get_stats(x, NULL), NUL, "out_stats");
  BAD(syrah_graph_exec_set_arg(x, 0, 0, NULL), NUL, "arg");
  BAD(syrah_graph_exec_set_arg(x, 5, 0, &arg), INV, "node 5 is out of range: the graph has 1 nodes");
  BAD(syrah_graph_exec_set_arg(x, 0, 0, &arg), INV, "node 0 is a barrier, not a kernel launch");
  bad.kind = 77;
  BAD(syrah_graph_exec_set_arg(x, 0, 0, &bad), SYRAH_ERROR_KERNEL_ARGUMENTS, "arg has the unknown kind 77");
  BAD(syrah_queue_submit_graph(q, x, NULL, 3, NULL), NUL, "count is 3");
  if (syrah_queue_create(NULL, d, 0, NULL, NULL, &other) == SYRAH_SUCCESS) {
    BAD(syrah_queue_submit_graph(other, x, NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT, "the queue is on device");
    EXPECT_OK(syrah_queue_release(other));
  }
  EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  /* The refused submissions are not counted. */
  EXPECT_OK(syrah_graph_exec_get_stats(x, &st));
  EXPECT_EQ(st.submissions, 1);
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
}

static void test_with_device(const syrah_device *d) {
  syrah_context *ctx = NULL, *ctx2 = NULL;
  syrah_queue *q = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *add = NULL, *loc = NULL;
  const syrah_device *devs[2];
  const syrah_platform *plat = NULL;
  size_t n = 0;
  char buf[8];
  uint64_t v = 0;
  bool has = false;
  syrah_host_task task = {noop_task, NULL, NULL};

  BAD(syrah_device_get_info_string(d, 5000, buf, sizeof buf, &n), INV, "5000");
  BAD(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_TYPE, buf, sizeof buf, &n), INV, "100");
  BAD(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, buf, 1, &n), SYRAH_ERROR_BUFFER_TOO_SMALL, "holds 1");
  BAD(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, NULL, 8, &n), NUL, "capacity is 8");
  BAD(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_NAME, &v), INV, "1");
  BAD(syrah_device_get_info_u64(d, 9999, &v), INV, "9999");
  BAD(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, NULL), NUL, "out_value");
  BAD(syrah_device_has_aspect(d, 1000, &has), INV, "1000");
  BAD(syrah_device_has_aspect(d, SYRAH_ASPECT_CPU, NULL), NUL, "out_has");
  BAD(syrah_device_get_platform(d, NULL), NUL, "out_platform");
  BAD(syrah_device_default_score(d, NULL), NUL, "out_score");
  REQUIRE_OK(syrah_device_get_platform(d, &plat));
  BAD(syrah_platform_get_info(plat, 0, buf, sizeof buf, &n), INV, "0");
  BAD(syrah_platform_get_info(plat, SYRAH_PLATFORM_INFO_NAME, buf, 1, &n), SYRAH_ERROR_BUFFER_TOO_SMALL, "holds 1");
  BAD(syrah_platform_get_devices(plat, NULL, 2, &n), NUL, "capacity is 2");
  BAD(syrah_platform_get_devices(plat, devs, 2, NULL), NUL, "out_count");

  devs[0] = d;
  devs[1] = NULL;
  BAD(syrah_context_create(devs, 2, &ctx), NUL, "devices[1]");
  BAD(syrah_context_create(devs, 1, NULL), NUL, "out_context");
  REQUIRE_OK(syrah_context_create(devs, 1, &ctx));
  BAD(syrah_context_get_devices(ctx, NULL, 1, &n), NUL, "capacity is 1");
  BAD(syrah_context_get_devices(ctx, devs, 1, NULL), NUL, "out_count");
  BAD(syrah_context_get_program_count(ctx, NULL), NUL, "out_count");
  BAD(syrah_queue_create(ctx, NULL, 0, NULL, NULL, &q), NUL, "device");
  BAD(syrah_queue_create(ctx, d, 0x80, NULL, NULL, &q), INV, "0x80");
  REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  BAD(syrah_queue_get_context(q, NULL), NUL, "out_context");
  BAD(syrah_queue_get_device(q, NULL), NUL, "out_device");

  BAD(syrah_program_create_from_source(ctx, NULL, NULL, &prog), NUL, "source");
  BAD(syrah_program_create_from_source(ctx, SRC, NULL, NULL), NUL, "out_program");
  BAD(syrah_program_create_from_source(ctx, "__kernel void broken( {", NULL, &prog), SYRAH_ERROR_BUILD_FAILURE,
      "");
  BAD(syrah_program_create_from_source(ctx, SRC, "-Dbroken -fno-such-option-at-all", &prog),
      SYRAH_ERROR_BUILD_FAILURE, "-fno-such-option-at-all");
  BAD(syrah_program_create_from_il(ctx, NULL, 16, NULL, &prog), NUL, "il");
  BAD(syrah_program_create_from_il(ctx, SRC, 0, NULL, &prog), INV, "empty (0 bytes)");
  BAD(syrah_program_create_from_binary(ctx, d, NULL, 16, NULL, &prog), NUL, "binary");
  BAD(syrah_program_create_from_binary(ctx, d, SRC, 0, NULL, &prog), INV, "empty (0 bytes)");
  BAD(syrah_program_create_from_binary(ctx, NULL, SRC, 16, NULL, &prog), NUL, "device");
  REQUIRE_OK(syrah_program_create_from_source(ctx, SRC, NULL, &prog));
  BAD(syrah_program_get_binary(prog, NULL, NULL, 0, &n), NUL, "device");
  BAD(syrah_program_get_binary(prog, d, buf, 1, &n), SYRAH_ERROR_BUFFER_TOO_SMALL, "holds 1");
  BAD(syrah_program_get_binary(prog, d, NULL, 0, NULL), NUL, "");
  BAD(syrah_program_get_build_log(prog, NULL, NULL, 0, &n), NUL, "device");
  BAD(syrah_program_get_build_log(prog, d, NULL, 5, &n), NUL, "capacity is 5");
  BAD(syrah_kernel_create(prog, NULL, &add), NUL, "name");
  BAD(syrah_kernel_create(prog, "add", NULL), NUL, "out_kernel");
  BAD(syrah_kernel_create(prog, "nosuchkernel", &add), SYRAH_ERROR_KERNEL_NOT_FOUND, "nosuchkernel");
  REQUIRE_OK(syrah_kernel_create(prog, "add", &add));
  REQUIRE_OK(syrah_kernel_create(prog, "loc", &loc));

  /* Objects of another context. */
  REQUIRE_OK(syrah_context_create(devs, 1, &ctx2));
  {
    syrah_queue *q2 = NULL;
    syrah_range r = syrah_range_1d(4);
    syrah_kernel_arg args[2];
    int val = 0;
    REQUIRE_OK(syrah_queue_create(ctx2, d, 0, NULL, NULL, &q2));
    args[0] = syrah_arg_usm(NULL);
    args[1] = syrah_arg_value(&val, sizeof val);
    BAD(syrah_queue_launch(q2, add, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT, "context");
    EXPECT_OK(syrah_queue_release(q2));
  }
  EXPECT_OK(syrah_context_release(ctx2));

  /* Host tasks: bad calls from inside a running task. */
  BAD(syrah_queue_submit_host_tasks(q, NULL, 0, &task, 0, NULL, 0, NULL), INV, "(0 given)");
  task.run = NULL;
  BAD(syrah_queue_submit_host_tasks(q, NULL, 0, &task, 1, NULL, 0, NULL), NUL, "tasks[0]");
  task.run = bad_task;
  {
    syrah_buffer *b = NULL;
    int host[4] = {1, 2, 3, 4};
    syrah_buffer_desc desc = t_desc1(4, host, SYRAH_HOST_WRITE_BACK);
    syrah_accessor acc;
    REQUIRE_OK(syrah_buffer_create(&desc, &b));
    acc = t_whole(b, SYRAH_ACCESS_READ);
    REQUIRE_OK(syrah_queue_submit_host_tasks(q, &acc, 1, &task, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_buffer_release(b));
    EXPECT_EQ(host[3], 4);
  }

  test_launch_input(d, ctx, q, add, loc);
  test_buffer_input(q, add);
  test_graph_input(d, q, add);

  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_kernel_release(add));
  EXPECT_OK(syrah_kernel_release(loc));
  EXPECT_OK(syrah_program_release(prog));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_OK(syrah_context_release(ctx));
}

/* With SYRAH_VALIDATE=1: every kind of handle used after its release, and
 * released twice. */
static void test_released(const syrah_device *d) {
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL;
  syrah_event *ev = NULL;
  syrah_buffer *b = NULL;
  syrah_host_accessor *ha = NULL;
  syrah_buffer_desc desc = t_desc1(16, NULL, SYRAH_HOST_NONE);
  syrah_buffer_info info;
  syrah_event_status st;
  const syrah_device *dev = NULL;
  size_t n = 0;
  uint64_t v = 0;
  void *p = NULL;
  int fake[8] = {0};
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  REQUIRE_OK(syrah_program_create_from_source(ctx, SRC, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "add", &k));
  REQUIRE_OK(syrah_user_event_create(ctx, &ev));
  REQUIRE_OK(syrah_buffer_create(&desc, &b));
  REQUIRE_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, NULL, NULL, &ha, &p));

  BAD(syrah_device_get_info_u64((const syrah_device *)fake, SYRAH_DEVICE_INFO_TYPE, &v),
      SYRAH_ERROR_INVALID_HANDLE, "0x");
  BAD(syrah_platform_get_info((const syrah_platform *)fake, SYRAH_PLATFORM_INFO_NAME, NULL, 0, &n),
      SYRAH_ERROR_INVALID_HANDLE, "0x");
  BAD(syrah_queue_retain((syrah_queue *)fake), SYRAH_ERROR_INVALID_HANDLE, "not a live handle");

  {
    /* An empty graph: finalized and submitted, then its handles used
     * after release. */
    syrah_graph *g = NULL;
    syrah_graph_exec *x = NULL;
    size_t nodes = 1;
    EXPECT_OK(syrah_queue_begin_recording(q));
    REQUIRE_OK(syrah_queue_end_recording(q, &g));
    REQUIRE_OK(syrah_graph_finalize(g, &x));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_graph_exec_release(x));
    BAD(syrah_queue_submit_graph(q, x, NULL, 0, NULL), SYRAH_ERROR_INVALID_HANDLE, "exec");
    BAD(syrah_graph_exec_release(x), SYRAH_ERROR_INVALID_HANDLE, "exec");
    EXPECT_OK(syrah_graph_get_node_count(g, &nodes));
    EXPECT_EQ(nodes, 0);
    EXPECT_OK(syrah_graph_release(g));
    BAD(syrah_graph_finalize(g, &x), SYRAH_ERROR_INVALID_HANDLE, "graph");
    BAD(syrah_graph_release(g), SYRAH_ERROR_INVALID_HANDLE, "graph");
  }
  if (t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    /* A graph whose USM argument was freed since it was recorded. */
    syrah_graph *g = NULL;
    syrah_graph_exec *x = NULL;
    void *m = NULL;
    int one = 1;
    syrah_range r = syrah_range_1d(4);
    syrah_kernel_arg args[2];
    REQUIRE_OK(syrah_malloc_device(ctx, d, 64, &m));
    args[0] = syrah_arg_usm(m);
    args[1] = syrah_arg_value(&one, sizeof one);
    EXPECT_OK(syrah_queue_begin_recording(q));
    EXPECT_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
    REQUIRE_OK(syrah_queue_end_recording(q, &g));
    REQUIRE_OK(syrah_graph_finalize(g, &x));
    EXPECT_OK(syrah_queue_submit_graph(q, x, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_free(ctx, m));
    BAD(syrah_queue_submit_graph(q, x, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER, "freed since it was recorded");
    EXPECT_OK(syrah_graph_exec_release(x));
    EXPECT_OK(syrah_graph_release(g));
  }
  EXPECT_OK(syrah_host_accessor_release(ha));
  BAD(syrah_host_accessor_release(ha), SYRAH_ERROR_INVALID_HANDLE, "accessor");
  EXPECT_OK(syrah_buffer_release(b));
  BAD(syrah_buffer_get_info(b, &info), SYRAH_ERROR_INVALID_HANDLE, "buffer");
  BAD(syrah_buffer_release(b), SYRAH_ERROR_INVALID_HANDLE, "buffer");
  EXPECT_OK(syrah_user_event_complete(ev, false));
  EXPECT_OK(syrah_event_release(ev));
  BAD(syrah_event_get_status(ev, &st), SYRAH_ERROR_INVALID_HANDLE, "event");
  BAD(syrah_event_retain(ev), SYRAH_ERROR_INVALID_HANDLE, "event");
  BAD(syrah_event_release(ev), SYRAH_ERROR_INVALID_HANDLE, "event");
  EXPECT_OK(syrah_kernel_release(k));
  BAD(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_NUM_ARGS, &v), SYRAH_ERROR_INVALID_HANDLE, "kernel");
  BAD(syrah_kernel_retain(k), SYRAH_ERROR_INVALID_HANDLE, "kernel");
  BAD(syrah_kernel_set_arg(k, 0, NULL), SYRAH_ERROR_INVALID_HANDLE, "kernel");
  BAD(syrah_kernel_release(k), SYRAH_ERROR_INVALID_HANDLE, "kernel");
  EXPECT_OK(syrah_program_release(prog));
  BAD(syrah_kernel_create(prog, "add", &k), SYRAH_ERROR_INVALID_HANDLE, "program");
  BAD(syrah_program_retain(prog), SYRAH_ERROR_INVALID_HANDLE, "program");
  BAD(syrah_program_release(prog), SYRAH_ERROR_INVALID_HANDLE, "program");
  EXPECT_OK(syrah_queue_release(q));
  BAD(syrah_queue_get_device(q, &dev), SYRAH_ERROR_INVALID_HANDLE, "queue");
  BAD(syrah_queue_wait(q), SYRAH_ERROR_INVALID_HANDLE, "queue");
  BAD(syrah_queue_barrier(q, NULL, 0, NULL), SYRAH_ERROR_INVALID_HANDLE, "queue");
  BAD(syrah_queue_release(q), SYRAH_ERROR_INVALID_HANDLE, "queue");
  EXPECT_OK(syrah_context_release(ctx));
  BAD(syrah_context_get_program_count(ctx, &n), SYRAH_ERROR_INVALID_HANDLE, "context");
  BAD(syrah_malloc_device(ctx, d, 64, &p), SYRAH_ERROR_INVALID_HANDLE, "context");
  BAD(syrah_context_retain(ctx), SYRAH_ERROR_INVALID_HANDLE, "context");
  BAD(syrah_context_release(ctx), SYRAH_ERROR_INVALID_HANDLE, "context");
}

int main(void) {
  const char *validate = getenv("SYRAH_VALIDATE");
  test_without_device();
  t_for_each_device(test_with_device);
  if (validate && strcmp(validate, "1") == 0)
    t_for_each_device(test_released);
  else
    t_skip("released handles and double releases", "they are caught only with SYRAH_VALIDATE=1 (the bad_input_validate test)");
  printf("bad-input sweep: %d bad calls tried, each refused with its status and message\n", bad_calls);
  return t_finish("test_bad_input");
}
