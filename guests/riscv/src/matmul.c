/* Multiplies two N×N integer matrices made from a seed (arguments: N, seed) and prints the
 * trace, a checksum and one row. 64-bit multiply-accumulate, divisions for the seeds. */
#include "mini.h"
int main(int argc, char **argv) {
    long n = argc > 1 ? parse_long(argv[1]) : 24;
    u64 seed = argc > 2 ? (u64)parse_long(argv[2]) : 1;
    if (n < 1 || n > 600) { out_str("N must be 1..600\n"); return 2; }
    i64 *a = malloc(n * n * 8), *b = malloc(n * n * 8), *c = malloc(n * n * 8);
    for (long i = 0; i < n * n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (i64)(seed >> 33) % 1000 - 500;
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        b[i] = (i64)(seed >> 40) / 7 - 1000;
    }
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            i64 s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    i64 trace = 0;
    u64 sum = 0;
    for (long i = 0; i < n; i++) trace += c[i * n + i];
    for (long i = 0; i < n * n; i++) sum = (sum ^ (u64)c[i]) * 0x100000001b3ULL;
    out_str("trace "); out_i64(trace); out_str(" checksum "); out_hex(sum, 16); out_char('\n');
    for (long j = 0; j < n && j < 8; j++) { out_i64(c[j] / 3); out_char(' '); out_i64(c[j] % 3); out_char(j + 1 < 8 && j + 1 < n ? ' ' : '\n'); }
    return 0;
}
