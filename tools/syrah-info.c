/* syrah-info: lists the platforms (OpenCL's, and the CUDA back end's
 * where NVIDIA's CUDA driver loads) and devices Syrah sees, their properties, aspects
 * and the USM strategy chosen for each device, and which device the
 * default selector (and SYRAH_DEVICE) picks. */
#include <syrah.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, syrah_status s) {
  fprintf(stderr, "syrah-info: %s failed: %s: %s\n", what, syrah_status_name(s),
          syrah_last_error_message());
  return 1;
}

static void print_string(const syrah_device *d, syrah_device_info which, const char *label) {
  char buf[4096];
  size_t len = 0;
  syrah_status s = syrah_device_get_info_string(d, which, buf, sizeof buf, &len);
  printf("    %-22s %s\n", label, s == SYRAH_SUCCESS ? buf : "(unavailable)");
}

static void print_u64(const syrah_device *d, syrah_device_info which, const char *label) {
  uint64_t v = 0;
  if (syrah_device_get_info_u64(d, which, &v) == SYRAH_SUCCESS) {
    printf("    %-22s %llu\n", label, (unsigned long long)v);
  }
}

int main(void) {
  static const char *aspect_names[] = {
      "cpu", "gpu", "accelerator", "fp64", "usm_device_allocations", "usm_host_allocations",
      "usm_shared_allocations", "usm_system_allocations", "usm_atomic_host_allocations",
      "usm_atomic_shared_allocations"};
  size_t np = 0, p;
  syrah_status s = syrah_get_platforms(NULL, 0, &np);
  const syrah_platform **platforms;
  const syrah_device *chosen = NULL;
  if (s != SYRAH_SUCCESS) {
    return fail("listing platforms", s);
  }
  printf("Syrah %u.%u.%u: %zu platform%s\n", SYRAH_VERSION_MAJOR, SYRAH_VERSION_MINOR,
         SYRAH_VERSION_PATCH, np, np == 1 ? "" : "s");
  platforms = (const syrah_platform **)calloc(np ? np : 1, sizeof *platforms);
  if (!platforms) {
    return 1;
  }
  s = syrah_get_platforms(platforms, np, &np);
  if (s != SYRAH_SUCCESS) {
    free(platforms);
    return fail("listing platforms", s);
  }
  for (p = 0; p < np; ++p) {
    char name[512], version[512];
    size_t nd = 0, d;
    const syrah_device **devices;
    syrah_platform_get_info(platforms[p], SYRAH_PLATFORM_INFO_NAME, name, sizeof name, NULL);
    syrah_platform_get_info(platforms[p], SYRAH_PLATFORM_INFO_VERSION, version, sizeof version,
                            NULL);
    syrah_platform_get_devices(platforms[p], NULL, 0, &nd);
    printf("\nPlatform %zu: %s (%s), %zu device%s\n", p, name, version, nd, nd == 1 ? "" : "s");
    devices = (const syrah_device **)calloc(nd ? nd : 1, sizeof *devices);
    if (!devices) {
      free(platforms);
      return 1;
    }
    syrah_platform_get_devices(platforms[p], devices, nd, &nd);
    for (d = 0; d < nd; ++d) {
      unsigned a;
      printf("  Device %zu.%zu\n", p, d);
      print_string(devices[d], SYRAH_DEVICE_INFO_NAME, "name");
      print_string(devices[d], SYRAH_DEVICE_INFO_VENDOR, "vendor");
      print_string(devices[d], SYRAH_DEVICE_INFO_VERSION, "OpenCL version");
      print_string(devices[d], SYRAH_DEVICE_INFO_DRIVER_VERSION, "driver version");
      print_string(devices[d], SYRAH_DEVICE_INFO_OPENCL_C_VERSION, "OpenCL C version");
      print_string(devices[d], SYRAH_DEVICE_INFO_IL_VERSION, "IL versions");
      print_string(devices[d], SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, "USM strategy");
      print_u64(devices[d], SYRAH_DEVICE_INFO_COMPUTE_UNITS, "compute units");
      print_u64(devices[d], SYRAH_DEVICE_INFO_GLOBAL_MEM_SIZE, "global memory (B)");
      print_u64(devices[d], SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE, "local memory (B)");
      print_u64(devices[d], SYRAH_DEVICE_INFO_MAX_MEM_ALLOC_SIZE, "max allocation (B)");
      print_u64(devices[d], SYRAH_DEVICE_INFO_MAX_WORK_GROUP_SIZE, "max work-group size");
      print_u64(devices[d], SYRAH_DEVICE_INFO_OUT_OF_ORDER, "out-of-order queues");
      print_u64(devices[d], SYRAH_DEVICE_INFO_PROFILING, "profiling");
      printf("    %-22s", "aspects");
      for (a = 0; a < sizeof aspect_names / sizeof aspect_names[0]; ++a) {
        bool has = false;
        if (syrah_device_has_aspect(devices[d], a, &has) == SYRAH_SUCCESS && has) {
          printf(" %s", aspect_names[a]);
        }
      }
      printf("\n");
      {
        syrah_graph_backend gb = 0;
        uint64_t in_place = 0;
        if (syrah_device_get_graph_backend(devices[d], &gb) == SYRAH_SUCCESS)
          printf("    %-22s %s%s\n", "graphs",
                 gb == SYRAH_GRAPH_BACKEND_COMMAND_BUFFER ? "command-buffers (cl_khr_command_buffer)"
                                                           : "planned replay",
                 syrah_device_get_info_u64(devices[d], SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE, &in_place) ==
                             SYRAH_SUCCESS &&
                         in_place
                     ? ", argument updates in place (mutable dispatch)"
                     : "");
      }
    }
    free(devices);
  }
  free(platforms);
  s = syrah_device_select(SYRAH_SELECTOR_DEFAULT, &chosen);
  if (s == SYRAH_SUCCESS) {
    char name[512];
    uint64_t pi = 0, di = 0;
    syrah_device_get_info_string(chosen, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL);
    syrah_device_get_info_u64(chosen, SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
    syrah_device_get_info_u64(chosen, SYRAH_DEVICE_INFO_DEVICE_INDEX, &di);
    printf("\nDefault device%s: %llu.%llu %s\n", getenv("SYRAH_DEVICE") ? " (SYRAH_DEVICE)" : "",
           (unsigned long long)pi, (unsigned long long)di, name);
  } else {
    printf("\nDefault device: none (%s: %s)\n", syrah_status_name(s), syrah_last_error_message());
  }
  return 0;
}
