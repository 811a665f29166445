/* Programs, kernels, launches, launch checks and group-local memory. */
#include "testing.h"

static const char *kSource =
    "__kernel void vadd(__global const int *a, __global const int *b, __global int *c, int n) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void ids2d(__global int *out, int width) {\n"
    "  int x = (int)get_global_id(0), y = (int)get_global_id(1);\n"
    "  out[y * width + x] = y * 1000 + x;\n"
    "}\n"
    "__kernel void ids3d(__global int *out) {\n"
    "  size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);\n"
    "  out[(z * get_global_size(1) + y) * get_global_size(0) + x] = (int)(z * 100 + y * 10 + x);\n"
    "}\n"
    "__kernel void one(__global int *out) { out[0] = 1234; }\n"
    "__kernel void group_sum_arg(__global const int *in, __global int *out, __local int *s) {\n"
    "  size_t l = get_local_id(0);\n"
    "  s[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (size_t k = get_local_size(0) / 2; k > 0; k /= 2) {\n"
    "    if (l < k) s[l] += s[l + k];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) out[get_group_id(0)] = s[0];\n"
    "}\n"
    "__kernel void group_sum_array(__global const int *in, __global int *out) {\n"
    "  __local int s[64];\n"
    "  size_t l = get_local_id(0);\n"
    "  s[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (size_t k = 32; k > 0; k /= 2) {\n"
    "    if (l < k) s[l] += s[l + k];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) out[get_group_id(0)] = s[0];\n"
    "}\n"
    "__kernel void big_static(__global int *out, __local int *extra) {\n"
    "  __local int s[1024];\n"
    "  s[get_local_id(0)] = 1; extra[0] = 2;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  out[get_global_id(0)] = s[0] + extra[0];\n"
    "}\n";

/* Builds the assembled SPIR-V kernel fill42 and checks what it writes. */
static void run_spirv(const syrah_device *d, syrah_context *ctx) {
#ifdef SYRAH_TEST_SPIRV
  FILE *f = fopen(SYRAH_TEST_SPIRV, "rb");
  unsigned char il[4096];
  size_t n = f ? fread(il, 1, sizeof il, f) : 0;
  syrah_program *p = NULL;
  syrah_kernel *k = NULL;
  syrah_queue *q = NULL;
  unsigned *mem = NULL, host[64];
  size_t i;
  int ok;
  syrah_range r = syrah_range_1d(64);
  syrah_kernel_arg arg;
  if (f) fclose(f);
  if (n == 0) {
    T_FAIL("cannot read %s", SYRAH_TEST_SPIRV);
    return;
  }
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("running a SPIR-V kernel", "the device has no USM");
    return;
  }
  REQUIRE_OK(syrah_program_create_from_il(ctx, il, n, NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "fill42", &k));
  REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof host, (void **)&mem));
  arg = syrah_arg_usm(mem);
  EXPECT_OK(syrah_queue_launch(q, k, &r, &arg, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, mem, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < 64; ++i) ok &= host[i] == 42;
  EXPECT_TRUE(ok);
  syrah_free(ctx, mem);
  syrah_queue_release(q);
  syrah_kernel_release(k);
  syrah_program_release(p);
#else
  (void)d;
  (void)ctx;
  t_skip("running a SPIR-V kernel", "spirv-as was not installed when the tests were configured");
#endif
}

