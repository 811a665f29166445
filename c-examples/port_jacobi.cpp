// The 2D Jacobi port through Syrah's C++ header: two grids take turns as
// input and output; the first is written back into its array when its
// buffer goes. Host code only; the kernel and the check are in
// port_jacobi.h.
#include <syrah.hpp>

#include "port_jacobi.h"

enum { N = 256, STEPS = 100 };
static float grid[N * N], expect[N * N], scratch[N * N];

int main() try {
  jacobi_init(N, STEPS, grid, expect, scratch);
  syrah::queue q;
  syrah::kernel jacobi(syrah::program(q.get_context(), jacobi_source), "jacobi");
  {
    syrah::buffer<float, 2> b[2] = {{grid, syrah::range<2>(N, N)},
                                    syrah::buffer<float, 2>(syrah::range<2>(N, N))};
    for (int step = 0; step < STEPS; ++step)
      q.submit([&](syrah::handler &h) {
        h.parallel_for(jacobi, syrah::range<2>(N, N),
                       b[step % 2].get_access<syrah::access_mode::read>(h),
                       b[1 - step % 2].get_access<syrah::access_mode::discard_write>(h), int(N));
      });
  }  // STEPS is even: the result is written back from b[0] here
  return jacobi_check("port_jacobi_cpp (Syrah C++)", N, STEPS, grid, expect);
} catch (const syrah::exception &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
