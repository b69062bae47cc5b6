//! Kernel dialects: the few lines that differ between host C, OpenCL C and CUDA C++.

/// The language a kernel is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// Host C, compiled by the system C compiler for the `cpu` backend.
    C,
    /// OpenCL C 1.2, for the `opencl` backend.
    #[serde(rename = "opencl")]
    OpenCl,
}

const C_HEADER: &str = r#"
/* ---- dialect: host C (cpu backend) ---- */
#include <stdint.h>
#include <math.h>
#define WV_GLOBAL
#define WV_CONST static const
#define WV_FN static inline
static inline uint32_t wv_f32_bits(float x) { union { float f; uint32_t u; } c; c.f = x; return c.u; }
static inline float wv_f32_from_bits(uint32_t x) { union { float f; uint32_t u; } c; c.u = x; return c.f; }
static inline uint64_t wv_f64_bits(double x) { union { double f; uint64_t u; } c; c.f = x; return c.u; }
static inline double wv_f64_from_bits(uint64_t x) { union { double f; uint64_t u; } c; c.u = x; return c.f; }
/* NaN tests on the bits: a device compiler may assume `x != x` is false. */
#define wv_f32_isnan(x) ((wv_f32_bits(x) & 0x7fffffffu) > 0x7f800000u)
#define wv_f64_isnan(x) ((wv_f64_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)
#define wv_clz32(x) ((x) ? (uint32_t)__builtin_clz(x) : 32u)
#define wv_ctz32(x) ((x) ? (uint32_t)__builtin_ctz(x) : 32u)
#define wv_popcnt32(x) ((uint32_t)__builtin_popcount(x))
#define wv_clz64(x) ((x) ? (uint64_t)__builtin_clzll(x) : 64u)
#define wv_ctz64(x) ((x) ? (uint64_t)__builtin_ctzll(x) : 64u)
#define wv_popcnt64(x) ((uint64_t)__builtin_popcountll(x))
/* libm may return a signalling NaN unchanged; WebAssembly wants it quieted (x + x). */
static inline float wv_f32_ceil(float x) { return wv_f32_isnan(x) ? x + x : ceilf(x); }
static inline float wv_f32_floor(float x) { return wv_f32_isnan(x) ? x + x : floorf(x); }
static inline float wv_f32_trunc(float x) { return wv_f32_isnan(x) ? x + x : truncf(x); }
static inline float wv_f32_nearest(float x) { return wv_f32_isnan(x) ? x + x : nearbyintf(x); }
static inline float wv_f32_sqrt(float x) { return wv_f32_isnan(x) ? x + x : sqrtf(x); }
static inline double wv_f64_ceil(double x) { return wv_f64_isnan(x) ? x + x : ceil(x); }
static inline double wv_f64_floor(double x) { return wv_f64_isnan(x) ? x + x : floor(x); }
static inline double wv_f64_trunc(double x) { return wv_f64_isnan(x) ? x + x : trunc(x); }
static inline double wv_f64_nearest(double x) { return wv_f64_isnan(x) ? x + x : nearbyint(x); }
static inline double wv_f64_sqrt(double x) { return wv_f64_isnan(x) ? x + x : sqrt(x); }
/* Not foldable into a no-op for a signalling NaN: converting must quiet it. */
static inline double wv_f64_promote_f32(float x) { return wv_f32_isnan(x) ? (double)(x + x) : (double)x; }
static inline float wv_f32_demote_f64(double x) { return wv_f64_isnan(x) ? (float)(x + x) : (float)x; }
#define wv_f32_convert_u64(x) ((float)(uint64_t)(x))
#define wv_f64_convert_u64(x) ((double)(uint64_t)(x))
/* -fsignaling-nans keeps `x * 1.0` and friends from being folded away. */
#define wv_f32_add(a, b) ((a) + (b))
#define wv_f32_sub(a, b) ((a) - (b))
#define wv_f32_mul(a, b) ((a) * (b))
#define wv_f32_div(a, b) ((a) / (b))
#define wv_f64_add(a, b) ((a) + (b))
#define wv_f64_sub(a, b) ((a) - (b))
#define wv_f64_mul(a, b) ((a) * (b))
#define wv_f64_div(a, b) ((a) / (b))
"#;

const C_ENTRY: &str = r#"
/* ---- launch entry: runs VMs first, first + step, ... below end that are running ---- */
void wv_launch(wv_fleet *f, uint32_t first, uint32_t end, uint32_t step) {
  for (uint32_t vm = first; vm < end; vm += step)
    if (f->vms[vm].status == WV_RUNNING) wv_trampoline(f, vm);
}
"#;

