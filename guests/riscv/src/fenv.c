/* The floating-point environment, bit for bit: every rounding operation of F and D in each of
 * the five rounding modes (frm, and a few static modes), on operands that reach every case
 * (zeros, subnormals, the extremes, infinities, quiet and signaling NaNs, ties) and on random
 * bit patterns, with the exception flags each raises (fflags). Prints one FNV-1a digest of the
 * results and flags per operation and mode; with a second argument, every result.
 * Arguments: a seed for the random operands, then anything to print every result. */
#include "mini.h"
static u64 seed;
static u64 next(void) { seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; return seed ^ (seed >> 29); }
static int verbose;
static u64 digest;
static void set_mode(u64 m) { __asm__ volatile("fsrm %0" : : "r"(m)); }
static void clear_flags(void) { __asm__ volatile("fsflags zero"); }
static u64 flags(void) { u64 f; __asm__ volatile("frflags %0" : "=r"(f)); return f; }
static void record(const char *op, u64 mode, u64 a, u64 b, u64 c, u64 r) {
    u64 f = flags();
    digest = (digest ^ r) * 0x100000001b3ULL;
    digest = (digest ^ f) * 0x100000001b3ULL;
    if (verbose) {
        out_str(op); out_char(' '); out_u64(mode); out_char(' '); out_hex(a, 16); out_char(' ');
        out_hex(b, 16); out_char(' '); out_hex(c, 16); out_str(" -> "); out_hex(r, 16);
        out_char(' '); out_hex(f, 2); out_char('\n');
    }
}
#define D3(name, insn) static u64 name(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; \
    __asm__ volatile("fmv.d.x fa0, %1\n fmv.d.x fa1, %2\n fmv.d.x fa2, %3\n " insn "\n fmv.x.d %0, fa3" \
        : "=r"(r) : "r"(a), "r"(b), "r"(c) : "fa0", "fa1", "fa2", "fa3"); return r; }
#define S3(name, insn) static u64 name(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; \
    __asm__ volatile("fmv.w.x fa0, %1\n fmv.w.x fa1, %2\n fmv.w.x fa2, %3\n " insn "\n fmv.x.w %0, fa3" \
        : "=r"(r) : "r"(a), "r"(b), "r"(c) : "fa0", "fa1", "fa2", "fa3"); return r & 0xffffffffULL; }
D3(add_d, "fadd.d fa3, fa0, fa1") D3(sub_d, "fsub.d fa3, fa0, fa1") D3(mul_d, "fmul.d fa3, fa0, fa1")
D3(div_d, "fdiv.d fa3, fa0, fa1") D3(sqrt_d, "fsqrt.d fa3, fa0") D3(madd_d, "fmadd.d fa3, fa0, fa1, fa2")
D3(msub_d, "fmsub.d fa3, fa0, fa1, fa2") D3(nmsub_d, "fnmsub.d fa3, fa0, fa1, fa2")
D3(nmadd_d, "fnmadd.d fa3, fa0, fa1, fa2")
S3(add_s, "fadd.s fa3, fa0, fa1") S3(sub_s, "fsub.s fa3, fa0, fa1") S3(mul_s, "fmul.s fa3, fa0, fa1")
S3(div_s, "fdiv.s fa3, fa0, fa1") S3(sqrt_s, "fsqrt.s fa3, fa0") S3(madd_s, "fmadd.s fa3, fa0, fa1, fa2")
S3(nmadd_s, "fnmadd.s fa3, fa0, fa1, fa2")
/* Static modes, whatever frm says. */
D3(add_d_rtz, "fadd.d fa3, fa0, fa1, rtz") D3(mul_d_rup, "fmul.d fa3, fa0, fa1, rup")
S3(div_s_rdn, "fdiv.s fa3, fa0, fa1, rdn") D3(madd_d_rmm, "fmadd.d fa3, fa0, fa1, fa2, rmm")
/* Conversions: the result's bits (integers as they are). */
#define CV(name, insn, in, out) static u64 name(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; \
    __asm__ volatile(in " ft0, %1\n " insn "\n " out " %0, ft1" : "=r"(r) : "r"(a) : "ft0", "ft1"); return r; }
