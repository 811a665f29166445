/* Library-wide functions, platforms, devices, aspects and selection. */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <ctype.h>

static void test_library(void) {
  EXPECT_EQ(syrah_api_version(), SYRAH_VERSION);
  EXPECT_EQ(SYRAH_VERSION, SYRAH_VERSION_MAJOR * 10000 + SYRAH_VERSION_MINOR * 100 +
                               SYRAH_VERSION_PATCH);
  EXPECT_EQ(SYRAH_EXT_LOCAL_MEMORY, 1);
  EXPECT_TRUE(strcmp(syrah_status_name(SYRAH_SUCCESS), "SYRAH_SUCCESS") == 0);
  EXPECT_TRUE(strcmp(syrah_status_name(SYRAH_ERROR_NULL_ARGUMENT), "SYRAH_ERROR_NULL_ARGUMENT") == 0);
  EXPECT_TRUE(strcmp(syrah_status_name(SYRAH_ERROR_INTERNAL), "SYRAH_ERROR_INTERNAL") == 0);
  EXPECT_TRUE(strcmp(syrah_status_name(-7), "SYRAH_STATUS_UNKNOWN") == 0);
  /* The message is per call: a failure sets it. */
  EXPECT_ERR(syrah_get_devices(NULL, 0, NULL), SYRAH_ERROR_NULL_ARGUMENT, "count");
}

