/* Work-group reduction with group-local memory declared at kernel scope:
 * a __local array whose size is fixed when the kernel is compiled. */
#include "reduction.h"

static const char *source =
    "__kernel void reduce(__global const int *in, __global long *partial) {\n"
    "  __local long scratch[WG];\n"
    "  size_t l = get_local_id(0);\n"
    "  scratch[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (size_t s = WG / 2; s > 0; s /= 2) {\n"
    "    if (l < s) scratch[l] += scratch[l + s];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) partial[get_group_id(0)] = scratch[0];\n"
    "}\n";

int main(void) { return run_reduction(source, "reduction_local_array", 128, 0); }
