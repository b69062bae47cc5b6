/* ---- warpvisor kernel prelude -------------------------------------------------------------
 * The runtime every generated kernel shares: fleet state, the memory layout, traps, and one
 * named helper per WebAssembly operator whose semantics C does not give directly.
 * The emitter defines WV_INTERLEAVE, WV_NUM_GLOBALS, WV_NUM_TABLES, WV_TABLE_WORDS,
 * WV_NUM_SEGMENTS, WV_RET_WORDS and WV_HAS_MEMORY before including it, and the dialect block
 * (WV_GLOBAL, WV_CONST, WV_FN, wv_f32_bits, ...) for its target language. */

/* The kernel ABI — status and trap codes, wv_vm, wv_fleet, the per-VM accessors WV_STK, WV_GLB,
 * WV_RET, WV_TABLE_WORD, WV_TABLE_SIZE, WV_DROPPED and the image offsets — precedes this
 * prelude, generated from warpvisor::abi. */
#define WV_TABLE(t, i) WV_TABLE_WORD(wv_table_base[t] + (i))
#define WV_MEM_BYTES() ((uint64_t)f->vms[vm].mem_pages << 16)

/* Byte address of memory offset `ea` of VM `vm` (DESIGN.md, decision 2). */
WV_FN uint64_t wv_cell(const wv_fleet *f, uint32_t vm, uint64_t ea) {
#if WV_INTERLEAVE == 0
  return (uint64_t)vm * f->mem_stride + ea;
#else
  return (ea / WV_INTERLEAVE) * ((uint64_t)f->num_vms * WV_INTERLEAVE) + (uint64_t)vm * WV_INTERLEAVE +
         ea % WV_INTERLEAVE;
#endif
}

/* `n` (1, 2, 4 or 8) little-endian bytes contiguous at `p`: a host reads them as one unaligned
 * word; OpenCL as one word of alignment 1 (clang) or through vloadn; CUDA as one word where
 * aligned (GPUs fault on misaligned words), else bytewise. */
#if !WV_HOST
/* Guest memory is read and written in words of every width over the same bytes, so its word
 * types must alias each other: C's aliasing rules would let a device compiler's type-based
 * alias analysis reorder a 4-byte store and an 8-byte load of the same bytes. */
typedef uint64_t __attribute__((may_alias)) wv_word64;
typedef uint32_t __attribute__((may_alias)) wv_word32;
typedef uint16_t __attribute__((may_alias)) wv_word16;
#endif
#if WV_HOST
WV_FN uint64_t wv_bytes_get(const uint8_t *p, uint32_t n) { uint64_t v = 0; __builtin_memcpy(&v, p, n); return v; }
WV_FN void wv_bytes_put(uint8_t *p, uint32_t n, uint64_t v) { __builtin_memcpy(p, &v, n); }
#elif WV_VLOAD_BYTES && defined(__clang__)
/* OpenCL under clang (PoCL and most device compilers): words through types of alignment 1,
 * which clang accesses as one unaligned word where the device allows it (a CPU) and splits
 * where it does not. Not vstoren: PoCL's stores each byte, and LLVM vectorised those byte
 * stores into shifts and byte packs (perf annotate of PHash-Modified's kernel). Little-endian
 * devices only (the dialect checks), so the bytes' order is the word's. */
typedef uint64_t __attribute__((may_alias, aligned(1))) wv_unaligned64;
typedef uint32_t __attribute__((may_alias, aligned(1))) wv_unaligned32;
typedef uint16_t __attribute__((may_alias, aligned(1))) wv_unaligned16;
WV_FN uint64_t wv_bytes_get(WV_GLOBAL const uint8_t *p, uint32_t n) {
  if (n == 8) return *(WV_GLOBAL const wv_unaligned64 *)p;
  if (n == 4) return *(WV_GLOBAL const wv_unaligned32 *)p;
  if (n == 2) return *(WV_GLOBAL const wv_unaligned16 *)p;
  return *p;
}
WV_FN void wv_bytes_put(WV_GLOBAL uint8_t *p, uint32_t n, uint64_t v) {
  if (n == 8) { *(WV_GLOBAL wv_unaligned64 *)p = v; return; }
  if (n == 4) { *(WV_GLOBAL wv_unaligned32 *)p = (uint32_t)v; return; }
  if (n == 2) { *(WV_GLOBAL wv_unaligned16 *)p = (uint16_t)v; return; }
  *p = (uint8_t)v;
}
#elif WV_VLOAD_BYTES
/* OpenCL elsewhere: vloadn of uchar is defined at any address, so the device compiler picks
 * the access. */
WV_FN uint64_t wv_bytes_get(WV_GLOBAL const uint8_t *p, uint32_t n) {
  if (n == 8) return as_ulong(vload8(0, p));
  if (n == 4) return as_uint(vload4(0, p));
  if (n == 2) return as_ushort(vload2(0, p));
  return *p;
}
WV_FN void wv_bytes_put(WV_GLOBAL uint8_t *p, uint32_t n, uint64_t v) {
  if (n == 8) { vstore8(as_uchar8(v), 0, p); return; }
  if (n == 4) { vstore4(as_uchar4((uint32_t)v), 0, p); return; }
  if (n == 2) { vstore2(as_uchar2((uint16_t)v), 0, p); return; }
  *p = (uint8_t)v;
}
#else
WV_FN uint64_t wv_bytes_get(WV_GLOBAL const uint8_t *p, uint32_t n) {
  if (((uint64_t)p & (n - 1)) == 0) {
    if (n == 8) return *(WV_GLOBAL const wv_word64 *)p;
    if (n == 4) return *(WV_GLOBAL const wv_word32 *)p;
    if (n == 2) return *(WV_GLOBAL const wv_word16 *)p;
    return *p;
  }
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
WV_FN void wv_bytes_put(WV_GLOBAL uint8_t *p, uint32_t n, uint64_t v) {
  if (((uint64_t)p & (n - 1)) == 0) {
    if (n == 8) { *(WV_GLOBAL wv_word64 *)p = v; return; }
    if (n == 4) { *(WV_GLOBAL wv_word32 *)p = (uint32_t)v; return; }
    if (n == 2) { *(WV_GLOBAL wv_word16 *)p = (uint16_t)v; return; }
    *p = (uint8_t)v;
    return;
  }
  for (uint32_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
#endif

/* A VM's memory seen from its first cell `mb`: cell bytes are contiguous (interleave 0), or
 * WV_INTERLEAVE bytes wide and `mrow` bytes apart (the VM's next cell follows every other
 * VM's). */
#if WV_INTERLEAVE == 0
#define WV_CELL_AT(ea, mrow) (ea)
#else
#define WV_CELL_AT(ea, mrow) ((ea) / WV_INTERLEAVE * (mrow) + (ea) % WV_INTERLEAVE)
#endif
WV_FN WV_GLOBAL uint8_t *wv_mem_base(const wv_fleet *f, uint32_t vm) {
#if WV_INTERLEAVE == 0
  return f->mem + (uint64_t)vm * f->mem_stride;
#else
  return f->mem + (uint64_t)vm * WV_INTERLEAVE;
#endif
}
WV_FN uint64_t wv_mem_row(const wv_fleet *f) { return (uint64_t)f->num_vms * WV_INTERLEAVE; }

/* Reads `n` (1, 2, 4 or 8) little-endian bytes at `ea`; the caller has bounds-checked. */
WV_FN uint64_t wv_load_cells(WV_GLOBAL const uint8_t *mb, uint64_t mrow, uint64_t ea, uint32_t n) {
#if WV_INTERLEAVE == 0
  (void)mrow;
  return wv_bytes_get(mb + ea, n);
#else
  if (ea % WV_INTERLEAVE + n <= WV_INTERLEAVE) return wv_bytes_get(mb + WV_CELL_AT(ea, mrow), n);
  /* An aligned 8-byte value over two 4-byte cells. */
  if (WV_INTERLEAVE == 4 && n == 8 && ea % 4 == 0)
    return wv_bytes_get(mb + WV_CELL_AT(ea, mrow), 4) | wv_bytes_get(mb + WV_CELL_AT(ea + 4, mrow), 4) << 32;
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; i++) v |= (uint64_t)mb[WV_CELL_AT(ea + i, mrow)] << (8 * i);
  return v;
#endif
}

/* Writes the `n` (1, 2, 4 or 8) low bytes of `v` at `ea`; the caller has bounds-checked. */
WV_FN void wv_store_cells(WV_GLOBAL uint8_t *mb, uint64_t mrow, uint64_t ea, uint32_t n, uint64_t v) {
#if WV_INTERLEAVE == 0
  (void)mrow;
  wv_bytes_put(mb + ea, n, v);
#else
  if (ea % WV_INTERLEAVE + n <= WV_INTERLEAVE) {
    wv_bytes_put(mb + WV_CELL_AT(ea, mrow), n, v);
  } else if (WV_INTERLEAVE == 4 && n == 8 && ea % 4 == 0) {
    wv_bytes_put(mb + WV_CELL_AT(ea, mrow), 4, v);
    wv_bytes_put(mb + WV_CELL_AT(ea + 4, mrow), 4, v >> 32);
  } else {
    for (uint32_t i = 0; i < n; i++) mb[WV_CELL_AT(ea + i, mrow)] = (uint8_t)(v >> (8 * i));
  }
#endif
}

WV_FN uint64_t wv_read(const wv_fleet *f, uint32_t vm, uint64_t ea, uint32_t n) {
  return wv_load_cells(wv_mem_base(f, vm), wv_mem_row(f), ea, n);
}
WV_FN void wv_write(const wv_fleet *f, uint32_t vm, uint64_t ea, uint32_t n, uint64_t v) {
  wv_store_cells(wv_mem_base(f, vm), wv_mem_row(f), ea, n, v);
}

/* Copies `n` bytes of `src` into the VM's memory at `ea` (memory.init, and a reset's data
 * segments where no dirty-page map applies); the caller has bounds-checked. */
WV_FN void wv_copy_into_cells(WV_GLOBAL uint8_t *mb, uint64_t mrow, uint64_t ea,
                              WV_GLOBAL const uint8_t *src, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) mb[WV_CELL_AT(ea + i, mrow)] = src[i];
  (void)mrow;
}

/* Dirty pages (interleave 0, every device): every write to guest memory marks its page in the
 * fleet's map (wv_fleet.dirty), so a reset restores only what a VM wrote instead of all the
 * memory it might have written (Rust guests reserve a 1 MiB shadow stack and touch a few pages
 * of it). The host marks what it writes (backend/fleet.rs). With WV_DIRTY_BY_MMU (cpu with guard
 * regions, OpenCL CPU devices) the host fills the map from the MMU's record before each reset
 * instead. */
#ifndef WV_DIRTY_BY_MMU
#define WV_DIRTY_BY_MMU 0
#endif
#if WV_INTERLEAVE == 0
#define WV_DIRTY_PAGES 1
WV_FN WV_GLOBAL uint8_t *wv_dirty_base(const wv_fleet *f, uint32_t vm) {
  return f->dirty + (((uint64_t)vm * f->mem_stride) >> WV_DIRTY_SHIFT);
}
/* Marks the pages of [ea, ea + n), n > 0: bulk operators. */
WV_FN void wv_mark_dirty(WV_GLOBAL uint8_t *db, uint64_t ea, uint64_t n) {
  if (WV_DIRTY_BY_MMU) return;
  for (uint64_t p = ea >> WV_DIRTY_SHIFT; p <= (ea + n - 1) >> WV_DIRTY_SHIFT; p++) db[p] = 1;
}
/* A store of at most 8 bytes marks the page it starts in; a restore covers 7 bytes more. The
 * mark is read first and written only when clear: the map is small enough to stay in L1 and
 * the branch is almost never taken, which costs less than a store per store (memory micro
 * 0.091 -> 0.072 s, no marks 0.061 s) and does not mispredict on scattered stores as a
 * last-page cache did. */
#define WV_DIRTY(ea) do { WV_GLOBAL uint8_t *d_ = &db[(ea) >> WV_DIRTY_SHIFT]; \
  if (__builtin_expect(!*d_, 0)) *d_ = 1; } while (0)
