;; Sleeps one second in `poll_oneoff` (one relative monotonic clock), then writes the errno,
;; the event count and the event.
(module
  ;; PRELUDE
  (func (export "_start")
    (i64.store (i32.const 256) (i64.const 42))          ;; userdata
    (i32.store8 (i32.const 264) (i32.const 0))           ;; clock
    (i32.store (i32.const 272) (i32.const 1))            ;; monotonic
    (i64.store (i32.const 280) (i64.const 1000000000))   ;; 1 s
    (i64.store (i32.const 288) (i64.const 0))            ;; precision
    (i32.store16 (i32.const 296) (i32.const 0))          ;; relative
    (call $rec (call $poll_oneoff (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 96)))
    (call $rec_bytes (i32.const 96) (i32.const 4))
    (call $rec_bytes (i32.const 512) (i32.const 32))
    (call $flush)))
