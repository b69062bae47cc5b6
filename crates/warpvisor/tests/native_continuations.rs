//! Continuations called as C functions (`codegen/function/continuation.rs`, `yield_call` with
//! `native`): a continuation of the kernel on no call cycle runs without a trip through the
//! trampoline when it does not yield, and when it yields from deep inside such a chain every
//! frame of the chain is saved and resumed through the trampoline, results intact. Checked on
//! `cpu` with continuations (the GPU backends' kernels) against the same program on wasmtime.

mod common;

use std::sync::Arc;

use warpvisor::backend::wasmtime::{WasiSetup, WasmtimeBackend};
use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::vmm::{FleetConfig, Program, TrapKind};
use warpvisor::wasi::program::{run_jobs_with_stats, JobResult, WasiRunConfig, WasiStats};
use warpvisor::wasi::WasiJob;

/// `_start` sums `$mid(i)` for i in 0..1000 and writes the sum's low byte and "\n" to stdout.
/// `$mid(x)` calls `$leaf(x)` and `$leaf(x + 1)`; `$leaf` writes "!" to stdout when its
/// argument is 500 (so both yield — they reach an import — but only two of the 2,000 calls,
/// from `$mid(499)` and `$mid(500)`, do). Neither recurses.
const CHAIN: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "!")
  (func $leaf (param $x i32) (result i32)
    local.get $x
    i32.const 500
    i32.eq
    if
      ;; iovec at 0: {16, 1}; written count at 8
      i32.const 0 i32.const 16 i32.store
      i32.const 4 i32.const 1 i32.store
      i32.const 1 i32.const 0 i32.const 1 i32.const 8 call $fd_write
      drop
    end
    local.get $x
    i32.const 3
    i32.mul)
  (func $mid (param $x i32) (result i32) (local $keep i32)
    ;; a value live across both calls
    local.get $x
    i32.const 7
    i32.add
    local.set $keep
    local.get $x
    call $leaf
    local.get $x
    i32.const 1
    i32.add
    call $leaf
    i32.add
    local.get $keep
    i32.xor)
  (func (export "_start") (local $i i32) (local $sum i32)
    loop $l
      local.get $sum
      local.get $i
      call $mid
      i32.add
      local.set $sum
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      i32.const 1000
      i32.lt_u
      br_if $l
    end
    i32.const 32 local.get $sum i32.store8
    i32.const 33 i32.const 10 i32.store8
    i32.const 0 i32.const 32 i32.store
    i32.const 4 i32.const 2 i32.store
    i32.const 1 i32.const 0 i32.const 1 i32.const 8 call $fd_write
    drop))"#;

/// What wasmtime makes of `jobs` of program `wasm`.
fn on_wasmtime(wasm: &[u8], name: &str, jobs: &[WasiJob]) -> Vec<JobResult> {
    let engine = WasmtimeBackend::new(Default::default()).unwrap();
    let setup = WasiSetup {
        program_name: name.into(),
        max_memory_pages: FleetConfig::default().max_memory_pages,
        ..WasiSetup::default()
    };
    engine.run_wasi(wasm, &setup, jobs).unwrap().0
}

/// `jobs` of program `wasm` on `cpu` with continuations (explicit memory checks) and kernel
/// partitions of `partition_ops` operators, one VM per job: the results and the run's stats.
fn on_cpu_with_continuations(
    wasm: &[u8],
    name: &str,
    jobs: &[WasiJob],
    partition_ops: u32,
) -> (Vec<JobResult>, WasiStats) {
    on_cpu_with_call_depth(
        wasm,
        name,
        jobs,
        partition_ops,
        FleetConfig::default().max_call_depth,
    )
}

/// [`on_cpu_with_continuations`] with at most `max_call_depth` nested calls per VM.
fn on_cpu_with_call_depth(
    wasm: &[u8],
    name: &str,
    jobs: &[WasiJob],
    partition_ops: u32,
    max_call_depth: u32,
) -> (Vec<JobResult>, WasiStats) {
    let kernel = KernelOptions {
        calls: CallMode::Continuations,
        memory_checks: MemoryChecks::Explicit,
        partition_ops,
        ..KernelOptions::default()
    };
    let program = Arc::new(Program::compile(wasm, &kernel, common::cpu().as_ref()).unwrap());
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: jobs.len() as u32,
            max_call_depth,
            ..FleetConfig::default()
        },
        program_name: name.into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
    };
    run_jobs_with_stats(program, &config, jobs).unwrap()
}

#[test]
fn calls_that_do_not_yield_skip_the_trampoline_and_one_that_does_resumes_its_chain() {
    let wasm = wat::parse_str(CHAIN).unwrap();
    let jobs = vec![WasiJob::default(); 4];
    let expected = on_wasmtime(&wasm, "chain", &jobs);
    assert_eq!(expected[0].stdout.len(), 4, "{:?}", expected[0]);
    assert_eq!(&expected[0].stdout[..2], b"!!");

    let (results, stats) = on_cpu_with_continuations(&wasm, "chain", &jobs, 0);
    assert_eq!(results, expected);
    // Per VM: 3,000 calls of continuations (each a slow call before); through the trampoline
    // only the three hypercalls and, twice, the resumption of the chain that yielded ($leaf
    // back to $mid, $mid back to _start).
    let per_vm = stats.fleet.slow_calls / 4;
    assert!((3..=12).contains(&per_vm), "{per_vm} slow calls per VM");
    // Only the chains that yielded saved their frames: a few live values each, twice.
    let saved = stats.fleet.saved_words / 4;
    assert!((1..=24).contains(&saved), "{saved} values saved per VM");
}

