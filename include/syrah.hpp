// Syrah for C++17: a SYCL-shaped, header-only layer over the C ABI of
// syrah.h. Objects are RAII handles (copy = another reference, move =
// takes it over); failures throw syrah::exception carrying the status and
// the library's message.
#ifndef SYRAH_HPP
#define SYRAH_HPP

#include <syrah.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace syrah {

/// A failed call: its status and message.
class exception : public std::runtime_error {
 public:
  exception(syrah_status status, const std::string &message)
      : std::runtime_error(std::string(syrah_status_name(status)) + ": " + message), status_(status) {}
  syrah_status status() const noexcept { return status_; }

 private:
  syrah_status status_;
};

/// Throws for any status but success.
inline void check(syrah_status s) {
  if (s != SYRAH_SUCCESS) throw exception(s, syrah_last_error_message());
}

namespace detail {
// A reference-counted handle over a C object with retain/release functions.
template <class T, syrah_status (*Retain)(const T *), syrah_status (*Release)(const T *)>
class handle {
 public:
  handle() = default;
  explicit handle(T *raw) noexcept : raw_(raw) {}  // takes over one reference
  handle(const handle &o) : raw_(o.raw_) {
    if (raw_) check(Retain(raw_));
  }
  handle(handle &&o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  handle &operator=(handle o) noexcept {
    std::swap(raw_, o.raw_);
    return *this;
  }
  ~handle() {
    if (raw_) Release(raw_);
  }
  T *get() const noexcept { return raw_; }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

 private:
  T *raw_ = nullptr;
};
}  // namespace detail

enum class aspect : syrah_aspect {
  cpu = SYRAH_ASPECT_CPU,
  gpu = SYRAH_ASPECT_GPU,
  accelerator = SYRAH_ASPECT_ACCELERATOR,
  fp64 = SYRAH_ASPECT_FP64,
  usm_device_allocations = SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS,
  usm_host_allocations = SYRAH_ASPECT_USM_HOST_ALLOCATIONS,
  usm_shared_allocations = SYRAH_ASPECT_USM_SHARED_ALLOCATIONS,
  usm_system_allocations = SYRAH_ASPECT_USM_SYSTEM_ALLOCATIONS,
  usm_atomic_host_allocations = SYRAH_ASPECT_USM_ATOMIC_HOST_ALLOCATIONS,
  usm_atomic_shared_allocations = SYRAH_ASPECT_USM_ATOMIC_SHARED_ALLOCATIONS,
};

/// A device; devices live as long as the process.
class device {
 public:
  device() { check(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d_)); }  // honours SYRAH_DEVICE
  explicit device(const syrah_device *d) : d_(d) {}
  static device select(const std::string &spec) {
    const syrah_device *d = nullptr;
    check(syrah_device_select_by_string(spec.c_str(), &d));
    return device(d);
  }
  static std::vector<device> get_devices() {
    size_t n = 0;
    check(syrah_get_devices(nullptr, 0, &n));
    std::vector<const syrah_device *> raw(n);
    check(syrah_get_devices(raw.data(), n, &n));
    return std::vector<device>(raw.begin(), raw.end());
  }
  std::string name() const { return string_info(SYRAH_DEVICE_INFO_NAME); }
  std::string string_info(syrah_device_info which) const {
    size_t len = 0;
    check(syrah_device_get_info_string(d_, which, nullptr, 0, &len));
    std::string s(len, '\0');
    check(syrah_device_get_info_string(d_, which, &s[0], len, &len));
    s.resize(len ? len - 1 : 0);
    return s;
  }
  uint64_t info(syrah_device_info which) const {
    uint64_t v = 0;
    check(syrah_device_get_info_u64(d_, which, &v));
    return v;
  }
  bool has(aspect a) const {
    bool v = false;
    check(syrah_device_has_aspect(d_, static_cast<syrah_aspect>(a), &v));
    return v;
  }
  const syrah_device *get() const noexcept { return d_; }
  bool operator==(const device &o) const noexcept { return d_ == o.d_; }
  bool operator!=(const device &o) const noexcept { return d_ != o.d_; }

