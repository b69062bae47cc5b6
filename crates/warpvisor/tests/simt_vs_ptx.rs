//! The prediction (`warpvisor simt`: jobs traced on `cpu`, warps replayed at width 32) against
//! the measurement (the same jobs on the `cuda` backend through warpvisor's CUDA driver for
//! the CPU with `WARPVISOR_CUDA_SIMT`, which runs NVRTC's PTX of the fleet kernel warp by
//! warp, device functions inlined): five workloads from fully converged to one long lane per
//! warp must agree with correlation ≥ 0.9 and a mean absolute error ≤ 10 points (issue 17's
//! acceptance; the ten benchmarks are compared by `scripts/simt-vs-ptx.sh`, docs/simt.md).
//!
//! One test in its own binary: the driver reads `WARPVISOR_CUDA_SIMT` when it loads a module.

mod common;
mod simt_cases;

use std::sync::Arc;

use warpvisor::codegen::{CallMode, Dialect, KernelOptions};
use warpvisor::simt::CallModel;
use warpvisor::vmm::{FleetConfig, Imports, Outcome, Program, Value};

/// Each export runs `$mix`'s loop (a hash step per iteration: not an affine recurrence, which
/// NVRTC would compute in closed form — it did for a linear congruential step) for a number
/// of iterations that depends on its argument, the job's index: long enough that the VMs'
/// code, not the kernel's admission and trampoline, is what the warps issue. The two arms of
/// `branchy` are loops of different functions, which no compiler can merge or predicate.
const WORKLOADS: &str = r#"(module
  (func $mix (param $x i32) (param $n i32) (result i32) (local $i i32)
    loop $l
      local.get $x
      local.get $x
      i32.const 15
      i32.shr_u
      i32.xor
      i32.const 739982445
      i32.mul
      local.get $i
      i32.xor
      local.set $x
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      local.get $n
      i32.lt_u
      br_if $l
    end
    local.get $x)
  (func $fold (param $x i32) (param $n i32) (result i32) (local $i i32)
    loop $l
      local.get $x
      i32.const 13
      i32.rotl
      local.get $i
      i32.xor
      local.set $x
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      local.get $n
      i32.lt_u
      br_if $l
    end
    local.get $x)
  ;; Every lane the same work.
  (func (export "uniform") (param $x i32) (result i32)
    (call $mix (local.get $x) (i32.const 2000)))
  ;; 500, 1000, 1500 or 2000 iterations by x % 4.
  (func (export "trips") (param $x i32) (result i32)
    (call $mix (local.get $x)
      (i32.mul (i32.const 500) (i32.add (i32.const 1) (i32.rem_u (local.get $x) (i32.const 4))))))
  ;; One lane in 32 runs 4,000 iterations, the rest 125.
  (func (export "one_long") (param $x i32) (result i32)
    (call $mix (local.get $x)
      (select (i32.const 4000) (i32.const 125) (i32.eqz (i32.rem_u (local.get $x) (i32.const 32))))))
  ;; Odd and even lanes run different loops of the same length: the warp runs both.
  (func (export "branchy") (param $x i32) (result i32)
    (if (result i32) (i32.and (local.get $x) (i32.const 1))
      (then (call $mix (local.get $x) (i32.const 1500)))
      (else (call $fold (local.get $x) (i32.const 1500)))))
  ;; A lane in four returns at once; the others work.
  (func (export "early") (param $x i32) (result i32)
    (if (i32.eqz (i32.rem_u (local.get $x) (i32.const 4)))
      (then (return (local.get $x))))
    (call $mix (local.get $x) (i32.const 2000))))"#;

const EXPORTS: [&str; 5] = ["uniform", "trips", "one_long", "branchy", "early"];
const JOBS: u32 = 64;

/// Lane instructions / (warp instructions × 32) of the `wv_kernel` launches in `log` lines
/// from `from` on.
fn measured(log: &str, from: usize) -> (f64, usize) {
    let (mut warp, mut lane, mut launches) = (0u64, 0u64, 0);
    for line in log.lines().skip(from) {
        let l: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if l["kernel"] != "wv_kernel" {
            continue;
        }
        launches += 1;
        warp += l["counts"]["warp_instructions"].as_u64().expect("a count");
        lane += l["counts"]["lane_instructions"].as_u64().expect("a count");
    }
    assert!(warp > 0, "no wv_kernel launch was counted");
    (lane as f64 / (32.0 * warp as f64), launches)
}

fn correlation(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sx = xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>().sqrt();
    let sy = ys.iter().map(|y| (y - my).powi(2)).sum::<f64>().sqrt();
    cov / (sx * sy)
}

#[test]
fn predicted_efficiency_matches_the_ptx_simt_emulation() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    let log_path = std::env::temp_dir().join(format!(
        "warpvisor-simt-vs-ptx-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log_path);
    std::env::set_var("WARPVISOR_CUDA_SIMT", &log_path);

    let binary = wat::parse_str(WORKLOADS).expect("the workloads parse");
    let options = KernelOptions {
        dialect: Dialect::Cuda,
        calls: CallMode::Continuations,
        ..KernelOptions::default()
    };
    let program = Arc::new(
        Program::compile(&binary, &options, common::cuda().as_ref())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let args: Vec<i32> = (0..JOBS as i32).collect();
    let (mut predicted, mut measured_all) = (Vec::new(), Vec::new());
    eprintln!("| workload | predicted | measured on PTX | launches |");
    for name in EXPORTS {
        // The prediction: traced on cpu, replayed as the GPU backends compile calls.
        let (trace, traced) = simt_cases::trace(WORKLOADS, name, &args, JOBS);
        let p = simt_cases::replay_with(&trace, &[32], CallModel::Continuations)[0].efficiency();

        // The measurement: the same jobs on cuda, warp by warp.
        let before = std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .count();
        let config = FleetConfig {
            num_vms: JOBS,
            max_memory_pages: 1,
            ..FleetConfig::default()
        };
        let mut fleet = warpvisor::vmm::Fleet::new(program.clone(), config, Imports::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let jobs: Vec<Vec<Value>> = args.iter().map(|&a| vec![Value::I32(a)]).collect();
        let outcomes = fleet.invoke(name, &jobs).unwrap_or_else(|e| panic!("{e}"));
        // The two runs computed the same results.
        assert_eq!(
            outcomes, traced,
            "{name}: cuda and the traced cpu run disagree"
        );
        assert!(outcomes.iter().all(|o| matches!(o, Outcome::Returned(_))));
        let log = std::fs::read_to_string(&log_path).expect("the SIMT log was written");
        let (m, launches) = measured(&log, before);
        eprintln!(
            "| {name} | {:.1}% | {:.1}% | {launches} |",
            100.0 * p,
            100.0 * m
        );
        predicted.push(p);
        measured_all.push(m);
    }
    let _ = std::fs::remove_file(&log_path);
    let r = correlation(&predicted, &measured_all);
    let mae = 100.0
        * predicted
            .iter()
            .zip(&measured_all)
            .map(|(p, m)| (p - m).abs())
            .sum::<f64>()
        / predicted.len() as f64;
    eprintln!("correlation {r:.3}, mean absolute error {mae:.1} points");
    // The workloads span the range, so a correlation means something.
    let spread = measured_all.iter().cloned().fold(f64::MIN, f64::max)
        - measured_all.iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        spread > 0.5,
        "the workloads should span efficiencies: {measured_all:?}"
    );
    assert!(r >= 0.9, "correlation {r:.3} < 0.9");
    assert!(mae <= 10.0, "mean absolute error {mae:.1} > 10 points");
}
