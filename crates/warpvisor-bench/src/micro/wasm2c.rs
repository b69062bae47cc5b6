//! warpvisor's `cpu` kernels against wasm2c: the same WebAssembly translated by wabt's
//! `wasm2c` and built by the same C compiler with the kernels' own flags
//! ([`CCompiler::flags`]), on the three shapes of code where a translator's calling convention
//! and memory access show: recursive calls, indirect calls and a memory-bound loop.
//!
//! Each program exports `run(i32) -> i32`; both sides run it on one instance (one VM) from a
//! fresh start, and their results must agree before a time counts. Times are the best of a few
//! runs of the call alone (wasm2c: measured inside its process around the exported call;
//! warpvisor: the fleet's wall time for the invocation, launch included).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;
use warpvisor::backend::cpu::CCompiler;
use warpvisor::vmm::{Fleet, FleetConfig, Outcome, Value};

use super::build;
use crate::platform::KernelPlatform;

/// Where Debian's wabt keeps the runtime that wasm2c's output links against.
const RUNTIME_DIR: &str = "/usr/share/wabt/wasm2c";

/// Timed runs per side; the best counts.
const REPS: usize = 3;

/// One program of the set.
struct MicroProgram {
    name: &'static str,
    what: &'static str,
    wat: &'static str,
    /// `run`'s argument: full and quick.
    arg: (i32, i32),
}

/// Naive doubly recursive Fibonacci that also counts its calls in a global: every call a real
/// call (in warpvisor a recursive function: a continuation, or a native call with a stack
/// check). The count is a side effect no C compiler can fold away; without it GCC collapses
/// wasm2c's pure `fib(36)` to 0.16 ms, which measures nothing about calls.
const RECURSIVE: &str = r#"(module
  (global $calls (mut i32) (i32.const 0))
  (func $fib (param $n i32) (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func (export "run") (param $n i32) (result i32)
    (global.set $calls (i32.const 0))
    (i32.add (call $fib (local.get $n)) (global.get $calls))))
"#;

