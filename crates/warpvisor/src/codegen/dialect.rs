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
    /// CUDA C++, compiled by NVRTC for the `cuda` backend.
    Cuda,
}

const C_HEADER: &str = r#"
/* ---- dialect: host C (cpu backend) ---- */
#include <stdint.h>
#include <math.h>
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the cpu backend needs a little-endian host (WebAssembly memory is little-endian)"
#endif
/* On the host: unaligned word access, and the C library's memmove/memset. */
#define WV_HOST 1
#define WV_GLOBAL
#define WV_CONST static const
#define WV_FN static inline
#define WV_FUNC static
#define WV_STATIC_ASSERT(c, name) _Static_assert(c, #name)
static inline uint32_t wv_f32_bits(float x) { union { float f; uint32_t u; } c; c.f = x; return c.u; }
static inline float wv_f32_from_bits(uint32_t x) { union { float f; uint32_t u; } c; c.u = x; return c.f; }
static inline uint64_t wv_f64_bits(double x) { union { double f; uint64_t u; } c; c.f = x; return c.u; }
static inline double wv_f64_from_bits(uint64_t x) { union { double f; uint64_t u; } c; c.u = x; return c.f; }
#define wv_clz32(x) ((x) ? (uint32_t)__builtin_clz(x) : 32u)
#define wv_ctz32(x) ((x) ? (uint32_t)__builtin_ctz(x) : 32u)
#define wv_popcnt32(x) ((uint32_t)__builtin_popcount(x))
#define wv_clz64(x) ((x) ? (uint64_t)__builtin_clzll(x) : 64u)
#define wv_ctz64(x) ((x) ? (uint64_t)__builtin_ctzll(x) : 64u)
#define wv_popcnt64(x) ((uint64_t)__builtin_popcountll(x))
/* Raw math; the prelude adds WebAssembly's NaN rules. */
#define wv_raw_ceilf ceilf
#define wv_raw_floorf floorf
#define wv_raw_truncf truncf
#define wv_raw_nearestf nearbyintf
#define wv_raw_sqrtf sqrtf
#define wv_raw_ceil ceil
#define wv_raw_floor floor
#define wv_raw_trunc trunc
#define wv_raw_nearest nearbyint
#define wv_raw_sqrt sqrt
#define wv_f32_convert_u64(x) ((float)(uint64_t)(x))
#define wv_f64_convert_u64(x) ((double)(uint64_t)(x))
/* -fsignaling-nans keeps `x * 1.0` and friends from being folded away: no quieting needed. */
#define WV_QUIET_ARITHMETIC 0
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
#ifndef __ENDIAN_LITTLE__
#error "the opencl backend needs a little-endian device (WebAssembly memory is little-endian)"
#endif
/* Synchronous imports (WV_SYNC_IMPORTS, built as OpenCL C 3.0): a VM's status is published to
 * and observed from the host through atomics at the scope of every SVM device and the host.
 * A compiler without that optional scope (PoCL 3.1 names none, though its CPU device reports
 * SVM atomics with the host) gets the device's: the host shares the CPU device's memory. */
#ifdef __opencl_c_atomic_scope_all_devices
#define WV_HOST_SCOPE memory_scope_all_svm_devices
#else
#define WV_HOST_SCOPE memory_scope_device
#endif
#define wv_status_publish(p, s) atomic_store_explicit((volatile __global atomic_uint *)(p), (s), \
  memory_order_release, WV_HOST_SCOPE)
#define wv_status_observe(p) atomic_load_explicit((volatile __global atomic_uint *)(p), \
  memory_order_acquire, WV_HOST_SCOPE)
#define wv_spin_pause() do { } while (0)
/* The host's answer, read after the acquire load that saw it. */
#define WV_MAILBOX_LOAD(x) (x)
/* A device: no C library; guest words at any alignment (the prelude: types of alignment 1
 * under clang, else vloadn/vstoren of bytes). */
