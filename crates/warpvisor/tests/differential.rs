//! Differential test: random modules from `wasm-smith` (no imports, only the features warpvisor
//! accepts, NaNs canonicalized, termination ensured by fuel) run on warpvisor's `cpu` backend
//! and on wasmtime; every export's results or trap kind, the exported globals and the memory
//! afterwards must agree.
//!
//! `WARPVISOR_DIFF_SEEDS=0..10000 cargo test --test differential -- on_cpu` reruns the full
//! acceptance range on `cpu`; `WARPVISOR_DIFF_SEEDS_OPENCL` sets the `opencl` range. The
//! `WARPVISOR_DIFF_SEEDS_DIRECT` sets the range run on `cpu` with direct calls. The
//! defaults are small samples for CI. Seed `s` runs with interleave `[0, 4, 8][s % 3]`, and odd
//! seeds with the kernel split into small partitions. `WARPVISOR_DIFF_DUMP=DIR` writes every
//! module compared into `DIR` (failing ones always go to the target's `diff-failures`).

mod common;

use std::sync::Arc;

use arbitrary::Unstructured;
use wasmtime::{Engine, Instance, Store, Val};

use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::frontend::ExportKind;
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, TrapKind, Value, VmmError};

fn seeds(var: &str, default: &str) -> std::ops::Range<u64> {
    let spec = std::env::var(var).unwrap_or_else(|_| default.into());
    let (a, b) = spec
        .split_once("..")
        .expect("WARPVISOR_DIFF_SEEDS looks like 0..100");
    a.parse().expect("seed range start")..b.parse().expect("seed range end")
}

fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    // splitmix64
    let mut state = seed;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}

fn smith_config() -> wasm_smith::Config {
    wasm_smith::Config {
        max_imports: 0,
        min_funcs: 4,
        min_exports: 4,
        max_funcs: 12,
        max_instructions: 200,
        export_everything: true,
        canonicalize_nans: true,
        simd_enabled: false,
        relaxed_simd_enabled: false,
        threads_enabled: false,
        gc_enabled: false,
        exceptions_enabled: false,
        tail_call_enabled: false,
        memory64_enabled: false,
        wide_arithmetic_enabled: false,
        extended_const_enabled: false,
        custom_page_sizes_enabled: false,
        compact_imports_enabled: false,
        max_memories: 1,
        max_tables: 3,
        max_memory32_bytes: 16 * 65536,
        memory_max_size_required: true,
        max_table_elements: 1000,
        table_max_size_required: true,
        multi_value_enabled: true,
        bulk_memory_enabled: true,
        reference_types_enabled: true,
        sign_extension_ops_enabled: true,
        saturating_float_to_int_enabled: true,
        ..wasm_smith::Config::default()
    }
}

/// The module of `seed`: the first of a few deterministic attempts that has a function.
fn module_for(seed: u64) -> Option<Vec<u8>> {
    for attempt in 0..16u64 {
        let bytes = random_bytes(seed.wrapping_mul(16).wrapping_add(attempt), 64 * 1024);
        let mut u = Unstructured::new(&bytes);
        let Ok(mut m) = wasm_smith::Module::new(smith_config(), &mut u) else {
            continue;
        };
        if m.ensure_termination(1_000).is_err() {
            continue;
        }
        let wasm = m.to_bytes();
        let has_code = wasmparser::Parser::new(0).parse_all(&wasm).any(
            |p| matches!(p, Ok(wasmparser::Payload::CodeSectionStart { count, .. }) if count > 0),
        );
        if has_code {
            return Some(wasm);
        }
    }
    None
}

fn arg_for(ty: &wasmparser::ValType, k: u64) -> Value {
    const INTS: [i64; 8] = [
        0,
        1,
        -1,
        7,
        0x7fff_ffff,
        -0x8000_0000,
        65535,
        0x1234_5678_9abc,
    ];
    let i = INTS[(k % INTS.len() as u64) as usize];
    match ty {
        wasmparser::ValType::I32 => Value::I32(i as i32),
        wasmparser::ValType::I64 => Value::I64(i),
        wasmparser::ValType::F32 => Value::F32((i as f32 * 0.5).to_bits()),
        wasmparser::ValType::F64 => Value::F64((i as f64 * 0.25).to_bits()),
        other => Value::zero(*other),
    }
}

fn to_wasmtime(v: &Value) -> Val {
    match *v {
        Value::I32(x) => Val::I32(x),
        Value::I64(x) => Val::I64(x),
        Value::F32(b) => Val::F32(b),
        Value::F64(b) => Val::F64(b),
        Value::FuncRef(_) => Val::FuncRef(None),
        Value::ExternRef(_) => Val::ExternRef(None),
    }
}

