/*
 * The runtime every translated PTX module includes: the launch and CTA records the host
 * fills, memory access helpers, PTX's integer and float operations with their exact
 * semantics, and the scheduler of a CTA's fused threads (barriers and warp operations).
 *
 * A CTA runs on one worker. Its threads are fused: the kernel function loops over them, and
 * each runs until it reaches a barrier, a warp operation or its end (a "split point"); its
 * registers are then saved in its spill slot and the next thread runs. When every thread has
 * stopped, wvp_release decides who goes on (Ocelot's thread fusion, ocelot.md §III).
 */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <fenv.h>

/* The runtime defines WVP_HOST_FMA when this machine has FMA instructions: fmaf/fma (PTX's
 * fma.rn, exact either way) then compile to one instruction instead of a libm call. The
 * define is part of the source, so a cached object built with it is only reused for source
 * generated on a machine that has them. */
#if defined(WVP_HOST_FMA) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC target("fma")
#endif

#define WVP_EXPORT __attribute__((visibility("default")))

/* A range of device memory a kernel may touch: [lo, hi). */
typedef struct { uint64_t lo, hi; } wvp_range;
/* Global accesses remember the allocation they last fell in, one slot per access site (by PTX
 * line): a kernel reading a and b and writing c keeps three slots warm, not one thrashed. */
#define WVP_HIT_SLOTS 8

/* What the host passes to every CTA of a launch (Rust: ptx::runtime::LaunchRecord). */
typedef struct {
    uint32_t grid[3];
    uint32_t block[3];
    uint8_t *params;          /* the kernel's parameter buffer, laid out as declared */
    uint64_t param_bytes;
    const wvp_range *ranges;  /* device allocations and module variables, sorted */
    uint64_t nranges;
} wvp_launch;

/* Why a thread stopped (wvp_thread.wait). */
enum { WVP_RUNNING = 0, WVP_AT_BARRIER = 1, WVP_AT_WARP_OP = 2, WVP_EXITED = 3 };
/* Warp operations, settled together for a warp's waiting lanes. */
enum {
    WVP_SHFL_UP, WVP_SHFL_DOWN, WVP_SHFL_BFLY, WVP_SHFL_IDX,
    WVP_VOTE_ALL, WVP_VOTE_ANY, WVP_VOTE_UNI, WVP_VOTE_BALLOT, WVP_WARP_SYNC
};
/* Results of a CTA (the host maps them to CUDA errors). */
enum { WVP_CTA_DONE = 0, WVP_CTA_DEADLOCK = -1, WVP_CTA_TRAP = -2, WVP_CTA_FAULT = -3, WVP_CTA_STACK = -4 };

/* One thread's scheduling state and its slot for a warp operation. */
typedef struct {
    uint32_t resume;   /* the split point to continue at (0: the start) */
    uint32_t wait;     /* WVP_RUNNING, ... */
    uint32_t op, mask; /* the warp operation and its member mask */
    uint64_t a;        /* the value this lane contributes */
    uint32_t b, c;     /* shfl's lane/offset and clamp operands */
    uint64_t result;   /* what the operation gave this lane */
    uint32_t pred;
} wvp_thread;

/* SIMT emulation state (simt.h), in translations made for it. */
struct wvp_simt;

