//! Resident handlers on wasmtime: one instance per VM, each on a thread of its own whose
//! `request_next` blocks until a request is queued; an instance that ends is replaced by a
//! fresh one ([`WasmtimeBackend::run_instances`]).

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use super::exchange::RequestExchange;
use super::guest_api::{GuestApi, FUNCTIONS, MODULE};
use super::resident::{ending_reply, ResidentOptions, StartRecord};
use crate::backend::wasmtime::{InstanceHooks, WasiSetup, WasmtimeBackend};
use crate::runner::RunError;
use crate::vmm::{Outcome, VmmError};
use crate::wasi::program::WasiRunConfig;
use crate::wasi::HostExtension;

/// Serves `exchange`'s requests with `options.vms` instances of `wasm` until it is drained.
pub(super) fn serve(
    w: &WasmtimeBackend,
    wasm: &[u8],
    config: &WasiRunConfig,
    options: ResidentOptions,
    exchange: &Arc<RequestExchange>,
    ready: Sender<Result<(), RunError>>,
) {
    let binary = match crate::frontend::to_binary(wasm) {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(VmmError::from(e).into()));
            return;
        }
    };
    let setup = WasiSetup::from(config);
    let n = options.vms as usize;
    let starts = Mutex::new(vec![StartRecord::default(); n]);
    let gone = Mutex::new(vec![false; n]);
    let extension = |i: u32| -> Box<dyn HostExtension> {
        Box::new(GuestApi::for_instance(exchange.clone(), i))
    };
    let ended = |i: u32, outcome: Outcome, stderr: Vec<u8>| -> bool {
        exchange.ended(i, ending_reply(&outcome));
        if !stderr.is_empty() {
            let text = String::from_utf8_lossy(&stderr);
            tracing::info!(vm = i, "guest stderr: {}", text.trim_end());
        }
        let mut starts = starts.lock().unwrap_or_else(|p| p.into_inner());
        for vm in exchange.take_fresh() {
            starts[vm as usize].took_request();
        }
        let again = starts[i as usize].ended();
        drop(starts);
        if exchange.drained() {
            return false;
        }
        if !again {
            tracing::error!(
                vm = i,
                "instance ended without taking a request (last: {outcome:?}); not restarted"
            );
            let mut gone = gone.lock().unwrap_or_else(|p| p.into_inner());
            gone[i as usize] = true;
            if gone.iter().all(|g| *g) {
                exchange.fail(format!(
                    "every instance ended without taking a request (last: {outcome:?})"
                ));
            }
            return false;
        }
        exchange.stats.restarts.fetch_add(1, Ordering::Relaxed);
        true
    };
    let hooks = InstanceHooks {
        functions: &FUNCTIONS,
        extension: &extension,
        ended: &ended,
        work_timeout: Some(options.request_timeout),
    };
    w.run_instances(&binary, &setup, MODULE, options.vms, &hooks, |r| {
        let _ = ready.send(r.map_err(RunError::from));
    });
}
