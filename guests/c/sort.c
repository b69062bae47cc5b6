/* Reads whitespace-separated integers from stdin, sorts them with qsort (function-pointer
   comparator; argument "desc" sorts descending), prints count, sum, min/median/max and the list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_asc(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}
static int cmp_desc(const void *a, const void *b) { return cmp_asc(b, a); }

int main(int argc, char **argv) {
    int (*cmp)(const void *, const void *) = cmp_asc;
    if (argc > 1 && strcmp(argv[1], "desc") == 0) cmp = cmp_desc;
    size_t n = 0, cap = 16;
    long long *v = malloc(cap * sizeof *v), x, sum = 0;
    while (scanf("%lld", &x) == 1) {
        if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        if (!v) { fprintf(stderr, "out of memory\n"); return 1; }
        v[n++] = x;
        sum += x;
    }
    qsort(v, n, sizeof *v, cmp);
    printf("count=%zu sum=%lld\n", n, sum);
    if (n > 0) printf("first=%lld median=%lld last=%lld\n", v[0], v[n / 2], v[n - 1]);
    for (size_t i = 0; i < n; i++) printf("%lld%c", v[i], (i + 1 == n || i % 10 == 9) ? '\n' : ' ');
    free(v);
    return 0;
}