/* One CTA's state: the worker owns it while the CTA runs. */
typedef struct {
    uint32_t ctaid[3];
    uint32_t nthreads;
    wvp_thread *thread;  /* nthreads */
    uint8_t *spill;      /* nthreads register sets */
    uint8_t *shared;     /* static then dynamic shared memory */
    uint8_t *local;      /* nthreads local depots */
    uint64_t shared_bytes;
    uint64_t local_bytes;    /* per thread */
    uint64_t fault;          /* the first address outside every range, + 1; 0: none */
    wvp_range hit[WVP_HIT_SLOTS]; /* per access site (line % slots): the range it last hit */
    uint8_t *frames;         /* device functions' .local frames (one thread calls at a time) */
    uint64_t frames_bytes, frame_top;
    uint32_t fault_line;     /* the PTX line of the faulting access */
    uint32_t fault_thread;   /* the faulting thread (flat index in the CTA) */
    uint64_t sink[4];        /* where a faulting access goes instead */
    struct wvp_simt *simt;   /* SIMT emulation only; otherwise null */
    /* Threads waiting at a barrier or a warp operation, and exited: kept as threads stop, so
     * a round's end needs no pass over the threads to count them. */
    uint32_t at_barrier, at_warp_op, exited;
    /* The highest wait state that runs this round: WVP_AT_BARRIER right after a barrier's
     * release (its threads go on without a pass resetting them), else WVP_RUNNING. */
    uint32_t runnable;
} wvp_cta;
_Static_assert(sizeof(wvp_thread) == 48, "wvp_thread layout (Rust: ThreadRecord)");
_Static_assert(sizeof(wvp_cta) == 288, "wvp_cta layout (Rust: CtaRecord)");
_Static_assert(sizeof(wvp_launch) == 56, "wvp_launch layout (Rust: LaunchRecord)");

/* ---- memory: unaligned-safe, alias-safe loads and stores ---- */
#define WVP_MEM(T, N) \
    static inline T wvp_ld_##N(const uint8_t *p) { T v; memcpy(&v, p, sizeof v); return v; } \
    static inline void wvp_st_##N(uint8_t *p, T v) { memcpy(p, &v, sizeof v); }
WVP_MEM(uint8_t, u8) WVP_MEM(uint16_t, u16) WVP_MEM(uint32_t, u32) WVP_MEM(uint64_t, u64)
WVP_MEM(int8_t, s8) WVP_MEM(int16_t, s16) WVP_MEM(int32_t, s32) WVP_MEM(int64_t, s64)
WVP_MEM(float, f32) WVP_MEM(double, f64)
#define WVP_PTR(addr) ((uint8_t *)(uintptr_t)(addr))

/* ---- checked addressing: an access outside what the launch may touch faults the CTA ---- */
static __attribute__((noinline, cold)) uint8_t *wvp_fault(wvp_cta *cta, uint64_t addr, uint32_t line) {
    if (!cta->fault) { cta->fault = addr + 1; cta->fault_line = line; }
    memset(cta->sink, 0, sizeof cta->sink);
    return (uint8_t *)cta->sink;
}
static inline uint8_t *wvp_global(const wvp_launch *l, wvp_cta *cta, uint64_t addr, uint32_t width, uint32_t line) {
    uint64_t end = addr + width;
    wvp_range *hit = &cta->hit[line % WVP_HIT_SLOTS];
    if (addr >= hit->lo && end <= hit->hi && end >= addr) return WVP_PTR(addr);
    uint64_t sh = (uint64_t)(uintptr_t)cta->shared, lo = (uint64_t)(uintptr_t)cta->local;
    if (addr >= sh && end <= sh + cta->shared_bytes && end >= addr) return WVP_PTR(addr);
    if (addr >= lo && end <= lo + (uint64_t)cta->nthreads * cta->local_bytes && end >= addr) return WVP_PTR(addr);
    uint64_t fr = (uint64_t)(uintptr_t)cta->frames;
    if (addr >= fr && end <= fr + cta->frame_top && end >= addr) return WVP_PTR(addr);
    uint64_t a = 0, b = l->nranges;
    while (a < b) {  /* the last range starting at or below addr */
        uint64_t m = (a + b) / 2;
        if (l->ranges[m].lo <= addr) a = m + 1; else b = m;
    }
    if (a > 0 && end <= l->ranges[a - 1].hi && end >= addr) {
        *hit = l->ranges[a - 1];
        return WVP_PTR(addr);
    }
    return wvp_fault(cta, addr, line);
}
static inline uint8_t *wvp_shared_at(wvp_cta *cta, uint64_t off, uint32_t width, uint32_t line) {
    return off + width <= cta->shared_bytes && off + width >= off ? cta->shared + off : wvp_fault(cta, off, line);
}
static inline uint8_t *wvp_local_at(wvp_cta *cta, uint8_t *local, uint64_t bytes, uint64_t off, uint32_t width, uint32_t line) {
    return off + width <= bytes && off + width >= off ? local + off : wvp_fault(cta, off, line);
}
/* A local address (a host address: see cvta in ops.rs) of thread t: its depot, or a live frame
 * of the device functions it is in. */
