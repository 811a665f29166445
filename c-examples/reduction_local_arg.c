/* Work-group reduction with group-local memory given at launch time as a
 * __local pointer argument (its size is chosen by the host). */
#include "reduction.h"

static const char *source =
    "__kernel void reduce(__global const int *in, __global long *partial,\n"
    "                     __local long *scratch) {\n"
    "  size_t l = get_local_id(0);\n"
    "  scratch[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {\n"
    "    if (l < s) scratch[l] += scratch[l + s];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) partial[get_group_id(0)] = scratch[0];\n"
    "}\n";

int main(void) {
  const size_t wg = 128;
  return run_reduction(source, "reduction_local_arg", wg, wg * sizeof(long long));
}
