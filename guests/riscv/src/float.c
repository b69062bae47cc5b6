/* Floating point, bit for bit: arithmetic, fused multiply-add, square roots, min/max with NaNs
 * and signed zeros, comparisons, classes, conversions in every direction (C casts truncate:
 * fcvt ... rtz), and a numeric loop (a Mandelbrot count and an n-body-like sum) whose results
 * print as bits. Argument: a seed for the random operands. */
#include "mini.h"
static u64 bits_d(double x) { u64 b; memcpy(&b, &x, 8); return b; }
static u32 bits_s(float x) { u32 b; memcpy(&b, &x, 4); return b; }
static double from_bits(u64 b) { double x; memcpy(&x, &b, 8); return x; }
static u64 seed;
static u64 next(void) { seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; return seed; }
static double rnd(void) {
    /* Mostly ordinary numbers, sometimes special ones. */
    switch (next() >> 60) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return from_bits(0x7ff0000000000000ULL);
    case 3: return from_bits(0x0000000000000001ULL + (next() >> 20));
    case 4: return (double)(i64)(next() >> 11) * (next() & 1 ? 1e-300 : 1e300);
    default: return (double)(i64)next() / (double)(next() >> 12 | 1);
    }
}
static void pd(const char *name, double x) { out_str(name); out_char(' '); out_hex(bits_d(x), 16); out_char('\n'); }
static void ps(const char *name, float x) { out_str(name); out_char(' '); out_hex(bits_s(x), 8); out_char('\n'); }
static void pi(const char *name, i64 x) { out_str(name); out_char(' '); out_i64(x); out_char('\n'); }
/* The instructions themselves (a freestanding build has no libm to call). */
static double fmin_d(double a, double b) { double r; __asm__("fmin.d %0, %1, %2" : "=f"(r) : "f"(a), "f"(b)); return r; }
static double fmax_d(double a, double b) { double r; __asm__("fmax.d %0, %1, %2" : "=f"(r) : "f"(a), "f"(b)); return r; }
static float fmin_s(float a, float b) { float r; __asm__("fmin.s %0, %1, %2" : "=f"(r) : "f"(a), "f"(b)); return r; }
static double sqrt_d(double a) { double r; __asm__("fsqrt.d %0, %1" : "=f"(r) : "f"(a)); return r; }
static float sqrt_s(float a) { float r; __asm__("fsqrt.s %0, %1" : "=f"(r) : "f"(a)); return r; }
static u64 class_d(double a) { u64 r; __asm__("fclass.d %0, %1" : "=r"(r) : "f"(a)); return r; }
static i64 round_d(double a, int mode) {
    i64 r;
    switch (mode) {
    case 0: __asm__("fcvt.l.d %0, %1, rne" : "=r"(r) : "f"(a)); break;
    case 1: __asm__("fcvt.l.d %0, %1, rtz" : "=r"(r) : "f"(a)); break;
    case 2: __asm__("fcvt.l.d %0, %1, rdn" : "=r"(r) : "f"(a)); break;
    case 3: __asm__("fcvt.l.d %0, %1, rup" : "=r"(r) : "f"(a)); break;
    default: __asm__("fcvt.w.d %0, %1, rmm" : "=r"(r) : "f"(a)); break;
    }
    return r;
}
__attribute__((noinline)) static double fma_d(double a, double b, double c) { return __builtin_fma(a, b, c); }
__attribute__((noinline)) static float fma_s(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
int main(int argc, char **argv) {
    seed = argc > 1 ? (u64)parse_long(argv[1]) : 1;
    volatile double zero = 0.0, inf = 1.0 / zero;
    pd("nan", zero / zero);
    pd("inf-inf", inf - inf);
    pd("sqrt-1", sqrt_d(-1.0 + zero));
    ps("nanf", (float)(zero / zero));
    pd("min(-0,+0)", fmin_d(-0.0 + zero, zero));
    pd("max(-0,+0)", fmax_d(-0.0 + zero, zero));
    pd("min(nan,1)", fmin_d(zero / zero, 1.0));
    ps("minf(nan,2)", fmin_s((float)(zero / zero), 2.0f));
    pd("fma exact", fma_d(0x1.0000001p0, 0x1.0000001p0, -0x1.0000002p0));
    ps("fmaf exact", fma_s(0x1.001p0f, 0x1.001p0f, -0x1.002p0f));
    u64 sum = 0;
    for (int i = 0; i < 400; i++) {
        double a = rnd(), b = rnd(), c = rnd();
        float fa = (float)a, fb = (float)b, fc = (float)c;
        u64 h = bits_d(a + b) ^ bits_d(a - b) * 3 ^ bits_d(a * b) * 5 ^ bits_d(a / b) * 7;
        h ^= bits_d(fma_d(a, b, c)) * 11 ^ bits_d(sqrt_d(a < 0 ? -a : a)) * 13;
        h ^= bits_s(fa + fb) * 17 ^ bits_s(fa * fb) * 19 ^ bits_s(fa / fb) * 23;
        h ^= bits_s(fma_s(fa, fb, fc)) * 29 ^ bits_s(sqrt_s(fa < 0 ? -fa : fa)) * 31;
        h ^= (u64)(a < b) * 37 ^ (u64)(a <= b) * 41 ^ (u64)(a == b) * 43 ^ (u64)(fa < fb) * 47;
        h ^= bits_d(fmin_d(a, b)) * 53 ^ bits_d(fmax_d(a, c)) * 59;
        h ^= (u64)(i64)a * 61 ^ (u64)(int)a * 67 ^ (u64)(unsigned)a * 71 ^ (u64)a * 73 ^ (u64)(i64)fa * 79;
        h ^= bits_d((double)(i64)next()) * 83 ^ bits_s((float)(i64)next()) * 89 ^ bits_d((double)(u64)next()) * 97;
        h ^= bits_s((float)a) * 101 ^ bits_d((double)fb) * 103;
        h ^= class_d(a) * 107 ^ class_d(b) * 109 ^ class_d(c) * 113;
        h ^= (u64)round_d(a * 0.5, i % 5) * 127 ^ (u64)round_d((double)(i - 200) / 4, i % 5) * 131;
        sum = (sum ^ h) * 0x100000001b3ULL;
        if (i < 3) { pd("a", a); pd("b", b); pd("a*b+c", fma_d(a, b, c)); pi("(long)a", (i64)a); }
    }
    out_str("checksum "); out_hex(sum, 16); out_char('\n');
    /* A Mandelbrot count on a 48 x 32 grid and a damped oscillator. */
    long inside = 0;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 48; x++) {
            double cr = -2.0 + x * (3.0 / 48), ci = -1.2 + y * (2.4 / 32), zr = 0, zi = 0;
            int k = 0;
            while (k < 100 && zr * zr + zi * zi < 4.0) { double t = zr * zr - zi * zi + cr; zi = 2 * zr * zi + ci; zr = t; k++; }
            inside += k == 100;
        }
    pi("mandelbrot inside", inside);
    double pos = 1.0, vel = 0.0;
    for (int i = 0; i < 10000; i++) { vel += (-0.5 * pos - 0.01 * vel) * 0.01; pos += vel * 0.01; }
    pd("oscillator", pos);
    ps("single sum", (float)pos * 3.0f + 0.1f);
    return 0;
}