static inline uint8_t *wvp_local_ptr(wvp_cta *cta, uint32_t t, uint64_t addr, uint32_t width, uint32_t line) {
    uint64_t end = addr + width, lo = (uint64_t)(uintptr_t)(cta->local + (size_t)t * cta->local_bytes);
    uint64_t fr = (uint64_t)(uintptr_t)cta->frames;
    if (end >= addr && ((addr >= lo && end <= lo + cta->local_bytes) || (addr >= fr && end <= fr + cta->frame_top)))
        return WVP_PTR(addr);
    return wvp_fault(cta, addr, line);
}
static inline uint8_t *wvp_param_at(const wvp_launch *l, wvp_cta *cta, uint64_t off, uint32_t width, uint32_t line) {
    return off + width <= l->param_bytes && off + width >= off ? l->params + off : wvp_fault(cta, off, line);
}

/* ---- bit casts ---- */
static inline float wvp_f32_of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline double wvp_f64_of(uint64_t b) { double f; memcpy(&f, &b, 8); return f; }
static inline uint32_t wvp_bits_f32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static inline uint64_t wvp_bits_f64(double f) { uint64_t b; memcpy(&b, &f, 8); return b; }

/* ---- integers: PTX defines what C leaves undefined ---- */
static inline uint32_t wvp_shl_32(uint32_t a, uint32_t s) { return s > 31 ? 0 : a << s; }
static inline uint64_t wvp_shl_64(uint64_t a, uint32_t s) { return s > 63 ? 0 : a << s; }
static inline uint32_t wvp_shr_u32(uint32_t a, uint32_t s) { return s > 31 ? 0 : a >> s; }
static inline uint64_t wvp_shr_u64(uint64_t a, uint32_t s) { return s > 63 ? 0 : a >> s; }
static inline int32_t wvp_shr_s32(int32_t a, uint32_t s) { return a >> (s > 31 ? 31 : s); }
static inline int64_t wvp_shr_s64(int64_t a, uint32_t s) { return a >> (s > 63 ? 63 : s); }
static inline uint16_t wvp_shl_16(uint16_t a, uint32_t s) { return s > 15 ? 0 : (uint16_t)(a << s); }
static inline uint16_t wvp_shr_u16(uint16_t a, uint32_t s) { return s > 15 ? 0 : (uint16_t)(a >> s); }
static inline int16_t wvp_shr_s16(int16_t a, uint32_t s) { return (int16_t)(a >> (s > 15 ? 15 : s)); }
/* Division by zero gives what NVIDIA GPUs give (all ones; the dividend for rem). */
#define WVP_DIV(N, T, MIN) \
    static inline T wvp_div_##N(T a, T b) { return b == 0 ? (T)-1 : ((MIN) != 0 && a == (T)(MIN) && b == (T)-1) ? a : a / b; } \
    static inline T wvp_rem_##N(T a, T b) { return b == 0 ? a : ((MIN) != 0 && a == (T)(MIN) && b == (T)-1) ? 0 : a % b; }
