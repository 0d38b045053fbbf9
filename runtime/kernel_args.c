/* kernel_args.c — error reporting for kernel_args.h. */
#include "kernel_args.h"

#include <stdio.h>

nmt_status args_end(nmt_device *dev, const args *a, const char *kernel) {
    if (a->err == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", kernel, (unsigned)a->err_i);
    return nmt_cl_fail(dev, a->err, what);
}

nmt_status nmt_enqueue(nmt_device *dev, cl_kernel k, cl_uint dims, const size_t *gws,
                       const size_t *lws, const char *kernel) {
    cl_int e = clEnqueueNDRangeKernel(dev->queue, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
    return nmt_cl_fail(dev, e, what);
}
