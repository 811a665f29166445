/* Without an OpenCL library (argument "no-library") or with one that lists
 * no platform ("no-platform"): clear statuses and messages, no crash. */
#include "testing.h"

int main(int argc, char **argv) {
  const syrah_device *d = NULL;
  const syrah_platform *p[4];
  size_t n = 99;
  syrah_context *ctx = NULL;
  if (argc != 2) {
    printf("usage: test_no_opencl no-library|no-platform\n");
    return 1;
  }
  if (strcmp(argv[1], "no-library") == 0) {
    EXPECT_ERR(syrah_get_platforms(p, 4, &n), SYRAH_ERROR_NO_OPENCL, "/nonexistent/libOpenCL.so.1");
    EXPECT_TRUE(strstr(syrah_last_error_message(), "install") != NULL);
    EXPECT_EQ(n, 99);
    EXPECT_ERR(syrah_get_devices(NULL, 0, &n), SYRAH_ERROR_NO_OPENCL, "SYRAH_OPENCL_LIBRARY");
    EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d), SYRAH_ERROR_NO_OPENCL, "no OpenCL library");
    EXPECT_ERR(syrah_device_select_by_string("gpu", &d), SYRAH_ERROR_NO_OPENCL, "");
    EXPECT_ERR(syrah_context_create(&d, 1, &ctx), SYRAH_ERROR_NULL_ARGUMENT, "devices[0]");
  } else if (strcmp(argv[1], "no-platform") == 0) {
    EXPECT_OK(syrah_get_platforms(p, 4, &n));
    EXPECT_EQ(n, 0);
    EXPECT_OK(syrah_get_devices(NULL, 0, &n));
    EXPECT_EQ(n, 0);
    EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d), SYRAH_ERROR_DEVICE_NOT_FOUND, "install a driver");
    EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_GPU, &d), SYRAH_ERROR_DEVICE_NOT_FOUND, "no OpenCL device");
    EXPECT_TRUE(d == NULL);
  } else {
    printf("unknown mode '%s'\n", argv[1]);
    return 1;
  }
  return t_finish(argv[1]);
}
