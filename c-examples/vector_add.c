/* c = a + b on the default device, with device USM and explicit copies. */
#include "example.h"

static const char *source =
    "__kernel void vadd(__global const float *a, __global const float *b,\n"
    "                   __global float *c, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n";

int main(void) {
  enum { N = 1 << 20 };
  const syrah_device *device = NULL;
  syrah_queue *queue = example_queue(&device);
  syrah_context *ctx = NULL;
  syrah_program *program = NULL;
  syrah_kernel *kernel = NULL;
  float *a = (float *)malloc(N * sizeof(float));
  float *b = (float *)malloc(N * sizeof(float));
  float *c = (float *)malloc(N * sizeof(float));
  void *da = NULL, *db = NULL, *dc = NULL;
  unsigned n = N;
  size_t i, errors = 0;
  syrah_range range = syrah_range_1d(N);
  syrah_kernel_arg args[4];
  if (!a || !b || !c) {
    return 1;
  }
  for (i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 2.0f * (float)i;
  }
  CHECK(syrah_queue_get_context(queue, &ctx));
  CHECK(syrah_program_create_from_source(ctx, source, NULL, &program));
  CHECK(syrah_kernel_create(program, "vadd", &kernel));
  CHECK(syrah_malloc_device(ctx, device, N * sizeof(float), &da));
  CHECK(syrah_malloc_device(ctx, device, N * sizeof(float), &db));
  CHECK(syrah_malloc_device(ctx, device, N * sizeof(float), &dc));
  /* The queue is in order: each command starts after the previous one. */
  CHECK(syrah_queue_memcpy(queue, da, a, N * sizeof(float), NULL, 0, NULL));
  CHECK(syrah_queue_memcpy(queue, db, b, N * sizeof(float), NULL, 0, NULL));
  args[0] = syrah_arg_usm(da);
  args[1] = syrah_arg_usm(db);
  args[2] = syrah_arg_usm(dc);
  args[3] = syrah_arg_value(&n, sizeof n);
  CHECK(syrah_queue_launch(queue, kernel, &range, args, 4, NULL, 0, NULL));
  CHECK(syrah_queue_memcpy(queue, c, dc, N * sizeof(float), NULL, 0, NULL));
  CHECK(syrah_queue_wait(queue));
  for (i = 0; i < N; ++i) {
    if (c[i] != 3.0f * (float)i) {
      ++errors;
    }
  }
  printf("vector_add: %d elements, %zu wrong\n", N, errors);
  CHECK(syrah_free(ctx, da));
  CHECK(syrah_free(ctx, db));
  CHECK(syrah_free(ctx, dc));
  CHECK(syrah_kernel_release(kernel));
  CHECK(syrah_program_release(program));
  CHECK(syrah_queue_release(queue));
  CHECK(syrah_context_release(ctx));
  free(a);
  free(b);
  free(c);
  return errors == 0 ? 0 : 1;
}