 private:
  explicit device(std::nullptr_t) {}
  const syrah_device *d_ = nullptr;
};

class context {
 public:
  explicit context(const std::vector<device> &devs) {
    std::vector<const syrah_device *> raw;
    for (const auto &d : devs) raw.push_back(d.get());
    syrah_context *c = nullptr;
    check(syrah_context_create(raw.data(), raw.size(), &c));
    h_ = handle_t(c);
  }
  explicit context(const device &d) : context(std::vector<device>{d}) {}
  explicit context(syrah_context *owned) : h_(owned) {}
  syrah_context *get() const noexcept { return h_.get(); }

 private:
  using handle_t = detail::handle<syrah_context, syrah_context_retain, syrah_context_release>;
  handle_t h_;
};

enum class event_status { queued, submitted, running, complete, failed };

class event {
 public:
  event() = default;
  explicit event(syrah_event *owned) : h_(owned) {}
  void wait() const {
    if (h_) check(syrah_event_wait(h_.get()));
  }
  event_status status() const {
    syrah_event_status s = 0;
    check(syrah_event_get_status(h_.get(), &s));
    return static_cast<event_status>(s);
  }
  uint64_t profiling(syrah_profiling_info which) const {
    uint64_t v = 0;
    check(syrah_event_get_profiling(h_.get(), which, &v));
    return v;
  }
  syrah_event *get() const noexcept { return h_.get(); }

 private:
  detail::handle<syrah_event, syrah_event_retain, syrah_event_release> h_;
};

class program {
 public:
  program(const context &ctx, const std::string &source, const std::string &options = "") {
    syrah_program *p = nullptr;
    check(syrah_program_create_from_source(ctx.get(), source.c_str(), options.c_str(), &p));
    h_ = handle_t(p);
  }
  syrah_program *get() const noexcept { return h_.get(); }

 private:
  using handle_t = detail::handle<syrah_program, syrah_program_retain, syrah_program_release>;
  handle_t h_;
};

/// Group-local memory of `bytes` for a __local pointer kernel parameter.
struct local_memory {
  size_t bytes;
};

/// A kernel argument other than an accessor: local memory, a USM pointer,
/// or a trivially copyable value read from `a` (which must outlive its use).
template <class A>
syrah_kernel_arg plain_arg(const A &a) {
  syrah_kernel_arg k{};
  if constexpr (std::is_same_v<A, local_memory>) {
    k.kind = SYRAH_ARG_LOCAL;
    k.size = a.bytes;
  } else if constexpr (std::is_pointer_v<A>) {
    k.kind = SYRAH_ARG_USM;
    k.size = sizeof(void *);
    k.value = static_cast<const void *>(a);
  } else {
    static_assert(std::is_trivially_copyable_v<A>, "kernel arguments are copied bytewise");
    k.kind = SYRAH_ARG_VALUE;
    k.size = sizeof(A);
    k.value = &a;
  }
  return k;
}

class kernel {
 public:
  kernel(const program &p, const std::string &name) {
    syrah_kernel *k = nullptr;
    check(syrah_kernel_create(p.get(), name.c_str(), &k));
    h_ = handle_t(k);
  }
  syrah_kernel *get() const noexcept { return h_.get(); }

  /// Binds argument `index` once (a value, copied; a USM pointer; or
  /// local_memory): launches that give fewer arguments, or none for this
  /// one, take it (syrah_kernel_set_arg).
  template <class A>
  void set_arg(uint32_t index, const A &a) {
    syrah_kernel_arg k = plain_arg(a);
    check(syrah_kernel_set_arg(h_.get(), index, &k));
  }
  /// Unbinds argument `index`.
  void unset_arg(uint32_t index) { check(syrah_kernel_set_arg(h_.get(), index, nullptr)); }

 private:
  using handle_t = detail::handle<syrah_kernel, syrah_kernel_retain, syrah_kernel_release>;
  handle_t h_;
};

