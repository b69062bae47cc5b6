//! Process-wide signal handlers: opening the `opencl` backend (PoCL) must not take wasmtime's
//! traps away. PoCL installs a SIGFPE handler that steps over a faulting integer division on
//! any thread; a differential run in CI saw wasmtime return from `i32.rem_s` by zero after
//! PoCL started in the same process. Its own binary: the order (wasmtime first) matters.
//! `div_u` because cranelift tests signed divisors itself in some sequences; an unsigned
//! division by a variable is left to the hardware's fault.
//!
//! The tests of this file run one at a time (`SERIAL`): each needs the handlers installed in
//! the order it makes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use warpvisor::codegen::{CallMode, Dialect, KernelOptions, MemoryChecks};
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, TrapKind, Value};
use wasmtime::{Engine, Instance, Module, Store};

static SERIAL: Mutex<()> = Mutex::new(());

const DIVIDES_BY_ITS_ARGUMENT: &str = r#"(module
  (func (export "div") (param i32) (result i32) (i32.div_u (i32.const 7) (local.get 0))))"#;

/// What wasmtime makes of `7 / 0`: the trap's message, or the value it returned.
fn divide_by_zero(engine: &Engine, module: &Module) -> Result<i32, String> {
    let mut store = Store::new(engine, ());
    let instance = Instance::new(&mut store, module, &[]).map_err(|e| e.to_string())?;
    let div = instance
        .get_typed_func::<i32, i32>(&mut store, "div")
        .map_err(|e| e.to_string())?;
    div.call(&mut store, 0).map_err(|e| format!("{e:#}"))
}

#[test]
fn wasmtime_still_traps_on_division_by_zero_after_pocl_starts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Engine::default();
    let wasm = wat::parse_str(DIVIDES_BY_ITS_ARGUMENT).expect("wat");
    let module = Module::new(&engine, wasm).expect("module");
    let before = divide_by_zero(&engine, &module);
    assert!(
        before.as_ref().is_err_and(|e| e.contains("divide by zero")),
        "{before:?}"
    );
    let devices = warpvisor::backend::opencl::devices();
    assert!(
        devices.is_ok(),
        "OpenCL (PoCL) is needed for this test: {:?}",
        devices.err()
    );
    let after = divide_by_zero(&engine, &module);
    assert!(
        after.as_ref().is_err_and(|e| e.contains("divide by zero")),
        "wasmtime's division trap after PoCL started: {after:?}"
    );
}

/// Loads an `i32` at its argument: out of bounds beyond 64 KiB; `unreachable` traps (a SIGILL
/// under wasmtime).
const LOADS_AT_ITS_ARGUMENT: &str = r#"(module
  (memory 1)
  (func (export "load") (param i32) (result i32) (i32.load (local.get 0)))
  (func (export "unreachable") unreachable))"#;

/// What wasmtime makes of `unreachable`: the trap's message, or the call's success.
fn reach_unreachable(engine: &Engine, module: &Module) -> Result<(), String> {
    let mut store = Store::new(engine, ());
    let instance = Instance::new(&mut store, module, &[]).map_err(|e| e.to_string())?;
    let f = instance
        .get_typed_func::<(), ()>(&mut store, "unreachable")
        .map_err(|e| e.to_string())?;
    f.call(&mut store, ()).map_err(|e| format!("{e:#}"))
}

/// What wasmtime makes of a load at 1 MiB: the trap's message, or the value it returned.
fn load_far(engine: &Engine, module: &Module) -> Result<i32, String> {
    let mut store = Store::new(engine, ());
    let instance = Instance::new(&mut store, module, &[]).map_err(|e| e.to_string())?;
    let load = instance
        .get_typed_func::<i32, i32>(&mut store, "load")
        .map_err(|e| e.to_string())?;
    load.call(&mut store, 1 << 20).map_err(|e| format!("{e:#}"))
}

/// A guarded PoCL fleet of two VMs whose kernel (a load at the argument) neither warpvisor's
/// cache nor PoCL's holds: a constant of this run's own and `tag` are in its code.
fn unbuilt_pocl_fleet(tag: u64) -> Fleet {
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id())
        ^ tag.rotate_left(40);
    let wat = format!(
        r#"(module
  (memory 1)
  (global $nonce (mut i64) (i64.const 0))
  (func (export "load") (param i32) (result i32)
    (global.set $nonce (i64.add (global.get $nonce) (i64.const {})))
    (i32.load (local.get 0))))"#,
        nonce as i64
    );
    let options = KernelOptions {
        dialect: Dialect::OpenCl,
        calls: CallMode::Continuations,
        memory_checks: MemoryChecks::Guard,
        ..KernelOptions::default()
    };
    let program = Program::compile(wat.as_bytes(), &options, &*common::opencl())
        .unwrap_or_else(|e| panic!("PoCL builds the kernel: {e}"));
    let config = FleetConfig {
        num_vms: 2,
        ..FleetConfig::default()
    };
    Fleet::new(Arc::new(program), config, Imports::default())
        .unwrap_or_else(|e| panic!("a guarded PoCL fleet: {e}"))
}