#define WV_HOST 0
#define WV_VLOAD_BYTES 1
#define WV_GLOBAL __global
#define WV_CONST __constant
#define WV_FN static inline
#define WV_FUNC static
/* OpenCL C 1.2 has no _Static_assert: a negative array size fails the build instead. */
#define WV_STATIC_ASSERT(c, name) typedef char wv_check_##name[(c) ? 1 : -1]
#define wv_f32_bits(x) as_uint(x)
#define wv_f32_from_bits(x) as_float((uint)(x))
#define wv_f64_bits(x) as_ulong(x)
#define wv_f64_from_bits(x) as_double((ulong)(x))
/* OpenCL's clz gives the bit width for 0; ctz is built from popcount (OpenCL 1.2 has no ctz). */
#define wv_clz32(x) ((uint)clz((uint)(x)))
#define wv_ctz32(x) ((uint)popcount((uint)(~(x) & ((x) - 1u))))
#define wv_popcnt32(x) ((uint)popcount((uint)(x)))
#define wv_clz64(x) ((ulong)clz((ulong)(x)))
#define wv_ctz64(x) ((ulong)popcount((ulong)(~(x) & ((x) - 1ul))))
#define wv_popcnt64(x) ((ulong)popcount((ulong)(x)))
/* Raw math (overloaded for float and double); the prelude adds WebAssembly's NaN rules.
 * PoCL's ceil, floor, trunc and rint (SLEEF's portable C) convert x (a double: x / 2^31) to int
 * before they check whether x is already integral: undefined beyond int's range (poison in
 * LLVM). rint branches on it, so LLVM took any path that rounds a large constant as unreachable
 * and dropped the code before it (docs/opencl.md, "Known issues"). A float of magnitude at
 * least 2^23 (a double: 2^52), infinities included, is integral: it is returned as it is, and
 * the library only ever sees values it converts within range. */
#if defined(__clang__) && defined(__x86_64__)
/* A CPU device built by clang (PoCL): LLVM's own rounding, one instruction each on x86-64 with
 * SSE4.1, and defined for every input. */
#define wv_raw_ceilf(x) __builtin_ceilf(x)
#define wv_raw_floorf(x) __builtin_floorf(x)
#define wv_raw_truncf(x) __builtin_truncf(x)
#define wv_raw_nearestf(x) __builtin_rintf(x)
#define wv_raw_ceil(x) __builtin_ceil(x)
#define wv_raw_floor(x) __builtin_floor(x)
#define wv_raw_trunc(x) __builtin_trunc(x)
#define wv_raw_nearest(x) __builtin_rint(x)
#else
#define WV_ROUND_F32(fn, x) ((as_uint(x) & 0x7fffffffu) < 0x4b000000u ? fn(x) : (x))
#define WV_ROUND_F64(fn, x) ((as_ulong(x) & 0x7fffffffffffffffull) < 0x4330000000000000ull ? fn(x) : (x))
WV_FN float wv_raw_ceilf(float x) { return WV_ROUND_F32(ceil, x); }
WV_FN float wv_raw_floorf(float x) { return WV_ROUND_F32(floor, x); }
WV_FN float wv_raw_truncf(float x) { return WV_ROUND_F32(trunc, x); }
WV_FN float wv_raw_nearestf(float x) { return WV_ROUND_F32(rint, x); }
WV_FN double wv_raw_ceil(double x) { return WV_ROUND_F64(ceil, x); }
WV_FN double wv_raw_floor(double x) { return WV_ROUND_F64(floor, x); }
WV_FN double wv_raw_trunc(double x) { return WV_ROUND_F64(trunc, x); }
WV_FN double wv_raw_nearest(double x) { return WV_ROUND_F64(rint, x); }
#endif
#define wv_raw_sqrtf sqrt
#define wv_raw_sqrt sqrt
#define wv_f32_convert_u64(x) ((float)(ulong)(x))
#define wv_f64_convert_u64(x) ((double)(ulong)(x))
/* The device compiler may fold `x * 1.0`, `x - 0.0`, `x / 1.0` to x, leaving a signalling NaN
 * unquieted: arithmetic results are quieted, a NaN marked unlikely (the prelude's
 * wv_f32_quiet: off the critical path of a CPU device's float code). */
#define WV_QUIET_ARITHMETIC 1
#define WV_QUIET_UNLIKELY 1
"#;

const CUDA_HEADER: &str = r#"
/* ---- dialect: CUDA C++ (cuda backend, compiled by NVRTC with --fmad=false) ---- */
typedef unsigned char uint8_t;
typedef signed char int8_t;
typedef unsigned short uint16_t;
typedef short int16_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
/* Synchronous imports (WV_SYNC_IMPORTS): the status word lives in mapped host memory; a
 * volatile access fenced system-wide is the release store and the acquire load the host pairs
 * with (backend/cuda/host_calls.rs). A waiting thread backs off between polls. */