/// Extents of a launch or of a buffer.
template <int Dims = 1>
struct range {
  static_assert(Dims >= 1 && Dims <= 3, "1 to 3 dimensions");
  std::array<size_t, 3> v{{1, 1, 1}};
  range() = default;
  template <class... I, class = std::enable_if_t<sizeof...(I) == Dims>>
  range(I... e) : v{{static_cast<size_t>(e)...}} {
    for (int i = Dims; i < 3; ++i) v[static_cast<size_t>(i)] = 1;
  }
  size_t operator[](int i) const { return v[static_cast<size_t>(i)]; }
  size_t size() const {
    size_t n = 1;
    for (int i = 0; i < Dims; ++i) n *= v[static_cast<size_t>(i)];
    return n;
  }
};

template <int Dims = 1>
struct id : range<Dims> {
  id() { this->v = {{0, 0, 0}}; }
  template <class... I, class = std::enable_if_t<sizeof...(I) == Dims>>
  id(I... e) : range<Dims>(e...) {}
};

/// A launch with a fixed work-group size.
template <int Dims = 1>
struct nd_range {
  range<Dims> global, local;
  nd_range(range<Dims> g, range<Dims> l) : global(g), local(l) {}
};

enum class access_mode : syrah_access_mode {
  read = SYRAH_ACCESS_READ,
  write = SYRAH_ACCESS_WRITE,
  read_write = SYRAH_ACCESS_READ_WRITE,
  discard_write = SYRAH_ACCESS_DISCARD_WRITE,
  discard_read_write = SYRAH_ACCESS_DISCARD_READ_WRITE,
};

class queue;
class handler;
class interop_handle;
template <class T, int Dims>
class buffer;

/// A buffer requirement of a command group.
template <class T, int Dims, access_mode Mode>
class accessor {
 public:
  size_t index() const noexcept { return index_; }
  range<Dims> get_range() const noexcept { return range_; }

 private:
  friend class handler;
  template <class, int>
  friend class buffer;
  accessor(size_t index, range<Dims> r) : index_(index), range_(r) {}
  size_t index_;
  range<Dims> range_;
};

/// Asynchronous errors: each delivered once.
using async_handler = std::function<void(const exception &)>;

/// What a host task sees: its accessors' host memory and native objects.
class interop_handle {
 public:
  template <class T, int Dims, access_mode Mode>
  T *get_pointer(const accessor<T, Dims, Mode> &a) const {
    void *p = nullptr;
    check(syrah_host_task_get_pointer(ctx_, a.index(), &p));
    return static_cast<T *>(p);
  }
  void *get_native(syrah_native which) const {
    void *p = nullptr;
    check(syrah_host_task_get_native(ctx_, which, &p));
    return p;
  }

 private:
  friend class handler;
  explicit interop_handle(const syrah_host_task_context *c) : ctx_(c) {}
  const syrah_host_task_context *ctx_;
};

/// Collects a command group's requirements and its one action.
class handler {
 public:
  void depends_on(const event &e) { deps_.push_back(e); }

  /// Launches `k` over `r`; arguments may be accessors, USM pointers,
  /// local_memory and trivially copyable values.
  template <int Dims, class... Args>
  void parallel_for(const kernel &k, range<Dims> r, const Args &...args) {
    launch(k, Dims, r.v, {{0, 0, 0}}, args...);
  }
  template <int Dims, class... Args>
  void parallel_for(const kernel &k, nd_range<Dims> r, const Args &...args) {
    launch(k, Dims, r.global.v, r.local.v, args...);
  }
  template <class... Args>
  void single_task(const kernel &k, const Args &...args) {
    launch(k, 1, {{1, 1, 1}}, {{1, 1, 1}}, args...);
  }

  /// Runs `f` (taking an interop_handle&, or nothing) on a runtime thread.
  template <class F>
  void host_task(F f) {
    if (kind_ == action::kernel) mixed();
    kind_ = action::host;
    tasks_.push_back(std::function<void(interop_handle &)>([f](interop_handle &ih) {
      if constexpr (std::is_invocable_v<F, interop_handle &>) {
        f(ih);
      } else {
        (void)ih;
        f();
      }
    }));
  }

