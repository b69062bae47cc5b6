
/*
 * SIMT emulation (translations made with ptx::emit_simt only): each warp runs in lockstep
 * under a reconvergence stack, the way pre-Volta NVIDIA GPUs and GPGPU-Sim run one, and the
 * CTA counts what a GPU would execute.
 *
 * The kernel is cut into basic blocks: every label, every split point and the instruction
 * after a predicated branch starts one, and a thread stops at each block's end with its
 * next block in `resume` (the fused scheduler's mechanism, used at every block instead of
 * only at barriers). A *step* runs one block for the active lanes of the warp's top stack
 * entry, one lane after another, then looks where they went: one place, or a divergence
 * that pushes an entry per target, all reconverging at the block's immediate
 * post-dominator (or, where that is the function's exit, where the entry they ran under
 * reconverges). A block that ends in a call (device functions are subroutines of the
 * kernel: ptx/subroutines.rs) pushes an entry for the callee reconverging at the return
 * site, as a GPU's CALL does. Counts per step: the block's instructions once per warp and once per
 * active lane, and for each global memory instruction the distinct 32-byte sectors its
 * lanes touched. Lanes of a block run one after another rather than one instruction at a
 * time: the counts are those of instruction lockstep for programs without races between a
 * warp's lanes (which CUDA requires since Volta, through __syncwarp).
 */
#define WVP_SIMT_DEPTH 1024
#define WVP_SIMT_NONE 0xffffffffu
/* Most sectors one warp memory instruction can touch: 32 lanes, 2 sectors each (<= 32 B). */
#define WVP_SIMT_SECTORS 64

/* A reconvergence stack entry: run `pc` for `mask` until it reaches `rpc`. */
typedef struct { uint32_t pc, rpc, mask, unused; } wvp_simt_entry;

typedef struct {
    uint32_t depth;
    uint32_t exited;   /* lanes that exited (or are beyond the CTA's last thread) */
    uint32_t stopped;  /* at a barrier: waits for the CTA's release */
    uint32_t unused;
    wvp_simt_entry stack[WVP_SIMT_DEPTH];
} wvp_simt_warp;

/* One worker's emulation state (Rust: ptx::simt::SimtRecord). Counters first. */
struct wvp_simt {
    uint64_t warp_instrs;   /* instructions issued per warp */
    uint64_t lane_instrs;   /* ... times the lanes active for each */
    uint64_t mem_instrs;    /* global memory instructions issued (>= 1 lane accessed) */
    uint64_t sectors;       /* 32-byte sectors those touched */
    uint64_t divergences;   /* steps that split a warp */
    uint64_t steps;         /* blocks run by a warp */
    uint64_t guarded_off;   /* lane instructions (not jumps) whose guard was false */
    wvp_simt_warp *warps;   /* nthreads / 32, rounded up */
    uint64_t *site_sectors; /* max_sites x WVP_SIMT_SECTORS: this step's sectors per site */
    uint32_t *site_count;   /* max_sites */
    const uint32_t *instrs, *sites, *ipdom, *calls; /* the kernel's blocks */
    uint32_t nblocks, max_sites;
    uint32_t warp, block, mask, pending; /* the step being run */
    int32_t error;          /* a CTA result (WVP_CTA_STACK: a stack overflowed); 0: none */
    uint32_t unused;
};
_Static_assert(sizeof(wvp_simt_warp) == 16 + 16 * WVP_SIMT_DEPTH, "wvp_simt_warp layout");
_Static_assert(sizeof(struct wvp_simt) == 144, "wvp_simt layout (Rust: SimtRecord)");

static inline wvp_simt_entry *wvp_simt_top(wvp_simt_warp *w) {
    return w->depth ? &w->stack[w->depth - 1] : 0;
}

