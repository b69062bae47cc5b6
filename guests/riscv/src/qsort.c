/* Sorts the integers on standard input with a quicksort taking a comparison function
 * (ascending, or descending with argument "desc"), prints them and a checksum. */
#include "mini.h"
typedef int (*cmp_fn)(i64, i64);
static int asc(i64 a, i64 b) { return a < b ? -1 : a > b; }
static int desc(i64 a, i64 b) { return asc(b, a); }
static void sort(i64 *v, long lo, long hi, cmp_fn cmp) {
    while (lo < hi) {
        i64 pivot = v[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (cmp(v[i], pivot) < 0) i++;
            while (cmp(v[j], pivot) > 0) j--;
            if (i <= j) { i64 t = v[i]; v[i] = v[j]; v[j] = t; i++; j--; }
        }
        if (j - lo < hi - i) { sort(v, lo, j, cmp); lo = i; } else { sort(v, i, hi, cmp); hi = j; }
    }
}
int main(int argc, char **argv) {
    size_t n;
    u8 *text = read_all(0, &n);
    i64 *v = malloc((n / 2 + 1) * sizeof(i64));
    long count = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && !(text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) i++;
        if (i >= n) break;
        i64 sign = 1, x = 0;
        if (text[i] == '-') { sign = -1; i++; }
        while (i < n && text[i] >= '0' && text[i] <= '9') x = x * 10 + (text[i++] - '0');
        v[count++] = sign * x;
    }
    cmp_fn cmp = argc > 1 && strcmp(argv[1], "desc") == 0 ? desc : asc;
    if (count) sort(v, 0, count - 1, cmp);
    u64 sum = 0;
    for (long i = 0; i < count; i++) {
        out_i64(v[i]); out_char(i + 1 < count ? ' ' : '\n');
        sum = sum * 31 + (u64)v[i];
    }
    out_str("count "); out_i64(count); out_str(" checksum "); out_hex(sum, 16); out_char('\n');
    return 0;
}