WVP_DIV(u16, uint16_t, 0) WVP_DIV(u32, uint32_t, 0) WVP_DIV(u64, uint64_t, 0)
WVP_DIV(s16, int16_t, INT16_MIN) WVP_DIV(s32, int32_t, INT32_MIN) WVP_DIV(s64, int64_t, INT64_MIN)
static inline uint32_t wvp_mulhi_u32(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline int32_t wvp_mulhi_s32(int32_t a, int32_t b) { return (int32_t)(((int64_t)a * b) >> 32); }
static inline uint64_t wvp_mulhi_u64(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }
static inline int64_t wvp_mulhi_s64(int64_t a, int64_t b) { return (int64_t)(((__int128)a * b) >> 64); }
static inline uint16_t wvp_mulhi_u16(uint16_t a, uint16_t b) { return (uint16_t)(((uint32_t)a * b) >> 16); }
static inline int16_t wvp_mulhi_s16(int16_t a, int16_t b) { return (int16_t)(((int32_t)a * b) >> 16); }
static inline int32_t wvp_add_sat_s32(int32_t a, int32_t b) {
    int64_t r = (int64_t)a + b; return r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : (int32_t)r;
}
static inline int32_t wvp_sub_sat_s32(int32_t a, int32_t b) {
    int64_t r = (int64_t)a - b; return r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : (int32_t)r;
}
static inline uint32_t wvp_popc_64(uint64_t a) { return (uint32_t)__builtin_popcountll(a); }
static inline uint32_t wvp_clz_32(uint32_t a) { return a ? (uint32_t)__builtin_clz(a) : 32; }
static inline uint32_t wvp_clz_64(uint64_t a) { return a ? (uint32_t)__builtin_clzll(a) : 64; }
static inline uint32_t wvp_brev_32(uint32_t a) {
    a = ((a >> 1) & 0x55555555u) | ((a & 0x55555555u) << 1);
    a = ((a >> 2) & 0x33333333u) | ((a & 0x33333333u) << 2);
    a = ((a >> 4) & 0x0f0f0f0fu) | ((a & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(a);
}
static inline uint64_t wvp_brev_64(uint64_t a) {
    return ((uint64_t)wvp_brev_32((uint32_t)a) << 32) | wvp_brev_32((uint32_t)(a >> 32));
}
/* bfind: the position of the most significant non-sign bit, 0xffffffff if none. */
static inline uint32_t wvp_bfind_u64(uint64_t a) { return a ? 63 - (uint32_t)__builtin_clzll(a) : 0xffffffffu; }
static inline uint32_t wvp_bfind_s64(int64_t a) { return wvp_bfind_u64((uint64_t)(a < 0 ? ~a : a)); }
/* bfe/bfi: bit-field extract and insert (position and length taken mod 256). */
static inline uint64_t wvp_bfe(uint64_t a, uint32_t pos, uint32_t len, uint32_t bits, int sign) {
    pos &= 0xff; len &= 0xff;
    uint64_t msb_pos = pos + len - 1 < bits - 1 ? pos + len - 1 : bits - 1;
    int sbit = sign ? (len == 0 ? 0 : (int)((a >> msb_pos) & 1)) : 0;
    uint64_t d = 0;
    for (uint32_t i = 0; i < bits; i++) {
        uint64_t bit = (i < len && pos + i <= bits - 1) ? (a >> (pos + i)) & 1 : (uint64_t)sbit;
        d |= bit << i;
    }
    return d;
}
static inline uint64_t wvp_bfi(uint64_t a, uint64_t b, uint32_t pos, uint32_t len, uint32_t bits) {
    pos &= 0xff; len &= 0xff;
    uint64_t f = b;
    for (uint32_t i = 0; i < len && pos + i < bits; i++)
        f = (f & ~((uint64_t)1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
    return f;
}
/* prmt (default mode): byte i of the result is byte (c >> 4i) & 7 of {b, a}, or its sign
 * replicated when bit 3 of the selector is set. */
static inline uint32_t wvp_prmt(uint32_t a, uint32_t b, uint32_t c) {
    uint64_t x = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t sel = (c >> (4 * i)) & 0xf;
        uint32_t byte = (uint32_t)(x >> (8 * (sel & 7))) & 0xff;
        if (sel & 8) byte = (byte & 0x80) ? 0xff : 0;
        d |= byte << (8 * i);
    }
    return d;
}
/* shf: funnel shifts of the 64-bit {b, a}. */
static inline uint32_t wvp_shf_l(uint32_t a, uint32_t b, uint32_t n, int clamp) {
    n = clamp ? (n > 32 ? 32 : n) : (n & 31);
    uint64_t x = ((uint64_t)b << 32) | a;
    return (uint32_t)((x << n) >> 32);
}
static inline uint32_t wvp_shf_r(uint32_t a, uint32_t b, uint32_t n, int clamp) {
    n = clamp ? (n > 32 ? 32 : n) : (n & 31);
    uint64_t x = ((uint64_t)b << 32) | a;
    return (uint32_t)(x >> n);
}

/* ---- floats ---- */
static inline float wvp_ftz_f32(float x) {
    return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}
static inline float wvp_sat_f32(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline double wvp_sat_f64(double x) { return x != x ? 0.0 : x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x; }
/* Directed rounding: the operation runs under the mode PTX names (rare outside cvt). */
#define WVP_ROUNDED(NAME, T, EXPR) \
    static __attribute__((noinline)) T NAME(T a, T b, T c, int mode) { \
        volatile T x = a, y = b, z = c; (void)z; int old = fegetround(); fesetround(mode); \
        volatile T r = (EXPR); fesetround(old); return r; }
WVP_ROUNDED(wvp_add_rnd_f32, float, x + y) WVP_ROUNDED(wvp_add_rnd_f64, double, x + y)
WVP_ROUNDED(wvp_sub_rnd_f32, float, x - y) WVP_ROUNDED(wvp_sub_rnd_f64, double, x - y)
WVP_ROUNDED(wvp_mul_rnd_f32, float, x * y) WVP_ROUNDED(wvp_mul_rnd_f64, double, x * y)
WVP_ROUNDED(wvp_div_rnd_f32, float, x / y) WVP_ROUNDED(wvp_div_rnd_f64, double, x / y)
WVP_ROUNDED(wvp_fma_rnd_f32, float, fmaf(x, y, z)) WVP_ROUNDED(wvp_fma_rnd_f64, double, fma(x, y, z))
WVP_ROUNDED(wvp_sqrt_rnd_f32, float, sqrtf(x)) WVP_ROUNDED(wvp_sqrt_rnd_f64, double, sqrt(x))
static __attribute__((noinline)) float wvp_f32_of_f64_rnd(double a, int mode) {
    volatile double x = a; int old = fegetround(); fesetround(mode); volatile float r = (float)x; fesetround(old); return r;
}
static __attribute__((noinline)) double wvp_f64_of_s64_rnd(int64_t a, int mode) {
    volatile int64_t x = a; int old = fegetround(); fesetround(mode); volatile double r = (double)x; fesetround(old); return r;
}
static __attribute__((noinline)) double wvp_f64_of_u64_rnd(uint64_t a, int mode) {
    volatile uint64_t x = a; int old = fegetround(); fesetround(mode); volatile double r = (double)x; fesetround(old); return r;
}
static __attribute__((noinline)) float wvp_f32_of_s64_rnd(int64_t a, int mode) {
    volatile int64_t x = a; int old = fegetround(); fesetround(mode); volatile float r = (float)x; fesetround(old); return r;
}
static __attribute__((noinline)) float wvp_f32_of_u64_rnd(uint64_t a, int mode) {
    volatile uint64_t x = a; int old = fegetround(); fesetround(mode); volatile float r = (float)x; fesetround(old); return r;
}
/* Float to integer: PTX saturates, and NaN gives 0. `round` is the integer rounding
 * (trunc, rint, floor, ceil) already applied to x. */
#define WVP_F2I(N, T, LO, HI) \
    static inline T wvp_f2i_##N(double x) { return x != x ? 0 : x <= (double)(LO) ? (T)(LO) : x >= (double)(HI) ? (T)(HI) : (T)x; }
WVP_F2I(s8, int8_t, INT8_MIN, INT8_MAX) WVP_F2I(s16, int16_t, INT16_MIN, INT16_MAX)
WVP_F2I(s32, int32_t, INT32_MIN, INT32_MAX) WVP_F2I(u8, uint8_t, 0, UINT8_MAX)
WVP_F2I(u16, uint16_t, 0, UINT16_MAX) WVP_F2I(u32, uint32_t, 0, UINT32_MAX)
static inline int64_t wvp_f2i_s64(double x) {
    return x != x ? 0 : x < -9223372036854775808.0 ? INT64_MIN : x >= 9223372036854775808.0 ? INT64_MAX : (int64_t)x;
}
static inline uint64_t wvp_f2i_u64(double x) {
    return x != x ? 0 : x <= 0.0 ? 0 : x >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)x;
}
static inline float wvp_rcp_f32(float x) { return 1.0f / x; }
static inline float wvp_rsqrt_f32(float x) { return 1.0f / sqrtf(x); }
static inline double wvp_rsqrt_f64(double x) { return 1.0 / sqrt(x); }
static inline int wvp_testp_normal(double x) { return fpclassify(x) == FP_NORMAL; }
static inline int wvp_testp_subnormal(double x) { return fpclassify(x) == FP_SUBNORMAL; }

/* ---- atomics (global memory is shared by the workers; shared memory by one) ---- */
static inline float wvp_atom_add_f32(uint8_t *p, float v) {
    uint32_t old = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), want;
    do { want = wvp_bits_f32(wvp_f32_of(old) + v); }
    while (!__atomic_compare_exchange_n((uint32_t *)p, &old, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return wvp_f32_of(old);
}
static inline double wvp_atom_add_f64(uint8_t *p, double v) {
    uint64_t old = __atomic_load_n((uint64_t *)p, __ATOMIC_RELAXED), want;
    do { want = wvp_bits_f64(wvp_f64_of(old) + v); }
    while (!__atomic_compare_exchange_n((uint64_t *)p, &old, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return wvp_f64_of(old);
}
#define WVP_ATOM_MINMAX(N, T, OP) \
    static inline T wvp_atom_##N(uint8_t *p, T v) { \
        T old = __atomic_load_n((T *)p, __ATOMIC_RELAXED); \
        while (!(v OP old) ? 0 : !__atomic_compare_exchange_n((T *)p, &old, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {} \
        return old; }
WVP_ATOM_MINMAX(min_u32, uint32_t, <) WVP_ATOM_MINMAX(max_u32, uint32_t, >)
WVP_ATOM_MINMAX(min_s32, int32_t, <) WVP_ATOM_MINMAX(max_s32, int32_t, >)
WVP_ATOM_MINMAX(min_u64, uint64_t, <) WVP_ATOM_MINMAX(max_u64, uint64_t, >)
WVP_ATOM_MINMAX(min_s64, int64_t, <) WVP_ATOM_MINMAX(max_s64, int64_t, >)
/* inc/dec wrap at the operand, as PTX defines them. */
static inline uint32_t wvp_atom_inc_u32(uint8_t *p, uint32_t v) {
    uint32_t old = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), want;
    do { want = old >= v ? 0 : old + 1; }
    while (!__atomic_compare_exchange_n((uint32_t *)p, &old, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}
static inline uint32_t wvp_atom_dec_u32(uint8_t *p, uint32_t v) {
    uint32_t old = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), want;
    do { want = (old == 0 || old > v) ? v : old - 1; }
    while (!__atomic_compare_exchange_n((uint32_t *)p, &old, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}
#define WVP_CAS(N, T) \
    static inline T wvp_atom_cas_##N(uint8_t *p, T cmp, T v) { \
        __atomic_compare_exchange_n((T *)p, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
WVP_CAS(32, uint32_t) WVP_CAS(64, uint64_t)

/* ---- clocks ---- */
static inline uint64_t wvp_clock(void) { return __builtin_ia32_rdtsc(); }

/* ---- the scheduler of fused threads ---- */
static inline uint32_t wvp_lane(uint32_t t) { return t & 31; }

/* The lanes of t's warp that have not exited. */
static inline uint32_t wvp_active_mask(const wvp_cta *cta, uint32_t t) {
    uint32_t first = t & ~31u, m = 0;
    for (uint32_t u = first; u < first + 32 && u < cta->nthreads; u++)
        if (cta->thread[u].wait != WVP_EXITED) m |= 1u << (u - first);
    return m;
}

/* A lane reaches a warp operation: it records its part and waits for its warp. */
static inline void wvp_warp_arrive(wvp_cta *cta, uint32_t t, uint32_t resume, uint32_t op,
                                   uint64_t a, uint32_t b, uint32_t c, uint32_t mask) {
    wvp_thread *th = &cta->thread[t];
    th->resume = resume; th->wait = WVP_AT_WARP_OP; th->op = op;
    cta->at_warp_op++;
    th->a = a; th->b = b; th->c = c; th->mask = mask;
}

/* Settles the warp operation that the lanes `arrived` of warp `w` (all waiting at it) reached. */
static void wvp_settle_lanes(wvp_cta *cta, uint32_t w, uint32_t arrived) {
    uint32_t first = w * 32, end = first + 32 < cta->nthreads ? first + 32 : cta->nthreads;
    uint32_t ballot = 0, all = 1, any = 0;
    for (uint32_t t = first; t < end; t++) {
        if (!(arrived >> (t - first) & 1)) continue;
        uint32_t v = cta->thread[t].a != 0;
        ballot |= v << (t - first); all &= v; any |= v;
    }
    for (uint32_t t = first; t < end; t++) {
        if (!(arrived >> (t - first) & 1)) continue;
        wvp_thread *th = &cta->thread[t];
        uint32_t lane = t - first;
        switch (th->op) {
        case WVP_SHFL_UP: case WVP_SHFL_DOWN: case WVP_SHFL_BFLY: case WVP_SHFL_IDX: {
            uint32_t bval = th->b & 31, cval = th->c & 31, seg = (th->c >> 8) & 31;
            uint32_t max_lane = (lane & seg) | (cval & ~seg), min_lane = lane & seg;
            int32_t j; int ok;
            if (th->op == WVP_SHFL_UP) { j = (int32_t)lane - (int32_t)bval; ok = j >= (int32_t)max_lane; }
            else if (th->op == WVP_SHFL_DOWN) { j = (int32_t)(lane + bval); ok = j <= (int32_t)max_lane; }
            else if (th->op == WVP_SHFL_BFLY) { j = (int32_t)(lane ^ bval); ok = j <= (int32_t)max_lane; }
            else { j = (int32_t)(min_lane | (bval & ~seg)); ok = j <= (int32_t)max_lane; }
            if (!ok || !((arrived >> j) & 1)) j = (int32_t)lane;
            th->result = cta->thread[first + (uint32_t)j].a;
            th->pred = (uint32_t)ok;
            break;
        }
        case WVP_VOTE_ALL: th->pred = all; break;
        case WVP_VOTE_ANY: th->pred = any; break;
        case WVP_VOTE_UNI: th->pred = all || !any; break;
        case WVP_VOTE_BALLOT: th->result = ballot & th->mask; break;
        default: break;
        }
        th->wait = WVP_RUNNING;
        cta->at_warp_op--;
    }
}

/* Settles the warp operation the waiting lanes of warp `w` reached, if all its members did. */
static int wvp_settle_warp(wvp_cta *cta, uint32_t w) {
    uint32_t first = w * 32, end = first + 32 < cta->nthreads ? first + 32 : cta->nthreads;
    wvp_thread *lead = 0;
    uint32_t present = 0;  /* lanes that have not exited */
    for (uint32_t t = first; t < end; t++) {
        if (cta->thread[t].wait != WVP_EXITED) present |= 1u << (t - first);
        if (!lead && cta->thread[t].wait == WVP_AT_WARP_OP) lead = &cta->thread[t];
    }
    if (!lead) return 0;
    uint32_t members = lead->mask & present, arrived = 0;
    for (uint32_t t = first; t < end; t++) {
        wvp_thread *th = &cta->thread[t];
        if (th->wait == WVP_AT_WARP_OP && th->resume == lead->resume) arrived |= 1u << (t - first);
    }
    if ((members & ~arrived) != 0 || arrived == 0) return 0;
    wvp_settle_lanes(cta, w, arrived);
    return 1;
}

/* After a round: lets waiting threads go on. 1: run another round; WVP_CTA_DONE when every
 * thread has exited; WVP_CTA_DEADLOCK when threads wait for others that never come. */
static int wvp_release(wvp_cta *cta) {
    uint32_t live = cta->nthreads - cta->exited;
    if (live == 0) return WVP_CTA_DONE;
    cta->runnable = WVP_RUNNING;
    int released = 0;
    /* A warp with no lane at a warp operation has nothing to settle: barrier-only kernels skip
     * the per-warp pass. */
    for (uint32_t w = 0; cta->at_warp_op && w * 32 < cta->nthreads; w++) released |= wvp_settle_warp(cta, w);
    if (released) return 1;
    if (cta->at_barrier == live) {
        cta->at_barrier = 0;
        cta->runnable = WVP_AT_BARRIER;
        return 1;
    }
    return WVP_CTA_DEADLOCK;
}
