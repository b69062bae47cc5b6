//! `warpvisor simt`: hand-computed cases. Each module is traced on a real fleet (`cpu`, the
//! traced kernel) and replayed; the expected instruction counts, efficiencies, launches and
//! sectors are worked out by hand from the module text (the block table's instruction counts
//! are checked first, so a miscount shows as such).
//!
//! Instruction counts: every operator except the markers `block`, `loop`, `else`, `end`,
//! `nop`. A block ends after `loop`, `if`, `else`, `end`, a branch, `return`, `unreachable` or
//! a call.

mod common;
mod simt_cases;

use std::sync::Arc;

use simt_cases::{
    block_sizes, counts, program, replay, replay_with, subset, trace, trace_wasi_jobs, IF_ELSE,
    NESTED, REGIONS,
};
use warpvisor::simt::tracer::trace_invoke;
use warpvisor::simt::{analyze, AnalysisConfig, CallModel, Grouping, Report, SimtError};
use warpvisor::vmm::{FleetConfig, Outcome, Program, Value};

#[test]
fn the_papers_two_lane_example_serialises_the_two_paths_and_reconverges() {
    // threadfuser.md Fig. 2: two threads, BBL1 diverges into BBL2 and BBL3, both reach BBL4.
    let (t, _) = trace(IF_ELSE, "f", &[1, 2], 2);
    assert_eq!(block_sizes(&t, 0), vec![4, 3, 5, 2]);
    let r = &replay(&t, &[2])[0];
    // Issued: 4 + 3 + 5 + 2 = 14; executed: 2*4 + 3 + 5 + 2*2 = 20.
    assert_eq!(counts(r), (14, 20));
    assert!((r.efficiency() - 20.0 / 28.0).abs() < 1e-12);
    assert_eq!(r.launches, 1);
    // The 8 idle lane slots (one lane waits through BBL2's 3 and BBL3's 5 instructions) are
    // the branch's, block 0 (global id 0).
    assert_eq!(r.divergence.get(&0), Some(&8));
    assert_eq!(r.idle_elsewhere, 0);
}

#[test]
fn an_if_else_gives_the_expected_efficiency_for_every_split_of_32_lanes() {
    // Warp k (k = 0..=32) has its first k lanes odd (then-branch), the rest even.
    let mut args = Vec::new();
    for k in 0..=32 {
        for lane in 0..32 {
            args.push(if lane < k { 1 } else { 2 });
        }
    }
    let (t, _) = trace(IF_ELSE, "f", &args, 32);
    for k in 0..=32u64 {
        let warp = subset(&t, k as usize * 32..k as usize * 32 + 32);
        let r = &replay(&warp, &[32])[0];
        let issued = 4 + 3 * u64::from(k > 0) + 5 * u64::from(k < 32) + 2;
        let executed = 32 * 4 + 3 * k + 5 * (32 - k) + 32 * 2;
        assert_eq!(counts(r), (issued, executed), "split {k}/32");
    }
}

/// `f(n)`: a do-while loop of `n` iterations.
const LOOP: &str = r#"(module
  (func (export "f") (param $n i32) (result i32) (local $i i32)
    loop $l
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      local.get $n
      i32.lt_u
      br_if $l
    end
    local.get $i))"#;
// Blocks: 0 [loop] = 0; 1 [get const add tee get lt br_if] = 7; 2 [end] = 0; 3 [get end] = 1.

#[test]
fn a_loop_issues_as_often_as_its_longest_lane() {
    let trips: Vec<i32> = (0..32).map(|v| 1 + v % 5).collect();
    let (t, _) = trace(LOOP, "f", &trips, 32);
    assert_eq!(block_sizes(&t, 0), vec![0, 7, 0, 1]);
    let r = &replay(&t, &[32])[0];
    let sum: u64 = trips.iter().map(|&n| n as u64).sum();
    assert_eq!(counts(r), (7 * 5 + 1, 7 * sum + 32));
}

