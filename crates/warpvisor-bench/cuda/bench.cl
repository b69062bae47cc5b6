// The `cuda-on-cpu` benchmark's kernels in OpenCL C: the same algorithms as bench.cu, for
// PoCL. Work-group = CUDA block, local memory = shared memory.

__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
__kernel void matrix_mul(__global const float *a, __global const float *b, __global float *c, int n) {
    __local float ta[TILE][TILE];
    __local float tb[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < n / TILE; t++) {
        ta[ty][tx] = a[row * n + t * TILE + tx];
        tb[ty][tx] = b[(t * TILE + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++) sum += ta[ty][k] * tb[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = sum;
}

__kernel void reduce(__global const float *in, __global float *out, int n, __local float *s) {
    unsigned t = get_local_id(0), bs = get_local_size(0);
    unsigned i = get_group_id(0) * bs * 2 + t;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + bs < n) v += in[i + bs];
    s[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (unsigned k = bs / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) out[get_group_id(0)] = s[0];
}