#if WV_DIRTY_BY_MMU
/* The host finds the written pages through the MMU instead (backend/write_watch.rs, a
 * compiler flag of cpu kernels with guard regions and of OpenCL CPU devices' kernels where
 * Linux offers it): no store marks. */
#undef WV_DIRTY
#define WV_DIRTY(ea) ((void)0)
#endif
#else
#define WV_DIRTY_PAGES 0
#define WV_DIRTY(ea) ((void)0)
#endif

/* Bulk zeroing and copying of guest bytes: the C library's on the host, word loops on devices
 * (whose compilers need not provide them for global memory). */
#if WV_HOST
#define wv_zero_bytes(p, n) __builtin_memset((p), 0, (n))
#define wv_copy_bytes(d, s, n) __builtin_memcpy((d), (s), (n))
#else
WV_FN void wv_zero_bytes(WV_GLOBAL uint8_t *p, uint64_t n) {
  uint64_t i = 0;
  for (; i < n && ((uint64_t)(p + i) & 7); i++) p[i] = 0;
  for (; i + 8 <= n; i += 8) *(WV_GLOBAL wv_word64 *)(p + i) = 0;
  for (; i < n; i++) p[i] = 0;
}
WV_FN void wv_copy_bytes(WV_GLOBAL uint8_t *d, WV_GLOBAL const uint8_t *s, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) d[i] = s[i];
}
#endif

/* ---- the VM context ---------------------------------------------------------------------- */
/* A running VM's functions all receive one pointer, `c`, to its context: the VM's globals
 * themselves (copied in from the fleet when the VM starts running and back whenever it stops),
 * its memory view, its stack floor and its place in the fleet. Globals at fixed offsets of the
 * pointer a function receives stay cheap, as wasm2c's instance fields are; reached through a
 * pointer recomputed from the fleet in every function, each call paid for the recomputation and
 * each global after a store reloaded it (fib micro: 3x slower). With direct calls (cpu) the
 * entry shim that starts a VM's fastcalls keeps the context on its stack; with continuations
 * (every device) the trampoline keeps it for as long as it runs the VM, in private memory on
 * the GPU backends. */
/* A guard fault on a device resumes at the fault point around the trampoline
 * (wv_trampoline_guarded), which cannot know the globals the compiler keeps in registers: there every global.set also
 * writes the VM's copy in the fleet (a guest store through a byte pointer may alias it, so
 * the write stays ahead of every later guest access), and the context is never written
 * back. */
#define WV_GLOBALS_WRITE_THROUGH (WV_GUARD_REGIONS && !WV_HOST)
typedef struct wv_ctx {
  uint64_t g[WV_NUM_GLOBALS];
#if WV_GLOBALS_WRITE_THROUGH
  WV_GLOBAL uint64_t *gw;
#endif
  wv_fleet *f;
  WV_GLOBAL uint8_t *mb;
  WV_GLOBAL uint8_t *db;
  uint64_t stack_floor;
  uint32_t vm;
  /* Set when a continuation has made a call through the trampoline: its callers, C frames
   * that called it as a C function, write their frames and return (WV_YIELDED). */
  uint32_t yielding;
#if WV_TRACE
  /* The VM's trace words not yet given to the host (simt/trace.rs), and where the current
   * block's records start. */
  uint32_t tn, tblk;
  uint32_t tb[WV_TRACE_WORDS];
#endif
} wv_ctx;
#if WV_TRACE
static void wv_trace_flush(wv_ctx *c);
#endif
#define WV_CTX_PARAMS wv_ctx *c
#define WV_CTX_ARGS c
/* The fleet and the VM's index, for the cold paths (traps, table and bulk operators). */
#define WV_CTX_VIEW() wv_fleet *const f = c->f; const uint32_t vm = c->vm; (void)f; (void)vm
/* A context made from the fleet (before an unwind point, with direct calls), left at every
 * exit. */
#define WV_CTX_ENTER() wv_ctx ctx_; wv_ctx *const c = &ctx_; wv_ctx_enter(c, f, vm)
#define WV_CTX_LEAVE() wv_ctx_leave(c)
WV_FN void wv_ctx_enter(wv_ctx *c, wv_fleet *f, uint32_t vm) {
  for (uint32_t g = 0; g < WV_NUM_GLOBALS; g++) c->g[g] = WV_GLB(g);
#if WV_GLOBALS_WRITE_THROUGH
  c->gw = &WV_GLB(0); /* interleave 0: the VM's globals are contiguous */
#endif
  c->f = f;
  c->vm = vm;
  c->yielding = 0;
  c->mb = wv_mem_base(f, vm);
#if WV_DIRTY_PAGES
  c->db = wv_dirty_base(f, vm);
#else
  c->db = 0;
#endif
#if WV_HOST
  c->stack_floor = f->stack_floor;
#else
  c->stack_floor = 0;
#endif
#if WV_TRACE
  c->tn = 0;
  c->tblk = 0;
#endif
}
WV_FN void wv_ctx_leave(wv_ctx *c) {
  wv_fleet *const f = c->f;
  const uint32_t vm = c->vm;
#if !WV_GLOBALS_WRITE_THROUGH
  for (uint32_t g = 0; g < WV_NUM_GLOBALS; g++) WV_GLB(g) = c->g[g];
#endif
#if WV_TRACE
  /* A trap may leave the rest of its block's reserved records unwritten: keep its id only. */
  if (c->tn && f->vms[vm].status == WV_TRAPPED) c->tn = c->tblk + 1;
  if (c->tn) wv_trace_flush(c);
#endif
}
#define WV_G(i) c->g[(i)]
#if WV_GLOBALS_WRITE_THROUGH
#define WV_G_SET(i, x) do { uint64_t g_ = (x); c->g[(i)] = g_; c->gw[(i)] = g_; } while (0)
#else
#define WV_G_SET(i, x) (c->g[(i)] = (x))
#endif
/* Every function keeps its VM's memory view in locals: a store through a byte pointer may
 * alias anything, so reading c->mb at each access would reload it after every store. */
#define WV_MEM_VIEW() WV_GLOBAL uint8_t *const mb = c->mb; const uint64_t mrow = wv_mem_row(f); \
  (void)mb; (void)mrow; WV_CTX_DIRTY_VIEW()