  template <class T, int Dims, access_mode M>
  void copy(const accessor<T, Dims, M> &src, T *dst) {
    set_copy([=](syrah_queue *q, const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_copy_from_accessor(q, &accs_[src.index()], dst, nullptr, nullptr, d, n, ev);
    });
  }
  template <class T, int Dims, access_mode M>
  void copy(const T *src, const accessor<T, Dims, M> &dst) {
    set_copy([=](syrah_queue *q, const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_copy_to_accessor(q, src, &accs_[dst.index()], nullptr, nullptr, d, n, ev);
    });
  }
  template <class T, int D1, access_mode M1, int D2, access_mode M2>
  void copy(const accessor<T, D1, M1> &src, const accessor<T, D2, M2> &dst) {
    set_copy([=](syrah_queue *q, const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_copy_accessor(q, &accs_[src.index()], &accs_[dst.index()], d, n, ev);
    });
  }
  template <class T, int Dims, access_mode M>
  void fill(const accessor<T, Dims, M> &dst, const T &value) {
    static_assert(sizeof(T) <= 128 && (sizeof(T) & (sizeof(T) - 1)) == 0,
                  "fill patterns are 1, 2, 4, 8, 16, 32, 64 or 128 bytes");
    T v = value;
    set_copy([=](syrah_queue *q, const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_fill_accessor(q, &accs_[dst.index()], &v, sizeof(T), d, n, ev);
    });
  }

 private:
  friend class queue;
  template <class, int>
  friend class buffer;
  enum class action { none, kernel, host, copy };
  using copy_fn = std::function<syrah_status(syrah_queue *, const syrah_event *const *, size_t, syrah_event **)>;

  explicit handler(syrah_queue *q) : q_(q) {}

  [[noreturn]] static void mixed() {
    throw exception(SYRAH_ERROR_INVALID_ARGUMENT,
                    "a command group holds one kind of action: a kernel, host tasks, or one copy or fill");
  }

  size_t add_accessor(const syrah_accessor &a) {
    accs_.push_back(a);
    return accs_.size() - 1;
  }

  void set_copy(copy_fn f) {
    if (kind_ != action::none) mixed();
    kind_ = action::copy;
    copy_ = std::move(f);
  }

  template <class A>
  void push_arg(const A &a) {
    syrah_kernel_arg k{};
    if constexpr (is_accessor<A>::value) {
      k.kind = SYRAH_ARG_ACCESSOR;
      k.size = a.index();
    } else {
      k = plain_arg(a);
      if (k.kind == SYRAH_ARG_VALUE) {
        // The command group keeps its own copy of the value.
        values_.push_back(std::make_unique<std::vector<unsigned char>>(sizeof(A)));
        std::memcpy(values_.back()->data(), &a, sizeof(A));
        k.value = values_.back()->data();
      }
    }
    args_.push_back(k);
  }

  template <class A>
  struct is_accessor : std::false_type {};
  template <class T, int D, access_mode M>
  struct is_accessor<accessor<T, D, M>> : std::true_type {};

  template <class... Args>
  void launch(const kernel &k, int dims, std::array<size_t, 3> g, std::array<size_t, 3> l, const Args &...args) {
    if (kind_ != action::none) mixed();
    kind_ = action::kernel;
    kernel_ = &k;
    range_.dimensions = static_cast<uint32_t>(dims);
    for (size_t i = 0; i < 3; ++i) {
      range_.global_size[i] = g[i];
      range_.local_size[i] = l[i];
      range_.global_offset[i] = 0;
    }
    (push_arg(args), ...);
  }

  static syrah_status run_task(const syrah_host_task_context *ctx, void *user) {
    auto *f = static_cast<std::function<void(interop_handle &)> *>(user);
    interop_handle ih(ctx);
    syrah_status s = SYRAH_SUCCESS;
    try {
      (*f)(ih);
    } catch (const exception &e) {
      s = e.status();
    } catch (...) {
      s = SYRAH_ERROR_EXECUTION_FAILED;
    }
    return s;
  }

