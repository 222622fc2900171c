/* test_device.c: device selection and the CPU device's memory primitives. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sieve_kernels.h"

Test(device, cpu_specs) {
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open("cpu", &dev), 0);
    cr_assert_not_null(dev);
    cr_assert_eq(sieve_device_get_kind(dev), SIEVE_DEVICE_CPU);
    sieve_device_info info;
    cr_assert_eq(sieve_device_get_info(dev, &info), 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(info.threads, (uint32_t)(cores > 0 ? cores : 1));
    cr_assert_eq(info.ordinal, -1);
    cr_assert_eq(info.kind, SIEVE_DEVICE_CPU);
    cr_assert_eq(strncmp(info.name, "cpu", 3), 0, "name %s", info.name);
    sieve_device_close(dev);

    cr_assert_eq(sieve_device_open("cpu:3", &dev), 0);
    cr_assert_eq(sieve_device_get_info(dev, &info), 0);
    cr_assert_eq(info.threads, 3);
    cr_assert_str_eq(info.name, "cpu (3 threads)");
    sieve_device_close(dev);
    sieve_device_close(NULL);
}

Test(device, auto_and_cuda_without_gpu) {
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open("auto", &dev), 0);
    if (sieve_cuda_device_count() == 0) {
        cr_assert_eq(sieve_device_get_kind(dev), SIEVE_DEVICE_CPU);
        sieve_device_close(dev);
        dev = (sieve_device *)1;
        cr_assert_eq(sieve_device_open("cuda:0", &dev), SIEVE_ENODEV);
        cr_assert_null(dev, "a failed open must leave *out NULL");
        cr_assert_eq(sieve_device_open("cuda", &dev), SIEVE_ENODEV);
    } else {
        cr_assert_eq(sieve_device_get_kind(dev), SIEVE_DEVICE_CUDA);
        sieve_device_close(dev);
    }
    int n = sieve_cuda_device_count();
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", n); /* one past the last device */
    cr_assert_eq(sieve_device_open(spec, &dev), SIEVE_ENODEV);
}

Test(device, bad_specs) {
    const char *bad[] = {"",      "cpu:",   "cpu:0",   "cpu:-1", "cpu:abc", "cpu:2x",
                         "cpu:99999", "gpu", "CPU",    "cuda:",  "cuda:x",  "cuda:-1",
                         "cuda:1.5", " cpu", "cpu:1 ", "autox", "cpu: 3", "cpu:+3", "cuda:+0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sieve_device *dev = (sieve_device *)1;
        cr_assert_eq(sieve_device_open(bad[i], &dev), SIEVE_EINVAL, "spec \"%s\"", bad[i]);
        cr_assert_null(dev, "spec \"%s\" left *out set", bad[i]);
    }
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open(NULL, &dev), SIEVE_EINVAL);
    cr_assert_eq(sieve_device_open("cpu", NULL), SIEVE_EINVAL);
}

Test(device, cpu_memory) {
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open("cpu:1", &dev), 0);
    void *d = NULL, *h = NULL;
    cr_assert_eq(sieve_device_alloc(dev, 64, &d), 0);
    cr_assert_eq(sieve_host_alloc_pinned(dev, 64, &h), 0);
    char src[64], dst[64];
    for (int i = 0; i < 64; i++) src[i] = (char)i;
    cr_assert_eq(sieve_device_upload(dev, d, src, 64), 0);
    cr_assert_eq(sieve_device_upload_async(dev, h, d, 64), 0);
    cr_assert_eq(sieve_device_sync(dev), 0);
    cr_assert_eq(sieve_device_download(dev, dst, h, 64), 0);
    cr_assert_eq(memcmp(src, dst, 64), 0);
    cr_assert_eq(sieve_device_upload(dev, NULL, src, 64), SIEVE_EINVAL);
    cr_assert_eq(sieve_device_alloc(dev, 8, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_device_get_info(dev, NULL), SIEVE_EINVAL);
    sieve_device_free(dev, d);
    sieve_host_free_pinned(dev, h);
    sieve_device_close(dev);
}
