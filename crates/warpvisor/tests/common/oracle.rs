//! The oracle: a WASI program run by wasmtime (with wasmtime-wasi's preview1), one instance per
//! job, with in-memory stdio.

use warpvisor::vmm::TrapKind;
use warpvisor::wasi::program::{JobResult, TRAP_EXIT_CODE};
use warpvisor::wasi::WasiJob;
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{I32Exit, WasiCtxBuilder};

fn trap_kind(e: &wasmtime::Error) -> TrapKind {
    use wasmtime::Trap;
    match e.downcast_ref::<Trap>() {
        Some(Trap::UnreachableCodeReached) => TrapKind::Unreachable,
        Some(Trap::MemoryOutOfBounds) => TrapKind::MemoryOutOfBounds,
        Some(Trap::TableOutOfBounds) => TrapKind::TableOutOfBounds,
        Some(Trap::IndirectCallToNull) => TrapKind::IndirectCallToNull,
        Some(Trap::BadSignature) => TrapKind::BadSignature,
        Some(Trap::IntegerOverflow) => TrapKind::IntegerOverflow,
        Some(Trap::IntegerDivisionByZero) => TrapKind::IntegerDivisionByZero,
        Some(Trap::BadConversionToInteger) => TrapKind::BadConversionToInteger,
        Some(Trap::StackOverflow) => TrapKind::StackOverflow,
        _ => TrapKind::HostError,
    }
}

/// Runs every job of `wasm` on wasmtime; `program_name` is `argv[0]`.
pub fn run(wasm: &[u8], program_name: &str, jobs: &[WasiJob]) -> Vec<JobResult> {
    let engine = Engine::default();
    let module = Module::new(&engine, wasm).expect("wasmtime compiles the module");
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    p1::add_to_linker_sync(&mut linker, |cx| cx).expect("WASI linker");
    jobs.iter()
        .map(|job| {
            let stdout = MemoryOutputPipe::new(64 << 20);
            let stderr = MemoryOutputPipe::new(64 << 20);
            let args: Vec<String> = std::iter::once(program_name.to_string())
                .chain(job.args.iter().cloned())
                .collect();
            let ctx = WasiCtxBuilder::new()
                .args(&args)
                .envs(&job.env)
                .stdin(MemoryInputPipe::new(job.stdin.clone()))
                .stdout(stdout.clone())
                .stderr(stderr.clone())
                .build_p1();
            let mut store = Store::new(&engine, ctx);
            let result = linker
                .instantiate(&mut store, &module)
                .and_then(|i| i.get_typed_func::<(), ()>(&mut store, "_start"))
                .and_then(|f| f.call(&mut store, ()));
            let (exit_code, trap) = match result {
                Ok(()) => (0, None),
                Err(e) => match e.downcast_ref::<I32Exit>() {
                    Some(I32Exit(code)) => (*code as u32, None),
                    None => (TRAP_EXIT_CODE, Some(trap_kind(&e))),
                },
            };
            drop(store);
            JobResult {
                exit_code,
                stdout: stdout.contents().to_vec(),
                stderr: stderr.contents().to_vec(),
                trap,
            }
        })
        .collect()
}
