//! WASI instances that live on (resident handlers on wasmtime): each runs `_start` on a
//! thread of its own with the functions of a [`HostExtension`] linked beside WASI, and is
//! replaced by a fresh instance when it ends, for as long as its owner wants.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{AsContextMut, Caller, Extern, FuncType, Linker, Val, ValType};
use wasmtime_wasi::p1;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::{
    from_val, to_val, trap_kind, InstanceState, WasiSetup, WasmtimeBackend, WasmtimeError,
};
use crate::vmm::{HostStop, Outcome, TrapKind, VmMemory};
use crate::wasi::HostExtension;

/// Epoch ticks a unit of work may run: the ticker ticks twenty times per work timeout, so
/// work is interrupted after between 1 and 1.05 timeouts.
const WORK_TICKS: u64 = 21;

/// What [`WasmtimeBackend::run_instances`] asks of its caller.
pub struct InstanceHooks<'a> {
    /// The extension's import module and its functions' types.
    pub functions: &'a [(
        &'a str,
        &'a [wasmparser::ValType],
        &'a [wasmparser::ValType],
    )],
    /// The extension of instance `i`.
    pub extension: &'a (dyn Fn(u32) -> Box<dyn HostExtension> + Sync),
    /// Instance `i`'s `_start` ended so: whether a fresh instance takes its place.
    pub ended: &'a (dyn Fn(u32, Outcome, Vec<u8>) -> bool + Sync),
    /// Time one unit of work (a successful call for which the extension's
    /// [`HostExtension::starts_work`] says so, or the instance's start) may run.
    pub work_timeout: Option<Duration>,
}

/// wasmtime's name for a numeric type (the extension's functions take numbers only).
fn val_type(t: wasmparser::ValType) -> Result<ValType, WasmtimeError> {
    match t {
        wasmparser::ValType::I32 => Ok(ValType::I32),
        wasmparser::ValType::I64 => Ok(ValType::I64),
        wasmparser::ValType::F32 => Ok(ValType::F32),
        wasmparser::ValType::F64 => Ok(ValType::F64),
        other => Err(WasmtimeError::Link(format!(
            "a host extension's function takes or returns {other}"
        ))),
    }
}

