/* LZ77 with a hash of 4-byte prefixes: compresses standard input, decompresses the result,
 * checks the round trip, prints both sizes and an FNV-1a checksum of the compressed bytes. */
#include "mini.h"
static size_t compress(const u8 *in, size_t n, u8 *out) {
    static u32 last[4096];
    memset(last, 0xff, sizeof last);
    size_t o = 0, i = 0, lit = 0;
    while (i < n) {
        size_t best_len = 0, best_off = 0;
        if (i + 4 <= n) {
            u32 key = ((u32)in[i] | (u32)in[i+1] << 8 | (u32)in[i+2] << 16 | (u32)in[i+3] << 24) * 2654435761u >> 20;
            u32 cand = last[key];
            last[key] = (u32)i;
            if (cand != 0xffffffffu && i - cand < 65536) {
                size_t len = 0;
                while (i + len < n && len < 255 + 4 && in[cand + len] == in[i + len]) len++;
                if (len >= 4) { best_len = len; best_off = i - cand; }
            }
        }
        if (best_len) {
            if (lit) { out[o++] = 0; out[o++] = (u8)lit; memcpy(out + o, in + i - lit, lit); o += lit; lit = 0; }
            out[o++] = 1; out[o++] = (u8)(best_len - 4); out[o++] = (u8)best_off; out[o++] = (u8)(best_off >> 8);
            i += best_len;
        } else {
            i++; lit++;
            if (lit == 255) { out[o++] = 0; out[o++] = 255; memcpy(out + o, in + i - lit, lit); o += lit; lit = 0; }
        }
    }
    if (lit) { out[o++] = 0; out[o++] = (u8)lit; memcpy(out + o, in + i - lit, lit); o += lit; }
    return o;
}
static size_t decompress(const u8 *in, size_t n, u8 *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (in[i] == 0) { size_t l = in[i+1]; memcpy(out + o, in + i + 2, l); o += l; i += 2 + l; }
        else { size_t l = in[i+1] + 4, off = in[i+2] | (size_t)in[i+3] << 8; for (size_t k = 0; k < l; k++, o++) out[o] = out[o - off]; i += 4; }
    }
    return o;
}
int main(void) {
    size_t n;
    u8 *in = read_all(0, &n);
    u8 *packed = malloc(n + n / 128 + 16), *back = malloc(n + 1);
    size_t p = compress(in, n, packed);
    size_t b = decompress(packed, p, back);
    u64 h = 1469598103934665603ULL;
    for (size_t i = 0; i < p; i++) h = (h ^ packed[i]) * 1099511628211ULL;
    out_u64(n); out_str(" -> "); out_u64(p); out_str(" bytes, checksum "); out_hex(h, 16);
    int ok = b == n && memcmp(in, back, n) == 0;
    out_str(ok ? ", round trip ok\n" : ", ROUND TRIP FAILED\n");
    return ok ? 0 : 1;
}