CV(cvt_s_d, "fcvt.s.d ft1, ft0", "fmv.d.x", "fmv.x.w")
CV(cvt_d_s, "fcvt.d.s ft1, ft0", "fmv.w.x", "fmv.x.d")
static u64 cvt_d_l(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fcvt.d.l ft1, %1\n fmv.x.d %0, ft1" : "=r"(r) : "r"(a) : "ft1"); return r; }
static u64 cvt_s_l(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fcvt.s.l ft1, %1\n fmv.x.w %0, ft1" : "=r"(r) : "r"(a) : "ft1"); return r & 0xffffffffULL; }
static u64 cvt_d_lu(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fcvt.d.lu ft1, %1\n fmv.x.d %0, ft1" : "=r"(r) : "r"(a) : "ft1"); return r; }
static u64 cvt_s_w(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fcvt.s.w ft1, %1\n fmv.x.w %0, ft1" : "=r"(r) : "r"(a) : "ft1"); return r & 0xffffffffULL; }
static u64 cvt_w_d(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fmv.d.x ft0, %1\n fcvt.w.d %0, ft0" : "=r"(r) : "r"(a) : "ft0"); return r; }
static u64 cvt_lu_s(u64 a, u64 b, u64 c) { u64 r; (void)b; (void)c; __asm__ volatile("fmv.w.x ft0, %1\n fcvt.lu.s %0, ft0" : "=r"(r) : "r"(a) : "ft0"); return r; }
/* Comparisons and min/max: their flags. */
static u64 cmp_d(u64 a, u64 b, u64 c) { u64 x, y, z; (void)c; __asm__ volatile("fmv.d.x ft0, %3\n fmv.d.x ft1, %4\n feq.d %0, ft0, ft1\n flt.d %1, ft0, ft1\n fle.d %2, ft0, ft1" : "=r"(x), "=r"(y), "=r"(z) : "r"(a), "r"(b) : "ft0", "ft1"); return x | y << 1 | z << 2; }
static u64 min_s(u64 a, u64 b, u64 c) { u64 r; (void)c; __asm__ volatile("fmv.w.x ft0, %1\n fmv.w.x ft1, %2\n fmin.s ft2, ft0, ft1\n fmv.x.w %0, ft2" : "=r"(r) : "r"(a), "r"(b) : "ft0", "ft1", "ft2"); return r & 0xffffffffULL; }

typedef u64 (*Op)(u64, u64, u64);
static const struct { const char *name; Op f; int single; int ints; } OPS[] = {
    {"fadd.d", add_d, 0, 0}, {"fsub.d", sub_d, 0, 0}, {"fmul.d", mul_d, 0, 0}, {"fdiv.d", div_d, 0, 0},
    {"fsqrt.d", sqrt_d, 0, 0}, {"fmadd.d", madd_d, 0, 0}, {"fmsub.d", msub_d, 0, 0},
    {"fnmsub.d", nmsub_d, 0, 0}, {"fnmadd.d", nmadd_d, 0, 0},
    {"fadd.s", add_s, 1, 0}, {"fsub.s", sub_s, 1, 0}, {"fmul.s", mul_s, 1, 0}, {"fdiv.s", div_s, 1, 0},
    {"fsqrt.s", sqrt_s, 1, 0}, {"fmadd.s", madd_s, 1, 0}, {"fnmadd.s", nmadd_s, 1, 0},
    {"fadd.d.rtz", add_d_rtz, 0, 0}, {"fmul.d.rup", mul_d_rup, 0, 0}, {"fdiv.s.rdn", div_s_rdn, 1, 0},
    {"fmadd.d.rmm", madd_d_rmm, 0, 0},
    {"fcvt.s.d", cvt_s_d, 0, 0}, {"fcvt.d.s", cvt_d_s, 1, 0}, {"fcvt.d.l", cvt_d_l, 0, 1},
    {"fcvt.s.l", cvt_s_l, 0, 1}, {"fcvt.d.lu", cvt_d_lu, 0, 1}, {"fcvt.s.w", cvt_s_w, 0, 1},
    {"fcvt.w.d", cvt_w_d, 0, 0}, {"fcvt.lu.s", cvt_lu_s, 1, 0}, {"fcmp.d", cmp_d, 0, 0},
    {"fmin.s", min_s, 1, 0},
};
static const u64 SPECIAL_D[] = {
    0, 0x8000000000000000ULL, 0x3ff0000000000000ULL, 0xbff0000000000000ULL, 0x3ff8000000000000ULL,
    0x3ff0000000000001ULL, 0x3fd5555555555555ULL, 0x7fefffffffffffffULL, 0xffefffffffffffffULL,
    0x0010000000000000ULL, 0x000fffffffffffffULL, 0x0000000000000001ULL, 0x0008000000000000ULL,
    0x7ff0000000000000ULL, 0xfff0000000000000ULL, 0x7ff8000000000000ULL, 0x7ff0000000000001ULL,
    0x7fe0000000000000ULL, 0x3ca0000000000000ULL, 0x4340000000000001ULL, 0xc00fffffffffffffULL,
};
static const u64 SPECIAL_S[] = {
    0, 0x80000000, 0x3f800000, 0xbf800000, 0x3fc00000, 0x3f800001, 0x3eaaaaab, 0x7f7fffff,
    0xff7fffff, 0x00800000, 0x007fffff, 0x00000001, 0x00400000, 0x7f800000, 0xff800000,
    0x7fc00000, 0x7f800001, 0x7f000000, 0x33800000, 0x4b000001, 0xc07fffff,
};
static const u64 SPECIAL_I[] = {
    0, 1, (u64)-1, 0x7fffffffffffffffULL, 0x8000000000000000ULL, 0x0020000000000001ULL,
    0x0020000000000003ULL, 0xffffffffffffffffULL, 0x0000000001000001ULL, 0x7fffffffffffff80ULL,
    0xfffffffffffff800ULL, 0x00000000ffffffffULL, 0x000000007fffffffULL, 0x0000000080000000ULL,
};
#define N(a) (sizeof(a) / sizeof((a)[0]))
/* A random operand: any bit pattern, or one near a special value. */
static u64 random_operand(int single, int ints) {
    u64 r = next();
    if (ints) return (r >> 60) < 4 ? SPECIAL_I[r % N(SPECIAL_I)] + (next() & 3) - 1 : next() >> (next() & 63);
    if (single) return (r >> 60) < 3 ? SPECIAL_S[r % N(SPECIAL_S)] ^ (next() & 1) : next() & 0xffffffffULL;
    return (r >> 60) < 3 ? SPECIAL_D[r % N(SPECIAL_D)] ^ (next() & 1) : next();
}
int main(int argc, char **argv) {
    seed = argc > 1 ? (u64)parse_long(argv[1]) : 1;
    verbose = argc > 2;
    for (unsigned k = 0; k < N(OPS); k++) {
        const u64 *sp = OPS[k].ints ? SPECIAL_I : OPS[k].single ? SPECIAL_S : SPECIAL_D;
        unsigned ns = OPS[k].ints ? N(SPECIAL_I) : N(SPECIAL_D);
        for (u64 mode = 0; mode < 5; mode++) {
            digest = 1469598103934665603ULL;
            set_mode(mode);
            for (unsigned i = 0; i < ns; i++)
                for (unsigned j = 0; j < ns; j++) {
                    u64 a = sp[i], b = sp[j], c = sp[(i * 7 + j * 3) % ns];
                    clear_flags();
                    record(OPS[k].name, mode, a, b, c, OPS[k].f(a, b, c));
                }
            for (int n = 0; n < 300; n++) {
                u64 a = random_operand(OPS[k].single, OPS[k].ints), b = random_operand(OPS[k].single, 0),
                    c = random_operand(OPS[k].single, 0);
                clear_flags();
                record(OPS[k].name, mode, a, b, c, OPS[k].f(a, b, c));
            }
            out_str(OPS[k].name); out_char(' '); out_u64(mode); out_char(' ');
            out_hex(digest, 16); out_char('\n');
        }
    }
    return 0;
}
