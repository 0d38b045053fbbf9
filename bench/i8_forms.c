/* SPDX-License-Identifier: MIT */
/* i8_forms.c — can OpenCL C reach an int8 product faster than fp32 on this
 * device?  (issue 22: CTranslate2's int8 lead at batch x beam >= 16 comes
 * from 8-bit integer dot-product instructions, e.g. AVX-512 VNNI.)  One
 * 64 x 1024 x 256 product (C = A B^T, a 4 x 4 block of C per work-item,
 * 16 elements of K per step), four or six ways:
 *   v_int    int8 widened to int32 vectors, multiply-add in int32
 *   v_short  int8 widened to int16, even/odd lanes split before widening
 *   v_float  the same product in fp32 (the reference: our fp32 kernels)
 *   v_pmadd  int16 lanes, even*even + odd*odd in int32 (the shape of
 *            x86's pmaddwd, which a compiler may match)
 *   v_vnni   (x86-64 host with AVX-512 VNNI, CPU device only) clang's
 *            vpdpbusd builtin in a function compiled for the feature,
 *            64 elements of K per step, A flipped and 128 sum(B) taken out
 *            (cl/gemm_i8.cl's I8_DOT 2)
 *   v_vnni_rs the same with B flipped and 128 sum(A row) taken out, the
 *            row sums given (measured; gemm_i8.cl keeps v_vnni's form)
 * Giga-operations per second (2 M N K / time), best of the two rounds
 * printed, each kernel checked against C[0] computed on the host.  Not a
 * test; the first OpenCL device of the first platform (OCL_ICD_VENDORS
 * picks the implementation).  docs/PERFORMANCE.md, "int8 activations on
 * CPU OpenCL runtimes".
 *
 *   i8_forms */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *kSource =
    "// C[m,n] = sum_k A[m,k]*B[n,k], int8, K multiple of 16; TMxTN tile per work-item\n"
    "#define TM 4\n"
    "#define TN 4\n"
    "__kernel void v_int(__global const char *A, __global const char *B, __global int *C, uint M, uint N, uint K) {\n"
    "  uint n0 = get_global_id(0)*TN, m0 = get_global_id(1)*TM;\n"
    "  int16 acc[TM][TN];\n"
    "  for (int i=0;i<TM;i++) for(int j=0;j<TN;j++) acc[i][j]=(int16)0;\n"
    "  for (uint k=0;k<K;k+=16){\n"
    "    int16 a[TM], b[TN];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++) a[i]=convert_int16(vload16(0,A+(m0+i)*K+k));\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) b[j]=convert_int16(vload16(0,B+(n0+j)*K+k));\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++)\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) acc[i][j]+=a[i]*b[j];\n"
    "  }\n"
    "  for(int i=0;i<TM;i++) for(int j=0;j<TN;j++){ int16 v=acc[i][j]; int8 s8=v.lo+v.hi; int4 s4=s8.lo+s8.hi; int2 s2=s4.lo+s4.hi; C[(m0+i)*N+n0+j]=s2.x+s2.y; }\n"
    "}\n"
    "__kernel void v_short(__global const char *A, __global const char *B, __global int *C, uint M, uint N, uint K) {\n"
    "  uint n0 = get_global_id(0)*TN, m0 = get_global_id(1)*TM;\n"
    "  int16 acc[TM][TN];\n"
    "  for (int i=0;i<TM;i++) for(int j=0;j<TN;j++) acc[i][j]=(int16)0;\n"
    "  for (uint k=0;k<K;k+=32){\n"
    "    short16 al[TM], ah[TM], bl[TN], bh[TN];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++){ char16 x=vload16(0,A+(m0+i)*K+k), y=vload16(0,A+(m0+i)*K+k+16);\n"
    "      // even/odd split as pmaddwd pairs adjacent lanes\n"
    "      al[i]=convert_short16((char16)(x.even,y.even)); ah[i]=convert_short16((char16)(x.odd,y.odd)); }\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++){ char16 x=vload16(0,B+(n0+j)*K+k), y=vload16(0,B+(n0+j)*K+k+16);\n"
    "      bl[j]=convert_short16((char16)(x.even,y.even)); bh[j]=convert_short16((char16)(x.odd,y.odd)); }\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++)\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) acc[i][j]+=convert_int16(al[i])*convert_int16(bl[j])+convert_int16(ah[i])*convert_int16(bh[j]);\n"
    "  }\n"
    "  for(int i=0;i<TM;i++) for(int j=0;j<TN;j++){ int16 v=acc[i][j]; int8 s8=v.lo+v.hi; int4 s4=s8.lo+s8.hi; int2 s2=s4.lo+s4.hi; C[(m0+i)*N+n0+j]=s2.x+s2.y; }\n"
    "}\n"
    "__kernel void v_float(__global const float *A, __global const float *B, __global float *C, uint M, uint N, uint K) {\n"
    "  uint n0 = get_global_id(0)*TN, m0 = get_global_id(1)*TM;\n"
    "  float16 acc[TM][TN];\n"
    "  for (int i=0;i<TM;i++) for(int j=0;j<TN;j++) acc[i][j]=(float16)0;\n"
    "  for (uint k=0;k<K;k+=16){\n"
    "    float16 a[TM], b[TN];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++) a[i]=vload16(0,A+(m0+i)*K+k);\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) b[j]=vload16(0,B+(n0+j)*K+k);\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++)\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) acc[i][j]=a[i]*b[j]+acc[i][j];\n"
    "  }\n"
    "  for(int i=0;i<TM;i++) for(int j=0;j<TN;j++){ float16 v=acc[i][j]; float8 s8=v.lo+v.hi; float4 s4=s8.lo+s8.hi; float2 s2=s4.lo+s4.hi; C[(m0+i)*N+n0+j]=s2.x+s2.y; }\n"
    "}\n"
    "__kernel void v_pmadd(__global const char *A, __global const char *B, __global int *C, uint M, uint N, uint K) {\n"
    "  uint n0 = get_global_id(0)*TN, m0 = get_global_id(1)*TM;\n"
    "  int8 acc[TM][TN];\n"
    "  for (int i=0;i<TM;i++) for(int j=0;j<TN;j++) acc[i][j]=(int8)0;\n"
    "  for (uint k=0;k<K;k+=16){\n"
    "    short16 a[TM], b[TN];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++) a[i]=convert_short16(vload16(0,A+(m0+i)*K+k));\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) b[j]=convert_short16(vload16(0,B+(n0+j)*K+k));\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<TM;i++)\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<TN;j++) acc[i][j]+=convert_int8(a[i].even)*convert_int8(b[j].even)+convert_int8(a[i].odd)*convert_int8(b[j].odd);\n"
    "  }\n"
    "  for(int i=0;i<TM;i++) for(int j=0;j<TN;j++){ int8 s8=acc[i][j]; int4 s4=s8.lo+s8.hi; int2 s2=s4.lo+s4.hi; C[(m0+i)*N+n0+j]=s2.x+s2.y; }\n"
    "}\n";

