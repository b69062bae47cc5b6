//! Call profiles (`warpvisor profile`, `--profile`): what a counting kernel counts, and that
//! kernels built with a profile — guarded direct calls of hot `call_indirect` targets, direct
//! calls of constant table slots — compute what wasmtime computes, in both call modes.

mod common;

use std::sync::Arc;

use warpvisor::codegen::{emit, CallMode, KernelOptions, MemoryChecks};
use warpvisor::profile::record::{counting_program, profile_invoke};
use warpvisor::profile::{CallProfile, TargetCount};
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, TrapKind, Value};

/// `go(n)` calls slot `i & 3` (three targets, `$dbl` twice as often) and slot 2 (a constant
/// slot of a table nothing changes) n times each; `$rec` is a recursive continuation of the
/// same type in slot 4, which `go(n)` calls once.
const WAT: &str = r#"(module
  (type $t (func (param i32) (result i32)))
  (table 5 funcref)
  (elem (i32.const 0) $dbl $inc $sq $dbl $rec)
  (func $dbl (type $t) (i32.mul (local.get 0) (i32.const 2)))
  (func $inc (type $t) (i32.add (local.get 0) (i32.const 1)))
  (func $sq (type $t) (i32.mul (local.get 0) (local.get 0)))
  (func $rec (type $t)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2)) (then (local.get 0))
      (else (i32.add (call $rec (i32.sub (local.get 0) (i32.const 1))) (i32.const 3)))))
  (func (export "go") (param $n i32) (result i32) (local $acc i32) (local $i i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc)
        (call_indirect (type $t) (local.get $i) (i32.and (local.get $i) (i32.const 3)))))
      (local.set $acc (i32.add (local.get $acc)
        (call_indirect (type $t) (local.get $i) (i32.const 2))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (i32.add (local.get $acc) (call_indirect (type $t) (local.get $n) (i32.const 4)))))"#;

fn on_wasmtime(wasm: &[u8], n: i32) -> i32 {
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::new(&engine, wasm).unwrap();
    let mut store = wasmtime::Store::new(&engine, ());
    let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
    let go = instance
        .get_typed_func::<i32, i32>(&mut store, "go")
        .unwrap();
    go.call(&mut store, n).unwrap()
}

fn on_warpvisor(wasm: &[u8], kernel: &KernelOptions, ns: &[i32]) -> Vec<Outcome> {
    let program = Arc::new(Program::compile(wasm, kernel, common::cpu().as_ref()).unwrap());
    let config = FleetConfig {
        num_vms: ns.len() as u32,
        ..FleetConfig::default()
    };
    let mut fleet = Fleet::new(program, config, Imports::default()).unwrap();
    let jobs: Vec<Vec<Value>> = ns.iter().map(|&n| vec![Value::I32(n)]).collect();
    fleet.invoke_batched("go", &jobs).unwrap()
}

fn record(wasm: &[u8], ns: &[i32]) -> CallProfile {
    let program = counting_program(wasm, common::cpu().as_ref(), 1).unwrap();
    let config = FleetConfig {
        num_vms: 2,
        ..FleetConfig::default()
    };
    let jobs: Vec<Vec<Value>> = ns.iter().map(|&n| vec![Value::I32(n)]).collect();
    let (outcomes, profile) = profile_invoke(wasm, program, "go", config, &jobs).unwrap();
    for (o, &n) in outcomes.iter().zip(ns) {
        assert_eq!(
            o,
            &Outcome::Returned(vec![Value::I32(on_wasmtime(wasm, n))])
        );
    }
    profile
}

#[test]
fn a_counting_kernel_counts_every_site_and_each_call_indirect_target() {
    let wasm = wat::parse_str(WAT).unwrap();
    // Three jobs of 100 iterations: 300 calls of the varying slot, 150 of them to $dbl.
    let profile = record(&wasm, &[100, 100, 100]);
    assert_eq!(profile.jobs, 3);
    let site = |func: u32, site: u32| {
        profile
            .sites
            .iter()
            .find(|s| s.func == func && s.site == site)
            .unwrap_or_else(|| panic!("no site {site} of {func}: {profile:?}"))
    };
    let varying = site(4, 0);
    assert_eq!(varying.calls, 300);
    assert_eq!(
        varying.targets,
        vec![
            TargetCount {
                func: 0,
                calls: 150
            },
            TargetCount { func: 1, calls: 75 },
            TargetCount { func: 2, calls: 75 }
        ]
    );
    // The constant slot is a direct call: counted, with no targets to tell apart.
    assert_eq!((site(4, 1).calls, site(4, 1).targets.len()), (300, 0));
    // $rec(100) recurses 99 times in each of the three jobs.
    assert_eq!(site(3, 0).calls, 3 * 99);
    let binary = wasm.clone();
    let module = warpvisor::frontend::load(&binary).unwrap();
    profile.check(&binary, &module).unwrap();
}