#[test]
fn nested_loops_with_per_lane_trip_counts_issue_the_longest_lane_of_each_round() {
    let ns: Vec<i32> = (0..32).map(|v| 1 + (v * 7) % 6).collect();
    let (t, _) = trace(NESTED, "f", &ns, 32);
    assert_eq!(block_sizes(&t, 0), vec![0, 2, 15, 0, 7, 0, 1]);
    let r = &replay(&t, &[32])[0];
    let inner = |n: i32| (n % 3 + 1) as u64;
    let max_n = *ns.iter().max().unwrap();
    // Round k of the outer loop runs for the lanes with n > k; the inner loop of that round
    // issues as often as the longest inner loop among them.
    let mut issued = 1u64;
    for k in 0..max_n {
        let alive: Vec<i32> = ns.iter().copied().filter(|&n| n > k).collect();
        issued += 2 + 15 * alive.iter().map(|&n| inner(n)).max().unwrap() + 7;
    }
    let executed: u64 = ns
        .iter()
        .map(|&n| n as u64 * (2 + 15 * inner(n) + 7) + 1)
        .sum();
    assert_eq!(counts(r), (issued, executed));
}

/// `f(x)`: returns early when x is 0.
const EARLY_RETURN: &str = r#"(module
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32.eqz
    if
      i32.const 100
      return
    end
    local.get 0
    i32.const 5
    i32.mul
    i32.const 1
    i32.add))"#;
// Blocks: 0 [get eqz if] 3; 1 [const return] 2; 2 [end] 0; 3 [get const mul const add end] 5.

#[test]
fn an_early_return_reconverges_only_at_the_function_exit() {
    let args: Vec<i32> = (0..32).map(|v| i32::from(v % 4 != 0)).collect();
    let (t, out) = trace(EARLY_RETURN, "f", &args, 32);
    assert_eq!(out[0], Outcome::Returned(vec![Value::I32(100)]));
    assert_eq!(block_sizes(&t, 0), vec![3, 2, 0, 5]);
    let r = &replay(&t, &[32])[0];
    // 8 lanes return early, 24 go on.
    assert_eq!(counts(r), (3 + 2 + 5, 32 * 3 + 8 * 2 + 24 * 5));
    let fb = t.header.blocks.function(0).unwrap();
    assert_eq!(fb.ipdom[0], fb.exit());
}

/// `f(n)`: recursion `n` deep.
const RECURSION: &str = r#"(module
  (func $f (export "f") (param i32) (result i32)
    local.get 0
    i32.eqz
    if (result i32)
      i32.const 0
    else
      local.get 0
      i32.const 1
      i32.sub
      call $f
      i32.const 1
      i32.add
    end))"#;
// Blocks: 0 [get eqz if] 3; 1 [const else] 1; 2 [get const sub call] 4; 3 [const add end] 2;
// 4 [end] 0.

#[test]
fn recursion_diverges_at_each_depth_where_some_lanes_stop() {
    let depths: Vec<i32> = (0..32).map(|v| v % 4).collect();
    let (t, out) = trace(RECURSION, "f", &depths, 32);
    assert_eq!(out[3], Outcome::Returned(vec![Value::I32(3)]));
    assert_eq!(block_sizes(&t, 0), vec![3, 1, 4, 2, 0]);
    // Native calls: level k runs for lanes with depth >= k: block 0 always; block 1 when a
    // lane stops at k; blocks 2 and 3 when a lane goes deeper.
    let r = &replay_with(&t, &[32], CallModel::Direct)[0];
    let (mut issued, mut executed) = (0u64, 0u64);
    for k in 0..=3 {
        let at = depths.iter().filter(|&&d| d >= k).count() as u64;
        let stop = depths.iter().filter(|&&d| d == k).count() as u64;
        let deeper = at - stop;
        issued += 3 + u64::from(stop > 0) + 6 * u64::from(deeper > 0);
        executed += 3 * at + stop + 6 * deeper;
    }
    assert_eq!(counts(r), (issued, executed));
    // Continuations ($f is recursive, so it yields): every call and return goes through the
    // trampoline, whose rounds regroup the lanes by where they are (8 lanes of each depth):
    // 1: b0 x32, b1 x8 (depth 0 done), b2 x24;  2: b0 x24, b1 x8, b2 x16;
    // 3: b0 x16, b1 x8, b2 x8, b3 x8 (depth 1 back at level 0, done);
    // 4: b0 x8, b1 x8, b3 x8;  5: b3 x16 (depth 2 done);  6: b3 x8;  7: b3 x8 (depth 3 done).
    let r = &replay_with(&t, &[32], CallModel::Continuations)[0];
    let issued = (3 + 1 + 4) + (3 + 1 + 4) + (3 + 1 + 4 + 2) + (3 + 1 + 2) + 2 + 2 + 2;
    let executed =
        (96 + 8 + 96) + (72 + 8 + 64) + (48 + 8 + 32 + 16) + (24 + 8 + 16) + 32 + 16 + 16;
    assert_eq!(counts(r), (issued, executed));
    assert_eq!(r.launches, 1, "rounds of the trampoline are not launches");
}