impl WasmtimeBackend {
    /// Runs `instances` instances of the WASI program `wasm` at once, one thread each, with
    /// `hooks`' extension linked in; each ended instance is replaced while `hooks.ended`
    /// says so. `ready` hears once whether the module compiled and linked.
    pub fn run_instances(
        &self,
        wasm: &[u8],
        setup: &WasiSetup,
        module_name: &str,
        instances: u32,
        hooks: &InstanceHooks<'_>,
        ready: impl FnOnce(Result<(), WasmtimeError>),
    ) {
        let linked = self.link_extension(wasm, setup, module_name, hooks);
        let pre = match linked {
            Ok(pre) => {
                ready(Ok(()));
                pre
            }
            Err(e) => return ready(Err(e)),
        };
        let finished = AtomicBool::new(false);
        std::thread::scope(|s| {
            if let Some(limit) = hooks.work_timeout.filter(|_| self.config.timeout.is_some()) {
                let engine = self.engine.clone();
                let finished = &finished;
                s.spawn(move || {
                    let tick = (limit / (WORK_TICKS as u32 - 1)).max(Duration::from_millis(1));
                    while !finished.load(Ordering::Acquire) {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                });
            }
            let workers: Vec<_> = (0..instances)
                .map(|i| {
                    let pre = &pre;
                    s.spawn(move || loop {
                        let (outcome, stderr) = self.run_instance(pre, setup, hooks, i);
                        if !(hooks.ended)(i, outcome, stderr) {
                            break;
                        }
                    })
                })
                .collect();
            for w in workers {
                let _ = w.join();
            }
            finished.store(true, Ordering::Release);
        });
    }

    fn link_extension(
        &self,
        wasm: &[u8],
        setup: &WasiSetup,
        module_name: &str,
        hooks: &InstanceHooks<'_>,
    ) -> Result<wasmtime::InstancePre<InstanceState>, WasmtimeError> {
        let link = |e: wasmtime::Error| WasmtimeError::Link(format!("{e:#}"));
        let module = self.compile(wasm)?;
        let mut linker: Linker<InstanceState> = Linker::new(&self.engine);
        p1::add_to_linker_sync(&mut linker, |s: &mut InstanceState| &mut s.wasi).map_err(link)?;
        let fuel = self.config.fuel;
        let timed = self.config.timeout.is_some() && hooks.work_timeout.is_some();
        for (name, params, results) in hooks.functions {
            let params: Vec<ValType> = params
                .iter()
                .map(|t| val_type(*t))
                .collect::<Result<_, _>>()?;
            let results: Vec<ValType> = results
                .iter()
                .map(|t| val_type(*t))
                .collect::<Result<_, _>>()?;
            let ty = FuncType::new(&self.engine, params, results);
            let name = name.to_string();
            linker
                .func_new(module_name, &name.clone(), ty, move |caller, args, out| {
                    call_extension(caller, &name, args, out, fuel, timed)
                })
                .map_err(link)?;
        }
        if setup.allow_unknown_imports {
            linker
                .define_unknown_imports_as_traps(&module)
                .map_err(link)?;
        }
        let pre = linker.instantiate_pre(&module).map_err(link)?;
        if !matches!(
            module.get_export("_start"),
            Some(wasmtime::ExternType::Func(_))
        ) {
            return Err(WasmtimeError::Link(
                "the module has no exported function `_start`".into(),
            ));
        }
        Ok(pre)
    }

    /// One life of instance `i`: how its `_start` ended, and what it wrote to stderr.
    fn run_instance(
        &self,
        pre: &wasmtime::InstancePre<InstanceState>,
        setup: &WasiSetup,
        hooks: &InstanceHooks<'_>,
        i: u32,
    ) -> (Outcome, Vec<u8>) {
        let max_bytes = (setup.max_memory_pages as usize) << 16;
        // A resident handler answers through the extension: stdout is dropped.
        let stderr = MemoryOutputPipe::new(64 << 10);
        let run = || -> Result<(), wasmtime::Error> {
            let mut b = WasiCtxBuilder::new();
            b.args(&[setup.program_name.as_str()])
                .stderr(stderr.clone());
            for (host, guest) in &setup.preopens {
                b.preopened_dir(host, guest, FsPerms::ReadWrite)?;
            }
            let state = InstanceState {
                wasi: b.build_p1(),
                limits: wasmtime::StoreLimitsBuilder::new()
                    .memory_size(max_bytes)
                    .build(),
                extension: Some((hooks.extension)(i)),
            };
            let mut store = self.store(state)?;
            if hooks.work_timeout.is_some() && self.config.timeout.is_some() {
                store.set_epoch_deadline(WORK_TICKS);
            }
            store.limiter(|s| &mut s.limits);
            let instance = pre.instantiate(&mut store)?;
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call(&mut store, ())
        };
        let outcome = match run() {
            Ok(()) => Outcome::Returned(Vec::new()),
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(I32Exit(code)) => Outcome::Exited(*code as u32),
                None => Outcome::Trapped(trap_kind(&e)),
            },
        };
        (outcome, stderr.contents().to_vec())
    }
}

/// A call from an instance to its extension's function `name`.
fn call_extension(
    mut caller: Caller<'_, InstanceState>,
    name: &str,
    args: &[Val],
    out: &mut [Val],
    fuel: Option<u64>,
    timed: bool,
) -> Result<(), wasmtime::Error> {
    let host_error = || wasmtime::Error::msg(format!("host error in `{name}`"));
    let memory = match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    };
    let values: Vec<_> = args.iter().map(from_val).collect();
    let (result, starts_work) = {
        let mut empty = [0u8; 0];
        let (bytes, state) = match memory {
            Some(m) => m.data_and_store_mut(&mut caller),
            None => (&mut empty[..], caller.data_mut()),
        };
        let Some(extension) = state.extension.as_mut() else {
            return Err(host_error());
        };
        let mut view = VmMemory::from_bytes(bytes);
        let result = extension.call(name, &mut view, &values);
        let starts = result.is_ok() && extension.starts_work(name);
        (result, starts)
    };
    match result {
        Ok(values) => {
            for (slot, v) in out.iter_mut().zip(values) {
                *slot = to_val(v);
            }
            if starts_work {
                if let Some(f) = fuel {
                    caller.set_fuel(f)?;
                }
                if timed {
                    caller.as_context_mut().set_epoch_deadline(WORK_TICKS);
                }
            }
            Ok(())
        }
        Err(HostStop::Exit(code)) => Err(I32Exit(code as i32).into()),
        Err(HostStop::Trap(TrapKind::Timeout)) => Err(wasmtime::Trap::Interrupt.into()),
        Err(_) => Err(host_error()),
    }
}