  event finish() {
    std::vector<const syrah_event *> d;
    for (const auto &e : deps_) d.push_back(e.get());
    syrah_event *ev = nullptr;
    switch (kind_) {
      case action::kernel:
        check(syrah_queue_submit_kernel(q_, kernel_->get(), &range_, accs_.data(), accs_.size(), args_.data(),
                                        args_.size(), d.data(), d.size(), &ev));
        break;
      case action::host: {
        // Each function is freed by its release callback, once the group
        // will not run it any more.
        std::vector<syrah_host_task> t;
        for (auto &f : tasks_) {
          t.push_back(syrah_host_task{&handler::run_task, new std::function<void(interop_handle &)>(std::move(f)),
                                      [](void *u) { delete static_cast<std::function<void(interop_handle &)> *>(u); }});
        }
        syrah_status s = syrah_queue_submit_host_tasks(q_, accs_.data(), accs_.size(), t.data(), t.size(), d.data(),
                                                       d.size(), &ev);
        if (s != SYRAH_SUCCESS) {
          for (auto &x : t) x.release(x.user_data);
          check(s);
        }
        break;
      }
      case action::copy:
        check(copy_(q_, d.data(), d.size(), &ev));
        break;
      case action::none:
        check(syrah_queue_barrier(q_, d.data(), d.size(), &ev));
        break;
    }
    return event(ev);
  }

  syrah_queue *q_;
  action kind_ = action::none;
  std::vector<event> deps_;
  std::vector<syrah_accessor> accs_;
  std::vector<syrah_kernel_arg> args_;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> values_;
  syrah_range range_{};
  const kernel *kernel_ = nullptr;
  std::vector<std::function<void(interop_handle &)>> tasks_;
  copy_fn copy_;
};

class graph;
class executable_graph;

/// A queue on a device.
class queue {
 public:
  explicit queue(const device &d = device(), bool in_order = false, async_handler h = {})
      : queue(nullptr, d, in_order, std::move(h)) {}
  queue(const context &ctx, const device &d, bool in_order = false, async_handler h = {})
      : queue(ctx.get(), d, in_order, std::move(h)) {}

  device get_device() const {
    const syrah_device *d = nullptr;
    check(syrah_queue_get_device(h_.get(), &d));
    return device(d);
  }
  context get_context() const {
    syrah_context *c = nullptr;
    check(syrah_queue_get_context(h_.get(), &c));
    return context(c);
  }

  /// Runs `cgf(handler&)` to describe a command group and submits it.
  template <class F>
  event submit(F cgf) {
    handler h(h_.get());
    cgf(h);
    return h.finish();
  }

  /// Records the commands submitted from now on into a graph instead of
  /// running them, until `end_recording` (syrah_graph.hpp).
  void begin_recording() { check(syrah_queue_begin_recording(h_.get())); }
  graph end_recording();
  /// Submits a finalized graph after `deps`.
  event submit(const executable_graph &x, const std::vector<event> &deps = {});

  /// Waits for everything submitted; delivers asynchronous errors to the
  /// handler, or throws the first one.
  void wait() { check(syrah_queue_wait(h_.get())); }
  void wait_and_throw() { wait(); }

  event memcpy(void *dst, const void *src, size_t bytes, const std::vector<event> &deps = {}) {
    return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_memcpy(h_.get(), dst, src, bytes, d, n, ev);
    }, deps);
  }
  event memset(void *p, int value, size_t bytes, const std::vector<event> &deps = {}) {
    return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_memset(h_.get(), p, value, bytes, d, n, ev);
    }, deps);
  }
  template <class T>
  event fill(T *p, const T &pattern, size_t count, const std::vector<event> &deps = {}) {
    return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_fill(h_.get(), p, &pattern, sizeof(T), count * sizeof(T), d, n, ev);
    }, deps);
  }
  event prefetch(const void *p, size_t bytes, const std::vector<event> &deps = {}) {
    return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_prefetch(h_.get(), p, bytes, d, n, ev);
    }, deps);
  }
  event mem_advise(const void *p, size_t bytes, uint32_t advice, const std::vector<event> &deps = {}) {
    return op([&](const syrah_event *const *d, size_t n, syrah_event **ev) {
      return syrah_queue_mem_advise(h_.get(), p, bytes, advice, d, n, ev);
    }, deps);
  }

  syrah_queue *get() const noexcept { return h_.get(); }

 private:
  queue(syrah_context *ctx, const device &d, bool in_order, async_handler h)
      : handler_(std::make_shared<async_handler>(std::move(h))) {
    syrah_queue *q = nullptr;
    check(syrah_queue_create(ctx, d.get(), in_order ? SYRAH_QUEUE_IN_ORDER : 0,
                             *handler_ ? &queue::on_error : nullptr, handler_.get(), &q));
    h_ = handle_t(q);
  }

  static void on_error(const syrah_queue *, syrah_status s, const char *msg, void *user) {
    auto *h = static_cast<async_handler *>(user);
    if (h && *h) (*h)(exception(s, msg ? msg : ""));
  }

  template <class F>
  event op(F f, const std::vector<event> &deps) {
    std::vector<const syrah_event *> d;
    for (const auto &e : deps) d.push_back(e.get());
    syrah_event *ev = nullptr;
    check(f(d.data(), d.size(), &ev));
    return event(ev);
  }

  using handle_t = detail::handle<syrah_queue, syrah_queue_retain, syrah_queue_release>;
  std::shared_ptr<async_handler> handler_;  // outlives the C queue (declared first)
  handle_t h_;
};