/// A WASI program: lanes with an argument (`p` = 1) and without take the two arms of an `if`
/// in each of 4 trips of a loop; the `else` arm can return (never does), so the `if`'s
/// reconvergence point is the function's end. Each trip calls `$g`, which can reach an import
/// (so `$g` and `_start` yield) but does not call it.
const DIVERGENT_LOOP_WITH_YIELDING_CALL: &str = r#"(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (memory (export "memory") 1)
  (func $g (param i32)
    local.get 0
    i32.const 1000000
    i32.eq
    if
      call $yield
      drop
    end)
  (func (export "_start") (local $p i32) (local $n i32)
    i32.const 0
    i32.const 4
    call $sizes
    drop
    i32.const 0
    i32.load
    i32.const 1
    i32.and
    local.set $p
    i32.const 4
    local.set $n
    loop $l
      local.get $n
      call $g
      local.get $p
      if
        local.get $n
        i32.const 7
        i32.mul
        drop
      else
        local.get $n
        i32.const 99
        i32.eq
        if
          return
        end
      end
      local.get $n
      i32.const 1
      i32.sub
      local.tee $n
      br_if $l
    end))"#;

#[test]
fn a_yielding_call_off_any_cycle_is_native_and_keeps_the_divergence_of_direct_calls() {
    let (binary, p) = program(DIVERGENT_LOOP_WITH_YIELDING_CALL);
    let args = |v: usize| {
        if v.is_multiple_of(2) {
            vec!["a".into()]
        } else {
            vec![]
        }
    };
    let (_, t) = trace_wasi_jobs(&binary, p, 32, 1, args);
    let start = t.header.blocks.function(3).unwrap();
    assert!(start.yields && t.header.blocks.function(2).unwrap().yields);
    // _start: 0 [const const call] 3; 1 [drop const load const and set const set] 8;
    // 2 [get call] 2 (the loop); 3 [get if] 2; 4 [get const mul drop] 4; 5 [get const eq if] 4;
    // 6 [return] 1; 7, 8 [end] 0; 9 [get const sub tee br_if] 5; 10, 11 [end] 0.
    // $g: 0 [get const eq if] 4; 1 [call] 1; 2 [drop] 1; 3 [end] 0.
    assert_eq!(block_sizes(&t, 3), vec![3, 8, 2, 2, 4, 4, 1, 0, 0, 5, 0, 0]);
    assert_eq!(block_sizes(&t, 2), vec![4, 1, 1, 0]);
    assert_eq!(start.ipdom[3], start.exit());
    // 16 lanes take each arm in every trip; every lane runs 3 + 8 + 4 x (2 + 4 + 2 + 9).
    let executed = 32 * (3 + 8) + 32 * 4 * (2 + 4 + 2 + 9);
    // Native calls: after the first `if` the `then` lanes run all 4 trips while the others
    // wait at the function's end, then the `else` lanes do: 3 + (8 + 2 + 4 + 2) + 2 x (9 + 3
    // x 17).
    let r = &replay_with(&t, &[32], CallModel::Direct)[0];
    assert_eq!(counts(r), (3 + 16 + 2 * (9 + 3 * 17), executed));
    // With continuations `$g`, which lies on no call cycle, is called as a C function (codegen's
    // native yield_call) and never yields here: the lanes diverge as with direct calls; only
    // the hypercall at the start relaunches the warp. (Calls through the trampoline, which
    // regroup lanes, are those of recursive functions: the test above.)
    let r = &replay_with(&t, &[32], CallModel::Continuations)[0];
    assert_eq!(counts(r), (3 + 16 + 2 * (9 + 3 * 17), executed));
    assert_eq!(r.launches, 2);
}

