/* Helpers shared by the examples: status checks and a queue on the
 * default device (SYRAH_DEVICE picks another). */
#ifndef SYRAH_EXAMPLE_H
#define SYRAH_EXAMPLE_H

#include <syrah.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    syrah_status check_status_ = (call);                                                 \
    if (check_status_ != SYRAH_SUCCESS) {                                                \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,           \
              syrah_status_name(check_status_), syrah_last_error_message());             \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* Opens an in-order queue on the default device and prints its name. */
static inline syrah_queue *example_queue(const syrah_device **out_device) {
  const syrah_device *device = NULL;
  syrah_queue *queue = NULL;
  char name[256];
  CHECK(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &device));
  CHECK(syrah_device_get_info_string(device, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  printf("device: %s\n", name);
  CHECK(syrah_queue_create(NULL, device, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &queue));
  *out_device = device;
  return queue;
}

#endif