/* The fifth form, built only on an x86-64 host whose CPU has AVX-512 VNNI
 * (a CPU OpenCL device on this host then runs it): clang's vpdpbusd
 * builtin (unsigned x signed bytes, four products per int32 lane), in a
 * function compiled for that feature and called once per work-item (PoCL
 * takes no -m options, and the feature cannot be inlined into its
 * work-group wrapper).  A is signed; its bytes are flipped to A + 128 (xor
 * 0x80) and 128 * sum(B) taken back out, both exact.  The 16 accumulators
 * are reduced by a pairwise even/odd tree.  cl/gemm_i8.cl's I8_DOT 2.
 * The sixth form, v_vnni_rs: B's bytes flipped instead and 128 * sum(A
 * row) taken out, that sum given per row (quant_rows could write it), so
 * the loop has no correction instructions: 16 vpdpbusd per 64 bytes of K
 * instead of 20.  Measured, not adopted (docs/PERFORMANCE.md). */
#if defined(__x86_64__) && defined(__GNUC__)
static const char *kVnni =
    "#define PAIR(x, y) ((uint16)((x).even, (y).even) + (uint16)((x).odd, (y).odd))\n"
    "static uint16 tree16(uint16 *x) {\n"
    "  #pragma unroll\n"
    "  for(int w=8;w>=1;w/=2) {\n"
    "    #pragma unroll\n"
    "    for(int p=0;p<w;p++) x[p]=PAIR(x[2*p],x[2*p+1]); }\n"
    "  return x[0];\n"
    "}\n"
    "static void store4x4(__global int *C, uint N, uint m0, uint n0, int16 r) {\n"
    "  vstore4(r.s0123,0,C+(m0+0)*N+n0); vstore4(r.s4567,0,C+(m0+1)*N+n0);\n"
    "  vstore4(r.s89ab,0,C+(m0+2)*N+n0); vstore4(r.scdef,0,C+(m0+3)*N+n0);\n"
    "}\n"
    "__attribute__((target(\"avx512vnni,avx512f\")))\n"
    "static uint16 tile(__global const char *A, __global const char *B, uint K, uint m0, uint n0) {\n"
    "  int16 acc[4][4], cor[4];\n"
    "  #pragma unroll\n"
    "  for (int i=0;i<4;i++) {\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<4;j++) acc[i][j]=(int16)0; }\n"
    "  #pragma unroll\n"
    "  for (int j=0;j<4;j++) cor[j]=(int16)0;\n"
    "  const int16 flip = (int16)(int)0x80808080;\n"
    "  for (uint k=0;k<K;k+=64){\n"
    "    int16 a[4], b[4];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<4;i++) a[i]=vload16(0,(__global const int *)(A+(m0+i)*K+k)) ^ flip;\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<4;j++){ b[j]=vload16(0,(__global const int *)(B+(n0+j)*K+k)); cor[j]=__builtin_ia32_vpdpbusd512(cor[j],flip,b[j]); }\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<4;i++) {\n"
    "      #pragma unroll\n"
    "      for(int j=0;j<4;j++) acc[i][j]=__builtin_ia32_vpdpbusd512(acc[i][j],a[i],b[j]); }\n"
    "  }\n"
    "  uint16 x[16];\n"
    "  #pragma unroll\n"
    "  for(int i=0;i<4;i++) {\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<4;j++) x[i*4+j]=as_uint16(acc[i][j])-as_uint16(cor[j]); }\n"
    "  return tree16(x);\n"
    "}\n"
    "__kernel void v_vnni(__global const char *A, __global const char *B, __global int *C, uint M, uint N, uint K) {\n"
    "  uint n0 = get_global_id(0)*4, m0 = get_global_id(1)*4;\n"
    "  store4x4(C,N,m0,n0,as_int16(tile(A,B,K,m0,n0)));\n"
    "}\n"
    "__attribute__((target(\"avx512vnni,avx512f\")))\n"
    "static uint16 tile_rs(__global const char *A, __global const char *B, uint K, uint m0, uint n0) {\n"
    "  int16 acc[4][4];\n"
    "  #pragma unroll\n"
    "  for (int i=0;i<4;i++) {\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<4;j++) acc[i][j]=(int16)0; }\n"
    "  const int16 flip = (int16)(int)0x80808080;\n"
    "  for (uint k=0;k<K;k+=64){\n"
    "    int16 a[4], b[4];\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<4;i++) a[i]=vload16(0,(__global const int *)(A+(m0+i)*K+k));\n"
    "    #pragma unroll\n"
    "    for(int j=0;j<4;j++) b[j]=vload16(0,(__global const int *)(B+(n0+j)*K+k)) ^ flip;\n"
    "    #pragma unroll\n"
    "    for(int i=0;i<4;i++) {\n"
    "      #pragma unroll\n"
    "      for(int j=0;j<4;j++) acc[i][j]=__builtin_ia32_vpdpbusd512(acc[i][j],b[j],a[i]); }\n"
    "  }\n"
    "  uint16 x[16];\n"
    "  #pragma unroll\n"
    "  for(int i=0;i<16;i++) x[i]=as_uint16(acc[i/4][i%4]);\n"
    "  return tree16(x);\n"
    "}\n"
    "__kernel void v_vnni_rs(__global const char *A, __global const char *B, __global int *C, uint M, uint N, uint K,\n"
    "                        __global const int *RA) {\n"
    "  uint n0 = get_global_id(0)*4, m0 = get_global_id(1)*4;\n"
    "  uint16 r = tile_rs(A,B,K,m0,n0);\n"
    "  store4x4(C,N,m0,n0,as_int16(r - (uint16)((uint4)(128u*(uint)RA[m0]), (uint4)(128u*(uint)RA[m0+1]),\n"
    "                                           (uint4)(128u*(uint)RA[m0+2]), (uint4)(128u*(uint)RA[m0+3]))));\n"
    "}\n";
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(cl_int e, const char *what) {
    if (e != CL_SUCCESS) {
        fprintf(stderr, "i8_forms: %s failed (%d)\n", what, (int)e);
        exit(1);
    }
}

