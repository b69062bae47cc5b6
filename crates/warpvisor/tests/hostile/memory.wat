;; Hostile pointers, lengths and counts. The case is stdin's first byte; a case that traps
;; leaves no transcript (wasmtime traps on bad guest pointers), the others record errnos.
;; Memory is 32 pages: 2 MiB, so 2097152 is one past the end.
(module
  ;; PRELUDE
  (func $iovec (param $at i32) (param $ptr i32) (param $len i32)
    (i32.store (local.get $at) (local.get $ptr))
    (i32.store (i32.add (local.get $at) (i32.const 4)) (local.get $len)))

  (func $case_body (param $c i32) (local $i i32)
    (block $done
      (block $19 (block $18 (block $17 (block $16 (block $15 (block $14 (block $13 (block $12
      (block $11 (block $10 (block $9 (block $8 (block $7 (block $6 (block $5 (block $4
      (block $3 (block $2 (block $1 (block $0
        (br_table $0 $1 $2 $3 $4 $5 $6 $7 $8 $9 $10 $11 $12 $13 $14 $15 $16 $17 $18 $19 $done
          (local.get $c)))
        ;; 0: argv pointers that wrap around the address space
        (call $rec (call $args_get (i32.const 0xFFFFFFF0) (i32.const 256))) (br $done))
        ;; 1: a misaligned argv array
        (call $rec (call $args_get (i32.const 2) (i32.const 256))) (br $done))
        ;; 2: a result pointer past the end
        (call $rec (call $args_sizes_get (i32.const 0xFFFFFFFF) (i32.const 256))) (br $done))
        ;; 3: 4 GiB of randomness
        (call $rec (call $random_get (i32.const 0) (i32.const 0xFFFFFFFF))) (br $done))
        ;; 4: randomness across the end of memory
        (call $rec (call $random_get (i32.const 2097150) (i32.const 16))) (br $done))
        ;; 5: 2^31 iovecs
        (call $rec (call $fd_write (i32.const 1) (i32.const 256) (i32.const 0x7FFFFFFF) (i32.const 96))) (br $done))
        ;; 6: one iovec of 4 GiB
        (call $iovec (i32.const 256) (i32.const 65536) (i32.const 0xFFFFFFFF))
        (call $rec (call $fd_write (i32.const 1) (i32.const 256) (i32.const 1) (i32.const 96))) (br $done))
        ;; 7: an iovec across the end of memory
        (call $iovec (i32.const 256) (i32.const 2097000) (i32.const 1000))
        (call $rec (call $fd_write (i32.const 1) (i32.const 256) (i32.const 1) (i32.const 96))) (br $done))
        ;; 8: 512 iovecs naming the same 1 MiB buffer (512 MiB asked for)
        (memory.fill (i32.const 65536) (i32.const 65) (i32.const 1048576))
        (local.set $i (i32.const 0))
        (loop $fill
          (call $iovec (i32.add (i32.const 8192) (i32.mul (local.get $i) (i32.const 8)))
            (i32.const 65536) (i32.const 1048576))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $fill (i32.lt_u (local.get $i) (i32.const 512))))
        (call $rec (call $fd_write (i32.const 1) (i32.const 8192) (i32.const 512) (i32.const 96)))
        (call $rec_bytes (i32.const 96) (i32.const 4)) (br $done))
        ;; 9: reading into a buffer across the end of memory
        (call $iovec (i32.const 256) (i32.const 2097000) (i32.const 1000))
        (call $rec (call $fd_read (i32.const 0) (i32.const 256) (i32.const 1) (i32.const 96))) (br $done))
        ;; 10: subscriptions that wrap around
        (call $rec (call $poll_oneoff (i32.const 0xFFFFFFF0) (i32.const 512) (i32.const 2) (i32.const 96))) (br $done))
        ;; 11: events past the end (a clock that fires at once)
        (i32.store8 (i32.const 264) (i32.const 0))
        (i32.store (i32.const 272) (i32.const 1))
        (i64.store (i32.const 280) (i64.const 0))
        (call $rec (call $poll_oneoff (i32.const 256) (i32.const 0xFFFFFFF8) (i32.const 1) (i32.const 96))) (br $done))
        ;; 12: fdstat past the end
        (call $rec (call $fd_fdstat_get (i32.const 1) (i32.const 0xFFFFFFF8))) (br $done))
        ;; 13: a misaligned filestat
        (call $rec (call $fd_filestat_get (i32.const 1) (i32.const 3))) (br $done))
        ;; 14: a bad descriptor with bad iovecs: the iovecs are looked at first
        (call $rec (call $fd_write (i32.const 99) (i32.const 0xFFFFFFF8) (i32.const 2) (i32.const 96))) (br $done))
        ;; 15: a bad descriptor with good iovecs
        (call $iovec (i32.const 256) (i32.const 1024) (i32.const 4))
        (call $rec (call $fd_write (i32.const 99) (i32.const 256) (i32.const 1) (i32.const 96))) (br $done))
        ;; 16: no subscriptions; then 2^28 of them
        (call $rec (call $poll_oneoff (i32.const 256) (i32.const 512) (i32.const 0) (i32.const 96)))
        (call $rec (call $poll_oneoff (i32.const 256) (i32.const 512) (i32.const 0x10000000) (i32.const 96)))
        (br $done))
        ;; 17: a result count past the end after a successful write (the write happens)
        (call $iovec (i32.const 256) (i32.const 4096) (i32.const 0))
        (call $rec (call $fd_write (i32.const 1) (i32.const 256) (i32.const 1) (i32.const 0xFFFFFFFF))) (br $done))
        ;; 18: an unknown clock
        (i32.store8 (i32.const 264) (i32.const 0))
        (i32.store (i32.const 272) (i32.const 7))
        (call $rec (call $poll_oneoff (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 96))) (br $done))
        ;; 19: a prestat of a descriptor that does not exist, with a bad pointer
        (call $rec (call $fd_prestat_get (i32.const 77) (i32.const 0xFFFFFFFF))) (br $done))
  )

  (func (export "_start")
    (call $case_body (call $case))
    (call $flush)))
