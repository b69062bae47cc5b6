//! The cost of a slow call: a call through the trampoline (save the live values in a frame,
//! return to the trampoline, dispatch, resume, restore) over a plain C call. A recursive
//! function is always a continuation in warpvisor, so recursion gives exact slow-call counts;
//! the same number of plain calls is the baseline. Both callees keep four values live across
//! the call, about what the benchmarks' frames hold.

use serde::Serialize;
use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::vmm::{Fleet, FleetConfig, Value};

use super::{build, expect_all};
use crate::platform::KernelPlatform;

/// Depth of each recursion: slow calls per repetition.
const DEPTH: i32 = 100;

/// One backend's slow-call cost.
#[derive(Debug, Clone, Serialize)]
pub struct SlowCallResult {
    /// The platform's report name.
    pub platform: &'static str,
    /// VMs calling at once.
    pub vms: u32,
    /// Slow calls made, over every VM.
    pub slow_calls: u64,
    /// Fleet execution time per slow call over a plain call, nanoseconds (all VMs calling at
    /// once, as in the benchmarks).
    pub ns_per_slow_call: f64,
    /// Fleet execution time per plain call, nanoseconds.
    pub ns_per_plain_call: f64,
}

/// The module: `slow(reps)` recurses `DEPTH` deep `reps` times; `plain(reps)` makes as many
/// calls to a function that does not recurse. Both return `reps * DEPTH * 4`.
pub fn module() -> String {
    let body = |callee: &str, n: &str| {
        format!(
            "(local.set $r (call {callee} {n} (local.get $a) (local.get $b) (local.get $c)))\n      (i32.add (local.get $r) (i32.add (local.get $a) (i32.add (local.get $b) (i32.add (local.get $c) (i32.const 1)))))"
        )
    };
    format!(
        r#"(module
  ;; Recursive, hence a continuation: every call saves a, b, c (and n) in a frame.
  (func $rec (param $n i32) (param $a i32) (param $b i32) (param $c i32) (result i32) (local $r i32)
    (if (result i32) (i32.eqz (local.get $n)) (then (i32.const 0))
      (else
      {rec})))
  ;; A leaf a C compiler may inline: the plain call.
  (func $leaf (param $n i32) (param $a i32) (param $b i32) (param $c i32) (result i32)
    (local.get $n))
  (func $flat (param $a i32) (param $b i32) (param $c i32) (result i32) (local $k i32) (local $r i32) (local $acc i32)
    (local.set $k (i32.const {DEPTH}))
    (loop $l
      {leaf}
      (local.set $acc (i32.add (local.get $acc)))
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (br_if $l (local.get $k)))
    (local.get $acc))
  (func (export "slow") (param $reps i32) (result i32) (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (call $rec (i32.const {DEPTH}) (i32.const 1) (i32.const 1) (i32.const 1))))
      (local.set $reps (i32.sub (local.get $reps) (i32.const 1)))
      (br_if $l (i32.gt_s (local.get $reps) (i32.const 0))))
    (local.get $acc))
  (func (export "plain") (param $reps i32) (result i32) (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (call $flat (i32.const 1) (i32.const 1) (i32.const 1))))
      (local.set $reps (i32.sub (local.get $reps) (i32.const 1)))
      (br_if $l (i32.gt_s (local.get $reps) (i32.const 0))))
    (local.get $acc)))
"#,
        rec = body("$rec", "(i32.sub (local.get $n) (i32.const 1))"),
        leaf = body("$leaf", "(i32.const 0)"),
    )
}

/// Measures `k` with `vms` VMs, each making `reps * DEPTH` calls of each kind.
pub fn run(k: &KernelPlatform, vms: u32, reps: u32) -> Result<SlowCallResult, String> {
    // A slow call is a continuation call: measured with continuations in either call mode
    // (with direct calls the recursion is native and there is nothing to measure).
    let continuations = KernelPlatform {
        platform: k.platform,
        backend: k.backend.clone(),
        kernel: KernelOptions {
            calls: CallMode::Continuations,
            memory_checks: MemoryChecks::Explicit,
            ..k.kernel.clone()
        },
    };
    let program = build(&continuations, &module(), k.kernel.interleave)?;
    let config = FleetConfig {
        num_vms: vms,
        max_memory_pages: 0,
        ..FleetConfig::default()
    };
    let mut fleet = Fleet::new(program, config, Default::default()).map_err(|e| e.to_string())?;
    let want = Value::I32(reps as i32 * DEPTH * 4);
    let mut time = |name: &str| -> Result<(f64, u64), String> {
        let args = vec![vec![Value::I32(reps as i32)]; vms as usize];
        fleet.invoke(name, &args).map_err(|e| e.to_string())?; // warm-up
        let before = fleet.stats();
        let out = fleet.invoke(name, &args).map_err(|e| e.to_string())?;
        expect_all(name, &out, want)?;
        let d = fleet.stats().since(&before);
        Ok((d.execute.as_secs_f64(), d.slow_calls))
    };
    let (slow, slow_calls) = time("slow")?;
    let (plain, _) = time("plain")?;
    let calls = (reps as u64 * DEPTH as u64 * vms as u64) as f64;
    Ok(SlowCallResult {
        platform: k.platform.key(),
        vms,
        slow_calls,
        ns_per_slow_call: ((slow - plain) / slow_calls.max(1) as f64 * 1e9).max(0.0),
        ns_per_plain_call: plain / calls * 1e9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// wasmtime agrees with the result both functions promise.
    #[test]
    fn both_functions_return_reps_times_depth_times_four() {
        let backend =
            warpvisor::backend::wasmtime::WasmtimeBackend::new(Default::default()).unwrap();
        let binary = warpvisor::frontend::to_binary(module().as_bytes())
            .unwrap()
            .into_owned();
        for f in ["slow", "plain"] {
            let (out, _) = backend
                .invoke(&binary, f, 1, &[vec![Value::I32(3)]])
                .unwrap();
            assert_eq!(
                out,
                vec![warpvisor::vmm::Outcome::Returned(vec![Value::I32(1200)])],
                "{f}"
            );
        }
    }
}