/// A comparable rendering of a result: references only by nullness (indices are per engine).
#[derive(Debug, PartialEq)]
enum Seen {
    Values(Vec<String>),
    Trap(String),
}

fn render_ours(v: &Value) -> String {
    match v {
        Value::FuncRef(r) => format!("funcref null={}", r.is_none()),
        Value::ExternRef(r) => format!("externref null={}", r.is_none()),
        other => format!("{other:?}"),
    }
}

fn render_theirs(v: &Val) -> String {
    match v {
        Val::I32(x) => format!("{:?}", Value::I32(*x)),
        Val::I64(x) => format!("{:?}", Value::I64(*x)),
        Val::F32(b) => format!("{:?}", Value::F32(*b)),
        Val::F64(b) => format!("{:?}", Value::F64(*b)),
        Val::FuncRef(r) => format!("funcref null={}", r.is_none()),
        Val::ExternRef(r) => format!("externref null={}", r.is_none()),
        other => format!("{other:?}"),
    }
}

fn trap_name(e: &wasmtime::Error) -> String {
    use wasmtime::Trap;
    match e.downcast_ref::<Trap>() {
        Some(Trap::UnreachableCodeReached) => TrapKind::Unreachable.name().into(),
        Some(Trap::MemoryOutOfBounds) => TrapKind::MemoryOutOfBounds.name().into(),
        Some(Trap::TableOutOfBounds) => TrapKind::TableOutOfBounds.name().into(),
        Some(Trap::IndirectCallToNull) => TrapKind::IndirectCallToNull.name().into(),
        Some(Trap::BadSignature) => TrapKind::BadSignature.name().into(),
        Some(Trap::IntegerOverflow) => TrapKind::IntegerOverflow.name().into(),
        Some(Trap::IntegerDivisionByZero) => TrapKind::IntegerDivisionByZero.name().into(),
        Some(Trap::BadConversionToInteger) => TrapKind::BadConversionToInteger.name().into(),
        Some(Trap::StackOverflow) => TrapKind::StackOverflow.name().into(),
        Some(Trap::NullReference) => TrapKind::NullReference.name().into(),
        Some(other) => format!("wasmtime:{other:?}"),
        None => format!("wasmtime error: {e}"),
    }
}

