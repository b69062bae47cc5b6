;; Filesystem attacks on the `--dir` sandbox (fd 3 is the preopened directory). The case is
;; stdin's first byte; every call's errno goes to the transcript.
(module
  ;; PRELUDE
  (data (i32.const 4096) "d")
  (data (i32.const 4100) "../../../../../../../..")
  (data (i32.const 4130) "etc/hostname")
  (data (i32.const 4150) "pwned")
  (data (i32.const 4160) "../outside.txt")
  (data (i32.const 4180) "l")
  (data (i32.const 4184) ".")
  (data (i32.const 4188) "sub/..")
  (data (i32.const 4200) "sub")
  (data (i32.const 4210) "../fifo")
  (data (i32.const 4220) "f")
  (data (i32.const 4224) "fifo")
  (data (i32.const 4230) "..")
  (data (i32.const 4240) "d/etc/hostname")
  (data (i32.const 4260) "l/x")
  (data (i32.const 4270) "/etc")
  (data (i32.const 4280) "inside.txt")

  (func $escape_through_replaced_dir (local $d i32)
    (call $open_dir (i32.const 3) (i32.const 4096) (i32.const 1))
    (local.set $d (i32.load (i32.const 64)))
    (call $rec (call $path_remove_directory (i32.const 3) (i32.const 4096) (i32.const 1)))
    (call $rec (call $path_symlink (i32.const 4100) (i32.const 23) (i32.const 3) (i32.const 4096) (i32.const 1)))
    ;; Paths below the old handle: the directory is gone, nothing leads out.
    (call $open_file (local.get $d) (i32.const 4130) (i32.const 12) (i32.const 0))
    (call $open_file (local.get $d) (i32.const 4150) (i32.const 5) (i32.const 1))
    ;; Through the new symlink from the preopen: refused.
    (call $open_file (i32.const 3) (i32.const 4240) (i32.const 14) (i32.const 0))
    ;; What the old handle lists: only `.` and `..` (bufused recorded).
    (call $rec (call $fd_readdir (local.get $d) (i32.const 8192) (i32.const 4096) (i64.const 0) (i32.const 80)))
    (call $rec_bytes (i32.const 80) (i32.const 4)))

  (func $times_through_symlink
    (call $rec (call $path_symlink (i32.const 4160) (i32.const 14) (i32.const 3) (i32.const 4180) (i32.const 1)))
    ;; Without the follow flag: the link's own times.
    (call $rec (call $path_filestat_set_times (i32.const 3) (i32.const 0) (i32.const 4180) (i32.const 1)
      (i64.const 0) (i64.const 0) (i32.const 5)))
    ;; With it: the target is outside, refused.
    (call $rec (call $path_filestat_set_times (i32.const 3) (i32.const 1) (i32.const 4180) (i32.const 1)
      (i64.const 0) (i64.const 0) (i32.const 5)))
    (call $rec (call $path_filestat_get (i32.const 3) (i32.const 1) (i32.const 4180) (i32.const 1) (i32.const 8192)))
    (call $open_file (i32.const 3) (i32.const 4180) (i32.const 1) (i32.const 0))
    (call $rec (call $path_create_directory (i32.const 3) (i32.const 4260) (i32.const 3))))

  (func $times_on_fifo_link
    (call $rec (call $path_symlink (i32.const 4210) (i32.const 7) (i32.const 3) (i32.const 4220) (i32.const 1)))
    (call $rec (call $path_filestat_set_times (i32.const 3) (i32.const 0) (i32.const 4220) (i32.const 1)
      (i64.const 0) (i64.const 0) (i32.const 5))))

  (func $open_fifo
    ;; A FIFO the host left in the directory: opening it must not block the host.
    ;; Read-only: open(2) of a FIFO without a writer blocks unless asked not to.
    (call $rec (call $path_open (i32.const 3) (i32.const 0) (i32.const 4224) (i32.const 4)
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 64))))

  (func $remove_the_preopen
    (call $rec (call $path_remove_directory (i32.const 3) (i32.const 4184) (i32.const 1)))
    (call $rec (call $path_remove_directory (i32.const 3) (i32.const 4230) (i32.const 2)))
    (call $rec (call $path_create_directory (i32.const 3) (i32.const 4200) (i32.const 3)))
    (call $rec (call $path_remove_directory (i32.const 3) (i32.const 4188) (i32.const 6))))

  (func $leave_by_name
    (call $open_file (i32.const 3) (i32.const 4160) (i32.const 14) (i32.const 0))
    (call $open_file (i32.const 3) (i32.const 4270) (i32.const 4) (i32.const 0))
    (call $rec (call $path_symlink (i32.const 4270) (i32.const 4) (i32.const 3) (i32.const 4180) (i32.const 1)))
    (call $rec (call $path_rename (i32.const 3) (i32.const 4280) (i32.const 10) (i32.const 3) (i32.const 4160) (i32.const 14)))
    (call $rec (call $path_unlink_file (i32.const 3) (i32.const 4160) (i32.const 14))))

  (func $rights_by_the_os (local $f i32)
    ;; A file opened for reading only: writing is BADF (from the OS), as in wasmtime.
    (call $rec (call $path_open (i32.const 3) (i32.const 0) (i32.const 4280) (i32.const 10)
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 64)))
    (local.set $f (i32.load (i32.const 64)))
    (i32.store (i32.const 256) (i32.const 4280))
    (i32.store (i32.const 260) (i32.const 4))
    (call $rec (call $fd_write (local.get $f) (i32.const 256) (i32.const 1) (i32.const 96)))
    ;; Reading a directory descriptor.
    (call $rec (call $fd_read (i32.const 3) (i32.const 256) (i32.const 1) (i32.const 96)))
    (call $rec (call $fd_close (local.get $f))))

  (func $bad_path_pointer
    ;; A path that wraps around the address space: a trap, as in wasmtime.
    (call $rec (call $path_open (i32.const 3) (i32.const 0) (i32.const 0xFFFFFFF0) (i32.const 32)
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 64))))

  (func $bad_readlink_buffer
    (call $rec (call $path_symlink (i32.const 4280) (i32.const 10) (i32.const 3) (i32.const 4180) (i32.const 1)))
    ;; The link's target copied into a buffer past the end of memory.
    (call $rec (call $path_readlink (i32.const 3) (i32.const 4180) (i32.const 1)
      (i32.const 2097148) (i32.const 64) (i32.const 96))))

  (func (export "_start")
    (block $done
      (block $8 (block $7 (block $6 (block $5 (block $4 (block $3 (block $2 (block $1 (block $0
        (br_table $0 $1 $2 $3 $4 $5 $6 $7 $8 $done (call $case)))
        (call $escape_through_replaced_dir) (br $done))
        (call $times_through_symlink) (br $done))
        (call $times_on_fifo_link) (br $done))
        (call $open_fifo) (br $done))
        (call $remove_the_preopen) (br $done))
        (call $leave_by_name) (br $done))
        (call $rights_by_the_os) (br $done))
        (call $bad_path_pointer) (br $done))
        (call $bad_readlink_buffer) (br $done))
    (call $flush)))