#[test]
fn native_calls_count_toward_the_call_depth_limit() {
    // CHAIN with $leaf's import never reached: _start (depth 1) calls $mid (2) and $leaf (3)
    // natively, which write no frames and never yield, then writes at depth 1. The limit still
    // counts the frames they stand for: below 3 they trap, though no frame was ever pushed.
    let quiet = CHAIN.replace("i32.const 500\n    i32.eq", "i32.const 5000\n    i32.eq");
    assert_ne!(quiet, CHAIN);
    let wasm = wat::parse_str(&quiet).unwrap();
    let jobs = vec![WasiJob::default(); 2];
    let expected = on_wasmtime(&wasm, "chain", &jobs);
    assert_eq!(expected[0].stdout.len(), 2, "{:?}", expected[0]);
    for depth in [1, 2] {
        let (results, _) = on_cpu_with_call_depth(&wasm, "chain", &jobs, 0, depth);
        for r in &results {
            assert_eq!(
                r.trap,
                Some(TrapKind::StackOverflow),
                "depth {depth}: {r:?}"
            );
            assert!(r.stdout.is_empty(), "depth {depth}: {r:?}");
        }
    }
    let (results, _) = on_cpu_with_call_depth(&wasm, "chain", &jobs, 0, 3);
    assert_eq!(results, expected);
}

/// `_start` makes 1,000 `call_indirect`s from a continuation (it reaches `fd_write`) to a
/// fastcall (even i) and to a continuation on no call cycle that writes "!" when its argument
/// is 501 (odd i), then one to a recursive continuation, `$rec(5)`, and writes the sum's low
/// byte and "\n". `$rec`'s slot comes from a global: a constant slot would be a direct call
/// (`codegen/devirt.rs`).
const INDIRECT: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (type $t (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "!")
  (table 3 funcref)
  (elem (i32.const 0) $fast $cont $rec)
  (global $rec_slot (mut i32) (i32.const 2))
  (func $fast (type $t) local.get 0 i32.const 5 i32.mul i32.const 1 i32.add)
  (func $cont (type $t)
    local.get 0
    i32.const 501
    i32.eq
    if
      i32.const 0 i32.const 16 i32.store
      i32.const 4 i32.const 1 i32.store
      i32.const 1 i32.const 0 i32.const 1 i32.const 8 call $fd_write
      drop
    end
    local.get 0
    i32.const 3
    i32.xor)
  (func $rec (type $t)
    local.get 0
    if (result i32)
      local.get 0 i32.const 1 i32.sub global.get $rec_slot call_indirect (type $t)
      i32.const 2 i32.add
    else
      i32.const 1
    end)
  (func (export "_start") (local $i i32) (local $sum i32)
    loop $l
      local.get $sum
      local.get $i
      local.get $i i32.const 1 i32.and
      call_indirect (type $t)
      i32.add
      local.set $sum
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      i32.const 1000
      i32.lt_u
      br_if $l
    end
    local.get $sum
    i32.const 5 global.get $rec_slot call_indirect (type $t)
    i32.add
    local.set $sum
    i32.const 32 local.get $sum i32.store8
    i32.const 33 i32.const 10 i32.store8
    i32.const 0 i32.const 32 i32.store
    i32.const 4 i32.const 2 i32.store
    i32.const 1 i32.const 0 i32.const 1 i32.const 8 call $fd_write
    drop))"#;

#[test]
fn call_indirect_from_a_continuation_calls_fastcalls_and_native_continuations_directly() {
    let wasm = wat::parse_str(INDIRECT).unwrap();
    let jobs = vec![WasiJob::default(); 4];
    let expected = on_wasmtime(&wasm, "indirect", &jobs);
    assert_eq!(expected[0].stdout.len(), 3, "{:?}", expected[0]);
    assert_eq!(expected[0].stdout[0], b'!');

    // One kernel, and partitions of a few operators: there a target that lives in another
    // partition than `_start` goes through the trampoline (and another launch), with the same
    // results.
    for partition_ops in [0, 12] {
        let (results, stats) = on_cpu_with_continuations(&wasm, "indirect", &jobs, partition_ops);
        assert_eq!(results, expected, "partitions of {partition_ops} operators");
        assert_eq!(
            stats.fleet.indirect_calls / 4,
            1006,
            "1,000 + $rec's 6 per VM"
        );
        let per_vm = stats.fleet.slow_calls / 4;
        if partition_ops == 0 {
            // Through the trampoline: the two hypercalls, the resumption of the call that
            // yielded, and $rec's six calls (a call cycle) — not the 1,000 calls in the loop.
            assert!((8..=16).contains(&per_vm), "{per_vm} slow calls per VM");
        }
    }
}