/// A buffer of `Dims`-dimensional elements of T.
template <class T, int Dims = 1>
class buffer {
 public:
  /// Without data.
  explicit buffer(range<Dims> r, range<Dims> page = range<Dims>()) : buffer(r, page, nullptr, SYRAH_HOST_NONE) {}
  /// Over `host`: data copied back into it when the buffer goes.
  buffer(T *host, range<Dims> r) : buffer(r, range<Dims>(), host, SYRAH_HOST_WRITE_BACK) {}
  /// Over read-only data, never written.
  buffer(const T *host, range<Dims> r)
      : buffer(r, range<Dims>(), const_cast<T *>(host), SYRAH_HOST_READ_ONLY) {}
  /// Over shared memory: written back at the end only if someone else still
  /// holds `p` then (an empty `p`: no data).
  buffer(std::shared_ptr<T> p, range<Dims> r)
      : buffer(r, range<Dims>(), p ? p.get() : nullptr, p ? SYRAH_HOST_SHARED : SYRAH_HOST_NONE, p) {}
  /// Takes the data over: copied in, nothing written back.
  template <class D>
  buffer(std::unique_ptr<T[], D> p, range<Dims> r)
      : buffer(r, range<Dims>(), p.get(), p ? SYRAH_HOST_COPY_IN : SYRAH_HOST_NONE) {}

  range<Dims> get_range() const { return range_; }

  /// Sends the final data to `p` (nullptr: nowhere).
  void set_final_data(T *p) { check(syrah_buffer_set_final_data(h_.get(), p)); }
  void set_final_data(std::nullptr_t) { check(syrah_buffer_set_final_data(h_.get(), nullptr)); }
  void set_write_back(bool on) { check(syrah_buffer_set_write_back(h_.get(), on)); }

  template <access_mode M>
  accessor<T, Dims, M> get_access(handler &h) {
    return get_access<M>(h, range_, id<Dims>());
  }
  template <access_mode M>
  accessor<T, Dims, M> get_access(handler &h, range<Dims> r, id<Dims> offset = id<Dims>()) {
    syrah_accessor a{};
    a.buffer = h_.get();
    a.mode = static_cast<syrah_access_mode>(M);
    for (int i = 0; i < Dims; ++i) {
      a.offset[i] = offset[i];
      a.range[i] = r[i];
    }
    return accessor<T, Dims, M>(h.add_accessor(a), r);
  }

  /// Host access for the scope of the returned object.
  template <access_mode M>
  class host_accessor {
   public:
    T *data() const noexcept { return p_; }
    T &operator[](size_t i) const noexcept { return p_[i]; }
    host_accessor(host_accessor &&o) noexcept : a_(std::exchange(o.a_, nullptr)), p_(o.p_) {}
    host_accessor(const host_accessor &) = delete;
    host_accessor &operator=(const host_accessor &) = delete;
    host_accessor &operator=(host_accessor &&) = delete;
    ~host_accessor() {
      if (a_) syrah_host_accessor_release(a_);
    }