/// `f(x)`: `call_indirect` to one of three functions by `x % 3`.
const INDIRECT: &str = r#"(module
  (type $t (func (param i32) (result i32)))
  (table 3 funcref)
  (elem (i32.const 0) $a $b $c)
  (func $a (type $t) local.get 0)
  (func $b (type $t) local.get 0 i32.const 1 i32.add)
  (func $c (type $t) local.get 0 i32.const 2 i32.mul i32.const 3 i32.add)
  (func (export "f") (param i32) (result i32)
    local.get 0
    local.get 0
    i32.const 3
    i32.rem_u
    call_indirect (type $t)))"#;
// $a 1, $b 3, $c 5 instructions (one block each); f: 0 [get get const rem call_indirect] 5,
// 1 [end] 0.

#[test]
fn indirect_calls_to_different_targets_run_one_target_after_another() {
    let args: Vec<i32> = (0..32).collect();
    let (t, _) = trace(INDIRECT, "f", &args, 32);
    assert_eq!(block_sizes(&t, 3), vec![5, 0]);
    let r = &replay(&t, &[32])[0];
    let n = |k: i32| args.iter().filter(|&&x| x % 3 == k).count() as u64;
    assert_eq!(
        counts(r),
        (5 + 1 + 3 + 5, 32 * 5 + n(0) + 3 * n(1) + 5 * n(2))
    );
    // The callee's own efficiency excludes the caller, and the other way round.
    assert_eq!(r.per_function[3].lockstep, 5);
    assert_eq!(r.per_function[3].thread, 32 * 5);
    assert_eq!(r.per_function[2].lockstep, 5);
    assert_eq!(r.per_function[2].thread, 5 * n(2));
}

/// A WASI program that asks for its arguments (a hypercall of every lane) and writes one
/// byte only when it has an argument (a hypercall inside divergent code).
const WASI_DIVERGENT: &str = r#"(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "x")
  (func (export "_start")
    i32.const 0
    i32.const 4
    call $sizes
    drop
    i32.const 0
    i32.load
    i32.const 1
    i32.gt_u
    if
      i32.const 16
      i32.const 64
      i32.store
      i32.const 20
      i32.const 1
      i32.store
      i32.const 1
      i32.const 16
      i32.const 1
      i32.const 24
      call $write
      drop
    else
      nop
    end
    i32.const 8
    i32.const 8
    i32.store))"#;
// _start (function 2): 0 [const const call] 3; 1 [drop const load const gt_u if] 6;
// 2 [const const store const const store const const const const call] 11; 3 [drop else] 1;
// 4 [nop end] 0; 5 [const const store end] 3.

#[test]
fn a_hypercall_in_divergent_code_relaunches_the_lanes_that_made_it() {
    let (binary, p) = program(WASI_DIVERGENT);
    let args = |v: usize| if v < 12 { vec!["a".into()] } else { vec![] };
    let (results, t) = trace_wasi_jobs(&binary, p, 32, 1, args);
    assert_eq!(results[0].stdout, b"x");
    assert!(results[20].stdout.is_empty());
    assert_eq!(block_sizes(&t, 2), vec![3, 6, 11, 1, 0, 3]);
    let r = &replay(&t, &[32])[0];
    // Launch 1: block 0, every lane stops at args_sizes_get. Launch 2: block 1; the 12 lanes
    // with an argument run block 2 and stop at fd_write; the 20 others run blocks 4 and 5 and
    // finish. Launch 3: the 12 run blocks 3 and 5.
    assert_eq!(r.launches, 3);
    let issued = 3 + 6 + 11 + 3 + 1 + 3;
    let executed = 32 * 3 + 32 * 6 + 12 * 11 + 20 * 3 + 12 + 12 * 3;
    assert_eq!(counts(r), (issued, executed));
}

/// `f(addr)`: one 4-byte and one 8-byte load at `addr`.
const LOADS: &str = r#"(module
  (memory 1)
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32.load
    local.get 0
    i64.load
    i32.wrap_i64
    i32.add))"#;

