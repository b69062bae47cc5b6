//! Process-wide signal handlers: opening the `opencl` backend (PoCL) must not take wasmtime's
//! traps away. PoCL installs a SIGFPE handler that steps over a faulting integer division on
//! any thread; a differential run in CI saw wasmtime return from `i32.rem_s` by zero after
//! PoCL started in the same process. Its own binary: the order (wasmtime first) matters.
//! `div_u` because cranelift tests signed divisors itself in some sequences; an unsigned
//! division by a variable is left to the hardware's fault.

use wasmtime::{Engine, Instance, Module, Store};

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