#if WV_DIRTY_PAGES
#define WV_CTX_DIRTY_VIEW() WV_GLOBAL uint8_t *const db = c->db; (void)db
#else
#define WV_CTX_DIRTY_VIEW() do { } while (0)
#endif
/* The functions the trampoline starts (continuations `wv_kN`, entry shims `wv_eN`): with
 * direct calls each makes the context (and its unwind point) itself; with continuations they
 * take the trampoline's. */
#if WV_DIRECT_CALLS
#define WV_START_PARAMS wv_fleet *f, uint32_t vm
#define WV_START_ARGS f, vm
#define WV_START() WV_CTX_ENTER()
#define WV_START_LEAVE() WV_CTX_LEAVE()
#define WV_TRAMPOLINE_ENTER() do { } while (0)
#define WV_TRAMPOLINE_LEAVE() do { } while (0)
#else
#define WV_START_PARAMS wv_ctx *c
#define WV_START_ARGS c
#define WV_START() WV_CTX_VIEW()
#define WV_START_LEAVE() do { } while (0)
#define WV_TRAMPOLINE_ENTER() WV_CTX_ENTER()
#define WV_TRAMPOLINE_LEAVE() WV_CTX_LEAVE()
#endif

/* ---- traps ------------------------------------------------------------------------------- */
WV_FN void wv_trap(const wv_fleet *f, uint32_t vm, uint32_t kind) {
  f->vms[vm].status = WV_TRAPPED;
  f->vms[vm].trap = kind;
}
#if WV_DIRECT_CALLS
/* With direct calls a VM's fastcalls are C frames only, down to the entry shim that started
 * them: a trap (or a host stop) jumps straight back to the shim's unwind point, so no caller
 * checks the VM's status after a call. __builtin_setjmp saves only what the jump needs. */
#define WV_UNWIND_POINT() void *wv_jb_[5]; if (__builtin_setjmp(wv_jb_)) { WV_CTX_LEAVE(); return; } \
  f->unwind = (uint64_t)(uintptr_t)wv_jb_; f->running = vm
/* Out of line, so that the fastcalls stay ordinary functions (an inline jump would give each a
 * non-local exit: a frame pointer and a slower epilogue, 50% slower calls measured). */
static __attribute__((noinline, noreturn, cold)) void wv_unwind_to(uint64_t point) {
  __builtin_longjmp((void **)(uintptr_t)point, 1);
}
#if WV_GUARD_REGIONS
/* A guard fault resumes at the entry shim's unwind point from code in which the compiler sees
 * no call (a load), so a shim whose fastcall were inlined would lose its unwind point's
 * receiver: shims call their fastcall through an opaque pointer. */
#define WV_OPAQUE(fn) (*({ __typeof__(&fn) volatile p_ = &fn; p_; }))
/* Where the host's fault handler resumes a worker whose VM touched a guard region: the VM's
 * unwind point (the handler has recorded the trap). */
__attribute__((noreturn)) void wv_fault_unwind(uint64_t point) { wv_unwind_to(point); }
#else
#define WV_OPAQUE(fn) fn
#endif
#define WV_UNWIND(f) wv_unwind_to((f)->unwind)
/* A trap is one call to a cold function: the fastcalls stay small enough for the compiler to
 * inline them (into themselves too, as it does wasm2c's recursive functions), and nothing the
 * trap needs is loaded on the hot path. */
static __attribute__((noinline, noreturn, cold)) void wv_ctx_trap(const wv_ctx *c, uint32_t kind) {
  wv_trap(c->f, c->vm, kind);
  wv_unwind_to(c->f->unwind);
}
#define WV_TRAP(k) wv_ctx_trap(c, (k))
/* After a call: the callee may have grown memory. */
#define WV_AFTER_CALL() do { msz = WV_MEM_BYTES(); } while (0)
#else
#define WV_UNWIND_POINT() do { } while (0)
#define WV_OPAQUE(fn) fn
/* Every function body ends with the label `wv_unwind`, which returns to its caller. */
#define WV_TRAP(k) do { wv_trap(f, vm, (k)); goto wv_unwind; } while (0)
/* After a call: stop if the callee trapped; the callee may have grown memory. */
#define WV_AFTER_CALL() do { if (v->status != WV_RUNNING) goto wv_unwind; msz = WV_MEM_BYTES(); } while (0)
#endif
/* Traps with the kind a helper returned, if any (0 = no trap). */
#define WV_CHECK(e) do { uint32_t k_ = (e); if (k_) WV_TRAP(k_); } while (0)

/* One tick of fuel, at every function entry and loop header of a metered kernel: a VM that
 * never finishes stops with out_of_fuel instead of holding the fleet forever. */
#if WV_METER_FUEL
#define WV_FUEL() do { if (v->fuel == 0) WV_TRAP(WV_TRAP_OUT_OF_FUEL); v->fuel--; } while (0)
#else
#define WV_FUEL() do { } while (0)
#endif

/* ---- memory access ----------------------------------------------------------------------- */
#if WV_GUARD_REGIONS
/* Guard regions (cpu, --memory-checks guard): a VM's memory is a reservation of
 * f->mem_stride = 4 GiB + WV_GUARD_BYTES of which only its current size is readable and
 * writable (memory.grow and the reset change that). addr < 4 GiB, so addr + offset + width
 * stays inside the reservation whenever offset + width <= WV_GUARD_BYTES: such an access
 * outside the memory faults, and the host's fault handler (backend/cpu/guard.rs) makes it the
 * VM's memory_out_of_bounds trap and resumes at wv_fault_unwind. Larger static offsets keep
 * the explicit check. A load's value is kept alive (as wasm2c's FORCE_READ) so that the
 * compiler cannot drop a load that must trap. */
#if WV_HOST
#include <sys/mman.h>
#endif
#define WV_GUARDED(offset, width) ((uint64_t)(offset) + (width) <= WV_GUARD_BYTES)
#define WV_KEEP(x) __asm__("" : : "r"(x))
#define WV_LOAD(dst, conv, addr, offset, width) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  if (!WV_GUARDED(offset, width) && ea_ + (width) > msz) WV_TRAP(WV_TRAP_MEMORY_OOB); \
  uint64_t raw_ = wv_load_cells(mb, mrow, ea_, (width)); WV_KEEP(raw_); dst = conv(raw_); } while (0)
#define WV_STORE(addr, offset, width, value) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  if (!WV_GUARDED(offset, width) && ea_ + (width) > msz) WV_TRAP(WV_TRAP_MEMORY_OOB); WV_DIRTY(ea_); \
  wv_store_cells(mb, mrow, ea_, (width), (uint64_t)(value)); } while (0)
/* Stores of a basic block through the same base local share marks (codegen/function/marks.rs):
 * the first marks the pages 2 KiB below and above its address (which include its own), the
 * ones within 2 KiB of it mark nothing. Emitted only where offset + 2 KiB stays within the
 * guard, so both marks lie in the VM's own slice of the map. */
#define WV_STORE_SPAN(addr, offset, width, value) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  WV_DIRTY(ea_ > 2048 ? ea_ - 2048 : 0); WV_DIRTY(ea_ + 2047); \
  wv_store_cells(mb, mrow, ea_, (width), (uint64_t)(value)); } while (0)
#define WV_STORE_MARKED(addr, offset, width, value) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  wv_store_cells(mb, mrow, ea_, (width), (uint64_t)(value)); } while (0)
#if WV_HOST
/* Makes pages [from, to) of VM `vm`'s memory accessible (from < to) or inaccessible
 * (from > to: pages [to, from)); nonzero when the system refused. */
WV_FN int wv_guard_resize(const wv_fleet *f, uint32_t vm, uint64_t from, uint64_t to) {
  if (from == to) return 0;
  uint64_t lo = from < to ? from : to, hi = from < to ? to : from;
  return mprotect(wv_mem_base(f, vm) + (lo << 16), (hi - lo) << 16,
                  from < to ? PROT_READ | PROT_WRITE : PROT_NONE);
}
#else
/* A device computing in host memory (OpenCL on an x86-64 CPU, backend/opencl/guard.rs)
 * cannot change page protection: a grow or a reset only changes the VM's size, and the host's
 * fault handler opens a page below that size when the VM first touches it. */
WV_FN int wv_guard_resize(const wv_fleet *f, uint32_t vm, uint64_t from, uint64_t to) {
  (void)f; (void)vm; (void)from; (void)to;
  return 0;
}
/* Where a fault outside a VM's memory resumes its device thread: wv_trampoline_guarded calls
 * wv_fault_point, a setjmp of its own (OpenCL C cannot call __builtin_setjmp, whose buffer is
 * in no address space OpenCL C can name, and PoCL links no library setjmp). It records the
 * callee-saved registers, its stack pointer and return address and returns 0; the record is
 * published in the VM's control block, and the host's fault handler resumes the thread as if
 * wv_fault_point returned 1 (backend/opencl/guard.rs), which traps the VM. Record: rbx, rbp,
 * r12-r15, rsp, return address. */
