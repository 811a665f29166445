/* The GEMM port's shared parts: the OpenCL C kernel (unchanged between
 * the Syrah and the raw OpenCL host programs), the inputs, a CPU
 * reference and the check, so that the two host programs differ only in
 * their host code. C = alpha * A * B + beta * C for n x n floats. */
#ifndef PORT_GEMM_H
#define PORT_GEMM_H

#include <math.h>
#include <stdio.h>

static const char *gemm_source =
    "__kernel void gemm(__global const float *a, __global const float *b,\n"
    "                   __global float *c, int n, float alpha, float beta) {\n"
    "  int col = get_global_id(0), row = get_global_id(1); /* neighbours in dimension 0 share a row */\n"
    "  float sum = 0.0f;\n"
    "  for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];\n"
    "  c[row * n + col] = alpha * sum + beta * c[row * n + col];\n"
    "}\n";

/* Inputs, and the expected result computed on the CPU. */
static void gemm_init(int n, float *a, float *b, float *c, float *expect, float alpha,
                      float beta) {
  int i, j, k;
  for (i = 0; i < n * n; ++i) {
    a[i] = (float)((i * 7) % 13) / 13.0f;
    b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    c[i] = (float)(i % 17);
  }
  for (i = 0; i < n; ++i)
    for (j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (k = 0; k < n; ++k) sum += a[i * n + k] * b[k * n + j];
      expect[i * n + j] = alpha * sum + beta * c[i * n + j];
    }
}

/* 0 when every element is within rounding of the reference. */
static int gemm_check(const char *who, int n, const float *c, const float *expect) {
  int i, wrong = 0;
  double worst = 0.0;
  for (i = 0; i < n * n; ++i) {
    double e = fabs((double)c[i] - (double)expect[i]);
    if (e > worst) worst = e;
    if (e > 1e-3 * (1.0 + fabs((double)expect[i]))) ++wrong;
  }
  printf("%s: %dx%d GEMM, max error %.2e, %d elements wrong\n", who, n, n, worst, wrong);
  return wrong == 0 ? 0 : 1;
}

#endif
