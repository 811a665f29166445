/* Freed device USM allocations kept for reuse where the driver allocates
 * slowly (SVM): a later allocation of a similar size gets the same block,
 * every USM guarantee holds (queries say freed pointers are unknown, a free
 * waits for the commands using the memory, data written after reuse is
 * the new owner's), and syrah_context_trim gives the blocks back. Devices
 * that do not pool say so and still pass the rest. */
#include "testing.h"

#include <stdint.h>

#define MIB (1u << 20)

/* SVM devices and the CUDA back end's keep freed device allocations. */
static bool pools(const syrah_device *d) {
  char strategy[64] = "";
  uint64_t backend = 0;
  const char *env = getenv("SYRAH_USM_POOL");
  syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, strategy, sizeof strategy,
                               NULL);
  syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend);
  return (strcmp(strategy, "svm") == 0 || backend == SYRAH_BACKEND_CUDA) && !(env && strcmp(env, "off") == 0);
}

static void per_device(const syrah_device *d) {
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *fill = NULL;
  void *a = NULL, *b = NULL, *c = NULL, *e = NULL;
  syrah_usm_alloc type = SYRAH_USM_ALLOC_UNKNOWN;
  unsigned *host = (unsigned *)malloc(2 * MIB);
  size_t kept = 0, i;
  int ok;
  unsigned v = 7;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(MIB / 4);
  if (!t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    t_skip("pooled device USM", "the device has no device USM");
    free(host);
    return;
  }
  REQUIRE_OK(syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(
      ctx, "__kernel void fill(__global uint *p, uint v) { p[get_global_id(0)] = v + get_global_id(0); }",
      NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "fill", &fill));
  /* 1 MiB, written by a kernel, freed right after without a wait: the
   * free waits for the kernel. */
  REQUIRE_OK(syrah_malloc_device(ctx, d, MIB, &a));
  args[0] = syrah_arg_usm(a);
  args[1] = syrah_arg_value(&v, sizeof v);
  EXPECT_OK(syrah_queue_launch(q, fill, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_free(ctx, a));
  /* A freed pointer is unknown to queries and to a second free. */
  EXPECT_OK(syrah_get_pointer_type(ctx, a, &type));
  EXPECT_EQ(type, SYRAH_USM_ALLOC_UNKNOWN);
  EXPECT_ERR(syrah_free(ctx, a), SYRAH_ERROR_INVALID_POINTER, "");
  /* The same size again, then a size of the same class. */
  REQUIRE_OK(syrah_malloc_device(ctx, d, MIB, &b));
  if (pools(d)) {
    EXPECT_TRUE(b == a);
  } else {
    t_skip("reuse of freed device USM", "only SVM devices and the CUDA back end's pool freed device allocations");
  }
  EXPECT_OK(syrah_get_pointer_type(ctx, b, &type));
  EXPECT_EQ(type, SYRAH_USM_ALLOC_DEVICE);
  /* The new owner's data: a copy in, a copy out. */
  for (i = 0; i < MIB / 4; ++i) host[i] = (unsigned)(i * 3u);
  EXPECT_OK(syrah_queue_memcpy(q, b, host, MIB, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q)); /* the host side stays untouched until then */
  memset(host, 0, MIB);
  EXPECT_OK(syrah_queue_memcpy(q, host, b, MIB, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0, ok = 1; i < MIB / 4; ++i) ok &= host[i] == (unsigned)(i * 3u);
  EXPECT_TRUE(ok);
  EXPECT_OK(syrah_free(ctx, b));
  REQUIRE_OK(syrah_malloc_device(ctx, d, MIB - 4096, &c));
  if (pools(d)) EXPECT_TRUE(c == a);
  /* The queries bound the allocation by the size asked for. */
  EXPECT_OK(syrah_get_pointer_type(ctx, (char *)c + (MIB - 4096) - 1, &type));
  EXPECT_EQ(type, SYRAH_USM_ALLOC_DEVICE);
  EXPECT_OK(syrah_get_pointer_type(ctx, (char *)c + (MIB - 4096), &type));
  EXPECT_EQ(type, SYRAH_USM_ALLOC_UNKNOWN);
  /* Two live allocations never share a block. */
  REQUIRE_OK(syrah_malloc_device(ctx, d, MIB, &e));
  EXPECT_TRUE(e != c);
  EXPECT_OK(syrah_free(ctx, c));
  EXPECT_OK(syrah_free(ctx, e));
  /* Trim: the kept blocks go back, and say how many bytes they were. */
  EXPECT_OK(syrah_context_trim(ctx, &kept));
  EXPECT_EQ(kept, pools(d) ? 2 * MIB : 0);
  EXPECT_OK(syrah_context_trim(ctx, &kept));
  EXPECT_EQ(kept, 0);
  EXPECT_OK(syrah_context_trim(ctx, NULL));
  /* Allocation still works after a trim. */
  REQUIRE_OK(syrah_malloc_device(ctx, d, 3 * MIB, &a));
  EXPECT_OK(syrah_free(ctx, a));
  syrah_kernel_release(fill);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx); /* frees the block kept from the last free */
  free(host);
}

int main(void) {
  t_for_each_device(per_device);
  return t_finish("test_usm_pool");
}