__attribute__((naked, noinline, returns_twice)) int wv_fault_point(uint64_t *record) {
  __asm__("movq %rbx, 0(%rdi)\n\tmovq %rbp, 8(%rdi)\n\tmovq %r12, 16(%rdi)\n\t"
          "movq %r13, 24(%rdi)\n\tmovq %r14, 32(%rdi)\n\tmovq %r15, 40(%rdi)\n\t"
          "leaq 8(%rsp), %rax\n\tmovq %rax, 48(%rdi)\n\tmovq (%rsp), %rax\n\t"
          "movq %rax, 56(%rdi)\n\txorl %eax, %eax\n\tret");
}
/* The fault point lives in a small frame of its own around the trampoline, which is never
 * inlined into it: a returns_twice call constrains the code of the whole function it is in
 * (a fault point inside the trampoline, into which the device compiler inlines the guest's
 * functions, left PoCL's code for them slower, and in differential seed 30 wrong). The second
 * return needs only the fleet and the VM; the guest's globals are already in the fleet
 * (WV_GLOBALS_WRITE_THROUGH) and its memory is where the fault left it. */
#define WV_TRAMPOLINE_ATTRS __attribute__((noinline))
WV_FUNC WV_TRAMPOLINE_ATTRS void wv_trampoline(wv_fleet *f, uint32_t vm);
WV_FUNC __attribute__((noinline)) void wv_trampoline_guarded(wv_fleet *f, uint32_t vm) {
  WV_GLOBAL wv_vm *const v = &f->vms[vm];
  uint64_t point[8];
  if (wv_fault_point(point)) {
    wv_trap(f, vm, WV_TRAP_MEMORY_OOB);
    v->unwind = 0;
    return;
  }
  v->unwind = (uint64_t)(size_t)point;
  wv_trampoline(f, vm);
  v->unwind = 0;
}
#define WV_RUN_TRAMPOLINE(f, vm) wv_trampoline_guarded((f), (vm))
#endif
#else
/* ea = addr + offset, trapping unless [ea, ea + width) lies in the VM's memory. */
#define WV_LOAD(dst, conv, addr, offset, width) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  if (ea_ + (width) > msz) WV_TRAP(WV_TRAP_MEMORY_OOB); dst = conv(wv_load_cells(mb, mrow, ea_, (width))); } while (0)
#define WV_STORE(addr, offset, width, value) do { uint64_t ea_ = (uint64_t)(addr) + (offset); \
  if (ea_ + (width) > msz) WV_TRAP(WV_TRAP_MEMORY_OOB); WV_DIRTY(ea_); \
  wv_store_cells(mb, mrow, ea_, (width), (uint64_t)(value)); } while (0)
#endif

/* How wv_run_vm starts the trampoline: directly, or under a device's fault point (above). */
#ifndef WV_RUN_TRAMPOLINE
#define WV_TRAMPOLINE_ATTRS
#define WV_RUN_TRAMPOLINE(f, vm) wv_trampoline((f), (vm))
#endif

#define wv_u8_s32(x) ((uint32_t)(int32_t)(int8_t)(x))
#define wv_u16_s32(x) ((uint32_t)(int32_t)(int16_t)(x))
#define wv_u8_s64(x) ((uint64_t)(int64_t)(int8_t)(x))
#define wv_u16_s64(x) ((uint64_t)(int64_t)(int16_t)(x))
#define wv_u32_s64(x) ((uint64_t)(int64_t)(int32_t)(x))
#define wv_as_u32(x) ((uint32_t)(x))
#define wv_as_u64(x) ((uint64_t)(x))
#define wv_as_f32(x) wv_f32_from_bits((uint32_t)(x))
#define wv_as_f64(x) wv_f64_from_bits((uint64_t)(x))

WV_FN uint32_t wv_memory_grow(const wv_fleet *f, uint32_t vm, uint32_t delta) {
  uint32_t old = f->vms[vm].mem_pages;
  if ((uint64_t)old + delta > f->max_pages) return 0xffffffffu;
#if WV_GUARD_REGIONS
  if (wv_guard_resize(f, vm, old, (uint64_t)old + delta) != 0) return 0xffffffffu;
#endif
  f->vms[vm].mem_pages = old + delta;
  return old;
}

WV_FN uint32_t wv_memory_fill(const wv_fleet *f, uint32_t vm, uint32_t d, uint32_t val, uint32_t n) {
  if ((uint64_t)d + n > WV_MEM_BYTES()) return WV_TRAP_MEMORY_OOB;
#if WV_DIRTY_PAGES
  if (n) wv_mark_dirty(wv_dirty_base(f, vm), d, n);
#endif
#if WV_HOST && WV_INTERLEAVE == 0
  __builtin_memset(f->mem + wv_cell(f, vm, d), (int)(uint8_t)val, n);
#else
  /* The VM's first cell read once: a byte store may alias the fleet, so `f->mem` inside the
   * loop was reloaded after every byte (perf annotate of PHash's PoCL kernel). */
  WV_GLOBAL uint8_t *mb = wv_mem_base(f, vm);
  const uint64_t mrow = wv_mem_row(f);
  for (uint64_t ea = d; ea < (uint64_t)d + n; ea++) mb[WV_CELL_AT(ea, mrow)] = (uint8_t)val;
  (void)mrow;
#endif
  return 0;
}

WV_FN uint32_t wv_memory_copy(const wv_fleet *f, uint32_t vm, uint32_t d, uint32_t s, uint32_t n) {
  uint64_t size = WV_MEM_BYTES();
  if ((uint64_t)d + n > size || (uint64_t)s + n > size) return WV_TRAP_MEMORY_OOB;
#if WV_DIRTY_PAGES
  if (n) wv_mark_dirty(wv_dirty_base(f, vm), d, n);
#endif
#if WV_HOST && WV_INTERLEAVE == 0
  __builtin_memmove(f->mem + wv_cell(f, vm, d), f->mem + wv_cell(f, vm, s), n);
#elif WV_VLOAD_BYTES && WV_INTERLEAVE == 0
  /* Eight bytes at a time, each chunk read before it is written, in the direction that never
   * overwrites a source byte before reading it. */
  WV_GLOBAL uint8_t *dp = wv_mem_base(f, vm) + d;
  WV_GLOBAL const uint8_t *sp = dp - d + s;
  uint32_t i;
  if (d <= s) {
    for (i = 0; i + 8 <= n; i += 8) wv_bytes_put(dp + i, 8, wv_bytes_get(sp + i, 8));
    for (; i < n; i++) dp[i] = sp[i];
  } else {
    for (i = n; i >= 8; i -= 8) wv_bytes_put(dp + i - 8, 8, wv_bytes_get(sp + i - 8, 8));
    for (; i > 0; i--) dp[i - 1] = sp[i - 1];
  }
#else
  WV_GLOBAL uint8_t *mb = wv_mem_base(f, vm);
  const uint64_t mrow = wv_mem_row(f);
  if (d <= s) {
    for (uint64_t i = 0; i < n; i++) mb[WV_CELL_AT(d + i, mrow)] = mb[WV_CELL_AT(s + i, mrow)];
  } else {
    for (uint64_t i = n; i > 0; i--) mb[WV_CELL_AT(d + i - 1, mrow)] = mb[WV_CELL_AT(s + i - 1, mrow)];
  }
  (void)mrow;
#endif
  return 0;
}

WV_FN uint32_t wv_memory_init(const wv_fleet *f, uint32_t vm, uint32_t seg, uint32_t d, uint32_t s, uint32_t n) {
  uint64_t len = WV_DROPPED(seg) ? 0 : wv_data_len[seg];
  if ((uint64_t)s + n > len || (uint64_t)d + n > WV_MEM_BYTES()) return WV_TRAP_MEMORY_OOB;
#if WV_DIRTY_PAGES
  if (n) wv_mark_dirty(wv_dirty_base(f, vm), d, n);
#endif
  wv_copy_into_cells(wv_mem_base(f, vm), wv_mem_row(f), d, f->data_blob + wv_data_base[seg] + s, n);
  return 0;
}

/* ---- tables ------------------------------------------------------------------------------ */
WV_FN uint32_t wv_table_get(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t i, uint32_t *out) {
  if (i >= WV_TABLE_SIZE(t)) return WV_TRAP_TABLE_OOB;
  *out = WV_TABLE(t, i);
  return 0;
}

WV_FN uint32_t wv_table_set(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t i, uint32_t r) {
  if (i >= WV_TABLE_SIZE(t)) return WV_TRAP_TABLE_OOB;
  WV_TABLE(t, i) = r;
  return 0;
}

WV_FN uint32_t wv_table_grow(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t init, uint32_t delta) {
  uint32_t old = WV_TABLE_SIZE(t);
  if ((uint64_t)old + delta > wv_table_cap[t]) return 0xffffffffu;
  for (uint32_t i = 0; i < delta; i++) WV_TABLE(t, old + i) = init;
  WV_TABLE_SIZE(t) = old + delta;
  return old;
}

WV_FN uint32_t wv_table_fill(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t d, uint32_t r, uint32_t n) {
  if ((uint64_t)d + n > WV_TABLE_SIZE(t)) return WV_TRAP_TABLE_OOB;
  for (uint32_t i = 0; i < n; i++) WV_TABLE(t, d + i) = r;
  return 0;
}