#[test]
fn kernels_built_with_a_profile_call_hot_targets_directly_and_agree_with_wasmtime() {
    let wasm = wat::parse_str(WAT).unwrap();
    let profile = record(&wasm, &[64, 64]);
    let module = warpvisor::frontend::load(&wasm).unwrap();
    let ns = [0, 1, 5, 77, 1000];
    let expected: Vec<Outcome> = ns
        .iter()
        .map(|&n| Outcome::Returned(vec![Value::I32(on_wasmtime(&wasm, n))]))
        .collect();
    for calls in [CallMode::Direct, CallMode::Continuations] {
        let mut kernel = KernelOptions {
            calls,
            memory_checks: MemoryChecks::Explicit,
            ..KernelOptions::default()
        };
        let plain = emit(&module, &kernel).unwrap().partitions.remove(0);
        assert!(!plain.contains("profiled target"), "{calls:?}");
        kernel.profile = Some(profile.clone());
        let source = emit(&module, &kernel).unwrap().partitions.remove(0);
        // $dbl (50%) and $inc (25%) are hot; only two targets are called directly.
        assert!(source.contains("if (callee == 0u)"), "{calls:?}: {source}");
        assert!(source.contains("if (callee == 1u)"), "{calls:?}");
        assert!(!source.contains("if (callee == 2u)"), "{calls:?}");
        assert!(
            source.contains("slot 2 of table 0 never changes"),
            "{calls:?}"
        );
        assert_eq!(on_warpvisor(&wasm, &kernel, &ns), expected, "{calls:?}");
    }
}

#[test]
fn slots_of_a_table_the_program_changes_stay_indirect() {
    // `go` calls slot 0 before and after replacing it: a constant-slot call would miss that.
    let wat = r#"(module
      (type $t (func (param i32) (result i32)))
      (table 2 funcref)
      (elem (i32.const 0) $a) (elem declare func $b)
      (func $a (type $t) (i32.add (local.get 0) (i32.const 1)))
      (func $b (type $t) (i32.mul (local.get 0) (i32.const 10)))
      (func (export "go") (param $n i32) (result i32) (local $x i32)
        (local.set $x (call_indirect (type $t) (local.get $n) (i32.const 0)))
        (table.set (i32.const 0) (ref.func $b))
        (i32.add (local.get $x) (call_indirect (type $t) (local.get $n) (i32.const 0)))))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let module = warpvisor::frontend::load(&wasm).unwrap();
    let kernel = KernelOptions {
        calls: CallMode::Direct,
        memory_checks: MemoryChecks::Explicit,
        ..KernelOptions::default()
    };
    let source = emit(&module, &kernel).unwrap().partitions.remove(0);
    assert!(!source.contains("never changes"), "{source}");
    let ns = [3, 9];
    let expected: Vec<Outcome> = ns
        .iter()
        .map(|&n| Outcome::Returned(vec![Value::I32(on_wasmtime(&wasm, n))]))
        .collect();
    assert_eq!(expected[0], Outcome::Returned(vec![Value::I32(4 + 30)]));
    assert_eq!(on_warpvisor(&wasm, &kernel, &ns), expected);
}

#[test]
fn a_constant_slot_of_another_type_still_traps() {
    // Slot 0 holds a function of another type: the call must trap as wasmtime's does.
    let wat = r#"(module
      (type $t (func (param i32) (result i32)))
      (table 1 funcref) (elem (i32.const 0) $other)
      (func $other (result i64) (i64.const 1))
      (func (export "go") (param i32) (result i32)
        (call_indirect (type $t) (local.get 0) (i32.const 0))))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let kernel = KernelOptions {
        calls: CallMode::Direct,
        memory_checks: MemoryChecks::Explicit,
        ..KernelOptions::default()
    };
    let module = warpvisor::frontend::load(&wasm).unwrap();
    let source = emit(&module, &kernel).unwrap().partitions.remove(0);
    assert!(!source.contains("never changes"), "{source}");
    let out = on_warpvisor(&wasm, &kernel, &[1]);
    assert_eq!(out, vec![Outcome::Trapped(TrapKind::BadSignature)]);
}

#[test]
fn a_profile_of_another_module_is_refused_with_a_reason() {
    let wasm = wat::parse_str(WAT).unwrap();
    let profile = record(&wasm, &[4]);
    let dir = std::env::temp_dir().join(format!("warpvisor-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.json");
    std::fs::write(&path, profile.to_json()).unwrap();
    let other =
        wat::parse_str("(module (func (export \"go\") (param i32) (result i32) (local.get 0)))")
            .unwrap();
    let om = warpvisor::frontend::load(&other).unwrap();
    let e = CallProfile::load(&path, &other, &om)
        .unwrap_err()
        .to_string();
    assert!(e.contains("another module"), "{e}");
    std::fs::write(&path, "{\"format\": 3}").unwrap();
    let module = warpvisor::frontend::load(&wasm).unwrap();
    let e = CallProfile::load(&path, &wasm, &module)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a warpvisor call profile"), "{e}");
    let loaded = CallProfile::load(&dir.join("missing.json"), &wasm, &module);
    assert!(loaded.unwrap_err().to_string().contains("cannot read"));
    let _ = std::fs::remove_dir_all(&dir);
}