/* A CTA begins: every warp at block 0 with its lanes, reconverging at the exit. */
static void wvp_simt_begin(wvp_cta *cta, const uint32_t *instrs, const uint32_t *sites,
                           const uint32_t *ipdom, const uint32_t *calls, uint32_t nblocks) {
    struct wvp_simt *s = cta->simt;
    s->instrs = instrs; s->sites = sites; s->ipdom = ipdom; s->calls = calls;
    s->nblocks = nblocks;
    s->warp = 0; s->block = 0; s->mask = 0; s->pending = 0; s->error = 0;
    for (uint32_t w = 0; w * 32 < cta->nthreads; w++) {
        uint32_t n = cta->nthreads - w * 32;
        uint32_t lanes = n >= 32 ? 0xffffffffu : (1u << n) - 1;
        wvp_simt_warp *wp = &s->warps[w];
        wp->depth = 1; wp->exited = ~lanes; wp->stopped = 0;
        wp->stack[0] = (wvp_simt_entry){0, nblocks, lanes, 0};
    }
}

/* The lanes of t's warp converged with it. */
static inline uint32_t wvp_simt_active(const wvp_cta *cta, uint32_t t) {
    (void)t;
    return cta->simt->mask;
}

/* A global access of the running lane at memory instruction `site` of its block: note its
 * sectors (generic addresses into shared or local memory are not global traffic). */
static inline uint8_t *wvp_simt_global(const wvp_launch *l, wvp_cta *cta, uint64_t addr,
                                       uint32_t width, uint32_t line, uint32_t site) {
    struct wvp_simt *s = cta->simt;
    uint64_t sh = (uint64_t)(uintptr_t)cta->shared, lo = (uint64_t)(uintptr_t)cta->local;
    uint64_t fr = (uint64_t)(uintptr_t)cta->frames;
    int on_chip = (addr >= sh && addr < sh + cta->shared_bytes)
        || (addr >= lo && addr < lo + (uint64_t)cta->nthreads * cta->local_bytes)
        || (addr >= fr && addr < fr + cta->frames_bytes);
    if (!on_chip && site < s->max_sites && width > 0) {
        uint64_t *set = s->site_sectors + (size_t)site * WVP_SIMT_SECTORS;
        uint32_t *n = &s->site_count[site];
        for (uint64_t sec = addr >> 5; sec <= (addr + width - 1) >> 5; sec++) {
            uint32_t k = 0;
            while (k < *n && set[k] != sec) k++;
            if (k == *n && *n < WVP_SIMT_SECTORS) set[(*n)++] = sec;
        }
    }
    return wvp_global(l, cta, addr, width, line);
}

