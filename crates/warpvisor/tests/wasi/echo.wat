;; A small WASI program for the differential tests: prints its arguments, the environment and
;; the bytes of stdin (upper-cased) to stdout, a line to stderr, and exits with the number of
;; arguments it was given (0 when there are none).
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 2)
  (data (i32.const 64) "stderr line\n")
  ;; write(fd, ptr, len) through the iovec at 0
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))
  ;; prints n NUL-terminated strings whose pointers are at $ptrs, one per line
  (func $print_list (param $ptrs i32) (param $n i32)
    (local $i i32) (local $s i32) (local $e i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $s (i32.load (i32.add (local.get $ptrs) (i32.shl (local.get $i) (i32.const 2)))))
      (local.set $e (local.get $s))
      (block $end (loop $scan
        (br_if $end (i32.eqz (i32.load8_u (local.get $e))))
        (local.set $e (i32.add (local.get $e) (i32.const 1)))
        (br $scan)))
      (i32.store8 (local.get $e) (i32.const 10))
      (call $write (i32.const 1) (local.get $s) (i32.add (i32.sub (local.get $e) (local.get $s)) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
  (func (export "_start")
    (local $argc i32) (local $envc i32) (local $n i32) (local $i i32)
    ;; arguments: pointers at 1024, strings at 2048
    (drop (call $args_sizes_get (i32.const 16) (i32.const 20)))
    (local.set $argc (i32.load (i32.const 16)))
    (drop (call $args_get (i32.const 1024) (i32.const 2048)))
    (call $print_list (i32.const 1024) (local.get $argc))
    ;; environment: pointers at 8192, strings at 12288
    (drop (call $environ_sizes_get (i32.const 16) (i32.const 20)))
    (local.set $envc (i32.load (i32.const 16)))
    (drop (call $environ_get (i32.const 8192) (i32.const 12288)))
    (call $print_list (i32.const 8192) (local.get $envc))
    ;; stdin, 7 bytes at a time, upper-cased, into 65536..
    (block $eof (loop $more
      (i32.store (i32.const 0) (i32.const 32768))
      (i32.store (i32.const 4) (i32.const 7))
      (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
      (local.set $n (i32.load (i32.const 8)))
      (br_if $eof (i32.eqz (local.get $n)))
      (local.set $i (i32.const 0))
      (block $up (loop $each
        (br_if $up (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.and (i32.ge_u (i32.load8_u (i32.add (i32.const 32768) (local.get $i))) (i32.const 97))
                     (i32.le_u (i32.load8_u (i32.add (i32.const 32768) (local.get $i))) (i32.const 122)))
          (then (i32.store8 (i32.add (i32.const 32768) (local.get $i))
                  (i32.sub (i32.load8_u (i32.add (i32.const 32768) (local.get $i))) (i32.const 32)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
      (call $write (i32.const 1) (i32.const 32768) (local.get $n))
      (br $more)))
    (call $write (i32.const 2) (i32.const 64) (i32.const 12))
    (call $proc_exit (i32.sub (local.get $argc) (i32.const 1)))))