#[test]
fn same_offset_accesses_coalesce_only_when_interleaved() {
    let (t, _) = trace(LOADS, "f", &[96; 32], 32);
    let r = &replay(&t, &[32])[0];
    let m: Vec<_> = r.memory.values().collect();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].instructions, 2);
    // i32: 32 sectors, 4 (128 contiguous bytes), 8 (half of each 8-byte cell).
    // i64: 32, 8 (two 4-byte cells, two 128-byte rows), 8.
    assert_eq!(m[0].sectors, [32 + 32, 4 + 8, 8 + 8]);
    let report = Report::new(&t, Grouping::Consecutive, &replay(&t, &[8, 16, 32]));
    assert_eq!(report.recommended_interleave, 4);
}

#[test]
fn strided_accesses_spread_over_sectors() {
    // Lane v reads offset 8v: interleave 4 puts lane v's cell in row 2v, 32 sectors; at
    // interleave 8 lane v's cell is in row v at v*256 + 8v: 32 sectors. The i64 load needs
    // two cells at interleave 4: 64.
    let args: Vec<i32> = (0..32).map(|v| 8 * v).collect();
    let (t, _) = trace(LOADS, "f", &args, 32);
    let r = &replay(&t, &[32])[0];
    let m: Vec<_> = r.memory.values().collect();
    assert_eq!(m[0].sectors, [32 + 32, 32 + 64, 32 + 32]);
}

/// `f(addr)`: one 4-byte load at `addr`.
const LOAD32: &str = r#"(module
  (memory 1)
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32.load))"#;

#[test]
fn neighbouring_offsets_coalesce_at_interleave_eight_in_pairs() {
    // Lane v reads offset 4v. Interleave 0: 32 slabs. Interleave 4: row v, at 132v: 32.
    // Interleave 8: row v/2 at 256(v/2) + 8v + 4(v % 2): lanes 2r and 2r+1 share a sector.
    let args: Vec<i32> = (0..32).map(|v| 4 * v).collect();
    let (t, _) = trace(LOAD32, "f", &args, 32);
    let r = &replay(&t, &[32])[0];
    let m: Vec<_> = r.memory.values().collect();
    assert_eq!(m[0].sectors, [32, 32, 16]);
}

#[test]
fn accesses_are_split_into_stack_data_and_heap() {
    let (t, _) = trace(REGIONS, "f", &[0; 32], 32);
    let r = &replay(&t, &[32])[0];
    use warpvisor::simt::trace::Region;
    for region in [Region::Stack, Region::Data, Region::Heap] {
        let m = r.memory[&region];
        assert_eq!((m.instructions, m.accesses), (1, 32), "{region:?}");
        assert_eq!(m.sectors, [32, 4, 8], "{region:?}");
    }
}

/// `f(n)`: fills `n` bytes at 0.
const FILL: &str = r#"(module
  (memory 1)
  (func (export "f") (param i32) (result i32)
    i32.const 0
    i32.const 7
    local.get 0
    memory.fill
    local.get 0))"#;

#[test]
fn a_bulk_fill_counts_every_sector_it_covers() {
    let (t, _) = trace(FILL, "f", &[64; 32], 32);
    let r = &replay(&t, &[32])[0];
    let m = r.memory.values().next().unwrap();
    // 64 bytes per lane: 2 sectors each at interleave 0; 16 rows of 128 bytes (4 sectors) at
    // interleave 4; 8 rows of 256 bytes at interleave 8.
    assert_eq!(m.sectors, [64, 64, 64]);
}

#[test]
fn uniform_lanes_are_fully_efficient_at_every_width() {
    let (t, _) = trace(LOOP, "f", &[3; 64], 64);
    for r in replay(&t, &[1, 8, 16, 32, 64]) {
        assert_eq!(
            counts(&r),
            ((7 * 3 + 1) * 64 / r.width as u64, (7 * 3 + 1) * 64)
        );
        assert_eq!(r.efficiency(), 1.0, "width {}", r.width);
    }
}

#[test]
fn a_partial_last_warp_leaves_its_missing_lanes_idle() {
    let (t, _) = trace(LOOP, "f", &[2; 40], 40);
    let r = &replay(&t, &[32])[0];
    // Two warps issue 15 each; 40 lanes execute 15.
    assert_eq!(counts(r), (30, 600));
    // No branch diverged: every idle slot is a missing lane of the short warp.
    assert!(r.divergence.is_empty());
    assert_eq!(r.idle_elsewhere, 30 * 32 - 600);
    assert!((r.efficiency() - 600.0 / (30.0 * 32.0)).abs() < 1e-12);
}

