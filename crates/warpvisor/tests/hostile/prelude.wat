  ;; Shared by the hostile guests: the WASI imports they use, and helpers that record each
  ;; call's errno as one byte of stdout (`$rec`), so that a run's stdout is a transcript to
  ;; compare with wasmtime's. The case to run is the first byte of stdin (`$case`).
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_readdir" (func $fd_readdir (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fd_fdstat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_filestat_get" (func $fd_filestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_remove_directory" (func $path_remove_directory (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_create_directory" (func $path_create_directory (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_unlink_file" (func $path_unlink_file (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_symlink" (func $path_symlink (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_readlink" (func $path_readlink (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_rename" (func $path_rename (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get" (func $path_filestat_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_set_times" (func $path_filestat_set_times (param i32 i32 i32 i32 i64 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 32)
  ;; Transcript bytes so far (at 1024).
  (global $n (mut i32) (i32.const 0))

  ;; Appends one byte (an errno) to the transcript.
  (func $rec (param $v i32)
    (i32.store8 (i32.add (i32.const 1024) (global.get $n)) (local.get $v))
    (global.set $n (i32.add (global.get $n) (i32.const 1))))

  ;; Appends `len` bytes at `ptr` to the transcript.
  (func $rec_bytes (param $ptr i32) (param $len i32)
    (memory.copy (i32.add (i32.const 1024) (global.get $n)) (local.get $ptr) (local.get $len))
    (global.set $n (i32.add (global.get $n) (local.get $len))))

  ;; Writes the transcript to stdout.
  (func $flush
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (global.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))

  ;; The case number: stdin's first byte.
  (func $case (result i32)
    (i32.store (i32.const 32) (i32.const 48))
    (i32.store (i32.const 36) (i32.const 1))
    (drop (call $fd_read (i32.const 0) (i32.const 32) (i32.const 1) (i32.const 40)))
    (i32.load8_u (i32.const 48)))

  ;; Opens `path` under `dir` as a directory; records the errno; the new fd is at 64.
  (func $open_dir (param $dir i32) (param $path i32) (param $len i32)
    (call $rec (call $path_open (local.get $dir) (i32.const 0) (local.get $path) (local.get $len)
      (i32.const 2) (i64.const 0x1FFFFFBF) (i64.const 0x1FFFFFFF) (i32.const 0) (i32.const 64))))

  ;; Opens `path` under `dir` with `oflags` for reading and writing; records the errno; the
  ;; new fd is at 64.
  (func $open_file (param $dir i32) (param $path i32) (param $len i32) (param $oflags i32)
    (call $rec (call $path_open (local.get $dir) (i32.const 0) (local.get $path) (local.get $len)
      (local.get $oflags) (i64.const 0x1FFFFFFF) (i64.const 0x1FFFFFFF) (i32.const 0) (i32.const 64))))
