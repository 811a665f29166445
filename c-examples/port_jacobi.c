/* A 2D Jacobi port through Syrah's buffers: two grids take turns as input
 * and output for every step; Syrah orders the steps from the accessors,
 * and the first grid is written back into its array at release. Host code
 * only; the kernel and the check are in port_jacobi.h. */
#include <syrah.h>

#include "port_jacobi.h"

#define CHECK(call)                                                                \
  do {                                                                             \
    if ((call) != SYRAH_SUCCESS) {                                                 \
      fprintf(stderr, "%s failed: %s\n", #call, syrah_last_error_message());       \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

enum { N = 256, STEPS = 100 };
static float grid[N * N], expect[N * N], scratch[N * N];

int main(void) {
  const syrah_device *device;
  syrah_queue *queue;
  syrah_context *ctx;
  syrah_program *program;
  syrah_kernel *kernel;
  syrah_buffer *b[2];
  int n = N, step;
  jacobi_init(N, STEPS, grid, expect, scratch);
  CHECK(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &device));
  CHECK(syrah_queue_create(NULL, device, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &queue));
  CHECK(syrah_queue_get_context(queue, &ctx));
  CHECK(syrah_program_create_from_source(ctx, jacobi_source, NULL, &program));
  CHECK(syrah_kernel_create(program, "jacobi", &kernel));
  syrah_buffer_desc d0 = syrah_buffer_desc_2d(sizeof(float), N, N, grid, SYRAH_HOST_WRITE_BACK);
  syrah_buffer_desc d1 = syrah_buffer_desc_2d(sizeof(float), N, N, NULL, SYRAH_HOST_NONE);
  CHECK(syrah_buffer_create(&d0, &b[0]));
  CHECK(syrah_buffer_create(&d1, &b[1]));
  syrah_kernel_arg args[3] = {syrah_arg_accessor(0), syrah_arg_accessor(1),
                              syrah_arg_value(&n, sizeof n)};
  syrah_range range = syrah_range_2d(N, N);
  for (step = 0; step < STEPS; ++step) {
    syrah_accessor acc[2] = {syrah_accessor_whole(b[step % 2], SYRAH_ACCESS_READ),
                             syrah_accessor_whole(b[1 - step % 2], SYRAH_ACCESS_DISCARD_WRITE)};
    CHECK(syrah_queue_submit_kernel(queue, kernel, &range, acc, 2, args, 3, NULL, 0, NULL));
  }
  CHECK(syrah_buffer_release(b[1]));
  CHECK(syrah_buffer_release(b[0])); /* STEPS is even: the result is here */
  CHECK(syrah_kernel_release(kernel));
  CHECK(syrah_program_release(program));
  CHECK(syrah_queue_release(queue));
  CHECK(syrah_context_release(ctx));
  return jacobi_check("port_jacobi (Syrah buffers)", N, STEPS, grid, expect);
}