/// Runs one module on both engines; returns a description of the first disagreement.
fn compare(
    seed: u64,
    wasm: &[u8],
    engine: &Engine,
    backend: &str,
    calls: CallMode,
) -> Result<(), String> {
    // wasmtime
    let module =
        wasmtime::Module::new(engine, wasm).map_err(|e| format!("wasmtime rejects: {e:#}"))?;
    let mut store = Store::new(engine, ());
    let theirs_instance = Instance::new(&mut store, &module, &[]);
    // warpvisor
    // Every seed exercises one interleave (0, 4 or 8); odd seeds split the kernel into
    // partitions of at most 40 operators.
    let mut options = KernelOptions {
        dialect: common::dialect(backend),
        interleave: [0, 4, 8][(seed % 3) as usize],
        partition_ops: if seed % 2 == 1 { 40 } else { 0 },
        calls,
        ..KernelOptions::default()
    };
    // Guard regions wherever the backend allows them (interleave 0 with direct calls on cpu,
    // with continuations on PoCL): the default.
    options.memory_checks = MemoryChecks::Auto;
    let program = Program::compile(wasm, &options, common::backend(backend).as_ref())
        .map_err(|e| format!("warpvisor rejects: {e}"))?;
    let program = Arc::new(program);
    let config = FleetConfig {
        num_vms: 2,
        ..FleetConfig::default()
    };
    let ours = Fleet::new(program.clone(), config, Imports::default());
    let (instance, mut fleet) = match (theirs_instance, ours) {
        (Ok(i), Ok(f)) => (i, f),
        (Err(e), Err(VmmError::InstantiationTrap(k))) if trap_name(&e) == k.name() => return Ok(()),
        (t, o) => {
            return Err(format!(
                "instantiation differs: wasmtime {:?}, warpvisor {:?}",
                t.err().map(|e| trap_name(&e)),
                o.err().map(|e| e.to_string())
            ))
        }
    };
    for export in &program.module.exports {
        let ExportKind::Func(f) = export.kind else {
            continue;
        };
        let ty = program.module.func_type(f).clone();
        let args: Vec<Value> = ty
            .params()
            .iter()
            .enumerate()
            .map(|(i, t)| arg_for(t, seed + i as u64))
            .collect();
        let func = instance
            .get_func(&mut store, &export.name)
            .ok_or("wasmtime lacks an export")?;
        let mut results = vec![Val::I32(0); ty.results().len()];
        let wargs: Vec<Val> = args.iter().map(to_wasmtime).collect();
        let theirs = match func.call(&mut store, &wargs, &mut results) {
            Ok(()) => Seen::Values(results.iter().map(render_theirs).collect()),
            Err(e) => Seen::Trap(trap_name(&e)),
        };
        // Both VMs run the same call: they must agree with wasmtime and each other.
        let outcomes = fleet
            .invoke(&export.name, &[args.clone(), args.clone()])
            .map_err(|e| format!("warpvisor invoke failed: {e}"))?;
        for o in outcomes {
            let mine = match o {
                Outcome::Returned(v) => Seen::Values(v.iter().map(render_ours).collect()),
                Outcome::Trapped(k) => Seen::Trap(k.name().into()),
                Outcome::Exited(c) => Seen::Trap(format!("exit {c}")),
            };
            if mine != theirs {
                return Err(format!(
                    "export `{}` {args:?}: wasmtime {theirs:?}, warpvisor {mine:?}",
                    export.name
                ));
            }
        }
    }
    // State afterwards: exported globals and memory.
    for export in &program.module.exports {
        match export.kind {
            ExportKind::Global(_) => {
                let theirs = instance
                    .get_global(&mut store, &export.name)
                    .map(|g| render_theirs(&g.get(&mut store)));
                let mine = fleet
                    .global(1, &export.name)
                    .map_err(|e| e.to_string())?
                    .map(|v| render_ours(&v));
                if theirs != mine {
                    return Err(format!(
                        "global `{}`: wasmtime {theirs:?}, warpvisor {mine:?}",
                        export.name
                    ));
                }
            }
            ExportKind::Memory(_) => {
                let mem = instance
                    .get_memory(&mut store, &export.name)
                    .ok_or("no memory")?;
                let data = mem.data(&store);
                let pages = fleet.memory_pages(1).unwrap_or(0) as usize;
                if pages * 65536 != data.len() {
                    return Err(format!(
                        "memory size: wasmtime {}, warpvisor {}",
                        data.len(),
                        pages * 65536
                    ));
                }
                let mine = fleet
                    .read_memory(1, 0, data.len())
                    .map_err(|e| e.to_string())?;
                if let Some(i) = (0..data.len()).find(|&i| data[i] != mine[i]) {
                    return Err(format!(
                        "memory byte {i}: wasmtime {}, warpvisor {}",
                        data[i], mine[i]
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs `range` on `backend`. With direct calls, a VM recurses on a native stack of
/// `stack_words` × `NATIVE_BYTES_PER_STACK_WORD` bytes, and wasmtime gets the same budget
/// instead of its default 512 KiB (on a thread with room for it): how deep either recursion
/// goes before its stack runs out is each compiler's frame size, not WebAssembly's semantics.
/// Seed 1709 showed it: wasmtime overflowed 512 KiB before the generator's fuel ran out, while
/// warpvisor's native frames, smaller, ran out of fuel (`unreachable`) first.
fn run_range(backend: &str, calls: CallMode, range: std::ops::Range<u64>) {
    let wasm_stack = match calls {
        CallMode::Direct => Some(
            FleetConfig::default().stack_words as usize
                * warpvisor::backend::cpu::NATIVE_BYTES_PER_STACK_WORD as usize,
        ),
        CallMode::Continuations => None,
    };
    let backend = backend.to_string();
    let thread = std::thread::Builder::new()
        .stack_size(wasm_stack.unwrap_or(0) + (8 << 20))
        .spawn(move || run_range_here(&backend, calls, range, wasm_stack))
        .expect("test thread");
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

fn run_range_here(
    backend: &str,
    calls: CallMode,
    range: std::ops::Range<u64>,
    wasm_stack: Option<usize>,
) {
    let mut config = wasmtime::Config::new();
    config.wasm_simd(false).wasm_relaxed_simd(false);
    if let Some(bytes) = wasm_stack {
        // wasmtime requires the async stacks (unused here) to be at least as large.
        config
            .async_stack_size(bytes + (1 << 20))
            .max_wasm_stack(bytes);
    }
    let engine = Engine::new(&config).expect("wasmtime engine");
    let mut failures = Vec::new();
    let mut compared = 0;
    for seed in range.clone() {
        let Some(wasm) = module_for(seed) else {
            continue;
        };
        compared += 1;
        if let Some(dir) = std::env::var_os("WARPVISOR_DIFF_DUMP") {
            let _ = std::fs::write(
                std::path::Path::new(&dir).join(format!("{seed}.wasm")),
                &wasm,
            );
        }
        if let Err(e) = compare(seed, &wasm, &engine, backend, calls) {
            let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diff-failures");
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{seed}.wasm")), &wasm);
            eprintln!("{backend} ({}) seed {seed}: {e}", calls.name());
            failures.push(seed);
        }
    }
    eprintln!(
        "{backend} ({}): {compared} modules compared over seeds {range:?}, {} disagreements",
        calls.name(),
        failures.len()
    );
    assert!(failures.is_empty(), "disagreements at seeds {failures:?}");
    assert!(
        compared * 10 >= (range.end - range.start) as usize * 8,
        "too few modules generated"
    );
}

#[test]
fn random_modules_agree_with_wasmtime_on_cpu() {
    run_range(
        "cpu",
        CallMode::Continuations,
        seeds("WARPVISOR_DIFF_SEEDS", "0..150"),
    );
}

#[test]
fn random_modules_agree_with_wasmtime_on_cpu_with_direct_calls() {
    run_range(
        "cpu",
        CallMode::Direct,
        seeds("WARPVISOR_DIFF_SEEDS_DIRECT", "0..150"),
    );
}

#[test]
fn random_modules_agree_with_wasmtime_on_opencl() {
    run_range(
        "opencl",
        CallMode::Continuations,
        seeds("WARPVISOR_DIFF_SEEDS_OPENCL", "1000..1020"),
    );
}

/// The `cuda` backend through warpvisor's CUDA driver for the CPU: NVRTC's PTX of each
/// module's kernel, translated to C and run on the host (`WARPVISOR_DIFF_SEEDS_CUDA`).
#[test]
fn random_modules_agree_with_wasmtime_on_cuda_through_the_cpu_driver() {
    if !common::cuda_on_cpu_here() {
        return;
    }
    run_range(
        "cuda",
        CallMode::Continuations,
        seeds("WARPVISOR_DIFF_SEEDS_CUDA", "0..10"),
    );
}

/// Rounding of values too large for the device library: PoCL's `rint`, `ceil`, `floor` and
/// `trunc` convert their argument to `int` before they see it is integral already, undefined
/// beyond `int`'s range, and LLVM took a function that rounded such a constant (`f64.nearest`
/// of -8.4e148 in seed 486) as never running past its fuel check: it trapped `unreachable`
/// (docs/opencl.md, "Known issues"). Each export checks a global as wasm-smith's fuel does,
/// then rounds constants around the limits (2^23 for f32, 2^52 for f64, and 2^31, 2^62 where
/// the library's conversions overflow).
#[test]
fn rounding_large_values_agrees_with_wasmtime() {
    let cases: [(&str, &[&str]); 2] = [
        (
            "f64",
            &[
                "-8.4e148",
                "1e300",
                "0x1p62",
                "0x1p52",
                "4503599627370495.5",
                "-4503599627370495.5",
                "2.5",
                "-0.4",
                "inf",
                "-inf",
            ],
        ),
        (
            "f32",
            &[
                "-3e20",
                "0x1p31",
                "0x1p23",
                "8388607.5",
                "-8388607.5",
                "2.5",
                "-0.4",
                "inf",
                "-inf",
            ],
        ),
    ];
    let mut text = String::from("(module\n  (global $fuel (mut i32) (i32.const 1000))\n");
    for (ty, values) in cases {
        for op in ["nearest", "floor", "ceil", "trunc"] {
            let results = vec![ty; values.len()].join(" ");
            let body: Vec<String> = values
                .iter()
                .map(|v| format!("({ty}.{op} ({ty}.const {v}))"))
                .collect();
            text.push_str(&format!(
                "  (func (export \"{ty}.{op}\") (result {results})\n    \
                 (if (i32.eqz (global.get $fuel)) (then unreachable))\n    {})\n",
                body.join(" ")
            ));
        }
    }
    text.push(')');
    let wasm = wat::parse_str(&text).expect("the rounding module");
    let engine = Engine::default();
    for backend in ["cpu", "opencl"] {
        if let Err(e) = compare(0, &wasm, &engine, backend, CallMode::Continuations) {
            panic!("{backend}: {e}");
        }
    }
}