#[test]
fn efficiency_does_not_rise_with_warp_width() {
    let trips: Vec<i32> = (0..64).map(|v| 1 + (v * 13 % 9)).collect();
    let (t, _) = trace(LOOP, "f", &trips, 64);
    let r = replay(&t, &[8, 16, 32]);
    assert!(r[0].efficiency() >= r[1].efficiency());
    assert!(r[1].efficiency() >= r[2].efficiency());
    assert!(r[2].efficiency() < 1.0);
}

#[test]
fn grouping_similar_jobs_removes_divergence_between_short_and_long_ones() {
    // Jobs alternate 1 and 9 iterations: consecutive warps mix them, similar warps do not.
    let trips: Vec<i32> = (0..64).map(|v| if v % 2 == 0 { 1 } else { 9 }).collect();
    let (t, _) = trace(LOOP, "f", &trips, 64);
    let similar = analyze(
        &t,
        &AnalysisConfig {
            widths: vec![32],
            grouping: Grouping::Similar,
            ..AnalysisConfig::default()
        },
    )
    .unwrap();
    let consecutive = replay(&t, &[32]);
    assert_eq!(similar[0].efficiency(), 1.0);
    // Consecutive: each warp issues 7*9+1 = 64; executes 16*(7+1) + 16*(63+1).
    assert_eq!(counts(&consecutive[0]), (128, 2 * (16 * 8 + 16 * 64)));
}

/// `f(x)`: traps when x is odd, in the middle of a divergent branch.
const TRAP: &str = r#"(module
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32.const 1
    i32.and
    if
      unreachable
    end
    local.get 0))"#;
// Blocks: 0 [get const and if] 4; 1 [unreachable] 1; 2 [end] 0; 3 [get end] 1.

#[test]
fn a_lane_that_traps_leaves_the_warp_and_the_others_carry_on() {
    let args: Vec<i32> = (0..32).collect();
    let (t, out) = trace(TRAP, "f", &args, 32);
    assert!(matches!(out[1], Outcome::Trapped(_)));
    assert_eq!(block_sizes(&t, 0), vec![4, 1, 0, 1]);
    let r = &replay(&t, &[32])[0];
    assert_eq!(counts(r), (4 + 1 + 1, 32 * 4 + 16 + 16));
}

#[test]
fn the_function_report_excludes_callees_and_names_the_worst() {
    let args: Vec<i32> = (0..32).collect();
    let (t, _) = trace(INDIRECT, "f", &args, 32);
    let results = replay(&t, &[8, 16, 32]);
    let report = Report::new(&t, Grouping::Consecutive, &results);
    let f = report.functions.iter().find(|f| f.index == 3).unwrap();
    assert_eq!(f.efficiency, 1.0);
    // $c issues 5 for the 10 lanes with x % 3 == 2: the most idle lane slots.
    assert_eq!(report.worst(1)[0].index, 2);
    assert_eq!(report.worst(1)[0].idle_lanes, 5 * 32 - 5 * 10);
    assert!(report.markdown().contains("| 32 |"));
    assert!(report.svg().starts_with("<svg"));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["recommended_interleave"], 0);
}