WV_FN uint32_t wv_table_copy(const wv_fleet *f, uint32_t vm, uint32_t dt, uint32_t st, uint32_t d, uint32_t s, uint32_t n) {
  if ((uint64_t)d + n > WV_TABLE_SIZE(dt) || (uint64_t)s + n > WV_TABLE_SIZE(st)) return WV_TRAP_TABLE_OOB;
  if (d <= s) {
    for (uint32_t i = 0; i < n; i++) WV_TABLE(dt, d + i) = WV_TABLE(st, s + i);
  } else {
    for (uint32_t i = n; i > 0; i--) WV_TABLE(dt, d + i - 1) = WV_TABLE(st, s + i - 1);
  }
  return 0;
}

WV_FN uint32_t wv_table_init(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t seg, uint32_t d, uint32_t s, uint32_t n) {
  uint64_t len = WV_DROPPED(WV_NUM_DATAS + seg) ? 0 : wv_elem_len[seg];
  if ((uint64_t)s + n > len || (uint64_t)d + n > WV_TABLE_SIZE(t)) return WV_TRAP_TABLE_OOB;
  for (uint32_t i = 0; i < n; i++) WV_TABLE(t, d + i) = f->elem_blob[wv_elem_base[seg] + s + i];
  return 0;
}

/* The function a `call_indirect` reaches: bounds, null and structural signature checks. */
WV_FN uint32_t wv_table_func(const wv_fleet *f, uint32_t vm, uint32_t t, uint32_t i, uint32_t sig, uint32_t *fid) {
  if (i >= WV_TABLE_SIZE(t)) return WV_TRAP_TABLE_OOB;
  uint32_t r = WV_TABLE(t, i);
  if (r == WV_NULL_REF) return WV_TRAP_INDIRECT_NULL;
  if (r >= WV_NUM_FUNCS || wv_func_sig[r] != sig) return WV_TRAP_BAD_SIGNATURE;
  f->vms[vm].indirect_calls++;
  *fid = r;
  return 0;
}

/* ---- continuations ----------------------------------------------------------------------- */
/* A continuation's body (`wv_bN`) takes its frame pointer `fp`, its depth in the VM's call
 * stack `depth` and its resume point as C parameters, its arguments as C parameters too, and
 * returns its results as a C function does: a frame in the VM's stack holds what the body needs
 * to resume, and is written only when the VM leaves the kernel's C frames (a yield).
 * Pushes the frame of a call to `fid` above the caller's frame of `words` words, for a call
 * through the trampoline; the caller then writes the arguments at
 * WV_STK(nfp + WV_FRAME_HEADER + i) and enters it (WV_ENTER). */
#define WV_PUSH_FRAME(nfp, words, fid, nargs) do { nfp = fp + (words); \
  if (depth >= f->max_depth || (uint64_t)nfp + WV_FRAME_HEADER + (nargs) > f->stack_words) \
    WV_TRAP(WV_TRAP_STACK_OVERFLOW); \
  WV_STK(nfp) = fp; WV_STK(nfp + 1) = (fid); WV_STK(nfp + 2) = 0; } while (0)
/* Makes the pushed frame the VM's top frame and starts unwinding the C frames to the
 * trampoline: the callers between see WV_YIELDED. */
#define WV_ENTER(nfp) do { v->fp = nfp; v->depth = depth + 1; v->slow_calls++; c->yielding = 1; } while (0)
/* Before a continuation called as a C function (at depth + 1): the call-depth limit, as
 * WV_PUSH_FRAME checks it. Its frame's room is checked by the callee. */
#define WV_NATIVE_DEPTH() do { if (depth >= f->max_depth) WV_TRAP(WV_TRAP_STACK_OVERFLOW); } while (0)
/* Whether the callee just called as a C function left the kernel's C frames: it made a call
 * through the trampoline (deeper down), or the VM trapped. */
#define WV_YIELDED() (c->yielding || v->status != WV_RUNNING)
/* A callee called as a C function on frame `nfp` yielded: the header of its frame, which only
 * the caller knows (its own frame `fp` and the callee `fid`); the callee wrote its resume
 * point and live values itself. */
#define WV_YIELDED_FRAME(nfp, fid) do { WV_STK(nfp) = fp; WV_STK((nfp) + 1) = (fid); } while (0)
/* An entry shim's start (`wv_eN`, `wv_kN`): the VM's top frame, nothing yielded yet. */
#define WV_FRAME_ENTER() WV_GLOBAL wv_vm *const v = &f->vms[vm]; const uint32_t fp = v->fp; \
  c->yielding = 0
/* Counts the `n` live values a yield point saves in its frame. */
#define WV_SAVED(n) (v->saved_words += (n))

/* Pops the current frame: the VM is done when it was the entry frame. */
WV_FN void wv_pop_frame(const wv_fleet *f, uint32_t vm, uint32_t fp) {
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  uint64_t caller = WV_STK(fp);
  v->depth--;
  if (caller == WV_NO_FRAME) v->status = WV_DONE;
  else v->fp = (uint32_t)caller;
}

/* ---- hand-offs between host and kernel (abi::status) ------------------------------------- */
/* Stops the VM at a hypercall to import `import`: its `nparams` arguments go to the result
 * words, where the host reads them and writes the results; `func` names the caller, which
 * runs next (WV_NO_FRAME: the import was the entry). */
WV_FN void wv_hypercall(const wv_fleet *f, uint32_t vm, uint32_t import, uint32_t nparams) {
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  uint32_t fp = v->fp;
  for (uint32_t i = 0; i < nparams; i++) WV_RET(i) = WV_STK(fp + WV_FRAME_HEADER + i);
  uint64_t caller = WV_STK(fp);
  v->func = caller == WV_NO_FRAME ? WV_NO_FRAME : (uint32_t)WV_STK(caller + 1);
  v->hypercall = import;
  v->status = WV_HYPERCALL;
}

/* Takes back a VM the host handed over: ENTRY builds the entry frame of `func` from the
 * arguments in the result words; RESUME pops the frame of the import the host served (its
 * results are in the result words, where the caller reads them). */
WV_FN void wv_admit(const wv_fleet *f, uint32_t vm) {
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  if (v->status == WV_ENTRY) {
    uint32_t fn = v->func, n = fn < WV_NUM_FUNCS ? wv_func_params[fn] : 0;
    if (WV_FRAME_HEADER + n > f->stack_words) { wv_trap(f, vm, WV_TRAP_STACK_OVERFLOW); return; }
    WV_STK(0) = WV_NO_FRAME; WV_STK(1) = fn; WV_STK(2) = 0;
    for (uint32_t i = 0; i < n; i++) WV_STK(WV_FRAME_HEADER + i) = WV_RET(i);
    v->fp = 0; v->depth = 1; v->status = WV_RUNNING;
  } else if (v->status == WV_RESUME) {
    v->status = WV_RUNNING;
    wv_pop_frame(f, vm, v->fp);
  }
}

/* ---- direct calls (cpu, --calls direct) ------------------------------------------------ */
#if WV_DIRECT_CALLS
/* The host's import service (backend::cpu::HostCalls): runs import `import` for VM `vm`,
 * whose arguments are in `words`, where the results go; nonzero when the VM must stop (a trap
 * or an exit the host recorded). */
typedef uint32_t (*wv_host_fn)(const void *ctx, uint32_t vm, uint32_t import, uint64_t *words,
                               uint32_t nwords);
/* The host's trace sink (backend::cpu::HostCalls::trace): takes VM `vm`'s next `n` words. */
typedef void (*wv_trace_fn)(const void *ctx, uint32_t vm, const uint32_t *words, uint32_t n);
typedef struct { wv_host_fn call; const void *ctx; wv_trace_fn trace; } wv_host;

#if WV_TRACE
/* Tracing (warpvisor simt trace): each VM records the id of every basic block it enters and
 * the effective address of every memory access (simt/blocks.rs says which blocks and which
 * accesses), in its context's buffer; a full buffer, and whatever is left when the VM leaves
 * the kernel, goes to the host. */
static __attribute__((noinline, cold)) void wv_trace_flush(wv_ctx *c) {
  const wv_host *h = (const wv_host *)(uintptr_t)c->f->host;
  if (h != 0 && h->trace != 0) h->trace(h->ctx, c->vm, c->tb, c->tn);
  c->tn = 0;
}
/* Each function's pointer to the current block's records. */
#define WV_TRACE_LOCALS() uint32_t *tr = 0; (void)tr
/* Entering basic block `id`, whose accesses record `n` words: the id and room for them are
 * taken at once, so that an access costs one store (`tr[k]`). */
#define WV_TRACE_BLOCK(id, n) do { if (c->tn + (n) + 1u > WV_TRACE_WORDS) wv_trace_flush(c); \
  c->tblk = c->tn; tr = c->tb + c->tn; c->tn += (n) + 1u; tr[0] = (id); } while (0)
/* Word `k` of the block's records. */
#define WV_TRACE_AT(k, w) (tr[(k)] = (uint32_t)(w))
/* Word `k`: an access at addr + offset (past 4 GiB, which traps, it records 0xffffffff). */
#define WV_TRACE_EA(k, addr, offset) do { uint64_t t_ = (uint64_t)(uint32_t)(addr) + (uint64_t)(offset); \
  tr[(k)] = t_ > 0xffffffffu ? 0xffffffffu : (uint32_t)t_; } while (0)
