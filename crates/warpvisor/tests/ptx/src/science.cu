// Numerical programs of the PTX-on-CPU corpus (tests/ptx_corpus.rs): separable convolution,
// Black-Scholes, n-body, and Parboil-like CP, MRI-Q and SAD. science.ptx beside this folder is
// NVRTC 12.x's output for compute_70 (`python3 crates/warpvisor-bench/cuda/nvrtc.py
// crates/warpvisor/tests/ptx/src/science.cu > crates/warpvisor/tests/ptx/science.ptx`).

// One pass of a separable convolution along rows (dx = 1) or columns (dx = 0), borders clamped.
extern "C" __global__ void convolve(const float *in, float *out, const float *k, int w, int h, int radius, int rows) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int d = -radius; d <= radius; d++) {
        int xx = rows ? min(max(x + d, 0), w - 1) : x;
        int yy = rows ? y : min(max(y + d, 0), h - 1);
        s += in[yy * w + xx] * k[d + radius];
    }
    out[y * w + x] = s;
}

__device__ float cnd(float d) {
    const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f, a4 = -1.821255978f, a5 = 1.330274429f;
    float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = 0.3989422804f * expf(-0.5f * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
    return d > 0 ? 1.0f - c : c;
}

extern "C" __global__ void black_scholes(const float *s, const float *x, const float *t, float *call, float *put, float r, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sq = sqrtf(t[i]);
    float d1 = (logf(s[i] / x[i]) + (r + 0.5f * v * v) * t[i]) / (v * sq);
    float d2 = d1 - v * sq;
    float e = expf(-r * t[i]);
    call[i] = s[i] * cnd(d1) - x[i] * e * cnd(d2);
    put[i] = x[i] * e * (1.0f - cnd(d2)) - s[i] * (1.0f - cnd(d1));
}

// All-pairs gravitational acceleration, positions staged through shared tiles of blockDim.x.
extern "C" __global__ void nbody(const float4 *pos, float4 *acc, int n, float eps2) {
    extern __shared__ float4 tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 p = i < n ? pos[i] : make_float4(0, 0, 0, 0);
    float ax = 0, ay = 0, az = 0;
    for (int base = 0; base < n; base += blockDim.x) {
        int j = base + threadIdx.x;
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0, 0, 0, 0);
        __syncthreads();
        for (int k = 0; k < blockDim.x && base + k < n; k++) {
            float4 q = tile[k];
            float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float f = q.w * inv * inv * inv;
            ax += dx * f; ay += dy * f; az += dz * f;
        }
        __syncthreads();
    }
    if (i < n) acc[i] = make_float4(ax, ay, az, 0);
}

// Coulombic potential on a 2-D lattice (Parboil CP): atoms are (x, y, z, charge).
extern "C" __global__ void cp_lattice(float *energy, int w, int h, float spacing, const float4 *atoms, int natoms) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float px = x * spacing, py = y * spacing, e = 0.0f;
    for (int a = 0; a < natoms; a++) {
        float dx = px - atoms[a].x, dy = py - atoms[a].y, dz = atoms[a].z;
        e += atoms[a].w / sqrtf(dx * dx + dy * dy + dz * dz);
    }
    energy[y * w + x] += e;
}

// MRI-Q (Parboil): Q at each voxel from k-space samples.
extern "C" __global__ void mri_q(int numK, int numX, const float *kx, const float *ky, const float *kz,
                                 const float *x, const float *y, const float *z, const float *phiMag, float *qr, float *qi) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= numX) return;
    float r = 0.0f, im = 0.0f;
    for (int k = 0; k < numK; k++) {
        float arg = 6.2831853071795864769f * (kx[k] * x[i] + ky[k] * y[i] + kz[k] * z[i]);
        r += phiMag[k] * cosf(arg);
        im += phiMag[k] * sinf(arg);
    }
    qr[i] = r;
    qi[i] = im;
}

// Sum of absolute differences of each 4x4 block of `cur` against `ref` displaced by
// (dx, dy) in [-range, range]^2, reads of `ref` clamped to the frame (Parboil SAD, simplified).
extern "C" __global__ void sad_4x4(const unsigned short *cur, const unsigned short *ref, unsigned *out, int w, int h, int range) {
    int bx = blockIdx.x, by = blockIdx.y, side = 2 * range + 1;
    for (int d = threadIdx.x; d < side * side; d += blockDim.x) {
        int dx = d % side - range, dy = d / side - range;
        unsigned s = 0;
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) {
                int x = bx * 4 + i, y = by * 4 + j;
                int rx = min(max(x + dx, 0), w - 1), ry = min(max(y + dy, 0), h - 1);
                int a = cur[y * w + x], b = ref[ry * w + rx];
                s += a > b ? a - b : b - a;
            }
        out[((by * gridDim.x) + bx) * side * side + d] = s;
    }
}
