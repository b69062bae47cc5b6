  ;; ---- warpvisor's RISC-V runtime: Linux system calls on WASI preview 1, RISC-V's integer
  ;; ---- semantics where WebAssembly's differ, the start-up stack. Spliced into every module
  ;; ---- translated from a RISC-V executable (translate/mod.rs supplies the constants).
  ;;
  ;; Low memory, below the executable (which starts at 0x10000 or higher):
  ;;   0x0800  Linux errno of each WASI errno (77 bytes)
  ;;   0x0900  messages;  0x0a00  struct utsname (390 bytes);  0x0c00  "."
  ;;   0x1000  scratch for WASI results;  0x1100  a WASI filestat;  0x1200  hex digits

  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_seek" (func $fd_seek (param i32 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_filestat_get" (func $fd_filestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get" (func $path_filestat_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))

  ;; The LR/SC reservation (an address, or -1), fcsr, the program break, where anonymous
  ;; mappings begin (0 before the first), system calls answered ENOSYS.
  (global $resv (mut i64) (i64.const -1))
  (global $fcsr (mut i64) (i64.const 0))
  (global $brk (mut i64) (i64.const 0))
  (global $mmap_floor (mut i64) (i64.const 0))
  ;; The end of the last anonymous mapping still held (0: none yet).
  (global $mmap_end (mut i64) (i64.const 0))
  (global $enosys (export "warpvisor_riscv_enosys") (mut i64) (i64.const 0))
  (global $path_fd (mut i32) (i32.const 0))
  (global $path_len (mut i32) (i32.const 0))

  ;; ---- addresses and errors ----

  ;; A guest address as a WebAssembly one: addresses beyond 32 bits become the last byte, which
  ;; no memory has, so the access traps as it would fault on Linux.
  (func $p (param $a i64) (result i32)
    (i32.wrap_i64 (select (local.get $a) (i64.const 0xffffffff)
      (i64.lt_u (local.get $a) (i64.const 0x100000000)))))

  ;; A length clamped to what one WASI call moves.
  (func $len32 (param $n i64) (result i32)
    (i32.wrap_i64 (select (local.get $n) (i64.const 0x7fffffff)
      (i64.lt_u (local.get $n) (i64.const 0x7fffffff)))))

  ;; A WASI errno as Linux's negative return value.
  (func $errno (param $e i32) (result i64)
    (if (i32.eqz (local.get $e)) (then (return (i64.const 0))))
    (i64.sub (i64.const 0) (i64.extend_i32_u (i32.load8_u offset=0x800
      (select (local.get $e) (i32.const 63) (i32.lt_u (local.get $e) (i32.const 77)))))))

  ;; Prints message $m ($n bytes), the address $pc in hex and a newline on stderr, and traps.
  (func $die (param $m i32) (param $n i32) (param $pc i64)
    (local $i i32) (local $d i32)
    (i32.store (i32.const 0x1000) (local.get $m))
    (i32.store (i32.const 0x1004) (local.get $n))
    (drop (call $fd_write (i32.const 2) (i32.const 0x1000) (i32.const 1) (i32.const 0x1008)))
    (i32.store16 (i32.const 0x1200) (i32.const 0x7830))
    (loop $digit
      (local.set $d (i32.wrap_i64 (i64.and (i64.shr_u (local.get $pc)
        (i64.extend_i32_u (i32.sub (i32.const 60) (i32.shl (local.get $i) (i32.const 2))))) (i64.const 15))))
      (i32.store8 offset=0x1202 (local.get $i)
        (i32.add (local.get $d) (select (i32.const 48) (i32.const 87) (i32.lt_u (local.get $d) (i32.const 10)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $digit (i32.lt_u (local.get $i) (i32.const 16))))
    (i32.store8 (i32.const 0x1212) (i32.const 10))
    (i32.store (i32.const 0x1000) (i32.const 0x1200))
    (i32.store (i32.const 0x1004) (i32.const 19))
    (drop (call $fd_write (i32.const 2) (i32.const 0x1000) (i32.const 1) (i32.const 0x1008)))
    unreachable)

  ;; ---- RISC-V arithmetic where WebAssembly's differs (no traps: fixed results) ----

  (func $div (param $a i64) (param $b i64) (result i64)
    (if (i64.eqz (local.get $b)) (then (return (i64.const -1))))
    (if (i32.and (i64.eq (local.get $a) (i64.const 0x8000000000000000)) (i64.eq (local.get $b) (i64.const -1)))
      (then (return (local.get $a))))
    (i64.div_s (local.get $a) (local.get $b)))
  (func $divu (param $a i64) (param $b i64) (result i64)
    (if (i64.eqz (local.get $b)) (then (return (i64.const -1))))
    (i64.div_u (local.get $a) (local.get $b)))
  (func $rem (param $a i64) (param $b i64) (result i64)
    (if (i64.eqz (local.get $b)) (then (return (local.get $a))))
    (i64.rem_s (local.get $a) (local.get $b)))
  (func $remu (param $a i64) (param $b i64) (result i64)
    (if (i64.eqz (local.get $b)) (then (return (local.get $a))))
    (i64.rem_u (local.get $a) (local.get $b)))
  (func $divw (param $a i64) (param $b i64) (result i64)
    (local $x i32) (local $y i32)
    (local.set $x (i32.wrap_i64 (local.get $a)))
    (local.set $y (i32.wrap_i64 (local.get $b)))
    (if (i32.eqz (local.get $y)) (then (return (i64.const -1))))
    (if (i32.and (i32.eq (local.get $x) (i32.const 0x80000000)) (i32.eq (local.get $y) (i32.const -1)))
      (then (return (i64.extend_i32_s (local.get $x)))))
    (i64.extend_i32_s (i32.div_s (local.get $x) (local.get $y))))
  (func $divuw (param $a i64) (param $b i64) (result i64)
    (local $y i32)
    (local.set $y (i32.wrap_i64 (local.get $b)))
    (if (i32.eqz (local.get $y)) (then (return (i64.const -1))))
    (i64.extend_i32_s (i32.div_u (i32.wrap_i64 (local.get $a)) (local.get $y))))
  (func $remw (param $a i64) (param $b i64) (result i64)
    (local $y i32)
    (local.set $y (i32.wrap_i64 (local.get $b)))
    (if (i32.eqz (local.get $y)) (then (return (i64.extend_i32_s (i32.wrap_i64 (local.get $a))))))
    (i64.extend_i32_s (i32.rem_s (i32.wrap_i64 (local.get $a)) (local.get $y))))
  (func $remuw (param $a i64) (param $b i64) (result i64)
    (local $y i32)
    (local.set $y (i32.wrap_i64 (local.get $b)))
    (if (i32.eqz (local.get $y)) (then (return (i64.extend_i32_s (i32.wrap_i64 (local.get $a))))))
    (i64.extend_i32_s (i32.rem_u (i32.wrap_i64 (local.get $a)) (local.get $y))))

  ;; The high 64 bits of the 128-bit product, from 32-bit halves.
  (func $mulhu (param $a i64) (param $b i64) (result i64)
    (local $al i64) (local $ah i64) (local $bl i64) (local $bh i64) (local $p1 i64) (local $p2 i64) (local $mid i64)
    (local.set $al (i64.and (local.get $a) (i64.const 0xffffffff)))
    (local.set $ah (i64.shr_u (local.get $a) (i64.const 32)))
    (local.set $bl (i64.and (local.get $b) (i64.const 0xffffffff)))
    (local.set $bh (i64.shr_u (local.get $b) (i64.const 32)))
    (local.set $p1 (i64.mul (local.get $al) (local.get $bh)))
    (local.set $p2 (i64.mul (local.get $ah) (local.get $bl)))
    (local.set $mid (i64.add (i64.add
      (i64.shr_u (i64.mul (local.get $al) (local.get $bl)) (i64.const 32))
      (i64.and (local.get $p1) (i64.const 0xffffffff)))
      (i64.and (local.get $p2) (i64.const 0xffffffff))))
    (i64.add (i64.add (i64.add (i64.mul (local.get $ah) (local.get $bh))
      (i64.shr_u (local.get $p1) (i64.const 32)))
      (i64.shr_u (local.get $p2) (i64.const 32)))
      (i64.shr_u (local.get $mid) (i64.const 32))))
  (func $mulh (param $a i64) (param $b i64) (result i64)
    (i64.sub (i64.sub (call $mulhu (local.get $a) (local.get $b))
      (select (local.get $b) (i64.const 0) (i64.lt_s (local.get $a) (i64.const 0))))
      (select (local.get $a) (i64.const 0) (i64.lt_s (local.get $b) (i64.const 0)))))
  (func $mulhsu (param $a i64) (param $b i64) (result i64)
    (i64.sub (call $mulhu (local.get $a) (local.get $b))
      (select (local.get $b) (i64.const 0) (i64.lt_s (local.get $a) (i64.const 0)))))

  ;; A NaN-boxed single's bits (zero-extended); an improperly boxed one reads as the canonical NaN.
  (func $unbox (param $v i64) (result i64)
    (select (i64.and (local.get $v) (i64.const 0xffffffff)) (i64.const 0x7fc00000)
      (i64.eq (i64.shr_u (local.get $v) (i64.const 32)) (i64.const 0xffffffff))))

  ;; ---- CSRs: the floating-point flags and rounding mode, and the counters ----

  (func $csr_read (param $csr i32) (param $pc i64) (result i64)
    (local $e i32)
    (if (i32.eq (local.get $csr) (i32.const 1)) (then (return (i64.and (global.get $fcsr) (i64.const 31)))))
    (if (i32.eq (local.get $csr) (i32.const 2)) (then (return (i64.and (i64.shr_u (global.get $fcsr) (i64.const 5)) (i64.const 7)))))
    (if (i32.eq (local.get $csr) (i32.const 3)) (then (return (global.get $fcsr))))
    ;; cycle, time, instret: the monotonic clock in nanoseconds
    (if (i32.and (i32.ge_u (local.get $csr) (i32.const 0xc00)) (i32.le_u (local.get $csr) (i32.const 0xc02)))
      (then
        (local.set $e (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 0x1000)))
        (return (i64.load (i32.const 0x1000)))))
    (call $illegal (local.get $pc))
    unreachable)
  (func $csr_write (param $csr i32) (param $v i64) (param $pc i64)
    (if (i32.eq (local.get $csr) (i32.const 1)) (then
      (global.set $fcsr (i64.or (i64.and (global.get $fcsr) (i64.const 0xe0)) (i64.and (local.get $v) (i64.const 31))))
      (return)))
    (if (i32.eq (local.get $csr) (i32.const 2)) (then
      (global.set $fcsr (i64.or (i64.and (global.get $fcsr) (i64.const 31)) (i64.shl (i64.and (local.get $v) (i64.const 7)) (i64.const 5))))
      (return)))
    (if (i32.eq (local.get $csr) (i32.const 3)) (then
      (global.set $fcsr (i64.and (local.get $v) (i64.const 0xff)))
      (return)))
    (call $illegal (local.get $pc)))

  ;; ---- memory: the program break and anonymous mappings, grown with memory.grow ----

  ;; Grows memory to at least $end bytes; 1 on success.
  (func $grow_to (param $end i64) (result i32)
    (local $have i64)
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.le_u (local.get $end) (local.get $have)) (then (return (i32.const 1))))
    (if (i64.gt_u (local.get $end) (i64.const 0xffff0000)) (then (return (i32.const 0))))
    (i32.ne (memory.grow (i32.wrap_i64 (i64.shr_u
      (i64.add (i64.sub (local.get $end) (local.get $have)) (i64.const 0xffff)) (i64.const 16))))
      (i32.const -1)))

  ;; brk: moves the break up to the first anonymous mapping; a failed move returns the old break.
  (func $sys_brk (param $a i64) (result i64)
    (local $keep i64)
    (if (i64.lt_u (local.get $a) (global.get $BRK_START)) (then (return (global.get $brk))))
    (if (i32.and (i64.ne (global.get $mmap_floor) (i64.const 0))
                 (i64.gt_u (local.get $a) (global.get $mmap_floor)))
      (then (return (global.get $brk))))
    (if (i32.eqz (call $grow_to (local.get $a))) (then (return (global.get $brk))))
    ;; Pages given back read as zeros when the break grows again (bytes left in the page of
    ;; the new break stay, as on Linux).
    (local.set $keep (i64.and (i64.add (local.get $a) (i64.const 4095)) (i64.const -4096)))
    (if (i64.lt_u (local.get $keep) (global.get $brk)) (then
      (memory.fill (i32.wrap_i64 (local.get $keep)) (i32.const 0)
        (i32.wrap_i64 (i64.sub (global.get $brk) (local.get $keep))))))
    (global.set $brk (local.get $a))
    (local.get $a))

  ;; mmap: anonymous mappings only, each at $mmap_end (the end of the last mapping still held,
  ;; memory's end at first), in 64 KiB steps; a place given back by munmap is zeroed again.
  (func $sys_mmap (param $addr i64) (param $len i64) (param $flags i64) (result i64)
    (local $start i64) (local $end i64) (local $have i64)
    (if (i64.eqz (i64.and (local.get $flags) (i64.const 0x20))) (then (return (i64.const -19))))
    (if (i64.ne (i64.and (local.get $flags) (i64.const 0x10)) (i64.const 0)) (then (return (i64.const -22))))
    (if (i64.eqz (local.get $len)) (then (return (i64.const -22))))
    (if (i64.gt_u (local.get $len) (i64.const 0xc0000000)) (then (return (i64.const -12))))
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (local.set $start (select (global.get $mmap_end) (local.get $have)
      (i64.ne (global.get $mmap_end) (i64.const 0))))
    (local.set $end (i64.add (local.get $start)
      (i64.and (i64.add (local.get $len) (i64.const 0xffff)) (i64.const -65536))))
    (if (i32.eqz (call $grow_to (local.get $end))) (then (return (i64.const -12))))
    (if (i64.lt_u (local.get $start) (local.get $have)) (then
      (memory.fill (i32.wrap_i64 (local.get $start)) (i32.const 0) (i32.wrap_i64
        (i64.sub (select (local.get $end) (local.get $have) (i64.lt_u (local.get $end) (local.get $have)))
                 (local.get $start))))))
    (if (i64.eqz (global.get $mmap_floor)) (then (global.set $mmap_floor (local.get $start))))
    (global.set $mmap_end (local.get $end))
    (local.get $start))

  ;; munmap: a range reaching the end of the mappings gives that place back to the next mmap
  ;; (from its start, rounded up to 64 KiB); anything else stays mapped, unused.
  (func $sys_munmap (param $addr i64) (param $len i64) (result i64)
    (if (i32.or (i64.ne (i64.and (local.get $addr) (i64.const 4095)) (i64.const 0))
                (i64.eqz (local.get $len)))
      (then (return (i64.const -22))))
    (if (i32.and (i32.and (i64.ne (global.get $mmap_floor) (i64.const 0))
                          (i64.ge_u (local.get $addr) (global.get $mmap_floor)))
                 (i32.and (i64.lt_u (local.get $addr) (global.get $mmap_end))
                          ;; reaching the end: its 64 KiB step, or (a length that wraps) beyond
                          (i32.or (i64.ge_u (local.get $len) (i64.sub (global.get $mmap_end) (local.get $addr)))
                                  (i64.ge_u (i64.and (i64.add (i64.add (local.get $addr) (local.get $len)) (i64.const 0xffff)) (i64.const -65536))
                                            (global.get $mmap_end)))))
      (then (global.set $mmap_end
        (i64.and (i64.add (local.get $addr) (i64.const 0xffff)) (i64.const -65536)))))
    (i64.const 0))

  ;; ---- files ----

  (func $sys_write (param $fd i64) (param $buf i64) (param $len i64) (result i64)
    (local $e i32)
    (i32.store (i32.const 0x1000) (call $p (local.get $buf)))
    (i32.store (i32.const 0x1004) (call $len32 (local.get $len)))
    (local.set $e (call $fd_write (i32.wrap_i64 (local.get $fd)) (i32.const 0x1000) (i32.const 1) (i32.const 0x1008)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i64.extend_i32_u (i32.load (i32.const 0x1008))))

  (func $sys_read (param $fd i64) (param $buf i64) (param $len i64) (result i64)
    (local $e i32)
    (i32.store (i32.const 0x1000) (call $p (local.get $buf)))
    (i32.store (i32.const 0x1004) (call $len32 (local.get $len)))
    (local.set $e (call $fd_read (i32.wrap_i64 (local.get $fd)) (i32.const 0x1000) (i32.const 1) (i32.const 0x1008)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i64.extend_i32_u (i32.load (i32.const 0x1008))))

  ;; readv/writev: one WASI call per buffer, stopping at a short transfer.
  (func $sys_rwv (param $read i32) (param $fd i64) (param $iov i64) (param $cnt i64) (result i64)
    (local $i i64) (local $total i64) (local $n i64) (local $len i64) (local $base i64)
    (if (i64.gt_u (local.get $cnt) (i64.const 1024)) (then (return (i64.const -22))))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (local.get $cnt)))
      (local.set $base (i64.load (call $p (i64.add (local.get $iov) (i64.shl (local.get $i) (i64.const 4))))))
      (local.set $len (i64.load (call $p (i64.add (i64.add (local.get $iov) (i64.shl (local.get $i) (i64.const 4))) (i64.const 8)))))
      (local.set $n (if (result i64) (local.get $read)
        (then (call $sys_read (local.get $fd) (local.get $base) (local.get $len)))
        (else (call $sys_write (local.get $fd) (local.get $base) (local.get $len)))))
      (if (i64.lt_s (local.get $n) (i64.const 0)) (then
        (return (select (local.get $total) (local.get $n) (i64.ne (local.get $total) (i64.const 0))))))
      (local.set $total (i64.add (local.get $total) (local.get $n)))
      (br_if $done (i64.lt_u (local.get $n) (local.get $len)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (local.get $total))

  ;; A path relative to a directory descriptor, as WASI wants it: AT_FDCWD and absolute paths
  ;; resolve in the first preopened directory (descriptor 3). Returns the path's address and
  ;; sets $path_fd and $path_len; an empty path becomes ".".
  (func $resolve (param $dirfd i64) (param $path i64) (result i32)
    (local $s i32) (local $n i32)
    (local.set $s (call $p (local.get $path)))
    (global.set $path_fd (i32.wrap_i64 (local.get $dirfd)))
    (if (i32.or (i64.eq (local.get $dirfd) (i64.const -100)) (i32.eq (i32.load8_u (local.get $s)) (i32.const 47)))
      (then (global.set $path_fd (i32.const 3))))
    (block $b (loop $l
      (br_if $b (i32.ne (i32.load8_u (local.get $s)) (i32.const 47)))
      (local.set $s (i32.add (local.get $s) (i32.const 1)))
      (br $l)))
    (block $b (loop $l
      (br_if $b (i32.eqz (i32.load8_u (i32.add (local.get $s) (local.get $n)))))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $n) (i32.const 4096)))))
    (global.set $path_len (local.get $n))
    (if (i32.eqz (local.get $n)) (then
      (global.set $path_len (i32.const 1))
      (return (i32.const 0xc00))))
    (local.get $s))

  (func $sys_openat (param $dirfd i64) (param $path i64) (param $flags i64) (result i64)
    (local $s i32) (local $oflags i32) (local $rights i64) (local $e i32)
    (local.set $s (call $resolve (local.get $dirfd) (local.get $path)))
    (if (i32.ge_u (global.get $path_len) (i32.const 4096)) (then (return (i64.const -36))))
    (local.set $oflags (i32.or (i32.or
      (select (i32.const 1) (i32.const 0) (i64.ne (i64.and (local.get $flags) (i64.const 0x40)) (i64.const 0)))
      (select (i32.const 2) (i32.const 0) (i64.ne (i64.and (local.get $flags) (i64.const 0x10000)) (i64.const 0))))
      (i32.or
      (select (i32.const 4) (i32.const 0) (i64.ne (i64.and (local.get $flags) (i64.const 0x80)) (i64.const 0)))
      (select (i32.const 8) (i32.const 0) (i64.ne (i64.and (local.get $flags) (i64.const 0x200)) (i64.const 0))))))
    ;; O_RDONLY: every right but writing; O_WRONLY: every right but reading; O_RDWR: all.
    (local.set $rights (i64.const 0x1fffffff))
    (if (i64.eq (i64.and (local.get $flags) (i64.const 3)) (i64.const 0))
      (then (local.set $rights (i64.and (local.get $rights) (i64.const -4194642)))))
    (if (i64.eq (i64.and (local.get $flags) (i64.const 3)) (i64.const 1))
      (then (local.set $rights (i64.and (local.get $rights) (i64.const -16387)))))
    (local.set $e (call $path_open (global.get $path_fd)
      (select (i32.const 0) (i32.const 1) (i64.ne (i64.and (local.get $flags) (i64.const 0x20000)) (i64.const 0)))
      (local.get $s) (global.get $path_len) (local.get $oflags)
      (local.get $rights) (i64.const 0x1fffffff)
      (select (i32.const 1) (i32.const 0) (i64.ne (i64.and (local.get $flags) (i64.const 0x400)) (i64.const 0)))
      (i32.const 0x1000)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i64.extend_i32_u (i32.load (i32.const 0x1000))))

  ;; The WASI filestat at 0x1100 as Linux's struct stat (riscv64: 128 bytes) at $o.
  (func $stat_out (param $o i32)
    (local $type i32) (local $mode i32) (local $size i64) (local $k i32) (local $t i64)
    (memory.fill (local.get $o) (i32.const 0) (i32.const 128))
    (i64.store (local.get $o) (i64.load (i32.const 0x1100)))
    (i64.store offset=8 (local.get $o) (i64.load (i32.const 0x1108)))
    (local.set $type (i32.load8_u (i32.const 0x1110)))
    (local.set $mode (i32.const 0x11b6))
    (if (i32.eq (local.get $type) (i32.const 1)) (then (local.set $mode (i32.const 0x61b6))))
    (if (i32.eq (local.get $type) (i32.const 2)) (then (local.set $mode (i32.const 0x21b6))))
    (if (i32.eq (local.get $type) (i32.const 3)) (then (local.set $mode (i32.const 0x41ed))))
    (if (i32.eq (local.get $type) (i32.const 4)) (then (local.set $mode (i32.const 0x81a4))))
    (if (i32.eq (local.get $type) (i32.const 5)) (then (local.set $mode (i32.const 0xc1ed))))
    (if (i32.eq (local.get $type) (i32.const 6)) (then (local.set $mode (i32.const 0xc1ed))))
    (if (i32.eq (local.get $type) (i32.const 7)) (then (local.set $mode (i32.const 0xa1ff))))
    (i32.store offset=16 (local.get $o) (local.get $mode))
    (i32.store offset=20 (local.get $o) (i32.wrap_i64 (i64.load (i32.const 0x1118))))
    (local.set $size (i64.load (i32.const 0x1120)))
    (i64.store offset=48 (local.get $o) (local.get $size))
    (i32.store offset=56 (local.get $o) (i32.const 4096))
    (i64.store offset=64 (local.get $o) (i64.shr_u (i64.add (local.get $size) (i64.const 511)) (i64.const 9)))
    ;; atime, mtime, ctime: seconds and nanoseconds
    (loop $times
      (local.set $t (i64.load offset=0x1128 (i32.shl (local.get $k) (i32.const 3))))
      (i64.store offset=72 (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 4)))
        (i64.div_u (local.get $t) (i64.const 1000000000)))
      (i64.store offset=80 (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 4)))
        (i64.rem_u (local.get $t) (i64.const 1000000000)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $times (i32.lt_u (local.get $k) (i32.const 3)))))

  (func $sys_fstat (param $fd i64) (param $st i64) (result i64)
    (local $e i32)
    (local.set $e (call $fd_filestat_get (i32.wrap_i64 (local.get $fd)) (i32.const 0x1100)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (call $stat_out (call $p (local.get $st)))
    (i64.const 0))

  (func $sys_fstatat (param $dirfd i64) (param $path i64) (param $st i64) (param $flags i64) (result i64)
    (local $s i32) (local $e i32)
    ;; AT_EMPTY_PATH with an empty path: the descriptor itself
    (if (i32.and (i64.ne (i64.and (local.get $flags) (i64.const 0x1000)) (i64.const 0))
                 (i32.eqz (i32.load8_u (call $p (local.get $path)))))
      (then (return (call $sys_fstat (local.get $dirfd) (local.get $st)))))
    (local.set $s (call $resolve (local.get $dirfd) (local.get $path)))
    (if (i32.ge_u (global.get $path_len) (i32.const 4096)) (then (return (i64.const -36))))
    (local.set $e (call $path_filestat_get (global.get $path_fd)
      (select (i32.const 0) (i32.const 1) (i64.ne (i64.and (local.get $flags) (i64.const 0x100)) (i64.const 0)))
      (local.get $s) (global.get $path_len) (i32.const 0x1100)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (call $stat_out (call $p (local.get $st)))
    (i64.const 0))

  (func $sys_lseek (param $fd i64) (param $off i64) (param $whence i64) (result i64)
    (local $e i32)
    (if (i64.gt_u (local.get $whence) (i64.const 2)) (then (return (i64.const -22))))
    (local.set $e (call $fd_seek (i32.wrap_i64 (local.get $fd)) (local.get $off)
      (i32.wrap_i64 (local.get $whence)) (i32.const 0x1000)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i64.load (i32.const 0x1000)))

  ;; ---- time, randomness, identity ----

  (func $sys_clock_gettime (param $clk i64) (param $tp i64) (result i64)
    (local $id i32) (local $e i32) (local $t i64) (local $o i32)
    (if (i64.gt_u (local.get $clk) (i64.const 7)) (then (return (i64.const -22))))
    ;; REALTIME(_COARSE) → realtime; the CPU-time clocks as they are; the rest → monotonic
    (local.set $id (i32.const 1))
    (if (i32.or (i64.eqz (local.get $clk)) (i64.eq (local.get $clk) (i64.const 5))) (then (local.set $id (i32.const 0))))
    (if (i64.eq (local.get $clk) (i64.const 2)) (then (local.set $id (i32.const 2))))
    (if (i64.eq (local.get $clk) (i64.const 3)) (then (local.set $id (i32.const 3))))
    (local.set $e (call $clock_time_get (local.get $id) (i64.const 1) (i32.const 0x1000)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (local.set $t (i64.load (i32.const 0x1000)))
    (local.set $o (call $p (local.get $tp)))
    (i64.store (local.get $o) (i64.div_u (local.get $t) (i64.const 1000000000)))
    (i64.store offset=8 (local.get $o) (i64.rem_u (local.get $t) (i64.const 1000000000)))
    (i64.const 0))

  (func $sys_getrandom (param $buf i64) (param $len i64) (result i64)
    (local $e i32) (local $n i32)
    (local.set $n (call $len32 (local.get $len)))
    (local.set $e (call $random_get (call $p (local.get $buf)) (local.get $n)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i64.extend_i32_u (local.get $n)))

  (func $sys_uname (param $buf i64) (result i64)
    (memory.copy (call $p (local.get $buf)) (i32.const 0xa00) (i32.const 390))
    (i64.const 0))

  (func $sys_prlimit (param $res i64) (param $old i64) (result i64)
    (local $o i32)
    (if (i64.eqz (local.get $old)) (then (return (i64.const 0))))
    (local.set $o (call $p (local.get $old)))
    ;; RLIMIT_STACK: the stack translated programs get; everything else unlimited
    (i64.store (local.get $o) (select (global.get $STACK_SIZE) (i64.const -1) (i64.eq (local.get $res) (i64.const 3))))
    (i64.store offset=8 (local.get $o) (i64.const -1))
    (i64.const 0))

  (func $sys_getcwd (param $buf i64) (param $size i64) (result i64)
    (if (i64.lt_u (local.get $size) (i64.const 2)) (then (return (i64.const -34))))
    (i32.store16 (call $p (local.get $buf)) (i32.const 0x2f))
    (i64.const 2))

  (func $sys_exit (param $code i64)
    (call $proc_exit (i32.and (i32.wrap_i64 (local.get $code)) (i32.const 255)))
    unreachable)

  ;; ---- the dispatcher: a7 holds the number (asm-generic numbering) ----
  (func $syscall (param $n i64) (param $a0 i64) (param $a1 i64) (param $a2 i64) (param $a3 i64) (param $a4 i64) (param $a5 i64) (result i64)
    (block $unknown
      (block $zero
        (br_if $zero (i64.eq (local.get $n) (i64.const 134)))   ;; rt_sigaction
        (br_if $zero (i64.eq (local.get $n) (i64.const 135)))   ;; rt_sigprocmask
        (br_if $zero (i64.eq (local.get $n) (i64.const 132)))   ;; sigaltstack
        (br_if $zero (i64.eq (local.get $n) (i64.const 226)))   ;; mprotect
        (br_if $zero (i64.eq (local.get $n) (i64.const 233)))   ;; madvise
        (br_if $zero (i64.eq (local.get $n) (i64.const 174)))   ;; getuid
        (br_if $zero (i64.eq (local.get $n) (i64.const 175)))   ;; geteuid
        (br_if $zero (i64.eq (local.get $n) (i64.const 176)))   ;; getgid
        (br_if $zero (i64.eq (local.get $n) (i64.const 177)))   ;; getegid
        (if (i64.eq (local.get $n) (i64.const 64)) (then (return (call $sys_write (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 63)) (then (return (call $sys_read (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 66)) (then (return (call $sys_rwv (i32.const 0) (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 65)) (then (return (call $sys_rwv (i32.const 1) (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 214)) (then (return (call $sys_brk (local.get $a0)))))
        (if (i64.eq (local.get $n) (i64.const 222)) (then (return (call $sys_mmap (local.get $a0) (local.get $a1) (local.get $a3)))))
        (if (i64.eq (local.get $n) (i64.const 215)) (then (return (call $sys_munmap (local.get $a0) (local.get $a1)))))
        (if (i64.eq (local.get $n) (i64.const 56)) (then (return (call $sys_openat (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 57)) (then (return (call $errno (call $fd_close (i32.wrap_i64 (local.get $a0)))))))
        (if (i64.eq (local.get $n) (i64.const 62)) (then (return (call $sys_lseek (local.get $a0) (local.get $a1) (local.get $a2)))))
        (if (i64.eq (local.get $n) (i64.const 80)) (then (return (call $sys_fstat (local.get $a0) (local.get $a1)))))
        (if (i64.eq (local.get $n) (i64.const 79)) (then (return (call $sys_fstatat (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))))
        (if (i64.eq (local.get $n) (i64.const 113)) (then (return (call $sys_clock_gettime (local.get $a0) (local.get $a1)))))
        (if (i64.eq (local.get $n) (i64.const 278)) (then (return (call $sys_getrandom (local.get $a0) (local.get $a1)))))
        (if (i64.eq (local.get $n) (i64.const 160)) (then (return (call $sys_uname (local.get $a0)))))
        (if (i64.eq (local.get $n) (i64.const 261)) (then (return (call $sys_prlimit (local.get $a1) (local.get $a3)))))
        (if (i64.eq (local.get $n) (i64.const 17)) (then (return (call $sys_getcwd (local.get $a0) (local.get $a1)))))
        (if (i64.eq (local.get $n) (i64.const 29)) (then (return (i64.const -25))))   ;; ioctl: ENOTTY
        ;; set_tid_address, getpid, gettid: the one thread of a one-process machine
        (if (i32.or (i64.eq (local.get $n) (i64.const 96))
              (i32.or (i64.eq (local.get $n) (i64.const 172)) (i64.eq (local.get $n) (i64.const 178))))
          (then (return (i64.const 1))))
        (if (i32.or (i64.eq (local.get $n) (i64.const 93)) (i64.eq (local.get $n) (i64.const 94)))
          (then (call $sys_exit (local.get $a0))))
        (br $unknown))
      (return (i64.const 0)))
    (global.set $enosys (i64.add (global.get $enosys) (i64.const 1)))
    (i64.const -38))

  ;; ---- the start-up stack: argc, argv, envp and the auxiliary vector, as Linux builds it ----
  ;; From the top: 16 random bytes (AT_RANDOM), the argument and environment strings, WASI's
  ;; 32-bit pointer arrays, then (16-byte aligned) the block the program's _start reads.
  (func $initial_stack (result i64)
    (local $argc i32) (local $argsz i32) (local $envc i32) (local $envsz i32)
    (local $rand i32) (local $strs i32) (local $tmp i32) (local $sp i32) (local $i i32)
    (local $envp i32) (local $aux i32)
    (drop (call $args_sizes_get (i32.const 0x1000) (i32.const 0x1004)))
    (drop (call $environ_sizes_get (i32.const 0x1008) (i32.const 0x100c)))
    (local.set $argc (i32.load (i32.const 0x1000)))
    (local.set $argsz (i32.load (i32.const 0x1004)))
    (local.set $envc (i32.load (i32.const 0x1008)))
    (local.set $envsz (i32.load (i32.const 0x100c)))
    ;; Everything must fit in half the stack (checked in 64 bits: the sizes are the host's).
    (if (i64.gt_u
          (i64.add (i64.add (i64.extend_i32_u (local.get $argsz)) (i64.extend_i32_u (local.get $envsz)))
                   (i64.mul (i64.add (i64.extend_i32_u (local.get $argc)) (i64.extend_i32_u (local.get $envc))) (i64.const 12)))
          (i64.sub (i64.shr_u (global.get $STACK_SIZE) (i64.const 1)) (i64.const 4096)))
      (then (call $die (i32.const 0x9c0) (i32.const 47) (global.get $STACK_SIZE))))
    (local.set $rand (i32.sub (i32.wrap_i64 (global.get $STACK_TOP)) (i32.const 16)))
    (drop (call $random_get (local.get $rand) (i32.const 16)))
    (local.set $strs (i32.and (i32.sub (i32.sub (local.get $rand) (local.get $argsz)) (local.get $envsz)) (i32.const -8)))
    (local.set $tmp (i32.and (i32.sub (local.get $strs)
      (i32.shl (i32.add (local.get $argc) (local.get $envc)) (i32.const 2))) (i32.const -8)))
    (drop (call $args_get (local.get $tmp) (local.get $strs)))
    (drop (call $environ_get (i32.add (local.get $tmp) (i32.shl (local.get $argc) (i32.const 2)))
      (i32.add (local.get $strs) (local.get $argsz))))
    ;; argc, argv[argc + 1], envp[envc + 1], 15 auxv pairs
    (local.set $sp (i32.and (i32.sub (local.get $tmp)
      (i32.shl (i32.add (i32.add (local.get $argc) (local.get $envc)) (i32.const 33)) (i32.const 3)))
      (i32.const -16)))
    (i64.store (local.get $sp) (i64.extend_i32_u (local.get $argc)))
    (block $b (loop $l
      (br_if $b (i32.ge_u (local.get $i) (local.get $argc)))
      (i64.store offset=8 (i32.add (local.get $sp) (i32.shl (local.get $i) (i32.const 3)))
        (i64.extend_i32_u (i32.load (i32.add (local.get $tmp) (i32.shl (local.get $i) (i32.const 2))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))
    (i64.store offset=8 (i32.add (local.get $sp) (i32.shl (local.get $argc) (i32.const 3))) (i64.const 0))
    (local.set $envp (i32.add (local.get $sp) (i32.shl (i32.add (local.get $argc) (i32.const 2)) (i32.const 3))))
    (local.set $i (i32.const 0))
    (block $b (loop $l
      (br_if $b (i32.ge_u (local.get $i) (local.get $envc)))
      (i64.store (i32.add (local.get $envp) (i32.shl (local.get $i) (i32.const 3)))
        (i64.extend_i32_u (i32.load (i32.add (i32.add (local.get $tmp) (i32.shl (local.get $argc) (i32.const 2)))
          (i32.shl (local.get $i) (i32.const 2))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))
    (i64.store (i32.add (local.get $envp) (i32.shl (local.get $envc) (i32.const 3))) (i64.const 0))
    (local.set $aux (i32.add (local.get $envp) (i32.shl (i32.add (local.get $envc) (i32.const 1)) (i32.const 3))))
    (i64.store offset=0 (local.get $aux) (i64.const 3))     (i64.store offset=8 (local.get $aux) (global.get $AT_PHDR))
    (i64.store offset=16 (local.get $aux) (i64.const 4))    (i64.store offset=24 (local.get $aux) (global.get $AT_PHENT))
    (i64.store offset=32 (local.get $aux) (i64.const 5))    (i64.store offset=40 (local.get $aux) (global.get $AT_PHNUM))
    (i64.store offset=48 (local.get $aux) (i64.const 6))    (i64.store offset=56 (local.get $aux) (i64.const 4096))
    (i64.store offset=64 (local.get $aux) (i64.const 9))    (i64.store offset=72 (local.get $aux) (global.get $ENTRY))
    (i64.store offset=80 (local.get $aux) (i64.const 11))   (i64.store offset=88 (local.get $aux) (i64.const 0))
    (i64.store offset=96 (local.get $aux) (i64.const 12))   (i64.store offset=104 (local.get $aux) (i64.const 0))
    (i64.store offset=112 (local.get $aux) (i64.const 13))  (i64.store offset=120 (local.get $aux) (i64.const 0))
    (i64.store offset=128 (local.get $aux) (i64.const 14))  (i64.store offset=136 (local.get $aux) (i64.const 0))
    ;; AT_HWCAP: the letters I, M, A, F, D, C
    (i64.store offset=144 (local.get $aux) (i64.const 16))  (i64.store offset=152 (local.get $aux) (i64.const 0x112d))
    (i64.store offset=160 (local.get $aux) (i64.const 17))  (i64.store offset=168 (local.get $aux) (i64.const 100))
    (i64.store offset=176 (local.get $aux) (i64.const 23))  (i64.store offset=184 (local.get $aux) (i64.const 0))
    (i64.store offset=192 (local.get $aux) (i64.const 25))  (i64.store offset=200 (local.get $aux) (i64.extend_i32_u (local.get $rand)))
    (i64.store offset=208 (local.get $aux) (i64.const 0))   (i64.store offset=216 (local.get $aux) (i64.const 0))
    (i64.extend_i32_u (local.get $sp)))
