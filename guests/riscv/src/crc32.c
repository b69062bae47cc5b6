/* CRC-32 (IEEE) of standard input, table-driven. */
#include "mini.h"
int main(void) {
    static u32 table[256];
    for (u32 i = 0; i < 256; i++) {
        u32 c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    size_t n;
    u8 *data = read_all(0, &n);
    u32 crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ data[i]) & 255] ^ (crc >> 8);
    out_hex(crc ^ 0xFFFFFFFFu, 8); out_str("  "); out_u64(n); out_str(" bytes\n");
    return 0;
}
