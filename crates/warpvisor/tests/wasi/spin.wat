;; A VM given any argument never finishes: it calls sched_yield forever (a hypercall each
;; round). Without arguments it prints "done" and exits 0.
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $sched_yield (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 32) "done\n")
  (func (export "_start")
    (drop (call $args_sizes_get (i32.const 0) (i32.const 4)))
    (if (i32.gt_u (i32.load (i32.const 0)) (i32.const 1))
      (then (loop $forever (drop (call $sched_yield)) (br $forever))))
    (i32.store (i32.const 16) (i32.const 32))
    (i32.store (i32.const 20) (i32.const 5))
    (drop (call $fd_write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))))