#endif

#if WV_PROFILE
/* Call counting (warpvisor profile, profile/mod.rs): WV_PROFILE_WORDS counters per call site
 * of the module — its calls, then for a call_indirect up to four (target + 1, calls) pairs and
 * the calls to any further target. Workers share them: relaxed atomics. */
static uint64_t wv_profile_words[WV_PROFILE_SITES * WV_PROFILE_WORDS];
uint64_t *wv_profile_counts(uint64_t *words) {
  *words = (uint64_t)WV_PROFILE_SITES * WV_PROFILE_WORDS;
  return wv_profile_words;
}
#define WV_PROFILE_CALL(site) \
  __atomic_fetch_add(&wv_profile_words[(uint64_t)(site) * WV_PROFILE_WORDS], 1, __ATOMIC_RELAXED)
static __attribute__((noinline)) void wv_profile_indirect(uint32_t site, uint32_t callee) {
  uint64_t *w = &wv_profile_words[(uint64_t)site * WV_PROFILE_WORDS];
  const uint64_t want = (uint64_t)callee + 1;
  __atomic_fetch_add(&w[0], 1, __ATOMIC_RELAXED);
  for (uint32_t k = 0; k < (WV_PROFILE_WORDS - 2) / 2; k++) {
    uint64_t seen = __atomic_load_n(&w[1 + 2 * k], __ATOMIC_RELAXED);
    if (seen == 0 && __atomic_compare_exchange_n(&w[1 + 2 * k], &seen, want, 0, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED))
      seen = want;
    if (seen == want) {
      __atomic_fetch_add(&w[2 + 2 * k], 1, __ATOMIC_RELAXED);
      return;
    }
  }
  __atomic_fetch_add(&w[WV_PROFILE_WORDS - 1], 1, __ATOMIC_RELAXED);
}
#endif

/* Recursion runs on the worker's native stack: a frame below the floor wv_launch set traps.
 * On x86-64 the check reads the stack pointer itself: __builtin_frame_address(0) would give
 * every recursive function a frame pointer (fib micro 0.105 -> 0.103 s). Not a global register
 * variable: binding %rsp to one miscompiled the benchmark programs (they trapped). */
#if defined(__x86_64__)
WV_FN uint64_t wv_stack_address(void) { uint64_t sp; __asm__("movq %%rsp, %0" : "=r"(sp)); return sp; }
#else
WV_FN uint64_t wv_stack_address(void) { return (uint64_t)(uintptr_t)__builtin_frame_address(0); }
#endif
/* Calls the host for an import and waits: this worker runs the import, then the VM goes on
 * (or stops, and its callers unwind). */
WV_FN void wv_call_host(wv_fleet *f, uint32_t vm, uint32_t import, uint64_t *words) {
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  const wv_host *h = (const wv_host *)(uintptr_t)f->host;
#if WV_GUARD_REGIONS
  /* Recursion is stopped by a guard some way below the floor (WV_STACK_CHECK); the host runs
   * on this stack too, in the room between floor and guard, so a VM below the floor that
   * calls the host has overflowed its stack. */
  if (wv_stack_address() < f->stack_floor) {
    wv_trap(f, vm, WV_TRAP_STACK_OVERFLOW);
    WV_UNWIND(f);
  }
#endif
  v->slow_calls++;
  v->hypercall = import;
  if (h == 0 || h->call(h->ctx, vm, import, words, WV_RET_WORDS) != 0) {
    v->status = WV_TRAPPED;
    v->trap = 0; /* the host recorded why */
    WV_UNWIND(f);
  }
}

#if WV_GUARD_REGIONS
/* With guard regions the floor is guarded too: for the launch the host makes pages below it
 * inaccessible, leaving a host call's room between floor and guard (backend/cpu/stack.rs);
 * kernels probe every page of a large frame (-fstack-clash-protection), and a fault in the
 * guard becomes the VM's stack_overflow. No check per call, so recursive functions stay small
 * enough to inline as wasm2c's are. */
#define WV_STACK_CHECK() do { } while (0)
#else
#define WV_STACK_CHECK() do { if (wv_stack_address() < c->stack_floor) WV_TRAP(WV_TRAP_STACK_OVERFLOW); } while (0)
#endif
#endif

/* ---- synchronous imports on a device (--calls direct on OpenCL with fine-grained SVM, CUDA) ---- */
#if WV_SYNC_IMPORTS && !WV_DIRECT_CALLS
/* The control blocks and result words live in memory the host shares while the kernel runs
 * (backend/host_calls.rs polls it). A VM calling an import leaves its arguments in its result words, publishes
 * WV_HOST_CALL in its status and spins until the host answers: RUNNING with the results in the
 * result words, or TRAPPED (the host recorded why), which the caller's WV_AFTER_CALL unwinds.
 * Only recursion and imports that park leave the kernel. */
WV_FN void wv_call_host(wv_fleet *f, uint32_t vm, uint32_t import, uint64_t *words) {
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  v->slow_calls++;
  v->hypercall = import;
  for (uint32_t i = 0; i < WV_RET_WORDS; i++) WV_RET(i) = words[i];
  wv_status_publish(&v->status, WV_HOST_CALL);
  while (wv_status_observe(&v->status) == WV_HOST_CALL) wv_spin_pause();
  for (uint32_t i = 0; i < WV_RET_WORDS; i++) words[i] = WV_MAILBOX_LOAD(WV_RET(i));
}
#endif

#if WV_DIRTY_PAGES
/* End of what restoring dirty page `p` covers: the page and the 7 bytes a store starting in
 * it may write beyond it, within the `clear` bytes the VM may have written. */
WV_FN uint64_t wv_dirty_end(uint64_t p, uint64_t clear) {
  /* By the MMU a store across two pages writes (and so dirties) both: no spill to cover, and
   * restoring into the next page would make a protected page written at every reset. */
  uint64_t end = ((p + 1) << WV_DIRTY_SHIFT) + (WV_DIRTY_BY_MMU ? 0 : 7);
  return end < clear ? end : clear;
}
/* Copies the parts of a data segment (`n` bytes from `src` at `off`) that dirty pages cover:
 * those pages were just cleared; the rest of the segment is still in place. */
WV_FN void wv_restore_segment(WV_GLOBAL uint8_t *mbase, WV_GLOBAL const uint8_t *db, uint64_t clear,
                              uint64_t off, WV_GLOBAL const uint8_t *src, uint64_t n) {
  if (n == 0) return;
  uint64_t first = off >> WV_DIRTY_SHIFT, last = (off + n - 1) >> WV_DIRTY_SHIFT;
  /* The page before may have spilled into the segment's first bytes (marks only). */
#if WV_DIRTY_BY_MMU
  const uint64_t from = first;
#else
  const uint64_t from = first > 0 ? first - 1 : 0;
#endif
  for (uint64_t p = from; p <= last; p++) {
    if (!db[p]) continue;
    uint64_t lo = p << WV_DIRTY_SHIFT, hi = wv_dirty_end(p, clear);
    if (lo < off) lo = off;
    if (hi > off + n) hi = off + n;
    if (lo < hi) wv_copy_bytes(mbase + lo, src + (lo - off), hi - lo);
  }
}
#endif

/* Puts VM `vm` back to the instantiation image (abi::ImageLayout) if the host asked for it
 * (status WV_RESET; a supervisor restarts single VMs while the others run on): memory cleared where
 * earlier runs may have written it (on the host, only the pages they did write), globals, tables and segment flags as instantiation leaves
 * them, active segments copied. Runs on the device: nothing per VM crosses to the host. */
