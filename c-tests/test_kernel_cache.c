/* Compiled kernels kept on disk (SYRAH_CACHE_DIR): on devices that
 * compile OpenCL C through an OpenCL twin (the CUDA back end), and on
 * NVIDIA's OpenCL where kernels take hidden offsets (buffers reach them as
 * memory objects), a build keeps the compiler's PTX in one file per
 * source, options and compiler; a
 * build in a new context takes it without writing it again; a damaged
 * file, or one whose binary no longer builds, is compiled again and
 * rewritten; "off" keeps nothing, and a directory that cannot be made
 * costs nothing but the cache. Every build's kernel is run and its
 * result checked. */
#define _POSIX_C_SOURCE 200809L
#include "testing.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static const char kSource[] =
    "__kernel void put(__global int *p, int v) { p[get_global_id(0)] = v + (int)get_global_id(0); }\n";
static const char kOther[] =
    "__kernel void put(__global int *p, int v) { p[get_global_id(0)] = v + 2 * (int)get_global_id(0); }\n";

static char dir[64];

/* The entries in the cache directory; the name of the first in `first`. */
static int entries(char *first, size_t size) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0) {
      if (n == 0 && first) snprintf(first, size, "%s/%s", dir, e->d_name);
      ++n;
    }
  }
  closedir(d);
  return n;
}

/* Builds `src` with `options` in a new context on `d` and checks a run of
 * its kernel: p[i] = 40 + i (times 2 for kOther). */
static void build_and_run(const syrah_device *d, const char *src, const char *options, int step) {
  enum { N = 64 };
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *p = NULL;
  syrah_kernel *k = NULL;
  int *mem = NULL, host[N], i, wrong = 0, forty = 40;
  syrah_kernel_arg args[2];
  syrah_range r = syrah_range_1d(N);
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  REQUIRE_OK(syrah_program_create_from_source(ctx, src, options, &p));
  REQUIRE_OK(syrah_kernel_create(p, "put", &k));
  REQUIRE_OK(syrah_malloc_device(ctx, d, sizeof host, (void **)&mem));
  args[0] = syrah_arg_usm(mem);
  args[1] = syrah_arg_value(&forty, sizeof forty);
  EXPECT_OK(syrah_queue_launch(q, k, &r, args, 2, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_memcpy(q, host, mem, sizeof host, NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(q));
  for (i = 0; i < N; ++i) wrong += host[i] != 40 + step * i;
  EXPECT_EQ(wrong, 0);
  EXPECT_OK(syrah_free(ctx, mem));
  EXPECT_OK(syrah_kernel_release(k));
  EXPECT_OK(syrah_program_release(p));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_OK(syrah_context_release(ctx));
}

static int read_file(const char *path, unsigned char **data, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = (unsigned char *)malloc((size_t)*size + 1);
  if (!*data || fread(*data, 1, (size_t)*size, f) != (size_t)*size) {
    fclose(f);
    return 0;
  }
  fclose(f);
  return 1;
}

static int write_file(const char *path, const unsigned char *data, long size) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, (size_t)size, f) == (size_t)size;
  if (f) ok = fclose(f) == 0 && ok;
  return ok;
}

/* Overwrites every byte of the entry's binary (its last part, after a
 * little-endian 64-bit length) with 'x', keeping its key whole. */
static int spoil_binary(const char *path) {
  unsigned char *data = NULL;
  long size = 0, at = 8, part;
  int k, b, ok;
  if (!read_file(path, &data, &size)) return 0;
  for (k = 0; k < 4 && at + 8 <= size; ++k) {
    unsigned long long len = 0;
    for (b = 7; b >= 0; --b) len = (len << 8) | data[at + b];
    part = at + 8;
    at = part + (long)len;
    if (k == 3 && at == size) memset(data + part, 'x', (size_t)len);
  }
  ok = at == size && write_file(path, data, size);
  free(data);
  return ok;
}

/* Whether builds for `d` keep their PTX: the CUDA back end's, and NVIDIA's
 * OpenCL where buffers reach kernels as memory objects and offsets. */
static int keeps_builds(const syrah_device *d) {
  uint64_t backend = 0;
  char vendor[256] = "";
  if (syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BACKEND, &backend) != SYRAH_SUCCESS) return 0;
  if (backend == SYRAH_BACKEND_CUDA) return 1;
  if (syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_VENDOR, vendor, sizeof vendor, NULL) != SYRAH_SUCCESS) return 0;
  return strstr(vendor, "NVIDIA") != NULL && !t_buffer_pointers(d);
}

static void test_cache(const syrah_device *d) {
  char first[320], blocked[352];
  struct stat a, b;
  if (!keeps_builds(d)) {
    t_skip("compiled kernels kept on disk",
           "only the CUDA back end and NVIDIA's OpenCL (kernels with hidden offsets) keep them");
    return;
  }
  snprintf(dir, sizeof dir, "/tmp/syrah-kernels-XXXXXX");
  if (!mkdtemp(dir)) {
    T_FAIL("mkdtemp failed");
    return;
  }
  setenv("SYRAH_CACHE_DIR", dir, 1);

  /* A first build keeps one entry. */
  build_and_run(d, kSource, NULL, 1);
  EXPECT_EQ(entries(first, sizeof first), 1);
  EXPECT_TRUE(stat(first, &a) == 0);

  /* A build in a new context takes it: the file is not written again. */
  build_and_run(d, kSource, NULL, 1);
  EXPECT_TRUE(stat(first, &b) == 0);
  EXPECT_TRUE(a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
              a.st_size == b.st_size);
  EXPECT_EQ(entries(NULL, 0), 1);

  /* Other options are another entry. */
  build_and_run(d, kSource, "-cl-fast-relaxed-math", 1);
  EXPECT_EQ(entries(NULL, 0), 2);

  /* A damaged file is compiled again and rewritten whole. */
  EXPECT_TRUE(write_file(first, (const unsigned char *)"garbage", 7));
  build_and_run(d, kSource, NULL, 1);
  EXPECT_TRUE(stat(first, &b) == 0);
  EXPECT_EQ((long)b.st_size, (long)a.st_size);

  /* An entry whose binary does not build is compiled again too. */
  EXPECT_TRUE(spoil_binary(first));
  build_and_run(d, kSource, NULL, 1);
  EXPECT_TRUE(stat(first, &b) == 0);
  EXPECT_EQ((long)b.st_size, (long)a.st_size);
  EXPECT_EQ(entries(NULL, 0), 2);

  /* "off" keeps nothing. */
  setenv("SYRAH_CACHE_DIR", "off", 1);
  build_and_run(d, kOther, NULL, 2);
  setenv("SYRAH_CACHE_DIR", dir, 1);
  EXPECT_EQ(entries(NULL, 0), 2);

  /* A directory that cannot be made (below a file) only loses the cache. */
  snprintf(blocked, sizeof blocked, "%s/below", first);
  setenv("SYRAH_CACHE_DIR", blocked, 1);
  build_and_run(d, kOther, NULL, 2);
  setenv("SYRAH_CACHE_DIR", dir, 1);
  EXPECT_EQ(entries(NULL, 0), 2);

  {
    DIR *dd = opendir(dir);
    struct dirent *e;
    char path[352];
    while (dd && (e = readdir(dd)) != NULL) {
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    if (dd) closedir(dd);
    rmdir(dir);
  }
  unsetenv("SYRAH_CACHE_DIR");
}

int main(void) {
  t_for_each_device(test_cache);
  return t_finish("test_kernel_cache");
}
