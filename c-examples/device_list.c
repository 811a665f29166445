/* Lists every OpenCL device Syrah can use, with its USM support. */
#include "example.h"

int main(void) {
  size_t count = 0, i;
  const syrah_device **devices;
  CHECK(syrah_get_devices(NULL, 0, &count));
  printf("%zu device%s\n", count, count == 1 ? "" : "s");
  devices = (const syrah_device **)calloc(count ? count : 1, sizeof *devices);
  if (!devices) {
    return 1;
  }
  CHECK(syrah_get_devices(devices, count, &count));
  for (i = 0; i < count; ++i) {
    char name[256], platform[256], strategy[64];
    uint64_t pi = 0, di = 0, type = 0;
    bool dev_usm = false, host_usm = false, shared_usm = false;
    CHECK(syrah_device_get_info_string(devices[i], SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
    CHECK(syrah_device_get_info_string(devices[i], SYRAH_DEVICE_INFO_PLATFORM_NAME, platform,
                                       sizeof platform, NULL));
    CHECK(syrah_device_get_info_string(devices[i], SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, strategy,
                                       sizeof strategy, NULL));
    CHECK(syrah_device_get_info_u64(devices[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi));
    CHECK(syrah_device_get_info_u64(devices[i], SYRAH_DEVICE_INFO_DEVICE_INDEX, &di));
    CHECK(syrah_device_get_info_u64(devices[i], SYRAH_DEVICE_INFO_TYPE, &type));
    CHECK(syrah_device_has_aspect(devices[i], SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS, &dev_usm));
    CHECK(syrah_device_has_aspect(devices[i], SYRAH_ASPECT_USM_HOST_ALLOCATIONS, &host_usm));
    CHECK(syrah_device_has_aspect(devices[i], SYRAH_ASPECT_USM_SHARED_ALLOCATIONS, &shared_usm));
    printf("%llu.%llu  %-40s %-4s platform '%s'\n      USM via %s: device %s, host %s, shared %s\n",
           (unsigned long long)pi, (unsigned long long)di, name,
           type == SYRAH_DEVICE_TYPE_GPU ? "GPU" : type == SYRAH_DEVICE_TYPE_CPU ? "CPU" : "other",
           platform, strategy, dev_usm ? "yes" : "no", host_usm ? "yes" : "no",
           shared_usm ? "yes" : "no");
  }
  free(devices);
  return count > 0 ? 0 : 1;
}