static void test_build(const syrah_device *d) {
  syrah_context *ctx = NULL, *other = NULL;
  syrah_program *p = NULL, *p2 = NULL, *p3 = NULL, *bad = NULL;
  syrah_kernel *k = NULL;
  size_t count = 0, size = 0, len = 0;
  uint64_t v = 0;
  char il_version[256];
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &p));
  EXPECT_OK(syrah_context_get_program_count(ctx, &count));
  EXPECT_EQ(count, 1);
  /* Same source and options: served from the cache. */
  EXPECT_OK(syrah_program_create_from_source(ctx, kSource, "", &p2));
  EXPECT_OK(syrah_context_get_program_count(ctx, &count));
  EXPECT_EQ(count, 1);
  EXPECT_OK(syrah_program_create_from_source(ctx, kSource, "-DUNUSED=1", &p3));
  EXPECT_OK(syrah_context_get_program_count(ctx, &count));
  EXPECT_EQ(count, 2);
  EXPECT_ERR(syrah_context_get_program_count(ctx, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_count");

  EXPECT_ERR(syrah_program_create_from_source(ctx, "__kernel void f(__global int *p) { p[0] = undefined_thing_xyz; }",
                                              NULL, &bad),
             SYRAH_ERROR_BUILD_FAILURE, "undefined_thing_xyz");
  EXPECT_ERR(syrah_program_create_from_source(ctx, "__kernel void f() {}", "-bogus-option-xyz", &bad),
             SYRAH_ERROR_BUILD_FAILURE, "-bogus-option-xyz");
  EXPECT_ERR(syrah_program_create_from_source(ctx, NULL, NULL, &bad), SYRAH_ERROR_NULL_ARGUMENT, "source");
  EXPECT_ERR(syrah_program_create_from_source(ctx, "", NULL, &bad), SYRAH_ERROR_INVALID_ARGUMENT, "empty");
  EXPECT_ERR(syrah_program_create_from_source(NULL, kSource, NULL, &bad), SYRAH_ERROR_NULL_ARGUMENT, "context");
  EXPECT_ERR(syrah_program_create_from_source(ctx, kSource, NULL, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_program");

  /* Build log (empty or not, it is a string) and kernels. */
  EXPECT_OK(syrah_program_get_build_log(p, d, NULL, 0, &len));
  EXPECT_TRUE(len >= 1);
  EXPECT_ERR(syrah_kernel_create(p, "no_such_kernel", &k), SYRAH_ERROR_KERNEL_NOT_FOUND, "vadd");
  EXPECT_ERR(syrah_kernel_create(p, NULL, &k), SYRAH_ERROR_NULL_ARGUMENT, "name");
  EXPECT_ERR(syrah_kernel_create(p, "vadd", NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_kernel");
  REQUIRE_OK(syrah_kernel_create(p, "vadd", &k));
  EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_NUM_ARGS, &v));
  EXPECT_EQ(v, 4);
  EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_WORK_GROUP_SIZE, &v));
  EXPECT_TRUE(v >= 1);
  EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_PRIVATE_MEM_SIZE, &v));
  EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, &v));
  EXPECT_TRUE(v >= 1);
  EXPECT_ERR(syrah_kernel_get_info(k, d, 42, &v), SYRAH_ERROR_INVALID_ARGUMENT, "42");
  EXPECT_OK(syrah_kernel_retain(k));
  EXPECT_OK(syrah_kernel_release(k));
  EXPECT_OK(syrah_kernel_release(k));
  REQUIRE_OK(syrah_kernel_create(p, "group_sum_array", &k));
  EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE, &v));
  if (v == 0) {
    t_skip("kernel-scope local memory size", "the driver reports 0 bytes for a kernel with a __local array");
  } else {
    EXPECT_TRUE(v >= 64 * sizeof(int));
  }
  EXPECT_OK(syrah_kernel_release(k));

  /* Binaries round-trip into a new program that builds and has the kernel. */
  EXPECT_OK(syrah_program_get_binary(p, d, NULL, 0, &size));
  if (size > 0) {
    unsigned char *bin = (unsigned char *)malloc(size), small[4];
    syrah_program *fromb = NULL;
    EXPECT_ERR(syrah_program_get_binary(p, d, small, sizeof small, &size), SYRAH_ERROR_BUFFER_TOO_SMALL,
               "holds 4");
    EXPECT_OK(syrah_program_get_binary(p, d, bin, size, &size));
    EXPECT_OK(syrah_program_create_from_binary(ctx, d, bin, size, NULL, &fromb));
    if (fromb) {
      EXPECT_OK(syrah_kernel_create(fromb, "vadd", &k));
      EXPECT_OK(syrah_kernel_get_info(k, d, SYRAH_KERNEL_INFO_NUM_ARGS, &v));
      EXPECT_EQ(v, 4);
      syrah_kernel_release(k);
      syrah_program_release(fromb);
    }
    memset(bin, 0x5a, size > 64 ? 64 : size);
    EXPECT_TRUE(syrah_program_create_from_binary(ctx, d, bin, size > 64 ? 64 : size, NULL, &fromb) !=
                SYRAH_SUCCESS);
    free(bin);
  } else {
    t_skip("binary round trip", "the driver returned an empty binary");
  }
  EXPECT_ERR(syrah_program_create_from_binary(ctx, d, NULL, 16, NULL, &bad), SYRAH_ERROR_NULL_ARGUMENT, "binary");
  EXPECT_ERR(syrah_program_create_from_binary(ctx, d, kSource, 0, NULL, &bad), SYRAH_ERROR_INVALID_ARGUMENT,
             "empty");

  /* SPIR-V: built and run where the device takes it, refused elsewhere. */
  syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_IL_VERSION, il_version, sizeof il_version, NULL);
  if (!strstr(il_version, "SPIR-V")) {
    static const unsigned spirv_magic[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    EXPECT_ERR(syrah_program_create_from_il(ctx, spirv_magic, sizeof spirv_magic, NULL, &bad),
               SYRAH_ERROR_FEATURE_NOT_SUPPORTED, "does not take SPIR-V");
  } else {
    static const unsigned junk[5] = {1, 2, 3, 4, 5};
    EXPECT_TRUE(syrah_program_create_from_il(ctx, junk, sizeof junk, NULL, &bad) != SYRAH_SUCCESS);
    run_spirv(d, ctx);
  }
  EXPECT_ERR(syrah_program_create_from_il(ctx, NULL, 8, NULL, &bad), SYRAH_ERROR_NULL_ARGUMENT, "il");

  /* Objects of another context. */
  REQUIRE_OK(syrah_context_create(&d, 1, &other));
  EXPECT_ERR(syrah_program_get_binary(p, (const syrah_device *)&v, NULL, 0, &size), SYRAH_ERROR_INVALID_HANDLE,
             "");
  EXPECT_OK(syrah_program_retain(p));
  EXPECT_OK(syrah_program_release(p));
  syrah_program_release(p);
  syrah_program_release(p2);
  syrah_program_release(p3);
  syrah_context_release(other);
  syrah_context_release(ctx);
}

