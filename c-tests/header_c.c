/* The C header compiles alone under -std=c99 -pedantic -Werror. */
#include <syrah.h>

int main(void) {
  syrah_range r = syrah_nd_range_2d(64, 32, 8, 4);
  syrah_kernel_arg a = syrah_arg_local(256);
  int ok = r.dimensions == 2 && r.local_size[1] == 4 && a.kind == SYRAH_ARG_LOCAL &&
           syrah_api_version() == SYRAH_VERSION;
  return ok ? 0 : 1;
}