/// `n` calls through a four-entry table, the slot chosen by the data (no compiler can
/// resolve it).
const INDIRECT: &str = r#"(module
  (type $op (func (param i32 i32) (result i32)))
  (table 4 funcref)
  (elem (i32.const 0) $add $xor $mul $rotl)
  (func $add (type $op) (i32.add (local.get 0) (local.get 1)))
  (func $xor (type $op) (i32.xor (local.get 0) (i32.add (local.get 1) (i32.const 0x9e3779b9))))
  (func $mul (type $op) (i32.mul (local.get 0) (i32.or (local.get 1) (i32.const 1))))
  (func $rotl (type $op) (i32.rotl (local.get 0) (local.get 1)))
  (func (export "run") (param $n i32) (result i32) (local $i i32) (local $acc i32)
    (local.set $acc (i32.const 1))
    (loop $l
      (local.set $acc
        (call_indirect (type $op) (local.get $acc) (local.get $i)
          (i32.and (i32.add (local.get $i) (i32.shr_u (local.get $acc) (i32.const 7))) (i32.const 3))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $acc)))
"#;

/// `n` rounds over 1 MiB of i32 words, each word rewritten from itself and a scattered other
/// word: loads and stores with bounds checks dominate. The memory is initialised first, so a
/// run's result does not depend on earlier runs.
const MEMORY: &str = r#"(module
  (memory 16)
  (func (export "run") (param $n i32) (result i32) (local $i i32) (local $r i32) (local $acc i32)
    (loop $init
      (i32.store (i32.shl (local.get $i) (i32.const 2)) (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $init (i32.lt_u (local.get $i) (i32.const 262144))))
    (loop $rounds
      (local.set $i (i32.const 0))
      (loop $words
        (i32.store (i32.shl (local.get $i) (i32.const 2))
          (i32.add
            (i32.mul (i32.load (i32.shl (local.get $i) (i32.const 2))) (i32.const 1664525))
            (i32.add
              (i32.load (i32.shl (i32.and (i32.mul (local.get $i) (i32.const 13)) (i32.const 262143)) (i32.const 2)))
              (local.get $r))))
        (local.set $acc (i32.xor (local.get $acc) (i32.load (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $words (i32.lt_u (local.get $i) (i32.const 262144))))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br_if $rounds (i32.lt_u (local.get $r) (local.get $n))))
    (local.get $acc)))
"#;

const PROGRAMS: &[MicroProgram] = &[
    MicroProgram {
        name: "recursive",
        what: "fib(n) + its call count, doubly recursive",
        wat: RECURSIVE,
        arg: (36, 32),
    },
    MicroProgram {
        name: "indirect",
        what: "n call_indirect through a 4-entry table",
        wat: INDIRECT,
        arg: (100_000_000, 20_000_000),
    },
    MicroProgram {
        name: "memory",
        what: "n rounds of load/load/store over 1 MiB",
        wat: MEMORY,
        arg: (200, 40),
    },
];

/// The wasm2c side's `main`: instantiate, time the exported call, keep the best of `reps`.
const HARNESS: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bench.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  u32 arg = (u32)strtoul(argv[1], 0, 10);
  int reps = atoi(argv[2]);
  wasm_rt_init();
  Z_bench_init_module();
  double best = 1e30;
  u32 result = 0;
  for (int i = 0; i < reps; i++) {
    Z_bench_instance_t inst;
    Z_bench_instantiate(&inst);
    double t0 = now();
    result = Z_benchZ_run(&inst, arg);
    double t = now() - t0;
    if (t < best) best = t;
    Z_bench_free(&inst);
  }
  printf("%u %.9f\n", result, best);
  wasm_rt_free();
  return 0;
}
"#;

/// One program's times on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Wasm2cResult {
    /// The program's name (`recursive`, `indirect`, `memory`).
    pub program: &'static str,
    /// What it does.
    pub what: &'static str,
    /// `run`'s argument.
    pub arg: i32,
    /// The warpvisor platform's report name.
    pub platform: &'static str,
    /// The call mode of its kernel.
    pub calls: &'static str,
    /// warpvisor's best time, seconds.
    pub warpvisor_s: f64,
    /// wasm2c's best time, seconds.
    pub wasm2c_s: f64,
    /// `warpvisor_s / wasm2c_s`: 1.25 or less meets the goal.
    pub ratio: f64,
}

/// Runs the set on `k` (a `cpu` platform), `quick` with the smaller arguments.
pub fn run(k: &KernelPlatform, quick: bool) -> Result<Vec<Wasm2cResult>, String> {
    let dir = std::env::temp_dir().join(format!("warpvisor-wasm2c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cc = CCompiler::detect().map_err(|e| e.to_string())?;
    // The kernels' flags, less the one that makes a shared object.
    let flags: Vec<String> = cc
        .flags(&k.kernel)
        .into_iter()
        .filter(|f| f != "-shared")
        .collect();
    let result = PROGRAMS
        .iter()
        .map(|p| {
            let arg = if quick { p.arg.1 } else { p.arg.0 };
            let (theirs, wasm2c_s) = on_wasm2c(&dir, p, arg, cc.path(), &flags)?;
            let (ours, warpvisor_s) = on_warpvisor(k, p, arg)?;
            if ours != theirs {
                return Err(format!(
                    "{}: warpvisor returned {ours}, wasm2c {theirs}",
                    p.name
                ));
            }
            Ok(Wasm2cResult {
                program: p.name,
                what: p.what,
                arg,
                platform: k.platform.key(),
                calls: k.kernel.calls.name(),
                warpvisor_s,
                wasm2c_s,
                ratio: warpvisor_s / wasm2c_s.max(1e-9),
            })
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `run(arg)` on one VM of `k`: its result and the best wall time of [`REPS`] invocations.
fn on_warpvisor(k: &KernelPlatform, p: &MicroProgram, arg: i32) -> Result<(u32, f64), String> {
    let program = build(k, p.wat, k.kernel.interleave)?;
    let config = FleetConfig {
        num_vms: 1,
        ..FleetConfig::default()
    };
    let mut fleet = Fleet::new(program, config, Default::default()).map_err(|e| e.to_string())?;
    let mut best = f64::INFINITY;
    let mut result = 0;
    for _ in 0..REPS {
        let start = Instant::now();
        let out = fleet
            .invoke("run", &[vec![Value::I32(arg)]])
            .map_err(|e| e.to_string())?;
        best = best.min(start.elapsed().as_secs_f64());
        result = match out.as_slice() {
            [Outcome::Returned(v)] => match v.as_slice() {
                [Value::I32(r)] => *r as u32,
                other => return Err(format!("{}: returned {other:?}", p.name)),
            },
            other => return Err(format!("{}: {other:?}", p.name)),
        };
    }
    Ok((result, best))
}

/// `run(arg)` translated by wasm2c and built by `cc` with `flags` (the kernels'): its result
/// and best time.
fn on_wasm2c(
    dir: &Path,
    p: &MicroProgram,
    arg: i32,
    cc: &str,
    flags: &[String],
) -> Result<(u32, f64), String> {
    let wasm =
        warpvisor::frontend::to_binary(p.wat.as_bytes()).map_err(|e| format!("{}: {e}", p.name))?;
    let base = dir.join(p.name);
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let file = |name: &str| -> PathBuf { base.join(name) };
    std::fs::write(file("bench.wasm"), &wasm).map_err(|e| e.to_string())?;
    std::fs::write(file("main.c"), HARNESS).map_err(|e| e.to_string())?;
    command(
        Command::new("wasm2c")
            .arg(file("bench.wasm"))
            .args(["-n", "bench", "-o"])
            .arg(file("bench.c")),
        "wasm2c (Debian: apt-get install wabt)",
    )?;
    command(
        Command::new(cc)
            .args(flags)
            .arg(format!("-I{RUNTIME_DIR}"))
            .arg(file("main.c"))
            .arg(file("bench.c"))
            .arg(Path::new(RUNTIME_DIR).join("wasm-rt-impl.c"))
            .arg("-lm")
            .arg("-o")
            .arg(file("bench")),
        "building wasm2c's output",
    )?;
    let out = command(
        Command::new(file("bench"))
            .arg((arg as u32).to_string())
            .arg(REPS.to_string()),
        "running wasm2c's build",
    )?;
    let mut words = out.split_whitespace();
    let parse = || format!("{}: wasm2c's build printed `{}`", p.name, out.trim());
    let result = words
        .next()
        .and_then(|w| w.parse::<u32>().ok())
        .ok_or_else(parse)?;
    let secs = words
        .next()
        .and_then(|w| w.parse::<f64>().ok())
        .ok_or_else(parse)?;
    Ok((result, secs))
}

/// Runs `cmd`; its stdout, or an error naming `what` with its stderr.
fn command(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `INDIRECT` in Rust.
    fn indirect(n: u32) -> u32 {
        let mut acc: u32 = 1;
        for i in 0..n {
            acc = match (i.wrapping_add(acc >> 7)) & 3 {
                0 => acc.wrapping_add(i),
                1 => acc ^ i.wrapping_add(0x9e37_79b9),
                2 => acc.wrapping_mul(i | 1),
                _ => acc.rotate_left(i),
            };
        }
        acc
    }

    /// `MEMORY` in Rust.
    fn memory(n: u32) -> u32 {
        let mut w: Vec<u32> = (0..262_144).collect();
        let mut acc = 0;
        for r in 0..n {
            for i in 0..262_144usize {
                let other = w[(i.wrapping_mul(13)) & 262_143];
                w[i] = w[i]
                    .wrapping_mul(1_664_525)
                    .wrapping_add(other.wrapping_add(r));
                acc ^= w[i];
            }
        }
        acc
    }

    /// Each program computes, under wasmtime, what its Rust twin does: the two sides of the
    /// comparison are checked against each other at run time, and this pins down that the
    /// programs do the work they are named for.
    #[test]
    fn the_programs_compute_what_they_say_under_wasmtime() {
        let backend =
            warpvisor::backend::wasmtime::WasmtimeBackend::new(Default::default()).unwrap();
        // fib(10) = 55 in 2 fib(11) - 1 = 177 calls.
        let want = [55 + 177, indirect(1000), memory(3)];
        let args = [10, 1000, 3];
        for ((p, want), arg) in PROGRAMS.iter().zip(want).zip(args) {
            let binary = warpvisor::frontend::to_binary(p.wat.as_bytes())
                .unwrap()
                .into_owned();
            let (out, _) = backend
                .invoke(&binary, "run", 16, &[vec![Value::I32(arg)]])
                .unwrap();
            assert_eq!(
                out,
                vec![Outcome::Returned(vec![Value::I32(want as i32)])],
                "{}",
                p.name
            );
        }
    }
}
