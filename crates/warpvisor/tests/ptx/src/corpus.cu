// CUDA programs of the PTX-on-CPU corpus (tests/ptx_corpus.rs). corpus.ptx beside this folder
// is NVRTC 12.x's output for compute_70: `python3 crates/warpvisor-bench/cuda/nvrtc.py
// crates/warpvisor/tests/ptx/src/corpus.cu > crates/warpvisor/tests/ptx/corpus.ptx`.

// Transpose of a w x h matrix through a 32 x 33 shared tile, block 32 x 8.
extern "C" __global__ void transpose_shared(const float *in, float *out, int w, int h) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Inclusive Hillis-Steele scan of each block's segment (double buffer in dynamic shared memory).
extern "C" __global__ void scan_block(const int *in, int *out, int n) {
    extern __shared__ int buf[];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int *a = buf, *b = buf + blockDim.x;
    a[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int d = 1; d < blockDim.x; d <<= 1) {
        b[t] = t >= d ? a[t] + a[t - d] : a[t];
        __syncthreads();
        int *s = a; a = b; b = s;
    }
    if (i < n) out[i] = a[t];
}

// 256-bin histogram: shared atomics per block, then global atomics.
extern "C" __global__ void histogram_shared(const unsigned char *in, unsigned *bins, int n) {
    __shared__ unsigned local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[in[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

// Bitonic sort of each block's blockDim.x keys (a power of two) in dynamic shared memory.
extern "C" __global__ void bitonic_sort(unsigned *data) {
    extern __shared__ unsigned keys[];
    unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
    keys[t] = data[base + t];
    __syncthreads();
    for (unsigned k = 2; k <= blockDim.x; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned p = t ^ j;
            if (p > t) {
                unsigned a = keys[t], b = keys[p];
                bool up = (t & k) == 0;
                if ((a > b) == up) { keys[t] = b; keys[p] = a; }
            }
            __syncthreads();
        }
    }
    data[base + t] = keys[t];
}

// Warp votes and shuffles with full masks: six results per thread.
extern "C" __global__ void warp_ops(const int *in, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, v = in[i];
    int lane = threadIdx.x & 31;
    unsigned ballot = __ballot_sync(0xffffffffu, v & 1);
    int any = __any_sync(0xffffffffu, v > 900);
    int all = __all_sync(0xffffffffu, v >= 0);
    int from0 = __shfl_sync(0xffffffffu, v, 0);
    int up = __shfl_up_sync(0xffffffffu, v, 3);
    int x = __shfl_xor_sync(0xffffffffu, v, 5);
    int *o = out + 6 * i;
    o[0] = (int)ballot; o[1] = any; o[2] = all; o[3] = from0; o[4] = up; o[5] = x + lane;
}

// Sum of squares with a warp-shuffle reduction inside each warp and shared memory across warps.
extern "C" __global__ void sum_squares(const float *in, float *out, int n) {
    __shared__ float warps[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] * in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x + 31) / 32 ? warps[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}

// Naive transpose of a w x h matrix: one element per thread, any 2-D block shape.
extern "C" __global__ void transpose_naive(const float *in, float *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// Naive n x n matrix product: one element per thread, products k = 0..n added in order.
extern "C" __global__ void matrix_mul_naive(const float *a, const float *b, float *c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    float sum = 0.0f;
    for (int k = 0; k < n; k++) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

// 256-bin histogram with global atomics only (grid-stride loop).
extern "C" __global__ void histogram_global(const unsigned char *in, unsigned *bins, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&bins[in[i]], 1u);
}

// One partial sum per block for any block size (not only powers of two): grid-stride sums per
// thread, then a tree in dynamic shared memory over the next power of two, `bar.sync` in the loop.
extern "C" __global__ void reduce_shared(const float *in, float *out, int n) {
    extern __shared__ float s[];
    unsigned t = threadIdx.x;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) v += in[i];
    s[t] = v;
    __syncthreads();
    unsigned p = 1;
    while (p < blockDim.x) p <<= 1;
    for (unsigned k = p >> 1; k > 0; k >>= 1) {
        if (t < k && t + k < blockDim.x) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Integer sum: warp shuffles, per-warp sums in static shared memory, one global atomicAdd per
// block (block size a multiple of 32).
extern "C" __global__ void reduce_shfl(const int *in, int *out, int n) {
    __shared__ int warps[32];
    int sum = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        sum += in[i];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x < 32) {
        sum = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
        if (threadIdx.x == 0) atomicAdd(out, sum);
    }
}

// Values that differ between threads next to values that do not, carried across barriers: a
// value chosen by a divergent branch, the count of a loop with a per-thread trip count, a
// uniform stride and round counter, and (in the second half of the rounds) a shuffle between
// the barriers, so rounds begin both at one barrier and at mixed split points. A translation
// that kept a per-thread value once per block would give every thread the last one's.
extern "C" __global__ void carried_across_barriers(const unsigned *in, unsigned *out, int rounds) {
    extern __shared__ unsigned words[];
    unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    unsigned x = in[g];
    unsigned chosen;
    if (x & 1) chosen = x * 3u; else chosen = x >> 1;
    unsigned trips = 0;
    for (unsigned k = 0; k < (x & 7u); k++) trips += k + blockDim.x;
    unsigned stride = blockDim.x;
    unsigned acc = 0;
    for (int r = 0; r < rounds; r++) {
        words[t] = chosen + (unsigned)r;
        __syncthreads();
        acc += words[(t + stride / 2u + (unsigned)r) % blockDim.x] ^ trips;
        if (r >= rounds / 2) acc += __shfl_xor_sync(0xffffffffu, chosen, 1);
        __syncthreads();
        chosen = chosen * 2654435761u + acc;
        stride = stride / 2u + 1u;
    }
    out[g] = acc ^ chosen ^ blockIdx.x;
}