#define wv_status_publish(p, s) do { __threadfence_system(); \
  *(volatile uint32_t *)(p) = (s); } while (0)
static __device__ inline uint32_t wv_status_observe(const uint32_t *p) {
  uint32_t s = *(const volatile uint32_t *)p;
  __threadfence_system();
  return s;
}
/* The host's answer, in mapped host memory: read past the SM's caches. */
#define WV_MAILBOX_LOAD(x) (*(const volatile uint64_t *)&(x))
#if __CUDA_ARCH__ >= 700
#define wv_spin_pause() __nanosleep(64)
#else
#define wv_spin_pause() do { } while (0)
#endif
/* A device: words only where aligned, no C library (NVIDIA GPUs are little-endian). */
#define WV_HOST 0
#define WV_GLOBAL
#define WV_CONST static __device__ const
#define WV_FN static __device__ inline
#define WV_FUNC static __device__
#define WV_STATIC_ASSERT(c, name) static_assert(c, #name)
/* NVRTC has no __builtin_offsetof; __INTADDR__ is its front end's (EDG) constant form. */
#define WV_OFFSETOF(t, m) ((unsigned long long)__INTADDR__(&(((t *)0)->m)))
#define wv_f32_bits(x) ((uint32_t)__float_as_uint(x))
#define wv_f32_from_bits(x) __uint_as_float((uint32_t)(x))
#define wv_f64_bits(x) ((uint64_t)__double_as_longlong(x))
#define wv_f64_from_bits(x) __longlong_as_double((long long)(x))
/* __clz gives the bit width for 0; __ffs is 1-based and 0 for 0. */
#define wv_clz32(x) ((uint32_t)__clz((int)(x)))
#define wv_ctz32(x) ((x) ? (uint32_t)(__ffs((int)(x)) - 1) : 32u)
#define wv_popcnt32(x) ((uint32_t)__popc((unsigned)(x)))
#define wv_clz64(x) ((uint64_t)__clzll((long long)(x)))
#define wv_ctz64(x) ((x) ? (uint64_t)(__ffsll((long long)(x)) - 1) : 64u)
#define wv_popcnt64(x) ((uint64_t)__popcll((unsigned long long)(x)))
/* Raw math; the prelude adds WebAssembly's NaN rules. */
#define wv_raw_ceilf ceilf
#define wv_raw_floorf floorf
#define wv_raw_truncf truncf
#define wv_raw_nearestf rintf
#define wv_raw_sqrtf sqrtf
#define wv_raw_ceil ceil
#define wv_raw_floor floor
#define wv_raw_trunc trunc
#define wv_raw_nearest rint
#define wv_raw_sqrt sqrt
#define wv_f32_convert_u64(x) ((float)(uint64_t)(x))
#define wv_f64_convert_u64(x) ((double)(uint64_t)(x))
/* NVVM may fold `x * 1.0` and friends, leaving a signalling NaN unquieted. */
#define WV_QUIET_ARITHMETIC 1
"#;

impl Dialect {
    /// Definitions that precede the module constants and the prelude.
    pub fn header(self) -> &'static str {
        match self {
            Dialect::C => C_HEADER,
            Dialect::OpenCl => OPENCL_HEADER,
            Dialect::Cuda => CUDA_HEADER,
        }
    }

    /// Kernel partition size, in WebAssembly operators, that suits this dialect's compiler
    /// (`KernelOptions::partition_ops`; 0: one kernel). Host C builds fastest as one kernel.
    /// PoCL, since continuations write frames only when they yield, builds one kernel about as
    /// fast as 10,000-operator partitions, which copy the same callees into many kernels (the
    /// ten benchmarks cold, 2026-12-06: 889 s against 879 s in all; PHash without a profile
    /// 100 s against 312 s), and one kernel makes no launches between partitions, so it runs
    /// faster (docs/benchmarks.md). CUDA keeps 2,000 until NVRTC has been measured the same way.
    pub fn default_partition_ops(self) -> u32 {
        match self {
            Dialect::C => 0,
            Dialect::OpenCl => 0,
            Dialect::Cuda => 2_000,
        }
    }

    /// Name used on the command line and in cache keys.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::C => "c",
            Dialect::OpenCl => "opencl",
            Dialect::Cuda => "cuda",
        }
    }
}