WV_FN void wv_reset_vm(const wv_fleet *f, uint32_t vm) {
  WV_GLOBAL const uint64_t *img = f->image;
  WV_GLOBAL wv_vm *v = &f->vms[vm];
  if (v->status != WV_RESET) return;
  uint64_t limit = (uint64_t)f->max_pages << 16;
  /* The VM can have written only below its memory's size at the end of its last run (memory
   * never shrinks; pages above it were cleared by an earlier reset or never touched, and a
   * fleet's buffers start zeroed): clear that much and no more, so pages a VM never used are
   * never written (they stay out of the resident set). */
  uint64_t used = (uint64_t)v->mem_pages << 16;
  uint64_t clear = used < limit ? used : limit;
  uint64_t pages = img[WV_IMG_PAGES] < f->max_pages ? img[WV_IMG_PAGES] : f->max_pages;
#if WV_DIRTY_PAGES
  /* Only the pages the VM wrote (wv_fleet.dirty); a VM never instantiated (memory size 0)
   * wrote none and gets every segment whole below. */
  WV_GLOBAL uint8_t *const db = wv_dirty_base(f, vm);
  WV_GLOBAL uint8_t *const mbase = f->mem + wv_cell(f, vm, 0);
  const int fresh = v->mem_pages == 0;
  const uint64_t dirty_pages = clear >> WV_DIRTY_SHIFT;
  for (uint64_t p = 0; p < dirty_pages; p++) {
    if (!db[p]) continue;
    uint64_t lo = p << WV_DIRTY_SHIFT;
    wv_zero_bytes(mbase + lo, wv_dirty_end(p, clear) - lo);
  }
#else
  for (uint64_t c = 0; c < clear; c += WV_INTERLEAVE) wv_bytes_put(f->mem + wv_cell(f, vm, c), WV_INTERLEAVE, 0);
#endif
#if WV_GUARD_REGIONS
  /* The image's pages become accessible; a refusal leaves the VM without memory: its first
   * access traps. The pages above the image (cleared just now) are taken away by the host
   * after the launch, on one thread (backend/cpu/fleet.rs close_shrunk_memories): taking
   * access away costs a TLB shootdown, and made here from every worker at once the calls
   * contend for the address space. */
  if (pages > v->mem_pages && wv_guard_resize(f, vm, v->mem_pages, pages) != 0) pages = 0;
#endif
  wv_vm zero = {0};
  *v = zero;
  v->status = WV_DONE;
  v->mem_pages = (uint32_t)pages;
  for (uint32_t g = 0; g < WV_NUM_GLOBALS; g++) WV_GLB(g) = img[WV_IMG_GLOBAL(g)];
  for (uint32_t i = 0; i < WV_TABLE_WORDS; i++) WV_TABLE_WORD(i) = WV_NULL_REF;
  for (uint32_t t = 0; t < WV_NUM_TABLES; t++) {
    uint64_t size = img[WV_IMG_TABLE_SIZE(t)];
    WV_TABLE_SIZE(t) = (uint32_t)(size < wv_table_cap[t] ? size : wv_table_cap[t]);
  }
  for (uint32_t s = 0; s < WV_NUM_SEGMENTS; s++) {
    uint64_t mode = img[WV_IMG_SEGMENT(s)], off = img[WV_IMG_SEGMENT(s) + 1], t = img[WV_IMG_SEGMENT(s) + 2];
    WV_DROPPED(s) = mode != WV_SEGMENT_PASSIVE;
    if (mode != WV_SEGMENT_ACTIVE) continue;
    if (s < WV_NUM_DATAS) {
      uint64_t n = wv_data_len[s];
      if (off + n > (pages << 16)) continue; /* the host checked: never taken */
#if WV_DIRTY_PAGES
      if (fresh) wv_copy_bytes(mbase + off, f->data_blob + wv_data_base[s], n);
      else wv_restore_segment(mbase, db, clear, off, f->data_blob + wv_data_base[s], n);
#else
      wv_copy_into_cells(wv_mem_base(f, vm), wv_mem_row(f), off, f->data_blob + wv_data_base[s], n);
#endif
    } else {
      uint32_t e = s - WV_NUM_DATAS;
      uint64_t n = wv_elem_len[e];
      if (t >= WV_NUM_TABLES || off + n > WV_TABLE_SIZE(t)) continue; /* the host checked */
      for (uint64_t i = 0; i < n; i++) WV_TABLE((uint32_t)t, (uint32_t)(off + i)) = f->elem_blob[wv_elem_base[e] + i];
    }
  }
#if WV_DIRTY_PAGES
  wv_zero_bytes(db, dirty_pages);
#endif
}

/* Values as 64-bit frame and result words. */
#define wv_enc_i32(x) ((uint64_t)(x))
#define wv_enc_i64(x) ((uint64_t)(x))
#define wv_enc_f32(x) ((uint64_t)wv_f32_bits(x))
#define wv_enc_f64(x) wv_f64_bits(x)
#define wv_enc_ref(x) ((uint64_t)(x))
#define wv_dec_i32(w) ((uint32_t)(w))
#define wv_dec_i64(w) ((uint64_t)(w))
#define wv_dec_f32(w) wv_f32_from_bits((uint32_t)(w))
#define wv_dec_f64(w) wv_f64_from_bits((uint64_t)(w))
#define wv_dec_ref(w) ((uint32_t)(w))

/* ---- integer operators ------------------------------------------------------------------- */
#define WV_I32_DIV_S(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); \
  if ((a) == 0x80000000u && (b) == 0xffffffffu) WV_TRAP(WV_TRAP_INT_OVERFLOW); d = (uint32_t)((int32_t)(a) / (int32_t)(b)); } while (0)
#define WV_I32_DIV_U(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); d = (a) / (b); } while (0)
#define WV_I32_REM_S(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); \
  d = (b) == 0xffffffffu ? 0 : (uint32_t)((int32_t)(a) % (int32_t)(b)); } while (0)
#define WV_I32_REM_U(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); d = (a) % (b); } while (0)
#define WV_I64_DIV_S(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); \
  if ((a) == 0x8000000000000000ull && (b) == 0xffffffffffffffffull) WV_TRAP(WV_TRAP_INT_OVERFLOW); \
  d = (uint64_t)((int64_t)(a) / (int64_t)(b)); } while (0)
#define WV_I64_DIV_U(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); d = (a) / (b); } while (0)
#define WV_I64_REM_S(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); \
  d = (b) == 0xffffffffffffffffull ? 0 : (uint64_t)((int64_t)(a) % (int64_t)(b)); } while (0)
#define WV_I64_REM_U(d, a, b) do { if ((b) == 0) WV_TRAP(WV_TRAP_INT_DIV_ZERO); d = (a) % (b); } while (0)

WV_FN uint32_t wv_i32_rotl(uint32_t a, uint32_t b) { b &= 31; return (a << b) | (a >> ((32 - b) & 31)); }
WV_FN uint32_t wv_i32_rotr(uint32_t a, uint32_t b) { b &= 31; return (a >> b) | (a << ((32 - b) & 31)); }
WV_FN uint64_t wv_i64_rotl(uint64_t a, uint64_t b) { b &= 63; return (a << b) | (a >> ((64 - b) & 63)); }
WV_FN uint64_t wv_i64_rotr(uint64_t a, uint64_t b) { b &= 63; return (a >> b) | (a << ((64 - b) & 63)); }
WV_FN uint32_t wv_i32_shr_s(uint32_t a, uint32_t b) { return (uint32_t)((int32_t)a >> (b & 31)); }
WV_FN uint64_t wv_i64_shr_s(uint64_t a, uint64_t b) { return (uint64_t)((int64_t)a >> (b & 63)); }

/* ---- float operators: no fast-math; NaN and signed-zero rules of WebAssembly ------------- */
/* NaN tests on the bits: a device compiler may assume `x != x` is false. */
#define wv_f32_isnan(x) ((wv_f32_bits(x) & 0x7fffffffu) > 0x7f800000u)
#define wv_f64_isnan(x) ((wv_f64_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)

/* Rounding and square root: a signalling NaN comes out quiet (x + x), whatever libm does. */
WV_FN float wv_f32_ceil(float x) { return wv_f32_isnan(x) ? x + x : wv_raw_ceilf(x); }
WV_FN float wv_f32_floor(float x) { return wv_f32_isnan(x) ? x + x : wv_raw_floorf(x); }
WV_FN float wv_f32_trunc(float x) { return wv_f32_isnan(x) ? x + x : wv_raw_truncf(x); }
WV_FN float wv_f32_nearest(float x) { return wv_f32_isnan(x) ? x + x : wv_raw_nearestf(x); }
WV_FN float wv_f32_sqrt(float x) { return wv_f32_isnan(x) ? x + x : wv_raw_sqrtf(x); }
WV_FN double wv_f64_ceil(double x) { return wv_f64_isnan(x) ? x + x : wv_raw_ceil(x); }
WV_FN double wv_f64_floor(double x) { return wv_f64_isnan(x) ? x + x : wv_raw_floor(x); }
WV_FN double wv_f64_trunc(double x) { return wv_f64_isnan(x) ? x + x : wv_raw_trunc(x); }
WV_FN double wv_f64_nearest(double x) { return wv_f64_isnan(x) ? x + x : wv_raw_nearest(x); }
WV_FN double wv_f64_sqrt(double x) { return wv_f64_isnan(x) ? x + x : wv_raw_sqrt(x); }
/* Conversions between float widths: a compiler may fold demote(promote(x)) to x. */
WV_FN double wv_f64_promote_f32(float x) { return wv_f32_isnan(x) ? (double)(x + x) : (double)x; }
WV_FN float wv_f32_demote_f64(double x) { return wv_f64_isnan(x) ? (float)(x + x) : (float)x; }

#ifndef WV_QUIET_UNLIKELY
#define WV_QUIET_UNLIKELY 0
#endif
#if WV_QUIET_ARITHMETIC && WV_QUIET_UNLIKELY
/* The NaN path is marked unlikely: written as plain `isnan(r) ? r + r : r`, LLVM made it
 * `r + select(isnan(r), r, -0.0)`, an add and a compare chain on every float operation's
 * critical path (PoCL ran PHash 25-45% slower than with no quieting at all); with the hint the
 * check can become a branch predicted not taken, off that path (PHash 0.36-0.51x -> 0.55-0.57x
 * wasmtime). A call in the NaN path, tried first, helped PHash as much but not
 * PHash-Modified, whose float loops it may keep LLVM from vectorising. */