const OPENCL_HEADER: &str = r#"
/* ---- dialect: OpenCL C 1.2 (opencl backend) ---- */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
/* No fused multiply-add: WebAssembly rounds every operation. */
#pragma OPENCL FP_CONTRACT OFF
typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
typedef uint uint32_t;
typedef int int32_t;
typedef ulong uint64_t;
typedef long int64_t;
#define WV_GLOBAL __global
#define WV_CONST __constant
#define WV_FN static inline
#define wv_f32_bits(x) as_uint(x)
#define wv_f32_from_bits(x) as_float((uint)(x))
#define wv_f64_bits(x) as_ulong(x)
#define wv_f64_from_bits(x) as_double((ulong)(x))
/* NaN tests on the bits: a device compiler may assume `x != x` is false. */
#define wv_f32_isnan(x) ((wv_f32_bits(x) & 0x7fffffffu) > 0x7f800000u)
#define wv_f64_isnan(x) ((wv_f64_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)
/* OpenCL's clz gives the bit width for 0; ctz is built from popcount (OpenCL 1.2 has no ctz). */
#define wv_clz32(x) ((uint)clz((uint)(x)))
#define wv_ctz32(x) ((uint)popcount((uint)(~(x) & ((x) - 1u))))
#define wv_popcnt32(x) ((uint)popcount((uint)(x)))
#define wv_clz64(x) ((ulong)clz((ulong)(x)))
#define wv_ctz64(x) ((ulong)popcount((ulong)(~(x) & ((x) - 1ul))))
#define wv_popcnt64(x) ((ulong)popcount((ulong)(x)))
/* A signalling NaN must come out quiet (x + x). */
static inline float wv_f32_ceil(float x) { return wv_f32_isnan(x) ? x + x : ceil(x); }
static inline float wv_f32_floor(float x) { return wv_f32_isnan(x) ? x + x : floor(x); }
static inline float wv_f32_trunc(float x) { return wv_f32_isnan(x) ? x + x : trunc(x); }
static inline float wv_f32_nearest(float x) { return wv_f32_isnan(x) ? x + x : rint(x); }
static inline float wv_f32_sqrt(float x) { return wv_f32_isnan(x) ? x + x : sqrt(x); }
static inline double wv_f64_ceil(double x) { return wv_f64_isnan(x) ? x + x : ceil(x); }
static inline double wv_f64_floor(double x) { return wv_f64_isnan(x) ? x + x : floor(x); }
static inline double wv_f64_trunc(double x) { return wv_f64_isnan(x) ? x + x : trunc(x); }
static inline double wv_f64_nearest(double x) { return wv_f64_isnan(x) ? x + x : rint(x); }
static inline double wv_f64_sqrt(double x) { return wv_f64_isnan(x) ? x + x : sqrt(x); }
static inline double wv_f64_promote_f32(float x) { return wv_f32_isnan(x) ? (double)(x + x) : (double)x; }
static inline float wv_f32_demote_f64(double x) { return wv_f64_isnan(x) ? (float)(x + x) : (float)x; }
#define wv_f32_convert_u64(x) ((float)(ulong)(x))
#define wv_f64_convert_u64(x) ((double)(ulong)(x))
/* The device compiler may fold `x * 1.0`, `x - 0.0`, `x / 1.0` to x, which leaves a signalling
 * NaN unquieted; a NaN result is quieted here (x + x). */
static inline float wv_f32_quiet(float r) { return wv_f32_isnan(r) ? r + r : r; }
static inline double wv_f64_quiet(double r) { return wv_f64_isnan(r) ? r + r : r; }
#define wv_f32_add(a, b) wv_f32_quiet((a) + (b))
#define wv_f32_sub(a, b) wv_f32_quiet((a) - (b))
#define wv_f32_mul(a, b) wv_f32_quiet((a) * (b))
#define wv_f32_div(a, b) wv_f32_quiet((a) / (b))
#define wv_f64_add(a, b) wv_f64_quiet((a) + (b))
#define wv_f64_sub(a, b) wv_f64_quiet((a) - (b))
#define wv_f64_mul(a, b) wv_f64_quiet((a) * (b))
#define wv_f64_div(a, b) wv_f64_quiet((a) / (b))
"#;

const OPENCL_ENTRY: &str = r#"
/* ---- kernel entry: one work-item per VM ---- */
__kernel void wv_kernel(__global uint8_t *mem, __global uint32_t *mem_pages, __global uint64_t *globals,
    __global uint32_t *tables, __global uint32_t *table_sizes, __global uint8_t *dropped,
    __global uint8_t *data_blob, __global uint32_t *elem_blob, __global uint64_t *stack,
    __global uint64_t *ret, __global wv_vm *vms, ulong mem_stride, uint num_vms, uint max_pages,
    uint stack_words, uint max_depth) {
  uint vm = (uint)get_global_id(0);
  if (vm >= num_vms || vms[vm].status != WV_RUNNING) return;
  wv_fleet fl;
  fl.mem = mem; fl.mem_pages = mem_pages; fl.globals = globals; fl.tables = tables;
  fl.table_sizes = table_sizes; fl.dropped = dropped; fl.data_blob = data_blob;
  fl.elem_blob = elem_blob; fl.stack = stack; fl.ret = ret; fl.vms = vms;
  fl.mem_stride = mem_stride; fl.num_vms = num_vms; fl.max_pages = max_pages;
  fl.stack_words = stack_words; fl.max_depth = max_depth;
  wv_trampoline(&fl, vm);
}
"#;

impl Dialect {
    /// Definitions that precede the module constants and the prelude.
    pub fn header(self) -> &'static str {
        match self {
            Dialect::C => C_HEADER,
            Dialect::OpenCl => OPENCL_HEADER,
        }
    }

    /// The kernel entry point that follows the trampoline.
    pub fn entry(self) -> &'static str {
        match self {
            Dialect::C => C_ENTRY,
            Dialect::OpenCl => OPENCL_ENTRY,
        }
    }

    /// Name used on the command line and in cache keys.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::C => "c",
            Dialect::OpenCl => "opencl",
        }
    }
}
