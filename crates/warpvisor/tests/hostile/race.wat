;; Run against a host thread that keeps swapping `d` between a real directory and a symlink
;; that leads outside: 300 times, read the first byte of `d/target.txt` into the transcript
;; and create `d/new`. Only the byte of the file inside may ever appear, and nothing may be
;; created outside.
(module
  ;; PRELUDE
  (data (i32.const 4096) "d/target.txt")
  (data (i32.const 4120) "d/new")
  (func (export "_start") (local $i i32) (local $f i32)
    (loop $again
      (if (i32.eqz (call $path_open (i32.const 3) (i32.const 1) (i32.const 4096) (i32.const 12)
            (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 64)))
        (then
          (local.set $f (i32.load (i32.const 64)))
          (i32.store (i32.const 256) (i32.const 512))
          (i32.store (i32.const 260) (i32.const 1))
          (i32.store8 (i32.const 512) (i32.const 0))
          (drop (call $fd_read (local.get $f) (i32.const 256) (i32.const 1) (i32.const 96)))
          (call $rec (i32.load8_u (i32.const 512)))
          (drop (call $fd_close (local.get $f)))))
      (if (i32.eqz (call $path_open (i32.const 3) (i32.const 1) (i32.const 4120) (i32.const 5)
            (i32.const 1) (i64.const 0x1FFFFFFF) (i64.const 0) (i32.const 0) (i32.const 64)))
        (then (drop (call $fd_close (i32.load (i32.const 64))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 300))))
    (call $flush)))
