;; hello: the first program to run on warpvisor. Each VM prints a greeting, its arguments,
;; and a checksum it computes from them (the same on every backend):
;;   warpvisor run examples/hello.wasm --vms 8 -- some words
;; Built into hello.wasm by `warpvisor`'s own text support (see examples/README.md).
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; 0..16: scratch (iovec, counts); 16..: text; 256..: argv pointers; 1024..: argv bytes
  (data (i32.const 16) "Hello from a warpvisor VM!\n")  ;; 27 bytes
  (data (i32.const 48) "  arg: ")                      ;; 7 bytes
  (data (i32.const 64) "  checksum: ")                 ;; 12 bytes
  (data (i32.const 80) "\n")

  ;; Writes `len` bytes at `ptr` to stdout.
  (func $print (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))

  ;; Length of the NUL-terminated string at `p`.
  (func $strlen (param $p i32) (result i32) (local $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))

  ;; FNV-1a over `len` bytes at `p`, continuing from `h`.
  (func $fnv (param $h i32) (param $p i32) (param $len i32) (result i32) (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $h (i32.mul
          (i32.xor (local.get $h) (i32.load8_u (i32.add (local.get $p) (local.get $i))))
          (i32.const 16777619)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $h))

  ;; Prints `v` as 8 hex digits.
  (func $print_hex (param $v i32) (local $i i32) (local $d i32)
    (loop $next
      (local.set $d (i32.and (i32.shr_u (local.get $v) (i32.sub (i32.const 28) (i32.shl (local.get $i) (i32.const 2)))) (i32.const 15)))
      (i32.store8 (i32.add (i32.const 96) (local.get $i))
        (i32.add (local.get $d) (select (i32.const 48) (i32.const 87) (i32.lt_u (local.get $d) (i32.const 10)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 8))))
    (call $print (i32.const 96) (i32.const 8)))

  (func (export "_start") (local $argc i32) (local $i i32) (local $p i32) (local $len i32) (local $h i32)
    (call $print (i32.const 16) (i32.const 27))
    (drop (call $args_sizes_get (i32.const 8) (i32.const 12)))
    (local.set $argc (i32.load (i32.const 8)))
    (drop (call $args_get (i32.const 256) (i32.const 1024)))
    (local.set $h (i32.const 0x811c9dc5))
    ;; argv[0] is the program's name: print the arguments after it.
    (local.set $i (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $argc)))
        (local.set $p (i32.load (i32.add (i32.const 256) (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $len (call $strlen (local.get $p)))
        (call $print (i32.const 48) (i32.const 7))
        (call $print (local.get $p) (local.get $len))
        (call $print (i32.const 80) (i32.const 1))
        (local.set $h (call $fnv (local.get $h) (local.get $p) (local.get $len)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $print (i32.const 64) (i32.const 12))
    (call $print_hex (local.get $h))
    (call $print (i32.const 80) (i32.const 1))))
