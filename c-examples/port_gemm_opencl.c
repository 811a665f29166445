/* The same GEMM through raw OpenCL, as a careful programmer writes it:
 * the device SYRAH_DEVICE names (P.D) or the first one, buffers
 * initialised from the host arrays, one launch, a blocking read, every
 * call checked and every object released. Host code only; the kernel and
 * the check are in port_gemm.h. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdlib.h>

#include "port_gemm.h"

#define CHECK(call)                                                                \
  do {                                                                             \
    cl_int err_ = (call);                                                          \
    if (err_ != CL_SUCCESS) {                                                      \
      fprintf(stderr, "%s failed: %d\n", #call, err_);                             \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

enum { N = 256 };
static float a[N * N], b[N * N], c[N * N], expect[N * N];

int main(void) {
  cl_platform_id platforms[16];
  cl_device_id devices[16];
  cl_uint np = 0, nd = 0, p = 0, d = 0;
  cl_int err;
  int n = N;
  float alpha = 1.5f, beta = 0.5f;
  const char *want = getenv("SYRAH_DEVICE");
  gemm_init(N, a, b, c, expect, alpha, beta);
  if (want && sscanf(want, "%u.%u", &p, &d) != 2) p = d = 0;
  CHECK(clGetPlatformIDs(16, platforms, &np));
  /* A device of Syrah's CUDA platform has no OpenCL index: nothing to run here. */
  if (p >= np) return printf("port_gemm_opencl (raw OpenCL): skipped, %s is not an OpenCL device\n", want ? want : "0.0") < 0;
  CHECK(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd));
  if (d >= nd) return 1;
  cl_context ctx = clCreateContext(NULL, 1, &devices[d], NULL, NULL, &err);
  CHECK(err);
  cl_command_queue queue = clCreateCommandQueueWithProperties(ctx, devices[d], NULL, &err);
  CHECK(err);
  cl_program program = clCreateProgramWithSource(ctx, 1, &gemm_source, NULL, &err);
  CHECK(err);
  if (clBuildProgram(program, 1, &devices[d], NULL, NULL, NULL) != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(program, devices[d], CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    fprintf(stderr, "build failed:\n%s\n", log);
    return 1;
  }
  cl_kernel kernel = clCreateKernel(program, "gemm", &err);
  CHECK(err);
  cl_mem_flags in = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
  cl_mem ba = clCreateBuffer(ctx, in, sizeof a, a, &err);
  CHECK(err);
  cl_mem bb = clCreateBuffer(ctx, in, sizeof b, b, &err);
  CHECK(err);
  cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof c, c, &err);
  CHECK(err);
  CHECK(clSetKernelArg(kernel, 0, sizeof ba, &ba));
  CHECK(clSetKernelArg(kernel, 1, sizeof bb, &bb));
  CHECK(clSetKernelArg(kernel, 2, sizeof bc, &bc));
  CHECK(clSetKernelArg(kernel, 3, sizeof n, &n));
  CHECK(clSetKernelArg(kernel, 4, sizeof alpha, &alpha));
  CHECK(clSetKernelArg(kernel, 5, sizeof beta, &beta));
  size_t global[2] = {N, N};
  CHECK(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global, NULL, 0, NULL, NULL));
  CHECK(clEnqueueReadBuffer(queue, bc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL));
  CHECK(clReleaseMemObject(ba));
  CHECK(clReleaseMemObject(bb));
  CHECK(clReleaseMemObject(bc));
  CHECK(clReleaseKernel(kernel));
  CHECK(clReleaseProgram(program));
  CHECK(clReleaseCommandQueue(queue));
  CHECK(clReleaseContext(ctx));
  return gemm_check("port_gemm_opencl (raw OpenCL)", N, c, expect);
}