/// Every second VM loads out of bounds: the outcomes a load fleet of `n` VMs must give.
fn half_out_of_bounds(fleet: &mut Fleet, n: u32) {
    let jobs: Vec<Vec<Value>> = (0..n)
        .map(|vm| {
            vec![Value::I32(if vm % 2 == 1 {
                1 << 20
            } else {
                8 * vm as i32
            })]
        })
        .collect();
    let expected: Vec<Outcome> = (0..n)
        .map(|vm| match vm % 2 {
            1 => Outcome::Trapped(TrapKind::MemoryOutOfBounds),
            _ => Outcome::Returned(vec![Value::I32(0)]),
        })
        .collect();
    let outcomes = fleet
        .invoke("load", &jobs)
        .unwrap_or_else(|e| panic!("the fleet runs: {e}"));
    assert_eq!(outcomes, expected);
}

/// PoCL's compiler (LLVM) registers handlers for SIGSEGV, SIGILL and more while it builds a
/// kernel, and when one of those signals reaches it, it puts back, for all of them, the
/// handlers it found. Registered before the guard handler, it put wasmtime's back in place of
/// ours at wasmtime's next trap (a SIGILL for `unreachable`, differential seed 18; through
/// ours for a SIGSEGV, seed 30), and the next guard fault of a PoCL VM went to wasmtime, which
/// crashed the process. The order here: wasmtime, a kernel PoCL has never built, a guarded
/// fleet, wasmtime's traps of both kinds, then the VMs' guard faults.
#[test]
fn guard_faults_on_pocl_still_trap_after_llvm_and_wasmtime_handle_signals() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Engine::default();
    let module =
        Module::new(&engine, wat::parse_str(LOADS_AT_ITS_ARGUMENT).expect("wat")).expect("module");
    let trapped = |r: &Result<i32, String>| r.as_ref().is_err_and(|e| e.contains("out of bounds"));
    let before = load_far(&engine, &module);
    assert!(trapped(&before), "{before:?}");
    let mut fleet = unbuilt_pocl_fleet(0);
    let unreachable = reach_unreachable(&engine, &module);
    assert!(
        unreachable
            .as_ref()
            .is_err_and(|e| e.contains("unreachable")),
        "wasmtime's unreachable after the PoCL build: {unreachable:?}"
    );
    let between = load_far(&engine, &module);
    assert!(
        trapped(&between),
        "wasmtime's trap after the PoCL build: {between:?}"
    );
    let outcomes = fleet
        .invoke("load", &[vec![Value::I32(1 << 20)], vec![Value::I32(8)]])
        .unwrap_or_else(|e| panic!("the fleet runs: {e}"));
    assert_eq!(
        outcomes,
        vec![
            Outcome::Trapped(TrapKind::MemoryOutOfBounds),
            Outcome::Returned(vec![Value::I32(0)])
        ]
    );
    let after = load_far(&engine, &module);
    assert!(
        trapped(&after),
        "wasmtime's trap after the guard faults: {after:?}"
    );
}

/// LLVM's handlers are one-shot (`SA_RESETHAND`): a signal reaching one resets that signal to
/// the default action until LLVM has put back the handlers it found, and deletes the temporary
/// files of the build in progress. `cpu` VMs faulting on two workers beside PoCL's builds
/// therefore crashed the process (CI, `guard_regions.rs`) or failed a build. Builds now wait
/// for guarded launches and the other way round, and the guard handler stays above LLVM's.
#[test]
fn guard_faults_on_cpu_workers_beside_cold_pocl_builds() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = common::cpu();
    let options = KernelOptions {
        calls: CallMode::Direct,
        memory_checks: MemoryChecks::Guard,
        ..KernelOptions::default()
    };
    let program = Program::compile(LOADS_AT_ITS_ARGUMENT.as_bytes(), &options, &*cpu)
        .unwrap_or_else(|e| panic!("cpu compiles the kernel: {e}"));
    let config = FleetConfig {
        num_vms: 64,
        ..FleetConfig::default()
    };
    let mut fleet = Fleet::new(Arc::new(program), config, Imports::default())
        .unwrap_or_else(|e| panic!("a guarded cpu fleet: {e}"));
    let building = AtomicBool::new(true);
    let rounds = std::thread::scope(|s| {
        let faulting = s.spawn(|| {
            let mut rounds = 0u32;
            while building.load(Ordering::Acquire) || rounds == 0 {
                half_out_of_bounds(&mut fleet, 64);
                rounds += 1;
            }
            rounds
        });
        for tag in 1..=3 {
            half_out_of_bounds(&mut unbuilt_pocl_fleet(tag), 2);
        }
        building.store(false, Ordering::Release);
        faulting.join()
    });
    assert!(matches!(rounds, Ok(r) if r > 0), "{rounds:?}");
}