static void test_launch(const syrah_device *d) {
  enum { W = 64, H = 16, N = W * H };
  syrah_queue *q = NULL, *q2 = NULL;
  syrah_context *ctx = NULL;
  syrah_program *p = NULL, *p_other = NULL;
  syrah_kernel *vadd = NULL, *ids2d = NULL, *ids3d = NULL, *one = NULL, *gsa = NULL, *gsr = NULL,
               *big = NULL, *vadd_other = NULL;
  int *a = NULL, *b = NULL, *c = NULL, host[N], i, ok, n = N, width = W;
  syrah_kernel_arg args[4];
  syrah_range r;
  uint64_t local_mem = 0, max_wg = 0, static_local = 0;
  syrah_event *ev = NULL;
  syrah_event_status st = 0;
  char msg[64];
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("kernel launches", "the device has no USM, which these tests use for data");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "vadd", &vadd));
  REQUIRE_OK(syrah_kernel_create(p, "ids2d", &ids2d));
  REQUIRE_OK(syrah_kernel_create(p, "ids3d", &ids3d));
  REQUIRE_OK(syrah_kernel_create(p, "one", &one));
  REQUIRE_OK(syrah_kernel_create(p, "group_sum_array", &gsa));
  REQUIRE_OK(syrah_kernel_create(p, "group_sum_arg", &gsr));
  REQUIRE_OK(syrah_kernel_create(p, "big_static", &big));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N * sizeof(int), (void **)&a));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N * sizeof(int), (void **)&b));
  REQUIRE_OK(syrah_malloc_device(ctx, d, N * sizeof(int), (void **)&c));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE, &local_mem));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_WORK_GROUP_SIZE, &max_wg));

  /* 1D vector add. */
  /* Host memory given to memcpy must stay untouched until the copy ends. */
  for (i = 0; i < N; ++i) host[i] = i;
  EXPECT_OK(syrah_queue_memcpy(q, a, host, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0; i < N; ++i) host[i] = 3 * i;
  EXPECT_OK(syrah_queue_memcpy(q, b, host, sizeof host, NULL, 0, NULL));
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_usm(b);
  args[2] = syrah_arg_usm(c);
  args[3] = syrah_arg_value(&n, sizeof n);
  r = syrah_range_1d(N);
  EXPECT_OK(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, c, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N; ++i) ok &= host[i] == 4 * i;
  EXPECT_TRUE(ok);

  /* Argument checks. */
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 3, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
             "takes 4 arguments, 3 given");
  args[3].kind = 77;
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
             "unknown kind 77");
  args[3] = syrah_arg_value(&n, 0);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "size 0");
  args[3] = syrah_arg_value(NULL, 4);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "args[3]");
  args[3] = syrah_arg_value(&n, 2);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
             "argument 3");
  args[3] = syrah_arg_value(&n, sizeof n);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, NULL, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "args");
  EXPECT_ERR(syrah_queue_launch(q, vadd, NULL, args, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "range");
  EXPECT_ERR(syrah_queue_launch(NULL, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "queue");
  EXPECT_ERR(syrah_queue_launch(q, NULL, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "kernel");
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 2, NULL), SYRAH_ERROR_NULL_ARGUMENT,
             "dependencies");
  r.dimensions = 0;
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_INVALID_ARGUMENT, "not 0");

  /* Work-group checks, refused before OpenCL sees them. */
  r = syrah_nd_range_1d(100, 32);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_INVALID_WORK_GROUP,
             "global size 100 is not a multiple of the work-group size 32");
  r = syrah_nd_range_1d((size_t)max_wg * 2, (size_t)max_wg * 2);
  snprintf(msg, sizeof msg, "%llu", (unsigned long long)max_wg);
  EXPECT_ERR(syrah_queue_launch(q, vadd, &r, args, 4, NULL, 0, NULL), SYRAH_ERROR_INVALID_WORK_GROUP, msg);

  /* 2D with an offset, 3D, single task, empty range. */
  r = syrah_range_2d(W, H / 2);
  r.global_offset[1] = H / 2;
  args[0] = syrah_arg_usm(c);
  args[1] = syrah_arg_value(&width, sizeof width);
  EXPECT_OK(syrah_queue_memset(q, c, 0xff, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_launch(q, ids2d, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, c, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N; ++i) {
    int y = i / W, x = i % W;
    ok &= host[i] == (y >= H / 2 ? y * 1000 + x : -1);
  }
  EXPECT_TRUE(ok);
  r = syrah_range_3d(4, 8, 16);
  EXPECT_OK(syrah_queue_launch(q, ids3d, &r, args, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, c, 4 * 8 * 16 * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < 4 * 8 * 16; ++i) ok &= host[i] == (i / 32) * 100 + ((i / 4) % 8) * 10 + i % 4;
  EXPECT_TRUE(ok);
  r = syrah_nd_range_2d(8, 8, 4, 4);
  EXPECT_OK(syrah_queue_launch(q, ids2d, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_single_task(q, one, args, 1, NULL, 0, &ev));
  EXPECT_ERR(syrah_queue_single_task(q, one, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
             "takes 1 argument, 2 given");
  EXPECT_OK(syrah_queue_memcpy(q, host, c, sizeof(int), (const syrah_event *const *)&ev, 1, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(host[0], 1234);
  syrah_event_release(ev);
  r = syrah_range_1d(0);
  EXPECT_OK(syrah_queue_launch(q, one, &r, args, 1, NULL, 0, &ev));
  EXPECT_OK(syrah_queue_single_task(q, one, args, 1, NULL, 0, NULL));
  EXPECT_OK(syrah_event_wait(ev));
  EXPECT_OK(syrah_event_get_status(ev, &st));
  EXPECT_EQ(st, SYRAH_EVENT_COMPLETE);
  syrah_event_release(ev);

  /* Group-local memory: a __local argument and a kernel-scope array. */
  for (i = 0; i < N; ++i) host[i] = i % 17;
  EXPECT_OK(syrah_queue_memcpy(q, a, host, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_usm(b);
  args[2] = syrah_arg_local(64 * sizeof(int));
  r = syrah_nd_range_1d(N, 64);
  EXPECT_OK(syrah_queue_launch(q, gsr, &r, args, 3, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, b, (N / 64) * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N / 64; ++i) {
    int j, want = 0;
    for (j = 0; j < 64; ++j) want += (i * 64 + j) % 17;
    ok &= host[i] == want;
  }
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_queue_memset(q, b, 0, N * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_launch(q, gsa, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, b, (N / 64) * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < N / 64; ++i) {
    int j, want = 0;
    for (j = 0; j < 64; ++j) want += (i * 64 + j) % 17;
    ok &= host[i] == want;
  }
  EXPECT_TRUE(ok);

  /* Local memory beyond the device's: refused with both numbers. */
  args[2] = syrah_arg_local((size_t)local_mem + 1);
  snprintf(msg, sizeof msg, "the device has %llu bytes", (unsigned long long)local_mem);
  EXPECT_ERR(syrah_queue_launch(q, gsr, &r, args, 3, NULL, 0, NULL), SYRAH_ERROR_OUT_OF_LOCAL_MEMORY, msg);
  EXPECT_OK(syrah_kernel_get_info(gsr, d, SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE, &static_local));
  snprintf(msg, sizeof msg, "needs %llu bytes", (unsigned long long)(static_local + local_mem + 1));
  EXPECT_ERR(syrah_queue_launch(q, gsr, &r, args, 3, NULL, 0, NULL), SYRAH_ERROR_OUT_OF_LOCAL_MEMORY, msg);
  args[2] = syrah_arg_local(0);
  EXPECT_ERR(syrah_queue_launch(q, gsr, &r, args, 3, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS,
             "0 bytes of local memory");
  EXPECT_OK(syrah_kernel_get_info(big, d, SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE, &static_local));
  if (static_local == 0) {
    t_skip("kernel-scope local memory in the launch check",
           "the driver reports 0 bytes for a kernel with a __local array");
  } else {
    EXPECT_TRUE(static_local >= 1024 * sizeof(int));
  }
  args[0] = syrah_arg_usm(c);
  args[1] = syrah_arg_local((size_t)(local_mem - static_local) + 8);
  snprintf(msg, sizeof msg, "(%llu declared in the kernel + %llu from local-memory arguments)",
           (unsigned long long)static_local, (unsigned long long)(local_mem - static_local) + 8);
  EXPECT_ERR(syrah_queue_launch(q, big, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_OUT_OF_LOCAL_MEMORY, msg);
  args[1] = syrah_arg_local(16);
  r = syrah_nd_range_1d(64, 64);
  EXPECT_OK(syrah_queue_launch(q, big, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, c, 64 * sizeof(int), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < 64; ++i) ok &= host[i] == 3;
  EXPECT_TRUE(ok);

  /* A kernel of another context. */
  REQUIRE_OK(syrah_queue_create(NULL, d, 0, NULL, NULL, &q2));
  {
    syrah_context *c2 = NULL;
    REQUIRE_OK(syrah_queue_get_context(q2, &c2));
    REQUIRE_OK(syrah_program_create_from_source(c2, kSource, NULL, &p_other));
    REQUIRE_OK(syrah_kernel_create(p_other, "one", &vadd_other));
    r = syrah_range_1d(1);
    args[0] = syrah_arg_usm(c);
    EXPECT_ERR(syrah_queue_launch(q, vadd_other, &r, args, 1, NULL, 0, NULL), SYRAH_ERROR_WRONG_CONTEXT,
               "kernel 'one' belongs to context");
    syrah_kernel_release(vadd_other);
    syrah_program_release(p_other);
    syrah_context_release(c2);
  }
  syrah_queue_release(q2);
  syrah_free(ctx, a);
  syrah_free(ctx, b);
  syrah_free(ctx, c);
  syrah_kernel_release(vadd);
  syrah_kernel_release(ids2d);
  syrah_kernel_release(ids3d);
  syrah_kernel_release(one);
  syrah_kernel_release(gsa);
  syrah_kernel_release(gsr);
  syrah_kernel_release(big);
  syrah_program_release(p);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

/* PTX given directly, on the CUDA back end: a kernel whose pointer
 * parameter is a plain .u64 (as hand-written PTX and nvcc declare it) takes
 * a USM pointer, and a launch runs it over exactly its range. */
static const char kPtx[] = ".version 7.0\n"
                           ".target sm_50\n"
                           ".address_size 64\n"
                           ".visible .entry add_index(.param .u64 p, .param .u32 k)\n"
                           "{\n"
                           "  .reg .b32 %r<8>;\n"
                           "  .reg .b64 %rd<5>;\n"
                           "  ld.param.u64 %rd1, [p];\n"
                           "  ld.param.u32 %r6, [k];\n"
                           "  cvta.to.global.u64 %rd2, %rd1;\n"
                           "  mov.u32 %r1, %ctaid.x;\n"
                           "  mov.u32 %r2, %ntid.x;\n"
                           "  mov.u32 %r3, %tid.x;\n"
                           "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
                           "  mul.wide.s32 %rd3, %r4, 4;\n"
                           "  add.s64 %rd4, %rd2, %rd3;\n"
                           "  ld.global.u32 %r5, [%rd4];\n"
                           "  mad.lo.s32 %r5, %r4, %r6, %r5;\n"
                           "  st.global.u32 [%rd4], %r5;\n"
                           "  ret;\n"
                           "}\n";

static void test_ptx(const syrah_device *d) {
  enum { N = 256 };
  uint64_t backend = 0;
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *p = NULL;
  syrah_kernel *k = NULL;
  int *mem = NULL, host[N], i, wrong = 0, three = 3;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_nd_range_1d(N, 64);
  if (syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend) != SYRAH_SUCCESS ||
      backend != SYRAH_BACKEND_CUDA) {
    t_skip("PTX given directly", "only devices of the CUDA back end take PTX");
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_binary(ctx, d, kPtx, sizeof kPtx, NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "add_index", &k));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof host, (void **)&mem));
  for (i = 0; i < N; ++i) host[i] = 1000 + i;
  EXPECT_OK(syrah_queue_memcpy(q, mem, host, sizeof host, NULL, 0, NULL));
  args[0] = syrah_arg_usm(mem);
  args[1] = syrah_arg_value(&three, sizeof three);
  EXPECT_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
  memset(host, 0, sizeof host);
  EXPECT_OK(syrah_queue_memcpy(q, host, mem, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0; i < N; ++i) wrong += host[i] != 1000 + 4 * i;
  EXPECT_EQ(wrong, 0);
  /* A pointer is refused where the kernel takes 4 bytes, naming both. */
  args[1] = syrah_arg_usm(mem);
  EXPECT_ERR(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL), SYRAH_ERROR_KERNEL_ARGUMENTS, "argument 1");
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_OK(syrah_free(ctx, mem));
  EXPECT_OK(syrah_kernel_release(k));
  EXPECT_OK(syrah_program_release(p));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_OK(syrah_context_release(ctx));
}

int main(void) {
  t_for_each_device(test_build);
  t_for_each_device(test_launch);
  t_for_each_device(test_ptx);
  return t_finish("test_program");
}