static cl_program build(cl_context c, cl_device_id d, const char *src) {
    cl_int e;
    cl_program pr = clCreateProgramWithSource(c, 1, &src, NULL, &e);
    check(e, "clCreateProgramWithSource");
    if (clBuildProgram(pr, 1, &d, "", NULL, NULL) != CL_SUCCESS) {
        static char log[1 << 14];
        clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "i8_forms: build failed:\n%s\n", log);
        clReleaseProgram(pr);
        return NULL;
    }
    return pr;
}

int main(void) {
    cl_platform_id p;
    cl_device_id d;
    cl_int e;
    check(clGetPlatformIDs(1, &p, NULL), "clGetPlatformIDs");
    check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL), "clGetDeviceIDs");
    char name[256] = "";
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL);
    cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
    check(e, "clCreateContext");
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &e);
    check(e, "clCreateCommandQueue");
    cl_program pr = build(c, d, kSource);
    if (pr == NULL) return 1;
    /* the VNNI form: only where this host's CPU has it and the device is a CPU */
    cl_program pv = NULL;
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
#if defined(__x86_64__) && defined(__GNUC__)
    if ((type & CL_DEVICE_TYPE_CPU) && __builtin_cpu_supports("avx512vnni")) pv = build(c, d, kVnni);
#endif
    const unsigned M = 64, N = 1024, K = 256;
    signed char *A = malloc(M * K), *B = malloc(N * K);
    float *Af = malloc(sizeof(float) * M * K), *Bf = malloc(sizeof(float) * N * K);
    if (!A || !B || !Af || !Bf) return 1;
    srand(1);
    for (unsigned i = 0; i < M * K; i++) Af[i] = A[i] = (signed char)(rand() % 255 - 127);
    for (unsigned i = 0; i < N * K; i++) Bf[i] = B[i] = (signed char)(rand() % 255 - 127);
    int ref = 0;
    for (unsigned k = 0; k < K; k++) ref += A[k] * B[k];
    int *RA = calloc(M, sizeof(int)); /* v_vnni_rs: A's row sums */
    if (!RA) return 1;
    for (unsigned i = 0; i < M * K; i++) RA[i / K] += A[i];
    const cl_mem_flags in = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR;
    cl_mem a = clCreateBuffer(c, in, M * K, A, &e), b = clCreateBuffer(c, in, N * K, B, &e);
    cl_mem af = clCreateBuffer(c, in, sizeof(float) * M * K, Af, &e);
    cl_mem bf = clCreateBuffer(c, in, sizeof(float) * N * K, Bf, &e);
    cl_mem cc = clCreateBuffer(c, CL_MEM_READ_WRITE, sizeof(float) * M * N, NULL, &e);
    cl_mem ra = clCreateBuffer(c, in, sizeof(int) * M, RA, &e);
    check(e, "clCreateBuffer");
    static const char *const names[6] = {"v_int", "v_short", "v_float", "v_pmadd", "v_vnni", "v_vnni_rs"};
    const int forms = pv != NULL ? 6 : 4;
    double best[6] = {0, 0, 0, 0, 0, 0};
    printf("device: %s; C[64, 1024] = A[64, 256] B[1024, 256]^T\n", name);
    for (int round = 0; round < 2; round++)
        for (int kk = 0; kk < forms; kk++) {
            cl_kernel k = clCreateKernel(kk >= 4 ? pv : pr, names[kk], &e);
            check(e, "clCreateKernel");
            check(clSetKernelArg(k, 0, sizeof(cl_mem), kk == 2 ? &af : &a), "arg");
            check(clSetKernelArg(k, 1, sizeof(cl_mem), kk == 2 ? &bf : &b), "arg");
            check(clSetKernelArg(k, 2, sizeof(cl_mem), &cc), "arg");
            check(clSetKernelArg(k, 3, sizeof M, &M), "arg");
            check(clSetKernelArg(k, 4, sizeof N, &N), "arg");
            check(clSetKernelArg(k, 5, sizeof K, &K), "arg");
            if (kk == 5) check(clSetKernelArg(k, 6, sizeof(cl_mem), &ra), "arg");
            const size_t g[2] = {N / 4, M / 4};
            check(clEnqueueNDRangeKernel(q, k, 2, NULL, g, NULL, 0, NULL, NULL), "launch");
            check(clFinish(q), "clFinish");
            int it = 0;
            const double t0 = now();
            while (now() - t0 < 0.3) {
                check(clEnqueueNDRangeKernel(q, k, 2, NULL, g, NULL, 0, NULL, NULL), "launch");
                it++;
            }
            check(clFinish(q), "clFinish");
            const double gops = 2.0 * M * N * K / ((now() - t0) / it) / 1e9;
            int out = 0;
            float outf = 0;
            if (kk == 2) check(clEnqueueReadBuffer(q, cc, CL_TRUE, 0, sizeof outf, &outf, 0, NULL, NULL), "read");
            else check(clEnqueueReadBuffer(q, cc, CL_TRUE, 0, sizeof out, &out, 0, NULL, NULL), "read");
            if (kk == 2) out = (int)outf;
            if (out != ref) {
                fprintf(stderr, "i8_forms: %s gave C[0] = %d, expected %d\n", names[kk], out, ref);
                return 1;
            }
            if (gops > best[kk]) best[kk] = gops;
            clReleaseKernel(k);
        }
    if (pv == NULL) printf("v_vnni, v_vnni_rs: not run (needs an x86-64 host CPU with AVX-512 VNNI and a CPU device)\n");
    for (int kk = 0; kk < forms; kk++)
        printf("%-8s %7.2f GOP/s  %.2fx fp32\n", names[kk], best[kk], best[kk] / best[2]);
    return 0;
}
