// Syrah for C++17, command graphs: the recorded graph, the finalized
// graph and the queue's recording and graph submission. Included by
// syrah.hpp; include that one.
#ifndef SYRAH_GRAPH_HPP
#define SYRAH_GRAPH_HPP

#include <syrah.hpp>

namespace syrah {

/// How a finalized graph is replayed.
enum class graph_backend : syrah_graph_backend {
  command_buffer = SYRAH_GRAPH_BACKEND_COMMAND_BUFFER,
  replay = SYRAH_GRAPH_BACKEND_REPLAY,
};

/// A finalized graph: submit it with `queue::submit(const executable_graph &)`.
class executable_graph {
 public:
  explicit executable_graph(syrah_graph_exec *owned) : h_(owned) {}
  /// Sets argument `index` of kernel node `node` (in recording order) for
  /// later submissions: a value (copied now) or a USM pointer.
  template <class A>
  void set_arg(size_t node, size_t index, const A &a) {
    syrah_kernel_arg arg = std::is_pointer<A>::value ? syrah_arg_usm(*reinterpret_cast<const void *const *>(&a))
                                                     : syrah_arg_value(&a, sizeof(A));
    check(syrah_graph_exec_set_arg(h_.get(), node, index, &arg));
  }
  graph_backend backend() const {
    syrah_graph_backend b = 0;
    check(syrah_graph_exec_get_backend(h_.get(), &b));
    return static_cast<graph_backend>(b);
  }
  /// Submissions made, command-buffers recorded, updates applied in place, and
  /// submissions that found their buffers unchanged.
  syrah_graph_exec_stats stats() const {
    syrah_graph_exec_stats s{};
    check(syrah_graph_exec_get_stats(h_.get(), &s));
    return s;
  }
  syrah_graph_exec *get() const noexcept { return h_.get(); }

 private:
  detail::handle<syrah_graph_exec, syrah_graph_exec_retain, syrah_graph_exec_release> h_;
};

/// A recorded graph (`queue::begin_recording` ... `queue::end_recording`).
class graph {
 public:
  explicit graph(syrah_graph *owned) : h_(owned) {}
  size_t node_count() const {
    size_t n = 0;
    check(syrah_graph_get_node_count(h_.get(), &n));
    return n;
  }
  executable_graph finalize() const {
    syrah_graph_exec *x = nullptr;
    check(syrah_graph_finalize(h_.get(), &x));
    return executable_graph(x);
  }
  syrah_graph *get() const noexcept { return h_.get(); }

 private:
  detail::handle<syrah_graph, syrah_graph_retain, syrah_graph_release> h_;
};

inline graph queue::end_recording() {
  syrah_graph *g = nullptr;
  check(syrah_queue_end_recording(h_.get(), &g));
  return graph(g);
}

inline event queue::submit(const executable_graph &x, const std::vector<event> &deps) {
  return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
    return syrah_queue_submit_graph(h_.get(), x.get(), d, n, ev);
  }, deps);
}

}  // namespace syrah

#endif
