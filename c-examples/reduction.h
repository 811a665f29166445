/* A work-group sum reduction driver shared by the two reduction examples:
 * the kernel `reduce` sums each work-group's slice into partial[group]. */
#ifndef SYRAH_REDUCTION_H
#define SYRAH_REDUCTION_H

#include "example.h"

/* Runs `reduce` over `n` ints with work-groups of `wg`, giving the kernel
 * `local_bytes` of local memory as its last argument when non-zero. */
static inline int run_reduction(const char *source, const char *label, size_t wg, size_t local_bytes) {
  enum { N = 1 << 22 };
  const syrah_device *device = NULL;
  syrah_queue *queue = example_queue(&device);
  syrah_context *ctx = NULL;
  syrah_program *program = NULL;
  syrah_kernel *kernel = NULL;
  size_t groups = N / wg, i;
  int *data = (int *)malloc(N * sizeof(int));
  long long *partial = (long long *)malloc(groups * sizeof(long long));
  void *d_data = NULL, *d_partial = NULL;
  long long expect = 0, got = 0;
  syrah_range range = syrah_nd_range_1d(N, wg);
  syrah_kernel_arg args[3];
  size_t nargs = 2;
  char options[64];
  uint64_t static_local = 0;
  if (!data || !partial) {
    return 1;
  }
  for (i = 0; i < N; ++i) {
    data[i] = (int)(i % 1000) - 300;
    expect += data[i];
  }
  snprintf(options, sizeof options, "-DWG=%zu", wg);
  CHECK(syrah_queue_get_context(queue, &ctx));
  CHECK(syrah_program_create_from_source(ctx, source, options, &program));
  CHECK(syrah_kernel_create(program, "reduce", &kernel));
  CHECK(syrah_kernel_get_info(kernel, device, SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE, &static_local));
  CHECK(syrah_malloc_device(ctx, device, N * sizeof(int), &d_data));
  CHECK(syrah_malloc_device(ctx, device, groups * sizeof(long long), &d_partial));
  CHECK(syrah_queue_memcpy(queue, d_data, data, N * sizeof(int), NULL, 0, NULL));
  args[0] = syrah_arg_usm(d_data);
  args[1] = syrah_arg_usm(d_partial);
  if (local_bytes) {
    args[2] = syrah_arg_local(local_bytes);
    nargs = 3;
  }
  CHECK(syrah_queue_launch(queue, kernel, &range, args, nargs, NULL, 0, NULL));
  CHECK(syrah_queue_memcpy(queue, partial, d_partial, groups * sizeof(long long), NULL, 0, NULL));
  CHECK(syrah_queue_wait(queue));
  for (i = 0; i < groups; ++i) {
    got += partial[i];
  }
  printf("%s: %d ints in %zu groups of %zu (kernel-scope local memory %llu B, argument %zu B): "
         "sum %lld, expected %lld\n",
         label, N, groups, wg, (unsigned long long)static_local, local_bytes, got, expect);
  CHECK(syrah_free(ctx, d_data));
  CHECK(syrah_free(ctx, d_partial));
  CHECK(syrah_kernel_release(kernel));
  CHECK(syrah_program_release(program));
  CHECK(syrah_queue_release(queue));
  CHECK(syrah_context_release(ctx));
  free(data);
  free(partial);
  return got == expect ? 0 : 1;
}

#endif
