/* The same 2D Jacobi through raw OpenCL, as a careful programmer writes
 * it: the device SYRAH_DEVICE names (P.D) or the first one, two grids on
 * the device taking turns (the arguments swapped at each step, the
 * in-order queue ordering the steps), one blocking read at the end, every
 * call checked and every object released. Host code only; the kernel and
 * the check are in port_jacobi.h. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdlib.h>

#include "port_jacobi.h"

#define CHECK(call)                                                                \
  do {                                                                             \
    cl_int err_ = (call);                                                          \
    if (err_ != CL_SUCCESS) {                                                      \
      fprintf(stderr, "%s failed: %d\n", #call, err_);                             \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

enum { N = 256, STEPS = 100 };
static float grid[N * N], expect[N * N], scratch[N * N];

int main(void) {
  cl_platform_id platforms[16];
  cl_device_id devices[16];
  cl_uint np = 0, nd = 0, p = 0, d = 0;
  cl_int err;
  int n = N, step;
  const char *want = getenv("SYRAH_DEVICE");
  jacobi_init(N, STEPS, grid, expect, scratch);
  if (want && sscanf(want, "%u.%u", &p, &d) != 2) p = d = 0;
  CHECK(clGetPlatformIDs(16, platforms, &np));
  /* A device of Syrah's CUDA platform has no OpenCL index: nothing to run here. */
  if (p >= np) return printf("port_jacobi_opencl (raw OpenCL): skipped, %s is not an OpenCL device\n", want ? want : "0.0") < 0;
  CHECK(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd));
  if (d >= nd) return 1;
  cl_context ctx = clCreateContext(NULL, 1, &devices[d], NULL, NULL, &err);
  CHECK(err);
  cl_command_queue queue = clCreateCommandQueueWithProperties(ctx, devices[d], NULL, &err);
  CHECK(err);
  cl_program program = clCreateProgramWithSource(ctx, 1, &jacobi_source, NULL, &err);
  CHECK(err);
  if (clBuildProgram(program, 1, &devices[d], NULL, NULL, NULL) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(program, devices[d], CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    fprintf(stderr, "build failed:\n%s\n", log);
    return 1;
  }
  cl_kernel kernel = clCreateKernel(program, "jacobi", &err);
  CHECK(err);
  cl_mem b[2];
  b[0] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof grid, grid, &err);
  CHECK(err);
  b[1] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof grid, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(kernel, 2, sizeof n, &n));
  size_t global[2] = {N, N};
  for (step = 0; step < STEPS; ++step) {
    CHECK(clSetKernelArg(kernel, 0, sizeof(cl_mem), &b[step % 2]));
    CHECK(clSetKernelArg(kernel, 1, sizeof(cl_mem), &b[1 - step % 2]));
    CHECK(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global, NULL, 0, NULL, NULL));
  }
  CHECK(clEnqueueReadBuffer(queue, b[0], CL_TRUE, 0, sizeof grid, grid, 0, NULL, NULL));
  CHECK(clReleaseMemObject(b[0]));
  CHECK(clReleaseMemObject(b[1]));
  CHECK(clReleaseKernel(kernel));
  CHECK(clReleaseProgram(program));
  CHECK(clReleaseCommandQueue(queue));
  CHECK(clReleaseContext(ctx));
  return jacobi_check("port_jacobi_opencl (raw OpenCL)", N, STEPS, grid, expect);
}