static void test_platforms(void) {
  size_t np = 0, total = 0, i;
  const syrah_platform *platforms[16];
  const syrah_device *all[64];
  size_t nall = 0;
  EXPECT_ERR(syrah_get_platforms(NULL, 2, &np), SYRAH_ERROR_NULL_ARGUMENT, "capacity is 2");
  EXPECT_ERR(syrah_get_platforms(platforms, 16, NULL), SYRAH_ERROR_NULL_ARGUMENT, "");
  REQUIRE_OK(syrah_get_platforms(NULL, 0, &np));
  EXPECT_TRUE(np >= 1);
  REQUIRE_OK(syrah_get_platforms(platforms, 16, &np));
  for (i = 0; i < np && i < 16; ++i) {
    char name[512], tiny[2];
    size_t len = 0, nd = 0, j;
    const syrah_device *devs[32];
    REQUIRE_OK(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_NAME, name, sizeof name, &len));
    EXPECT_EQ(len, strlen(name) + 1);
    EXPECT_TRUE(strlen(name) > 0);
    len = 0;
    EXPECT_OK(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_NAME, NULL, 0, &len));
    EXPECT_EQ(len, strlen(name) + 1);
    EXPECT_ERR(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_NAME, tiny, sizeof tiny, &len),
               SYRAH_ERROR_BUFFER_TOO_SMALL, "holds 2");
    EXPECT_ERR(syrah_platform_get_info(platforms[i], 77, name, sizeof name, NULL),
               SYRAH_ERROR_INVALID_ARGUMENT, "77");
    EXPECT_ERR(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_NAME, NULL, 0, NULL),
               SYRAH_ERROR_NULL_ARGUMENT, "");
    EXPECT_OK(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_VENDOR, name, sizeof name, NULL));
    EXPECT_OK(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_VERSION, name, sizeof name, NULL));
    /* OpenCL's platforms say their OpenCL version; the CUDA back end's its CUDA version. */
    EXPECT_TRUE(strncmp(name, "OpenCL ", 7) == 0 || strncmp(name, "CUDA ", 5) == 0);
    EXPECT_OK(syrah_platform_get_info(platforms[i], SYRAH_PLATFORM_INFO_EXTENSIONS, NULL, 0, &len));
    REQUIRE_OK(syrah_platform_get_devices(platforms[i], devs, 32, &nd));
    for (j = 0; j < nd && j < 32; ++j) {
      const syrah_platform *back = NULL;
      uint64_t pi = 99, di = 99;
      EXPECT_OK(syrah_device_get_platform(devs[j], &back));
      EXPECT_TRUE(back == platforms[i]);
      EXPECT_OK(syrah_device_get_info_u64(devs[j], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi));
      EXPECT_OK(syrah_device_get_info_u64(devs[j], SYRAH_DEVICE_INFO_DEVICE_INDEX, &di));
      EXPECT_EQ(pi, i);
      EXPECT_EQ(di, j);
    }
    total += nd;
  }
  EXPECT_ERR(syrah_platform_get_devices(NULL, NULL, 0, &total), SYRAH_ERROR_NULL_ARGUMENT, "platform");
  EXPECT_ERR(syrah_platform_get_devices((const syrah_platform *)&total, NULL, 0, &total),
             SYRAH_ERROR_INVALID_HANDLE, "not a platform handle");
  REQUIRE_OK(syrah_get_devices(all, 64, &nall));
  EXPECT_EQ(nall, total);
  EXPECT_ERR(syrah_device_get_platform(all[0], NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_platform");
}

static void test_device(const syrah_device *d) {
  char buf[4096];
  uint64_t v = 0, type = 0, strategy = 9;
  bool has = false;
  unsigned a;
  int fake = 0;
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, buf, sizeof buf, NULL));
  EXPECT_TRUE(strlen(buf) > 0);
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_VENDOR, buf, sizeof buf, NULL));
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_DRIVER_VERSION, buf, sizeof buf, NULL));
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_VERSION, buf, sizeof buf, NULL));
  {
    /* The back end matches the device's version: CUDA's, or OpenCL's. */
    uint64_t backend = 0;
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend));
    if (backend == SYRAH_BACKEND_CUDA)
      EXPECT_TRUE(strncmp(buf, "CUDA ", 5) == 0);
    else
      EXPECT_TRUE(backend == SYRAH_BACKEND_OPENCL && strncmp(buf, "OpenCL ", 7) == 0);
  }
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_OPENCL_C_VERSION, buf, sizeof buf, NULL));
  EXPECT_TRUE(strncmp(buf, "OpenCL C ", 9) == 0);
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_EXTENSIONS, NULL, 0, &v));
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_IL_VERSION, buf, sizeof buf, NULL));
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_PLATFORM_NAME, buf, sizeof buf, NULL));
  EXPECT_TRUE(strlen(buf) > 0);
  EXPECT_OK(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, buf, sizeof buf, NULL));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_USM_STRATEGY, &strategy));
  EXPECT_TRUE((strategy == SYRAH_USM_STRATEGY_NONE && strcmp(buf, "none") == 0) ||
              (strategy == SYRAH_USM_STRATEGY_SVM && strcmp(buf, "svm") == 0) ||
              (strategy == SYRAH_USM_STRATEGY_INTEL &&
               strcmp(buf, "cl_intel_unified_shared_memory") == 0));
  EXPECT_ERR(syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_COMPUTE_UNITS, buf, sizeof buf, NULL),
             SYRAH_ERROR_INVALID_ARGUMENT, "syrah_device_get_info_u64");
  EXPECT_ERR(syrah_device_get_info_string(d, 55, buf, sizeof buf, NULL), SYRAH_ERROR_INVALID_ARGUMENT,
             "55");
  EXPECT_ERR(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_NAME, &v), SYRAH_ERROR_INVALID_ARGUMENT,
             "syrah_device_get_info_string");
  EXPECT_ERR(syrah_device_get_info_u64(d, 1234, &v), SYRAH_ERROR_INVALID_ARGUMENT, "1234");
  EXPECT_ERR(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, NULL), SYRAH_ERROR_NULL_ARGUMENT,
             "out_value");
  EXPECT_ERR(syrah_device_get_info_u64(NULL, SYRAH_DEVICE_INFO_TYPE, &v), SYRAH_ERROR_NULL_ARGUMENT,
             "device");
  EXPECT_ERR(syrah_device_get_info_u64((const syrah_device *)&fake, SYRAH_DEVICE_INFO_TYPE, &v),
             SYRAH_ERROR_INVALID_HANDLE, "not a device handle");
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, &type));
  EXPECT_TRUE(type >= SYRAH_DEVICE_TYPE_CPU && type <= SYRAH_DEVICE_TYPE_OTHER);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_COMPUTE_UNITS, &v));
  EXPECT_TRUE(v >= 1);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_GLOBAL_MEM_SIZE, &v));
  EXPECT_TRUE(v > 0);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE, &v));
  EXPECT_TRUE(v > 0);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_MEM_ALLOC_SIZE, &v));
  EXPECT_TRUE(v > 0);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_WORK_GROUP_SIZE, &v));
  EXPECT_TRUE(v >= 1);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_0, &v));
  EXPECT_TRUE(v >= 1);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_1, &v));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_2, &v));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_MAX_CLOCK_FREQUENCY, &v));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_OUT_OF_ORDER, &v));
  EXPECT_TRUE(v <= 1);
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_PROFILING, &v));
  EXPECT_TRUE(v <= 1);

  /* Aspects agree with the type and the USM strategy. */
  EXPECT_OK(syrah_device_has_aspect(d, SYRAH_ASPECT_CPU, &has));
  EXPECT_EQ(has, type == SYRAH_DEVICE_TYPE_CPU);
  EXPECT_OK(syrah_device_has_aspect(d, SYRAH_ASPECT_GPU, &has));
  EXPECT_EQ(has, type == SYRAH_DEVICE_TYPE_GPU);
  EXPECT_OK(syrah_device_has_aspect(d, SYRAH_ASPECT_ACCELERATOR, &has));
  EXPECT_EQ(has, type == SYRAH_DEVICE_TYPE_ACCELERATOR);
  EXPECT_OK(syrah_device_has_aspect(d, SYRAH_ASPECT_FP64, &has));
  for (a = SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS; a <= SYRAH_ASPECT_USM_ATOMIC_SHARED_ALLOCATIONS; ++a) {
    EXPECT_OK(syrah_device_has_aspect(d, a, &has));
    if (strategy == SYRAH_USM_STRATEGY_NONE) {
      EXPECT_TRUE(!has);
    }
  }
  EXPECT_EQ(t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS), strategy != SYRAH_USM_STRATEGY_NONE);
  /* Atomic host allocations imply host allocations. */
  EXPECT_TRUE(!t_has(d, SYRAH_ASPECT_USM_ATOMIC_HOST_ALLOCATIONS) ||
              t_has(d, SYRAH_ASPECT_USM_HOST_ALLOCATIONS));
  EXPECT_ERR(syrah_device_has_aspect(d, 10, &has), SYRAH_ERROR_INVALID_ARGUMENT, "aspect 10");
  EXPECT_ERR(syrah_device_has_aspect(d, SYRAH_ASPECT_CPU, NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_has");
}

static int32_t pick_index(const syrah_device *d, void *user) {
  const syrah_device *want = *(const syrah_device **)user;
  return d == want ? 5 : 1;
}

static int32_t reject_all(const syrah_device *d, void *user) {
  (void)d;
  (void)user;
  return -1;
}

static void lower(char *s) {
  for (; *s; ++s) *s = (char)tolower((unsigned char)*s);
}

static void test_selection(void) {
  const syrah_device *all[64], *d = NULL;
  size_t n = 0, i;
  uint64_t type = 0, pi = 0, di = 0;
  bool any_cpu = false, any_gpu = false;
  int score = 0;
  REQUIRE_OK(syrah_get_devices(all, 64, &n));
  for (i = 0; i < n; ++i) {
    syrah_device_get_info_u64(all[i], SYRAH_DEVICE_INFO_TYPE, &type);
    any_cpu = any_cpu || type == SYRAH_DEVICE_TYPE_CPU;
    any_gpu = any_gpu || type == SYRAH_DEVICE_TYPE_GPU;
  }
  unsetenv("SYRAH_DEVICE");
  EXPECT_OK(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d));
  EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, &type));
  if (any_gpu) {
    EXPECT_EQ(type, SYRAH_DEVICE_TYPE_GPU);
  }
  if (any_cpu) {
    EXPECT_OK(syrah_device_select(SYRAH_SELECTOR_CPU, &d));
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, &type));
    EXPECT_EQ(type, SYRAH_DEVICE_TYPE_CPU);
  }
  if (any_gpu) {
    EXPECT_OK(syrah_device_select(SYRAH_SELECTOR_GPU, &d));
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_TYPE, &type));
    EXPECT_EQ(type, SYRAH_DEVICE_TYPE_GPU);
  } else {
    EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_GPU, &d), SYRAH_ERROR_DEVICE_NOT_FOUND, "'gpu'");
  }
  EXPECT_ERR(syrah_device_select(17, &d), SYRAH_ERROR_INVALID_ARGUMENT, "17");
  EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_DEFAULT, NULL), SYRAH_ERROR_NULL_ARGUMENT, "");

  /* Index, type and name terms. */
  EXPECT_OK(syrah_device_select_by_string("0.0", &d));
  EXPECT_TRUE(d == all[0]);
  EXPECT_OK(syrah_device_select_by_string(" 0 ", &d));
  EXPECT_TRUE(d == all[0]);
  {
    char pname[256], spec[300];
    const syrah_device *last = all[n - 1];
    syrah_device_get_info_string(last, SYRAH_DEVICE_INFO_PLATFORM_NAME, pname, sizeof pname, NULL);
    syrah_device_get_info_u64(last, SYRAH_DEVICE_INFO_PLATFORM_INDEX, &pi);
    syrah_device_get_info_u64(last, SYRAH_DEVICE_INFO_DEVICE_INDEX, &di);
    snprintf(spec, sizeof spec, "%llu.%llu", (unsigned long long)pi, (unsigned long long)di);
    EXPECT_OK(syrah_device_select_by_string(spec, &d));
    EXPECT_TRUE(d == last);
    lower(pname);
    EXPECT_OK(syrah_device_select_by_string(pname, &d));
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_PLATFORM_INDEX, &di));
    EXPECT_EQ(di, pi);
    snprintf(spec, sizeof spec, "%s:any", pname);
    EXPECT_OK(syrah_device_select_by_string(spec, &d));
    snprintf(spec, sizeof spec, "no-such-platform:gpu, %llu", (unsigned long long)pi);
    EXPECT_OK(syrah_device_select_by_string(spec, &d));
    EXPECT_OK(syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_PLATFORM_INDEX, &di));
    EXPECT_EQ(di, pi);
  }
  EXPECT_ERR(syrah_device_select_by_string("nvidia:gpx", &d), SYRAH_ERROR_INVALID_ARGUMENT, "'gpx'");
  EXPECT_ERR(syrah_device_select_by_string("99.0", &d), SYRAH_ERROR_DEVICE_NOT_FOUND, "'99.0'");
  EXPECT_ERR(syrah_device_select_by_string("1.x", &d), SYRAH_ERROR_INVALID_ARGUMENT, "'1.x'");
  EXPECT_ERR(syrah_device_select_by_string("", &d), SYRAH_ERROR_INVALID_ARGUMENT, "empty");
  EXPECT_ERR(syrah_device_select_by_string(NULL, &d), SYRAH_ERROR_NULL_ARGUMENT, "spec");

  /* SYRAH_DEVICE steers the default selector. */
  setenv("SYRAH_DEVICE", "0.0", 1);
  EXPECT_OK(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d));
  EXPECT_TRUE(d == all[0]);
  setenv("SYRAH_DEVICE", "bogus:gpx", 1);
  EXPECT_ERR(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &d), SYRAH_ERROR_INVALID_ARGUMENT,
             "SYRAH_DEVICE");
  unsetenv("SYRAH_DEVICE");

  /* Score callbacks. */
  {
    const syrah_device *want = all[n - 1];
    EXPECT_OK(syrah_device_select_by_score(pick_index, &want, &d));
    EXPECT_TRUE(d == want);
    EXPECT_ERR(syrah_device_select_by_score(reject_all, NULL, &d), SYRAH_ERROR_DEVICE_NOT_FOUND,
               "rejected all");
    EXPECT_ERR(syrah_device_select_by_score(NULL, NULL, &d), SYRAH_ERROR_NULL_ARGUMENT, "score");
  }
  EXPECT_OK(syrah_device_default_score(all[0], &score));
  EXPECT_OK(syrah_device_get_info_u64(all[0], SYRAH_DEVICE_INFO_TYPE, &type));
  EXPECT_EQ(score, type == SYRAH_DEVICE_TYPE_GPU ? 300 : type == SYRAH_DEVICE_TYPE_CPU ? 100 : score);
  EXPECT_ERR(syrah_device_default_score(all[0], NULL), SYRAH_ERROR_NULL_ARGUMENT, "out_score");
}

int main(void) {
  test_library();
  test_platforms();
  t_for_each_device(test_device);
  test_selection();
  return t_finish("test_api");
}
