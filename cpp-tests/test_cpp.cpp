// The C++ layer (syrah.hpp) on every device: command groups with kernels,
// host tasks, copies and fills; buffers over raw, const, shared and unique
// pointers (the host-memory rules of the model); USM; errors as exceptions.
#include <syrah.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

static int checks = 0, failures = 0;
static std::string where;

#define EXPECT(cond)                                                                        \
  do {                                                                                      \
    ++checks;                                                                               \
    if (!(cond)) {                                                                          \
      ++failures;                                                                           \
      std::fprintf(stderr, "FAIL %s:%d [%s] %s\n", __FILE__, __LINE__, where.c_str(), #cond); \
    }                                                                                       \
  } while (0)

static const char *kSource =
    "__kernel void setv(__global int *p, int v) { p[get_global_id(0)] = v; }\n"
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n"
    "__kernel void sum(__global const int *in, __global int *out, __local int *s) {\n"
    "  size_t l = get_local_id(0);\n"
    "  s[l] = in[get_global_id(0)];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (l == 0) { int t = 0; for (size_t i = 0; i < get_local_size(0); ++i) t += s[i]; out[get_group_id(0)] = t; }\n"
    "}\n";

constexpr size_t N = 1024;
using syrah::access_mode;

static void kernels_and_tasks(const syrah::device &dev) {
  syrah::queue q(dev);
  syrah::program prog(q.get_context(), kSource);
  syrah::kernel setv(prog, "setv"), addv(prog, "addv"), sum(prog, "sum");
  std::vector<int> a(N, 3), b(N, 0), c(N, 0);
  {
    syrah::buffer<int> ba(a.data(), syrah::range<1>(N));
    syrah::buffer<int> bb(b.data(), syrah::range<1>(N));
    syrah::buffer<int> bc(c.data(), syrah::range<1>(N));
    q.submit([&](syrah::handler &h) {
      auto acc = bb.get_access<access_mode::discard_write>(h);
      h.parallel_for(setv, syrah::range<1>(N), acc, 2);
    });
    // The model's example: two host tasks in one group, run in order.
    std::thread::id submitter = std::this_thread::get_id(), ran_on;
    q.submit([&](syrah::handler &h) {
      auto accA = ba.get_access<access_mode::read>(h);
      auto accB = bb.get_access<access_mode::read_write>(h);
      auto accC = bc.get_access<access_mode::read_write>(h);
      h.host_task([=, &ran_on](syrah::interop_handle &ih) {
        ran_on = std::this_thread::get_id();
        int *A = ih.get_pointer(accA), *B = ih.get_pointer(accB);
        B[0] = A[0] * 7;
      });
      h.host_task([=](syrah::interop_handle &ih) {
        int *A = ih.get_pointer(accA), *B = ih.get_pointer(accB), *C = ih.get_pointer(accC);
        C[0] += A[0] * B[0];
      });
    });
    q.submit([&](syrah::handler &h) {
      auto acc = bb.get_access<access_mode::read_write>(h);
      h.parallel_for(addv, syrah::range<1>(N), acc, 1);
    });
    q.wait();
    EXPECT(ran_on != submitter);
    // A group may not mix a kernel and host tasks.
    bool refused = false;
    try {
      q.submit([&](syrah::handler &h) {
        auto acc = bb.get_access<access_mode::read_write>(h);
        h.parallel_for(addv, syrah::range<1>(N), acc, 1);
        h.host_task([] {});
      });
    } catch (const syrah::exception &e) {
      refused = e.status() == SYRAH_ERROR_INVALID_ARGUMENT && std::string(e.what()).find("one kind") != std::string::npos;
    }
    EXPECT(refused);
    // Group-local memory through a local_memory argument, with an nd_range.
    std::vector<int> partial(N / 64, 0);
    {
      syrah::buffer<int> bp(partial.data(), syrah::range<1>(N / 64));
      q.submit([&](syrah::handler &h) {
        auto in = ba.get_access<access_mode::read>(h);
        auto out = bp.get_access<access_mode::discard_write>(h);
        h.parallel_for(sum, syrah::nd_range<1>(syrah::range<1>(N), syrah::range<1>(64)), in, out,
                       syrah::local_memory{64 * sizeof(int)});
      });
    }
    bool ok = true;
    for (int v : partial) ok = ok && v == 64 * 3;
    EXPECT(ok);
  }
  // Released buffers wrote their data back.
  EXPECT(b[0] == 3 * 7 + 1);
  EXPECT(b[1] == 2 + 1 && b[N - 1] == 3);
  EXPECT(c[0] == 3 * 21);
  EXPECT(c[1] == 0);
}

static void copies_and_fill(const syrah::device &dev) {
  syrah::queue q(dev, true);
  std::vector<int> src(N), out(N, 0);
  for (size_t i = 0; i < N; ++i) src[i] = static_cast<int>(i);
  syrah::buffer<int> a{syrah::range<1>(N)}, b{syrah::range<1>(N)};
  q.submit([&](syrah::handler &h) {
    auto acc = a.get_access<access_mode::discard_write>(h);
    h.copy(src.data(), acc);
  });
  q.submit([&](syrah::handler &h) {
    auto from = a.get_access<access_mode::read>(h);
    auto to = b.get_access<access_mode::discard_write>(h);
    h.copy(from, to);
  });
  q.submit([&](syrah::handler &h) {
    auto acc = b.get_access<access_mode::write>(h, syrah::range<1>(16), syrah::id<1>(100));
    h.fill(acc, -1);
  });
  q.submit([&](syrah::handler &h) {
    auto acc = b.get_access<access_mode::read>(h);
    h.copy(acc, out.data());
  });
  q.wait();
  bool ok = true;
  for (size_t i = 0; i < N; ++i) ok = ok && out[i] == ((i >= 100 && i < 116) ? -1 : static_cast<int>(i));
  EXPECT(ok);
  // Reading through a write accessor is refused, naming the mode.
  bool refused = false;
  try {
    q.submit([&](syrah::handler &h) {
      auto acc = b.get_access<access_mode::write>(h);
      h.copy(acc, out.data());
    });
  } catch (const syrah::exception &e) {
    refused = std::string(e.what()).find("'write'") != std::string::npos;
  }
  EXPECT(refused);
  auto host = b.get_host_access<access_mode::read>();
  EXPECT(host[101] == -1 && host[200] == 200);
}

static void ownership(const syrah::device &dev) {
  syrah::queue q(dev);
  syrah::program prog(q.get_context(), kSource);
  syrah::kernel setv(prog, "setv");
  auto write = [&](auto &buf, int v) {
    q.submit([&](syrah::handler &h) {
      auto acc = buf.template get_access<access_mode::discard_write>(h);
      h.parallel_for(setv, syrah::range<1>(N), acc, v);
    });
  };
  // shared_ptr still held: data copied back.
  {
    std::shared_ptr<int> p(new int[N](), std::default_delete<int[]>());
    {
      syrah::buffer<int> b(p, syrah::range<1>(N));
      write(b, 5);
    }
    EXPECT(p.get()[0] == 5 && p.get()[N - 1] == 5);
  }
  // shared_ptr reset before the buffer goes: nothing copied back.
  {
    int *raw = new int[N]();
    bool deleted = false;
    {
      std::shared_ptr<int> p(raw, [&](int *x) {
        deleted = true;
        delete[] x;
      });
      syrah::buffer<int> b(p, syrah::range<1>(N));
      write(b, 6);
      p.reset();
      EXPECT(!deleted);  // the buffer still holds the memory
    }
    EXPECT(deleted);
  }
  // unique_ptr: copied in, never written back.
  {
    std::unique_ptr<int[]> u(new int[N]);
    for (size_t i = 0; i < N; ++i) u[i] = 9;
    syrah::buffer<int> b(std::move(u), syrah::range<1>(N));
    EXPECT(!u);
    auto h = b.get_host_access<access_mode::read>();
    EXPECT(h[0] == 9);
  }
  // set_final_data to another place, and to nowhere.
  {
    // (While a buffer lives, the memory it was given is its host storage:
    // its contents are the buffer's to use.)
    std::vector<int> home(N, 0), other(N, 0), home2(N, 0);
    {
      syrah::buffer<int> b(home.data(), syrah::range<1>(N));
      write(b, 7);
      b.set_final_data(other.data());
    }
    EXPECT(other[0] == 7 && other[N - 1] == 7);
    {
      syrah::buffer<int> b(home2.data(), syrah::range<1>(N));
      write(b, 8);
      b.set_final_data(nullptr);
    }
    q.wait();
    EXPECT(home2[0] == 0);
  }
  // Copy retains, move steals.
  {
    std::vector<int> home(N, 0);
    {
      syrah::buffer<int> b1(home.data(), syrah::range<1>(N));
      syrah::buffer<int> b2 = b1;
      syrah::buffer<int> b3 = std::move(b2);
      write(b3, 4);
      { syrah::buffer<int> gone = b1; }
      EXPECT(home[0] == 0);  // handles remain: no write-back yet
    }
    EXPECT(home[0] == 4);
  }
}

static void usm_and_errors(const syrah::device &dev) {
  int errors = 0;
  std::string last;
  syrah::queue q(dev, false, [&](const syrah::exception &e) {
    ++errors;
    last = e.what();
  });
  if (dev.has(syrah::aspect::usm_device_allocations)) {
    int *d = syrah::malloc_device<int>(N, q);
    int *pin = syrah::malloc_pinned<int>(N, q);
    std::vector<int> in(N, 11), back(N, 0);
    auto e1 = q.memcpy(d, in.data(), N * sizeof(int));
    auto e2 = q.fill(d + 10, 42, 5, {e1});
    q.memcpy(back.data(), d, N * sizeof(int), {e2}).wait();
    EXPECT(back[0] == 11 && back[10] == 42 && back[14] == 42 && back[15] == 11);
    q.memcpy(pin, d, N * sizeof(int)).wait();
    EXPECT(pin[0] == 11 && pin[10] == 42 && pin[14] == 42 && pin[15] == 11);
    syrah::free(pin, q);
    syrah::free(d, q);
  } else {
    std::printf("SKIP [%s] USM through C++: the device has no USM\n", where.c_str());
  }
  // A host task that throws becomes one asynchronous error for the handler.
  q.submit([&](syrah::handler &h) { h.host_task([] { throw std::runtime_error("boom"); }); });
  q.wait();
  EXPECT(errors == 1);
  EXPECT(last.find("SYRAH_ERROR_EXECUTION_FAILED") != std::string::npos);
  q.wait();
  EXPECT(errors == 1);
  // Synchronous errors throw with the status.
  bool thrown = false;
  try {
    syrah::program prog(q.get_context(), kSource);
    syrah::kernel k(prog, "no_such_kernel");
  } catch (const syrah::exception &e) {
    thrown = e.status() == SYRAH_ERROR_KERNEL_NOT_FOUND;
  }
  EXPECT(thrown);
}

// A graph recorded through the C++ layer: kernels on a buffer and a host
// task, replayed four times; an argument update; waiting while recording
// throws.
static void graphs(const syrah::device &dev) {
  syrah::queue q(dev, true);
  syrah::program prog(q.get_context(), kSource);
  syrah::kernel addv(prog, "addv");
  std::vector<int> a(N, 1);
  {
    syrah::buffer<int> ba(a.data(), syrah::range<1>(N));
    q.begin_recording();
    q.submit([&](syrah::handler &h) {
      auto acc = ba.get_access<access_mode::read_write>(h);
      h.parallel_for(addv, syrah::range<1>(N), acc, 2);
    });
    q.submit([&](syrah::handler &h) {
      auto acc = ba.get_access<access_mode::read_write>(h);
      h.host_task([=](syrah::interop_handle &ih) {
        int *p = ih.get_pointer(acc);
        for (size_t i = 0; i < N; ++i) p[i] *= 3;
      });
    });
    bool thrown = false;
    try {
      q.wait();
    } catch (const syrah::exception &e) {
      thrown = e.status() == SYRAH_ERROR_INVALID_OPERATION;
    }
    EXPECT(thrown);
    syrah::graph g = q.end_recording();
    EXPECT(g.node_count() == 2);
    syrah::executable_graph x = g.finalize();
    EXPECT(x.backend() == syrah::graph_backend::replay);
    for (int i = 0; i < 4; ++i) q.submit(x);
    q.wait();
    syrah_graph_exec_stats st = x.stats();
    EXPECT(st.submissions == 4 && st.command_buffer_recordings == 0 && st.command_buffer_updates == 0);
  }
  // (((((1 + 2) * 3) + 2) * 3 + 2) * 3 + 2) * 3 = 321
  EXPECT(a[0] == 321 && a[N - 1] == 321);
  if (dev.has(syrah::aspect::usm_device_allocations)) {
    int *d = syrah::malloc_device<int>(N, q);
    q.memset(d, 0, N * sizeof(int));
    q.begin_recording();
    q.submit([&](syrah::handler &h) { h.parallel_for(addv, syrah::range<1>(N), d, 5); });
    syrah::executable_graph x = q.end_recording().finalize();
    q.submit(x);
    x.set_arg(0, 1, 7);
    q.submit(x).wait();
    std::vector<int> back(N, 0);
    q.memcpy(back.data(), d, N * sizeof(int)).wait();
    EXPECT(back[0] == 12 && back[N - 1] == 12);
    syrah::free(d, q);
  }
}

// Arguments bound to a kernel once, and single elements read in one call.
static void bound_and_read(const syrah::device &dev) {
  syrah::queue q(dev);
  syrah::program prog(q.get_context(), kSource);
  syrah::kernel addv(prog, "addv");
  std::vector<int> a(N, 1);
  {
    syrah::buffer<int> ba(a.data(), syrah::range<1>(N));
    addv.set_arg(1, 5);
    for (int i = 0; i < 3; ++i)
      q.submit([&](syrah::handler &h) {
        h.parallel_for(addv, syrah::range<1>(N), ba.get_access<access_mode::read_write>(h));
      });
    EXPECT(ba.read(syrah::id<1>(17)) == 16);
    int two[2] = {0, 0};
    ba.read(syrah::range<1>(2), syrah::id<1>(N - 2), two);
    EXPECT(two[0] == 16 && two[1] == 16);
    addv.unset_arg(1);
    bool refused = false;
    try {
      q.submit([&](syrah::handler &h) {
        h.parallel_for(addv, syrah::range<1>(N), ba.get_access<access_mode::read_write>(h));
      });
    } catch (const syrah::exception &e) {
      refused = e.status() == SYRAH_ERROR_KERNEL_ARGUMENTS;
    }
    EXPECT(refused);
  }
  EXPECT(a[0] == 16 && a[N - 1] == 16);
}

int main() {
  for (const auto &d : syrah::device::get_devices()) {
    where = d.name();
    std::printf("== device %llu.%llu %s\n", static_cast<unsigned long long>(d.info(SYRAH_DEVICE_INFO_PLATFORM_INDEX)),
                static_cast<unsigned long long>(d.info(SYRAH_DEVICE_INFO_DEVICE_INDEX)), where.c_str());
    try {
      kernels_and_tasks(d);
      copies_and_fill(d);
      ownership(d);
      usm_and_errors(d);
      graphs(d);
      bound_and_read(d);
    } catch (const std::exception &e) {
      ++failures;
      std::fprintf(stderr, "FAIL [%s] exception: %s\n", where.c_str(), e.what());
    }
  }
  std::printf("test_cpp: %d checks, %d passed, %d failed\n", checks, checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
