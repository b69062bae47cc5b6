/* Counts lines, words and bytes of standard input and the five most frequent words
 * (lower-cased letters and digits), with an open-addressing hash table. */
#include "mini.h"
typedef struct { const u8 *word; u32 len; u32 count; } Entry;
static u64 hash(const u8 *p, u32 n) {
    u64 h = 1469598103934665603ULL;
    for (u32 i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}
static int is_word(u8 c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
int main(void) {
    size_t n;
    u8 *text = read_all(0, &n);
    for (size_t i = 0; i < n; i++) if (text[i] >= 'A' && text[i] <= 'Z') text[i] += 32;
    u32 cap = 1024;
    Entry *table = malloc(cap * sizeof(Entry));
    memset(table, 0, cap * sizeof(Entry));
    u64 lines = 0, words = 0, distinct = 0;
    for (size_t i = 0; i < n;) {
        if (text[i] == '\n') lines++;
        if (!is_word(text[i])) { i++; continue; }
        size_t s = i;
        while (i < n && is_word(text[i])) i++;
        u32 len = (u32)(i - s);
        words++;
        if (distinct * 2 >= cap) {
            Entry *old = table;
            u32 ocap = cap;
            cap *= 2;
            table = malloc(cap * sizeof(Entry));
            memset(table, 0, cap * sizeof(Entry));
            for (u32 k = 0; k < ocap; k++) if (old[k].word) {
                u64 h = hash(old[k].word, old[k].len) & (cap - 1);
                while (table[h].word) h = (h + 1) & (cap - 1);
                table[h] = old[k];
            }
        }
        u64 h = hash(text + s, len) & (cap - 1);
        while (table[h].word && !(table[h].len == len && memcmp(table[h].word, text + s, len) == 0))
            h = (h + 1) & (cap - 1);
        if (!table[h].word) { table[h].word = text + s; table[h].len = len; distinct++; }
        table[h].count++;
    }
    out_u64(lines); out_char(' '); out_u64(words); out_char(' '); out_u64(n); out_str(" distinct ");
    out_u64(distinct); out_char('\n');
    for (int top = 0; top < 5; top++) {
        long best = -1;
        for (u32 k = 0; k < cap; k++) {
            if (!table[k].word || table[k].count == 0) continue;
            if (best < 0 || table[k].count > table[best].count ||
                (table[k].count == table[best].count &&
                 (table[k].len < table[best].len || (table[k].len == table[best].len &&
                  memcmp(table[k].word, table[best].word, table[k].len) < 0)))) best = k;
        }
        if (best < 0) break;
        out_bytes(table[best].word, table[best].len); out_char(' '); out_u64(table[best].count); out_char('\n');
        table[best].count = 0;
    }
    return 0;
}
