/* Command graphs: one time step of heat flowing along a rod (two kernels
 * ping-ponging between two buffers, the left end held at a temperature
 * passed by value) is recorded once, then replayed 200 times; halfway the
 * end's temperature is changed without recording again. The result is
 * checked exactly against the same steps computed on the host. */
#include "example.h"

#include <string.h>

enum { CELLS = 4096, STEPS = 200 };

static const char *source =
    "__kernel void diffuse(__global const int *from, __global int *to, int n, int left)\n"
    "{\n"
    "  int i = (int)get_global_id(0);\n"
    "  int l = i > 0 ? from[i - 1] : left, r = i < n - 1 ? from[i + 1] : from[i];\n"
    "  to[i] = (l + 2 * from[i] + r) / 4;\n"
    "}\n";

static void host_step(const int *from, int *to, int left) {
  int i;
  for (i = 0; i < CELLS; ++i) {
    int l = i > 0 ? from[i - 1] : left, r = i < CELLS - 1 ? from[i + 1] : from[i];
    to[i] = (l + 2 * from[i] + r) / 4;
  }
}

/* One kernel of the step: `from` read, `to` written, both whole. */
static void diffuse(syrah_queue *q, syrah_kernel *k, syrah_buffer *from, syrah_buffer *to, int left) {
  syrah_accessor acc[2];
  syrah_kernel_arg args[4];
  syrah_range r = syrah_range_1d(CELLS);
  int n = CELLS;
  memset(acc, 0, sizeof acc);
  acc[0].buffer = from;
  acc[0].mode = SYRAH_ACCESS_READ;
  acc[1].buffer = to;
  acc[1].mode = SYRAH_ACCESS_DISCARD_WRITE;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1].kind = SYRAH_ARG_ACCESSOR;
  args[1].size = 1;
  args[1].value = NULL;
  args[2] = syrah_arg_value(&n, sizeof n);
  args[3] = syrah_arg_value(&left, sizeof left);
  CHECK(syrah_queue_submit_kernel(q, k, &r, acc, 2, args, 4, NULL, 0, NULL));
}

int main(void) {
  const syrah_device *device = NULL;
  syrah_queue *q = example_queue(&device);
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *k = NULL;
  syrah_buffer *a = NULL, *b = NULL;
  syrah_buffer_desc desc;
  syrah_graph *graph = NULL;
  syrah_graph_exec *exec = NULL;
  syrah_graph_backend backend = 0;
  static int rod[CELLS], spare[CELLS], ha[CELLS], hb[CELLS];
  int step, i, wrong = 0, hot = 1000000, cold = 0;
  syrah_kernel_arg new_left;

  CHECK(syrah_queue_get_context(q, &ctx));
  CHECK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  CHECK(syrah_kernel_create(prog, "diffuse", &k));
  memset(&desc, 0, sizeof desc);
  desc.element_size = sizeof(int);
  desc.dimensions = 1;
  desc.range[0] = CELLS;
  desc.ownership = SYRAH_HOST_WRITE_BACK;
  desc.host_pointer = rod;
  CHECK(syrah_buffer_create(&desc, &a));
  desc.host_pointer = spare;
  CHECK(syrah_buffer_create(&desc, &b));

  /* Record one time step: a -> b, then b -> a. Nothing runs yet. */
  CHECK(syrah_queue_begin_recording(q));
  diffuse(q, k, a, b, hot);
  diffuse(q, k, b, a, hot);
  CHECK(syrah_queue_end_recording(q, &graph));
  CHECK(syrah_graph_finalize(graph, &exec));

  for (step = 0; step < STEPS; ++step) {
    if (step == STEPS / 2) {
      /* Cool the left end: argument 3 of both nodes, no new recording. */
      new_left = syrah_arg_value(&cold, sizeof cold);
      CHECK(syrah_graph_exec_set_arg(exec, 0, 3, &new_left));
      CHECK(syrah_graph_exec_set_arg(exec, 1, 3, &new_left));
    }
    CHECK(syrah_queue_submit_graph(q, exec, NULL, 0, NULL));
  }
  CHECK(syrah_graph_exec_get_backend(exec, &backend));
  CHECK(syrah_queue_wait(q));
  CHECK(syrah_graph_exec_release(exec));
  CHECK(syrah_graph_release(graph));
  CHECK(syrah_buffer_release(a)); /* writes the rod back */
  CHECK(syrah_buffer_release(b));

  for (step = 0; step < STEPS; ++step) {
    int left = step < STEPS / 2 ? hot : cold;
    host_step(ha, hb, left);
    host_step(hb, ha, left);
  }
  for (i = 0; i < CELLS; ++i) wrong += rod[i] != ha[i];
  printf("graph_replay: %d steps of 2 kernels replayed (%s), rod[0..3] = %d %d %d %d, %d cells wrong\n", STEPS,
         backend == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffer" : "planned replay", rod[0], rod[1], rod[2],
         rod[3], wrong);
  syrah_kernel_release(k);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx);
  return wrong == 0 ? 0 : 1;
}