   private:
    friend class buffer;
    host_accessor(syrah_host_accessor *a, T *p) : a_(a), p_(p) {}
    syrah_host_accessor *a_;
    T *p_;
  };

  template <access_mode M = access_mode::read_write>
  host_accessor<M> get_host_access() {
    syrah_host_accessor *a = nullptr;
    void *p = nullptr;
    check(syrah_buffer_host_access(h_.get(), static_cast<syrah_access_mode>(M), nullptr, nullptr, &a, &p));
    return host_accessor<M>(a, static_cast<T *>(p));
  }

  /// Copies `r` elements at `offset` into `dst` (packed) once the
  /// commands writing them are done, moving only their bytes
  /// (syrah_buffer_read).
  void read(range<Dims> r, id<Dims> offset, T *dst) const {
    size_t o[3] = {0, 0, 0}, n[3] = {0, 0, 0};
    for (int i = 0; i < Dims; ++i) {
      o[i] = offset[i];
      n[i] = r[i];
    }
    check(syrah_buffer_read(h_.get(), o, n, dst));
  }
  /// The element at `at`, read the same way.
  T read(id<Dims> at) const {
    T v{};
    range<Dims> one;
    read(one, at, &v);
    return v;
  }

  syrah_buffer_stats stats() const {
    syrah_buffer_stats s{};
    check(syrah_buffer_get_stats(h_.get(), &s));
    return s;
  }
  syrah_buffer *get() const noexcept { return h_.get(); }

 private:
  buffer(range<Dims> r, range<Dims> page, T *host, syrah_host_ownership own, std::shared_ptr<T> shared = {})
      : range_(r) {
    syrah_buffer_desc d{};
    d.element_size = sizeof(T);
    d.dimensions = Dims;
    for (int i = 0; i < Dims; ++i) {
      d.range[i] = r[i];
      d.page_size[i] = page[i] == 1 && page.size() == 1 ? 0 : page[i];
    }
    d.host_pointer = host;
    d.ownership = own;
    if (own == SYRAH_HOST_SHARED) {
      // The buffer's own copy of the pointer: more owners than it means
      // the application still holds the memory.
      shared_ = std::make_shared<std::shared_ptr<T>>(std::move(shared));
      d.still_shared = [](void *u) -> bool { return static_cast<std::shared_ptr<T> *>(u)->use_count() > 1; };
      d.shared_user_data = shared_.get();
    }
    syrah_buffer *b = nullptr;
    check(syrah_buffer_create(&d, &b));
    h_ = handle_t(b);
  }

  using handle_t = detail::handle<syrah_buffer, syrah_buffer_retain, syrah_buffer_release>;
  range<Dims> range_;
  std::shared_ptr<std::shared_ptr<T>> shared_;  // outlives the C buffer (declared first)
  handle_t h_;
};

// ---- USM -------------------------------------------------------------------

template <class T>
T *malloc_device(size_t count, const queue &q) {
  void *p = nullptr;
  check(syrah_malloc_device(q.get_context().get(), q.get_device().get(), count * sizeof(T), &p));
  return static_cast<T *>(p);
}
template <class T>
T *malloc_host(size_t count, const queue &q) {
  void *p = nullptr;
  check(syrah_malloc_host(q.get_context().get(), count * sizeof(T), &p));
  return static_cast<T *>(p);
}
/// Pinned host memory for fast copies (see syrah_malloc_pinned); free it
/// with syrah::free.
template <class T>
T *malloc_pinned(size_t count, const queue &q) {
  void *p = nullptr;
  check(syrah_malloc_pinned(q.get_context().get(), count * sizeof(T), &p));
  return static_cast<T *>(p);
}
template <class T>
T *malloc_shared(size_t count, const queue &q) {
  void *p = nullptr;
  check(syrah_malloc_shared(q.get_context().get(), q.get_device().get(), count * sizeof(T), &p));
  return static_cast<T *>(p);
}
inline void free(void *p, const queue &q) { check(syrah_free(q.get_context().get(), p)); }

}  // namespace syrah

#include <syrah_graph.hpp>

#endif