/* A step ended: count it, settle a warp operation, and move the warp's stack on. */
static void wvp_simt_finish(wvp_cta *cta) {
    struct wvp_simt *s = cta->simt;
    wvp_simt_warp *w = &s->warps[s->warp];
    wvp_simt_entry *e = wvp_simt_top(w);
    uint32_t b = s->block, m = s->mask, first = s->warp * 32;
    s->steps++;
    s->warp_instrs += s->instrs[b];
    s->lane_instrs += (uint64_t)s->instrs[b] * (uint32_t)__builtin_popcount(m);
    for (uint32_t k = 0; k < s->sites[b] && k < s->max_sites; k++) {
        if (s->site_count[k]) { s->mem_instrs++; s->sectors += s->site_count[k]; s->site_count[k] = 0; }
    }
    /* Where each lane went. */
    uint32_t targets[32], tmask[32], nt = 0, at_op = 0, at_barrier = 0;
    for (uint32_t l = 0; l < 32; l++) {
        if (!(m >> l & 1)) continue;
        wvp_thread *th = &cta->thread[first + l];
        if (th->wait == WVP_EXITED) { w->exited |= 1u << l; continue; }
        if (th->wait == WVP_AT_WARP_OP) at_op |= 1u << l;
        if (th->wait == WVP_AT_BARRIER) at_barrier |= 1u << l;
        uint32_t k = 0;
        while (k < nt && targets[k] != th->resume) k++;
        if (k == nt) { targets[nt] = th->resume; tmask[nt] = 0; nt++; }
        tmask[k] |= 1u << l;
    }
    /* The converged lanes settle their warp operation now (the members that are not
     * converged here are not waited for, as on a GPU with a reconvergence stack). */
    if (at_op) wvp_settle_lanes(cta, s->warp, at_op);
    if (at_barrier) w->stopped = 1;
    if (nt == 0 || !e) return;  /* every lane exited: the entry is popped when next looked at */
    if (s->calls[b] != WVP_SIMT_NONE && nt == 1) {
        /* A call: the warp goes on at the return site once the callee's entry reconverges
         * there (an entry left with pc == rpc is popped when next looked at). */
        e->pc = s->calls[b];
        /* Nothing left of this entry after the call (a guarded call's lanes, whose entry
         * ends at the return site): the callee's entry takes its place. */
        if (e->pc == e->rpc) { e->pc = targets[0]; e->mask = tmask[0]; return; }
        if (w->depth == WVP_SIMT_DEPTH) { s->error = WVP_CTA_STACK; return; }
        w->stack[w->depth++] = (wvp_simt_entry){targets[0], s->calls[b], tmask[0], 0};
        return;
    }
    if (nt == 1) { e->pc = targets[0]; return; }
    s->divergences++;
    /* No post-dominator inside the function (its lanes part until it returns, or for
     * good): they reconverge where the entry they ran under does. */
    uint32_t r = s->ipdom[b] == s->nblocks ? e->rpc : s->ipdom[b];
    e->pc = r;
    if (e->pc == e->rpc) w->depth--;  /* it reconverges where its own entry does */
    for (uint32_t k = nt; k-- > 0;) {  /* the lowest target ends on top and runs first */
        if (targets[k] == r) continue;  /* those lanes wait at the reconvergence point */
        if (w->depth == WVP_SIMT_DEPTH) { s->error = WVP_CTA_STACK; return; }
        w->stack[w->depth++] = (wvp_simt_entry){targets[k], r, tmask[k], 0};
    }
}

/* The next lane to run a block, or WVP_SIMT_NONE when every warp has stopped (barrier, end)
 * for this round. Warps run one after another, each until it stops. */
static uint32_t wvp_simt_next(wvp_cta *cta) {
    struct wvp_simt *s = cta->simt;
    uint32_t nwarps = (cta->nthreads + 31) / 32;
    for (;;) {
        if (s->pending) {
            uint32_t l = (uint32_t)__builtin_ctz(s->pending);
            s->pending &= s->pending - 1;
            return s->warp * 32 + l;
        }
        if (s->mask) { wvp_simt_finish(cta); s->mask = 0; }
        if (s->error) return WVP_SIMT_NONE;
        while (s->warp < nwarps) {
            wvp_simt_warp *w = &s->warps[s->warp];
            wvp_simt_entry *e;
            while ((e = wvp_simt_top(w)) && ((e->mask & ~w->exited) == 0 || e->pc == e->rpc)) w->depth--;
            if (e && !w->stopped) {
                if (e->pc >= s->nblocks) { s->error = WVP_CTA_DEADLOCK; return WVP_SIMT_NONE; }
                s->block = e->pc;
                s->mask = s->pending = e->mask & ~w->exited;
                break;
            }
            s->warp++;
        }
        if (s->warp >= nwarps) return WVP_SIMT_NONE;
    }
}

/* After a round: WVP_CTA_DONE when every warp finished, 1 when the warps all wait at a
 * barrier (released now), an error otherwise. */
static int wvp_simt_release(wvp_cta *cta) {
    struct wvp_simt *s = cta->simt;
    if (s->error) return s->error;
    uint32_t live = 0;
    for (uint32_t w = 0; w * 32 < cta->nthreads; w++) live += s->warps[w].depth != 0;
    if (live == 0) return WVP_CTA_DONE;
    for (uint32_t t = 0; t < cta->nthreads; t++)
        if (cta->thread[t].wait == WVP_AT_BARRIER) cta->thread[t].wait = WVP_RUNNING;
    cta->at_barrier = 0;
    for (uint32_t w = 0; w * 32 < cta->nthreads; w++) s->warps[w].stopped = 0;
    s->warp = 0;
    return 1;
}