#[test]
fn a_trace_that_does_not_follow_the_control_flow_is_an_error() {
    let (mut t, _) = trace(IF_ELSE, "f", &[1, 2], 2);
    // Job 0 took block 1; claim it took block 3 straight from block 0.
    t.jobs[0].words[1] = 3;
    match analyze(&t, &AnalysisConfig::default()) {
        Err(SimtError::Mismatch { job: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
    t.jobs[0].words[1] = 99_999;
    assert!(analyze(&t, &AnalysisConfig::default()).is_err());
    let bad = AnalysisConfig {
        widths: vec![65],
        grouping: Grouping::Consecutive,
        ..AnalysisConfig::default()
    };
    assert!(matches!(analyze(&t, &bad), Err(SimtError::Limit(_))));
}

#[test]
fn tracing_leaves_results_unchanged_and_cuts_long_traces_where_told() {
    let (binary, p) = program(NESTED);
    let jobs: Vec<Vec<Value>> = (0..8).map(|v| vec![Value::I32(v + 1)]).collect();
    let config = FleetConfig {
        num_vms: 4,
        ..FleetConfig::default()
    };
    let (outcomes, full) = trace_invoke(&binary, p.clone(), "f", config, &jobs, 1 << 20).unwrap();
    // The same module untraced on the same backend.
    let plain = Program::compile(
        NESTED.as_bytes(),
        &warpvisor::codegen::KernelOptions::default(),
        common::cpu().as_ref(),
    )
    .unwrap();
    let mut fleet =
        warpvisor::vmm::Fleet::new(Arc::new(plain), config, Default::default()).unwrap();
    assert_eq!(fleet.invoke_batched("f", &jobs).unwrap(), outcomes);
    assert_eq!(full.jobs.len(), 8);
    assert!(full.jobs.iter().all(|j| !j.truncated));
    let (_, cut) = trace_invoke(&binary, p, "f", config, &jobs, 10).unwrap();
    for (c, f) in cut.jobs.iter().zip(&full.jobs) {
        if f.words.len() > 10 {
            assert!(c.truncated && c.words[..] == f.words[..10]);
        } else {
            assert!(!c.truncated && c.words == f.words);
        }
    }
    assert!(cut.jobs.iter().filter(|j| j.truncated).count() >= 6);
    // A cut trace still analyses (its jobs end early).
    assert!(analyze(&cut, &AnalysisConfig::default()).is_ok());
}

/// `f(x)`: loads 0, then 70000 for odd `x` (past the memory's end: a trap mid-block), else 0.
const TRAP_MID_BLOCK: &str = r#"(module
  (memory 1)
  (func (export "f") (param i32) (result i32)
    i32.const 0
    i32.load
    local.get 0
    i32.const 1
    i32.and
    i32.const 70000
    i32.mul
    i32.load
    i32.add))"#;

#[test]
fn a_trap_in_the_middle_of_a_block_keeps_the_trace_consistent() {
    let args: Vec<i32> = (0..32).collect();
    let (t, out) = trace(TRAP_MID_BLOCK, "f", &args, 32);
    assert!(matches!(out[1], Outcome::Trapped(_)));
    assert_eq!(out[2], Outcome::Returned(vec![Value::I32(0)]));
    // A trapping lane keeps its block's id, not the block's accesses.
    assert_eq!(t.jobs[1].words.len(), 1);
    assert_eq!(t.jobs[2].words.len(), 3);
    let r = &replay(&t, &[32])[0];
    assert_eq!(counts(r), (9, 9 * 32));
    let accesses: u64 = r.memory.values().map(|m| m.accesses).sum();
    assert_eq!(accesses, 2 * 16);
}

#[test]
fn the_dynamic_cfg_reconverges_before_paths_no_lane_took() {
    // `f(x)`: a search loop over x's bits that exits early at the first set bit; a second exit
    // (no set bit) returns at once. Statically the early exit and the fall-through meet only at
    // the function's exit; no job has x = 0, so dynamically they meet after the loop.
    let wat = r#"(module
      (func (export "f") (param i32) (result i32) (local $i i32)
        block $found
          loop $next
            local.get 0
            local.get $i
            i32.shr_u
            i32.const 1
            i32.and
            br_if $found
            local.get $i
            i32.const 1
            i32.add
            local.tee $i
            i32.const 32
            i32.lt_u
            br_if $next
          end
          i32.const -1
          return
        end
        local.get $i
        i32.const 100
        i32.mul
        i32.const 7
        i32.add
        i32.const 3
        i32.mul))"#;
    let args: Vec<i32> = (0..32).map(|v| 1 << (v % 4)).collect();
    let (t, _) = trace(wat, "f", &args, 32);
    let stat = replay(&t, &[32]);
    let dynamic = analyze(
        &t,
        &AnalysisConfig {
            widths: vec![32],
            cfg: warpvisor::simt::Cfg::Dynamic,
            ..AnalysisConfig::default()
        },
    )
    .unwrap();
    // Statically the lanes that found their bit early run the tail apart, once per exit
    // iteration (4 groups); dynamically they wait after the loop and run it once together.
    assert_eq!(stat[0].counts.thread, dynamic[0].counts.thread);
    assert!(dynamic[0].counts.lockstep < stat[0].counts.lockstep);
    let tail = 7; // local.get, const, mul, const, add, const, mul
    assert_eq!(
        stat[0].counts.lockstep - dynamic[0].counts.lockstep,
        3 * tail
    );
}
