// Kernels of the `cuda-on-cpu` benchmark (warpvisor-bench). bench.ptx is NVRTC 12.x output
// for compute_70 (`python3 nvrtc.py bench.cu > bench.ptx`); bench.cl holds the same
// algorithms in OpenCL C for the PoCL comparison.

extern "C" __global__ void empty() {}

// Barrier cost as live values grow: K values stay live across two barriers per iteration.
extern "C" __global__ void barrier_1(float *out, int iters) {
    extern __shared__ float s[];
    float x = threadIdx.x;
    float v0 = x + 0.0f;
    for (int i = 0; i < iters; i++) {
        s[threadIdx.x] = v0;
        __syncthreads();
        float n = s[(threadIdx.x + 1) % blockDim.x];
        v0 = v0 * 0.5f + n;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v0;
}

extern "C" __global__ void barrier_16(float *out, int iters) {
    extern __shared__ float s[];
    float x = threadIdx.x;
    float v0 = x + 0.0f;
    float v1 = x + 1.0f;
    float v2 = x + 2.0f;
    float v3 = x + 3.0f;
    float v4 = x + 4.0f;
    float v5 = x + 5.0f;
    float v6 = x + 6.0f;
    float v7 = x + 7.0f;
    float v8 = x + 8.0f;
    float v9 = x + 9.0f;
    float v10 = x + 10.0f;
    float v11 = x + 11.0f;
    float v12 = x + 12.0f;
    float v13 = x + 13.0f;
    float v14 = x + 14.0f;
    float v15 = x + 15.0f;
    for (int i = 0; i < iters; i++) {
        s[threadIdx.x] = v0;
        __syncthreads();
        float n = s[(threadIdx.x + 1) % blockDim.x];
        v0 = v0 * 0.5f + n;
        v1 = v1 * 0.5f + n;
        v2 = v2 * 0.5f + n;
        v3 = v3 * 0.5f + n;
        v4 = v4 * 0.5f + n;
        v5 = v5 * 0.5f + n;
        v6 = v6 * 0.5f + n;
        v7 = v7 * 0.5f + n;
        v8 = v8 * 0.5f + n;
        v9 = v9 * 0.5f + n;
        v10 = v10 * 0.5f + n;
        v11 = v11 * 0.5f + n;
        v12 = v12 * 0.5f + n;
        v13 = v13 * 0.5f + n;
        v14 = v14 * 0.5f + n;
        v15 = v15 * 0.5f + n;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14 + v15;
}

extern "C" __global__ void barrier_64(float *out, int iters) {
    extern __shared__ float s[];
    float x = threadIdx.x;
    float v0 = x + 0.0f;
    float v1 = x + 1.0f;
    float v2 = x + 2.0f;
    float v3 = x + 3.0f;
    float v4 = x + 4.0f;
    float v5 = x + 5.0f;
    float v6 = x + 6.0f;
    float v7 = x + 7.0f;
    float v8 = x + 8.0f;
    float v9 = x + 9.0f;
    float v10 = x + 10.0f;
    float v11 = x + 11.0f;
    float v12 = x + 12.0f;
    float v13 = x + 13.0f;
    float v14 = x + 14.0f;
    float v15 = x + 15.0f;
    float v16 = x + 16.0f;
    float v17 = x + 17.0f;
    float v18 = x + 18.0f;
    float v19 = x + 19.0f;
    float v20 = x + 20.0f;
    float v21 = x + 21.0f;
    float v22 = x + 22.0f;
    float v23 = x + 23.0f;
    float v24 = x + 24.0f;
    float v25 = x + 25.0f;
    float v26 = x + 26.0f;
    float v27 = x + 27.0f;
    float v28 = x + 28.0f;
    float v29 = x + 29.0f;
    float v30 = x + 30.0f;
    float v31 = x + 31.0f;
    float v32 = x + 32.0f;
    float v33 = x + 33.0f;
    float v34 = x + 34.0f;
    float v35 = x + 35.0f;
    float v36 = x + 36.0f;
    float v37 = x + 37.0f;
    float v38 = x + 38.0f;
    float v39 = x + 39.0f;
    float v40 = x + 40.0f;
    float v41 = x + 41.0f;
    float v42 = x + 42.0f;
    float v43 = x + 43.0f;
    float v44 = x + 44.0f;
    float v45 = x + 45.0f;
    float v46 = x + 46.0f;
    float v47 = x + 47.0f;
    float v48 = x + 48.0f;
    float v49 = x + 49.0f;
    float v50 = x + 50.0f;
    float v51 = x + 51.0f;
    float v52 = x + 52.0f;
    float v53 = x + 53.0f;
    float v54 = x + 54.0f;
    float v55 = x + 55.0f;
    float v56 = x + 56.0f;
    float v57 = x + 57.0f;
    float v58 = x + 58.0f;
    float v59 = x + 59.0f;
    float v60 = x + 60.0f;
    float v61 = x + 61.0f;
    float v62 = x + 62.0f;
    float v63 = x + 63.0f;
    for (int i = 0; i < iters; i++) {
        s[threadIdx.x] = v0;
        __syncthreads();
        float n = s[(threadIdx.x + 1) % blockDim.x];
        v0 = v0 * 0.5f + n;
        v1 = v1 * 0.5f + n;
        v2 = v2 * 0.5f + n;
        v3 = v3 * 0.5f + n;
        v4 = v4 * 0.5f + n;
        v5 = v5 * 0.5f + n;
        v6 = v6 * 0.5f + n;
        v7 = v7 * 0.5f + n;
        v8 = v8 * 0.5f + n;
        v9 = v9 * 0.5f + n;
        v10 = v10 * 0.5f + n;
        v11 = v11 * 0.5f + n;
        v12 = v12 * 0.5f + n;
        v13 = v13 * 0.5f + n;
        v14 = v14 * 0.5f + n;
        v15 = v15 * 0.5f + n;
        v16 = v16 * 0.5f + n;
        v17 = v17 * 0.5f + n;
        v18 = v18 * 0.5f + n;
        v19 = v19 * 0.5f + n;
        v20 = v20 * 0.5f + n;
        v21 = v21 * 0.5f + n;
        v22 = v22 * 0.5f + n;
        v23 = v23 * 0.5f + n;
        v24 = v24 * 0.5f + n;
        v25 = v25 * 0.5f + n;
        v26 = v26 * 0.5f + n;
        v27 = v27 * 0.5f + n;
        v28 = v28 * 0.5f + n;
        v29 = v29 * 0.5f + n;
        v30 = v30 * 0.5f + n;
        v31 = v31 * 0.5f + n;
        v32 = v32 * 0.5f + n;
        v33 = v33 * 0.5f + n;
        v34 = v34 * 0.5f + n;
        v35 = v35 * 0.5f + n;
        v36 = v36 * 0.5f + n;
        v37 = v37 * 0.5f + n;
        v38 = v38 * 0.5f + n;
        v39 = v39 * 0.5f + n;
        v40 = v40 * 0.5f + n;
        v41 = v41 * 0.5f + n;
        v42 = v42 * 0.5f + n;
        v43 = v43 * 0.5f + n;
        v44 = v44 * 0.5f + n;
        v45 = v45 * 0.5f + n;
        v46 = v46 * 0.5f + n;
        v47 = v47 * 0.5f + n;
        v48 = v48 * 0.5f + n;
        v49 = v49 * 0.5f + n;
        v50 = v50 * 0.5f + n;
        v51 = v51 * 0.5f + n;
        v52 = v52 * 0.5f + n;
        v53 = v53 * 0.5f + n;
        v54 = v54 * 0.5f + n;
        v55 = v55 * 0.5f + n;
        v56 = v56 * 0.5f + n;
        v57 = v57 * 0.5f + n;
        v58 = v58 * 0.5f + n;
        v59 = v59 * 0.5f + n;
        v60 = v60 * 0.5f + n;
        v61 = v61 * 0.5f + n;
        v62 = v62 * 0.5f + n;
        v63 = v63 * 0.5f + n;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14 + v15 + v16 + v17 + v18 + v19 + v20 + v21 + v22 + v23 + v24 + v25 + v26 + v27 + v28 + v29 + v30 + v31 + v32 + v33 + v34 + v35 + v36 + v37 + v38 + v39 + v40 + v41 + v42 + v43 + v44 + v45 + v46 + v47 + v48 + v49 + v50 + v51 + v52 + v53 + v54 + v55 + v56 + v57 + v58 + v59 + v60 + v61 + v62 + v63;
}

extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
extern "C" __global__ void matrix_mul(const float *a, const float *b, float *c, int n) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < n / TILE; t++) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t * TILE + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = sum;
}

extern "C" __global__ void reduce(const float *in, float *out, int n) {
    extern __shared__ float s[];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x * 2 + t;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    s[t] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
