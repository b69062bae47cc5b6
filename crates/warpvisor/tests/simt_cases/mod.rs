//! What the `simt` tests share: tracing a module on a real fleet, replaying it, and the
//! modules more than one test binary uses.
#![allow(dead_code)]

use std::sync::Arc;

use warpvisor::simt::replay::WidthResult;
use warpvisor::simt::tracer::{trace_invoke, trace_wasi, traced_program};
use warpvisor::simt::{analyze, AnalysisConfig, CallModel, Grouping, Trace};
use warpvisor::vmm::{FleetConfig, Outcome, Program, Value};
use warpvisor::wasi::program::{JobResult, WasiRunConfig};
use warpvisor::wasi::WasiJob;

use crate::common;

pub fn program(wat: &str) -> (Vec<u8>, Arc<Program>) {
    let binary = wat::parse_str(wat).unwrap();
    let p = traced_program(&binary, common::cpu().as_ref(), 0).unwrap_or_else(|e| panic!("{e}"));
    (binary, p)
}

/// Traces `func` of `wat` once per job (one `i32` argument each) on `vms` VMs.
pub fn trace(wat: &str, func: &str, args: &[i32], vms: u32) -> (Trace, Vec<Outcome>) {
    let (binary, p) = program(wat);
    let jobs: Vec<Vec<Value>> = args.iter().map(|&a| vec![Value::I32(a)]).collect();
    let config = FleetConfig {
        num_vms: vms,
        max_memory_pages: 1,
        ..FleetConfig::default()
    };
    let (outcomes, trace) =
        trace_invoke(&binary, p, func, config, &jobs, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
    (trace, outcomes)
}

/// Runs WASI program `binary` (compiled as `program`) once per job on a traced fleet of one
/// VM per job, job `j` with arguments `args(j)`, each VM's memory at most `max_pages` pages.
pub fn trace_wasi_jobs(
    binary: &[u8],
    program: Arc<Program>,
    jobs: usize,
    max_pages: u32,
    args: impl Fn(usize) -> Vec<String>,
) -> (Vec<JobResult>, Trace) {
    let jobs: Vec<WasiJob> = (0..jobs)
        .map(|j| WasiJob {
            args: args(j),
            env: vec![],
            stdin: Default::default(),
        })
        .collect();
    let config = WasiRunConfig {
        fleet: FleetConfig {
            num_vms: jobs.len() as u32,
            max_memory_pages: max_pages,
            ..FleetConfig::default()
        },
        program_name: "p".into(),
        preopens: vec![],
        allow_unknown_imports: false,
    };
    trace_wasi(binary, program, &config, &jobs, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
}

pub fn replay(trace: &Trace, widths: &[u32]) -> Vec<WidthResult> {
    replay_with(trace, widths, CallModel::default())
}

/// [`replay`] with calls run as `calls` says.
pub fn replay_with(trace: &Trace, widths: &[u32], calls: CallModel) -> Vec<WidthResult> {
    analyze(
        trace,
        &AnalysisConfig {
            widths: widths.to_vec(),
            grouping: Grouping::Consecutive,
            calls,
            ..AnalysisConfig::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The trace of jobs `range` only.
pub fn subset(trace: &Trace, range: std::ops::Range<usize>) -> Trace {
    Trace {
        header: trace.header.clone(),
        jobs: trace.jobs[range].to_vec(),
    }
}

/// Instruction counts of function `f`'s blocks.
pub fn block_sizes(trace: &Trace, f: u32) -> Vec<u32> {
    let fb = trace.header.blocks.function(f).unwrap();
    fb.blocks.iter().map(|b| b.instructions).collect()
}

/// (issued, executed) of one result.
pub fn counts(r: &WidthResult) -> (u64, u64) {
    (r.counts.lockstep, r.counts.thread)
}

/// `f(x)`: then-branch when x is odd.
pub const IF_ELSE: &str = r#"(module
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32.const 1
    i32.and
    if (result i32)
      local.get 0
      i32.const 1
      i32.add
    else
      local.get 0
      i32.const 3
      i32.mul
      i32.const 7
      i32.add
    end
    i32.const 2
    i32.mul))"#;
// Blocks: 0 [get const and if] = 4; 1 [get const add else] = 3; 2 [get const mul const add
// end] = 5; 3 [const mul end] = 2.

/// `f(n)`: an outer loop of `n` iterations, each running an inner loop of `n % 3 + 1`.
pub const NESTED: &str = r#"(module
  (func (export "f") (param $n i32) (result i32) (local $i i32) (local $j i32) (local $s i32)
    loop $outer
      i32.const 0
      local.set $j
      loop $inner
        local.get $s
        i32.const 1
        i32.add
        local.set $s
        local.get $j
        i32.const 1
        i32.add
        local.tee $j
        local.get $n
        i32.const 3
        i32.rem_u
        i32.const 1
        i32.add
        i32.lt_u
        br_if $inner
      end
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      local.get $n
      i32.lt_u
      br_if $outer
    end
    local.get $s))"#;
// Blocks: 0 [loop] 0; 1 [const set loop] 2; 2 [inner body .. br_if] 15; 3 [end] 0;
// 4 [get const add tee get lt br_if] 7; 5 [end] 0; 6 [get end] 1.

/// Accesses in the shadow stack, static data and the heap of an LLVM-style module.
pub const REGIONS: &str = r#"(module
  (memory 1)
  (global $sp (mut i32) (i32.const 1024))
  (global $heap i32 (i32.const 4096))
  (global $end i32 (i32.const 2064))
  (export "__heap_base" (global $heap))
  (export "__data_end" (global $end))
  (data (i32.const 2048) "0123456789abcdef")
  (func (export "f") (param i32) (result i32)
    i32.const 512
    i32.load
    i32.const 2052
    i32.load
    i32.add
    i32.const 5000
    i32.load
    i32.add))"#;
