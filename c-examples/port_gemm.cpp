// The GEMM port through Syrah's C++ header: read-only buffers over the
// inputs, C written back into its array when its buffer goes. Host code
// only; the kernel and the check are in port_gemm.h.
#include <syrah.hpp>

#include "port_gemm.h"

enum { N = 256 };
static float a[N * N], b[N * N], c[N * N], expect[N * N];

int main() try {
  const float alpha = 1.5f, beta = 0.5f;
  gemm_init(N, a, b, c, expect, alpha, beta);
  syrah::queue q;
  syrah::kernel gemm(syrah::program(q.get_context(), gemm_source), "gemm");
  {
    syrah::buffer<float, 2> ba(static_cast<const float *>(a), syrah::range<2>(N, N));
    syrah::buffer<float, 2> bb(static_cast<const float *>(b), syrah::range<2>(N, N));
    syrah::buffer<float, 2> bc(c, syrah::range<2>(N, N));
    q.submit([&](syrah::handler &h) {
      h.parallel_for(gemm, syrah::range<2>(N, N), ba.get_access<syrah::access_mode::read>(h),
                     bb.get_access<syrah::access_mode::read>(h),
                     bc.get_access<syrah::access_mode::read_write>(h), int(N), alpha, beta);
    });
  }  // C is written back here
  return gemm_check("port_gemm_cpp (Syrah C++)", N, c, expect);
} catch (const syrah::exception &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
