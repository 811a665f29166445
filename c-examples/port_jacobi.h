/* The 2D Jacobi port's shared parts: the OpenCL C kernel (unchanged
 * between the Syrah and the raw OpenCL host programs), the starting grid,
 * a CPU reference and the check. Each step replaces every interior point
 * of an n x n grid by the mean of its four neighbours; the edges stay. */
#ifndef PORT_JACOBI_H
#define PORT_JACOBI_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *jacobi_source =
    "__kernel void jacobi(__global const float *in, __global float *out, int n) {\n"
    "  int col = get_global_id(0), row = get_global_id(1); /* neighbours in dimension 0 share a row */\n"
    "  int i = row * n + col;\n"
    "  if (row == 0 || col == 0 || row == n - 1 || col == n - 1) out[i] = in[i];\n"
    "  else out[i] = 0.25f * (in[i - n] + in[i + n] + in[i - 1] + in[i + 1]);\n"
    "}\n";

/* A grid with a hot top edge, and the expected grid after `steps` steps
 * (`scratch` holds n * n floats). */
static void jacobi_init(int n, int steps, float *grid, float *expect, float *scratch) {
  int i, s, r, c;
  for (i = 0; i < n * n; ++i) grid[i] = i < n ? 100.0f : (float)(i % 7);
  memcpy(expect, grid, sizeof(float) * (size_t)n * (size_t)n);
  for (s = 0; s < steps; ++s) {
    for (r = 0; r < n; ++r)
      for (c = 0; c < n; ++c) {
        int k = r * n + c;
        scratch[k] = (r == 0 || c == 0 || r == n - 1 || c == n - 1)
                         ? expect[k]
                         : 0.25f * (expect[k - n] + expect[k + n] + expect[k - 1] + expect[k + 1]);
      }
    memcpy(expect, scratch, sizeof(float) * (size_t)n * (size_t)n);
  }
}

/* 0 when every point is within rounding of the reference. */
static int jacobi_check(const char *who, int n, int steps, const float *grid,
                        const float *expect) {
  int i, wrong = 0;
  double worst = 0.0;
  for (i = 0; i < n * n; ++i) {
    double e = fabs((double)grid[i] - (double)expect[i]);
    if (e > worst) worst = e;
    if (e > 1e-3) ++wrong;
  }
  printf("%s: %dx%d grid, %d Jacobi steps, max error %.2e, %d points wrong\n", who, n, n, steps,
         worst, wrong);
  return wrong == 0 ? 0 : 1;
}

#endif