WV_FN float wv_f32_quiet(float r) { return __builtin_expect(wv_f32_isnan(r), 0) ? r + r : r; }
WV_FN double wv_f64_quiet(double r) { return __builtin_expect(wv_f64_isnan(r), 0) ? r + r : r; }
#elif WV_QUIET_ARITHMETIC
WV_FN float wv_f32_quiet(float r) { return wv_f32_isnan(r) ? r + r : r; }
WV_FN double wv_f64_quiet(double r) { return wv_f64_isnan(r) ? r + r : r; }
#else
#define wv_f32_quiet(r) (r)
#define wv_f64_quiet(r) (r)
#endif
#if WV_QUIET_ARITHMETIC && defined(__clang__) && defined(__x86_64__)
/* On an x86 CPU device compiled by clang (PoCL), add, sub and mul need no check: their operands
 * pass through an empty asm statement, so the compiler cannot know either is a constant and
 * has no `x * 1.0`, `x - 0.0`, `x + -0.0` or `-0.0 - x` to fold; the hardware's own result is
 * then a quiet NaN. The statement costs no instruction and, unlike a check, adds nothing to
 * the dependency chain. Division keeps its check: hiding a constant divisor would also turn
 * `x / 2.0` into a real division instead of `x * 0.5`. */
WV_FN float wv_f32_opaque(float x) { __asm__("" : "+x"(x)); return x; }
WV_FN double wv_f64_opaque(double x) { __asm__("" : "+x"(x)); return x; }
#define wv_f32_add(a, b) (wv_f32_opaque(a) + wv_f32_opaque(b))
#define wv_f32_sub(a, b) (wv_f32_opaque(a) - wv_f32_opaque(b))
#define wv_f32_mul(a, b) (wv_f32_opaque(a) * wv_f32_opaque(b))
#define wv_f64_add(a, b) (wv_f64_opaque(a) + wv_f64_opaque(b))
#define wv_f64_sub(a, b) (wv_f64_opaque(a) - wv_f64_opaque(b))
#define wv_f64_mul(a, b) (wv_f64_opaque(a) * wv_f64_opaque(b))
#else
#define wv_f32_add(a, b) wv_f32_quiet((a) + (b))
#define wv_f32_sub(a, b) wv_f32_quiet((a) - (b))
#define wv_f32_mul(a, b) wv_f32_quiet((a) * (b))
#define wv_f64_add(a, b) wv_f64_quiet((a) + (b))
#define wv_f64_sub(a, b) wv_f64_quiet((a) - (b))
#define wv_f64_mul(a, b) wv_f64_quiet((a) * (b))
#endif
#define wv_f32_div(a, b) wv_f32_quiet((a) / (b))
#define wv_f64_div(a, b) wv_f64_quiet((a) / (b))
/* min and max of a NaN are a NaN, quiet: `a + b` is not enough where the device compiler folds
 * `a + -0.0` to `a` (f32.min(x, -0.0) once returned a signalling x on PoCL). */
WV_FN float wv_f32_min(float a, float b) {
  if (wv_f32_isnan(a) || wv_f32_isnan(b)) return wv_f32_quiet(a + b);
  if (a == b) return wv_f32_from_bits(wv_f32_bits(a) | wv_f32_bits(b));
  return a < b ? a : b;
}
WV_FN float wv_f32_max(float a, float b) {
  if (wv_f32_isnan(a) || wv_f32_isnan(b)) return wv_f32_quiet(a + b);
  if (a == b) return wv_f32_from_bits(wv_f32_bits(a) & wv_f32_bits(b));
  return a > b ? a : b;
}
WV_FN double wv_f64_min(double a, double b) {
  if (wv_f64_isnan(a) || wv_f64_isnan(b)) return wv_f64_quiet(a + b);
  if (a == b) return wv_f64_from_bits(wv_f64_bits(a) | wv_f64_bits(b));
  return a < b ? a : b;
}
WV_FN double wv_f64_max(double a, double b) {
  if (wv_f64_isnan(a) || wv_f64_isnan(b)) return wv_f64_quiet(a + b);
  if (a == b) return wv_f64_from_bits(wv_f64_bits(a) & wv_f64_bits(b));
  return a > b ? a : b;
}
WV_FN float wv_f32_abs(float a) { return wv_f32_from_bits(wv_f32_bits(a) & 0x7fffffffu); }
WV_FN float wv_f32_neg(float a) { return wv_f32_from_bits(wv_f32_bits(a) ^ 0x80000000u); }
WV_FN float wv_f32_copysign(float a, float b) {
  return wv_f32_from_bits((wv_f32_bits(a) & 0x7fffffffu) | (wv_f32_bits(b) & 0x80000000u));
}
WV_FN double wv_f64_abs(double a) { return wv_f64_from_bits(wv_f64_bits(a) & 0x7fffffffffffffffull); }
WV_FN double wv_f64_neg(double a) { return wv_f64_from_bits(wv_f64_bits(a) ^ 0x8000000000000000ull); }
WV_FN double wv_f64_copysign(double a, double b) {
  return wv_f64_from_bits((wv_f64_bits(a) & 0x7fffffffffffffffull) | (wv_f64_bits(b) & 0x8000000000000000ull));
}

/* Trapping float → integer conversions: NaN is a bad conversion, out of range an overflow. */
#define WV_TRUNC(d, T, isnan, x, lo_ok, hi_ok) do { if (isnan(x)) WV_TRAP(WV_TRAP_BAD_CONVERSION); \
  if (!((lo_ok) && (hi_ok))) WV_TRAP(WV_TRAP_INT_OVERFLOW); d = (T)(x); } while (0)
#define WV_I32_TRUNC_F32_S(d, x) WV_TRUNC(d, int32_t, wv_f32_isnan, x, (x) >= -2147483648.0f, (x) < 2147483648.0f)
#define WV_I32_TRUNC_F32_U(d, x) WV_TRUNC(d, uint32_t, wv_f32_isnan, x, (x) > -1.0f, (x) < 4294967296.0f)
#define WV_I32_TRUNC_F64_S(d, x) WV_TRUNC(d, int32_t, wv_f64_isnan, x, (x) > -2147483649.0, (x) < 2147483648.0)
#define WV_I32_TRUNC_F64_U(d, x) WV_TRUNC(d, uint32_t, wv_f64_isnan, x, (x) > -1.0, (x) < 4294967296.0)
#define WV_I64_TRUNC_F32_S(d, x) WV_TRUNC(d, int64_t, wv_f32_isnan, x, (x) >= -9223372036854775808.0f, (x) < 9223372036854775808.0f)
#define WV_I64_TRUNC_F32_U(d, x) WV_TRUNC(d, uint64_t, wv_f32_isnan, x, (x) > -1.0f, (x) < 18446744073709551616.0f)
#define WV_I64_TRUNC_F64_S(d, x) WV_TRUNC(d, int64_t, wv_f64_isnan, x, (x) >= -9223372036854775808.0, (x) < 9223372036854775808.0)
#define WV_I64_TRUNC_F64_U(d, x) WV_TRUNC(d, uint64_t, wv_f64_isnan, x, (x) > -1.0, (x) < 18446744073709551616.0)

/* Saturating float → integer conversions. */
WV_FN uint32_t wv_i32_trunc_sat_f32_s(float x) {
  if (wv_f32_isnan(x)) return 0;
  if (x < -2147483648.0f) return 0x80000000u;
  if (x >= 2147483648.0f) return 0x7fffffffu;
  return (uint32_t)(int32_t)x;
}
WV_FN uint32_t wv_i32_trunc_sat_f32_u(float x) {
  if (wv_f32_isnan(x) || x <= -1.0f) return 0;
  if (x >= 4294967296.0f) return 0xffffffffu;
  return (uint32_t)x;
}
WV_FN uint32_t wv_i32_trunc_sat_f64_s(double x) {
  if (wv_f64_isnan(x)) return 0;
  if (x <= -2147483649.0) return 0x80000000u;
  if (x >= 2147483648.0) return 0x7fffffffu;
  return (uint32_t)(int32_t)x;
}
WV_FN uint32_t wv_i32_trunc_sat_f64_u(double x) {
  if (wv_f64_isnan(x) || x <= -1.0) return 0;
  if (x >= 4294967296.0) return 0xffffffffu;
  return (uint32_t)x;
}
WV_FN uint64_t wv_i64_trunc_sat_f32_s(float x) {
  if (wv_f32_isnan(x)) return 0;
  if (x < -9223372036854775808.0f) return 0x8000000000000000ull;
  if (x >= 9223372036854775808.0f) return 0x7fffffffffffffffull;
  return (uint64_t)(int64_t)x;
}
WV_FN uint64_t wv_i64_trunc_sat_f32_u(float x) {
  if (wv_f32_isnan(x) || x <= -1.0f) return 0;
  if (x >= 18446744073709551616.0f) return 0xffffffffffffffffull;
  return (uint64_t)x;
}
WV_FN uint64_t wv_i64_trunc_sat_f64_s(double x) {
  if (wv_f64_isnan(x)) return 0;
  if (x < -9223372036854775808.0) return 0x8000000000000000ull;
  if (x >= 9223372036854775808.0) return 0x7fffffffffffffffull;
  return (uint64_t)(int64_t)x;
}
WV_FN uint64_t wv_i64_trunc_sat_f64_u(double x) {
  if (wv_f64_isnan(x) || x <= -1.0) return 0;
  if (x >= 18446744073709551616.0) return 0xffffffffffffffffull;
  return (uint64_t)x;
}
/* ---- end of prelude ---------------------------------------------------------------------- */
