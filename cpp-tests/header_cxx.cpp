// The C header compiles alone as C++17 under -pedantic -Werror, and its
// inline helpers behave the same there.
#include <syrah.h>

int main() {
  syrah_range r = syrah_range_3d(4, 5, 6);
  syrah_kernel_arg a = syrah_arg_usm(nullptr);
  const bool ok = r.dimensions == 3 && r.global_size[2] == 6 && r.local_size[0] == 0 &&
                  a.kind == SYRAH_ARG_USM && syrah_api_version() == SYRAH_VERSION;
  return ok ? 0 : 1;
}
