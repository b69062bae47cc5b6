//! The guest API of resident handlers: the functions a module imports from `warpvisor` to
//! take requests and send responses (the SDKs in `guests/sdk/` wrap them). A module importing
//! any of them is served as a resident handler by `warpvisor serve`.
//!
//! | Import | Type | Meaning |
//! |---|---|---|
//! | `request_next` | `() -> i32` | waits for the VM's next request; its body length, or -1 when the server stops (return from `_start`) |
//! | `request_read` | `(ptr: i32, len: i32) -> i32` | copies the next unread body bytes (at most `len`) to `ptr`; how many, 0 at the end, -1 without a request |
//! | `response_send` | `(status: i32, ptr: i32, len: i32) -> i32` | answers the request with HTTP `status` and the `len` bytes at `ptr`; 0, -1 without a request, -2 for a status outside 100–599, -3 above the response limit (the request is then answered 500) |
//!
//! A bad pointer traps the VM, as a WASI call's does. Asking for the next request without
//! answering the current one answers it 500.

use std::sync::Arc;
use std::time::Duration;

use wasmparser::{FuncType, ValType};

use super::exchange::{HandlerReply, Next, RequestExchange, RESPONSE_LIMIT};
use crate::vmm::{HostStop, TrapKind, Value, VmMemory};
use crate::wasi::HostExtension;

/// The import module of the guest API.
pub const MODULE: &str = "warpvisor";

/// The guest API's functions with their parameter and result types.
pub const FUNCTIONS: [(&str, &[ValType], &[ValType]); 3] = [
    ("request_next", &[], &[ValType::I32]),
    (
        "request_read",
        &[ValType::I32, ValType::I32],
        &[ValType::I32],
    ),
    (
        "response_send",
        &[ValType::I32, ValType::I32, ValType::I32],
        &[ValType::I32],
    ),
];

/// The imports a resident handler's VM leaves the kernel at when the kernel makes direct
/// calls (`KernelOptions::parking_imports`): `request_next`, which parks the VM until a
/// request comes, and WASI's `sched_yield`, so that a VM that yields lets the fleet's
/// supervisor run (hand out requests, restart VMs) as it does with continuations.
pub fn parking_imports() -> Vec<crate::frontend::ImportName> {
    [
        (MODULE, "request_next"),
        ("wasi_snapshot_preview1", "sched_yield"),
    ]
    .into_iter()
    .map(|(module, name)| crate::frontend::ImportName {
        module: module.into(),
        name: name.into(),
    })
    .collect()
}

/// The kernel options a resident handler is served with, from those of `warpvisor run`: a VM
/// waiting for a request must leave the kernel, so with direct calls the parking imports are
/// named; with continuations every import leaves the kernel already.
pub fn resident_kernel(
    mut options: crate::codegen::KernelOptions,
) -> crate::codegen::KernelOptions {
    if options.calls == crate::codegen::CallMode::Direct {
        options.parking_imports = parking_imports();
    }
    options
}

/// Whether a module's imports make it a resident handler (it imports from [`MODULE`]).
pub fn is_resident(module: &crate::frontend::Module<'_>) -> bool {
    module.imports.iter().any(|(name, _)| name.module == MODULE)
}

/// How `request_next` waits when no request is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Park the VM ([`HostStop::Park`]); the fleet's supervisor hands it a request and wakes it.
    Park,
    /// Block the calling thread until a request is queued (a wasmtime instance).
    Block,
}

/// The guest API of one fleet (or one wasmtime instance), over a request exchange.
pub struct GuestApi {
    exchange: Arc<RequestExchange>,
    waiting: Waiting,
    /// The VM of a wasmtime instance (whose memory view says VM 0).
    vm: Option<u32>,
}

impl GuestApi {
    /// The API of a fleet: VMs park in `request_next`.
    pub fn for_fleet(exchange: Arc<RequestExchange>) -> Self {
        GuestApi {
            exchange,
            waiting: Waiting::Park,
            vm: None,
        }
    }

    /// The API of wasmtime instance `vm`: `request_next` blocks its thread.
    pub fn for_instance(exchange: Arc<RequestExchange>, vm: u32) -> Self {
        GuestApi {
            exchange,
            waiting: Waiting::Block,
            vm: Some(vm),
        }
    }

    fn request_next(&self, vm: u32) -> Result<i32, HostStop> {
        loop {
            match self.exchange.next(vm, self.waiting == Waiting::Block) {
                Next::Request(len) => return Ok(i32::try_from(len).unwrap_or(i32::MAX)),
                Next::Stop => return Ok(-1),
                Next::Wait if self.waiting == Waiting::Park => return Err(HostStop::Park),
                Next::Wait => self.exchange.wait_for_request(Duration::from_millis(100)),
            }
        }
    }

    fn request_read(
        &self,
        vm: u32,
        memory: &mut VmMemory<'_>,
        ptr: u32,
        len: u32,
    ) -> Result<i32, HostStop> {
        let trap = HostStop::Trap(TrapKind::HostError);
        memory.check(ptr as u64, len as u64).map_err(|_| trap)?;
        // Never more than the body holds: a huge `len` costs nothing.
        let mut buf = vec![0u8; (len as usize).min(1 << 20)];
        let Some(n) = self.exchange.read(vm, &mut buf) else {
            return Ok(-1);
        };
        memory.write(ptr as u64, &buf[..n]).map_err(|_| trap)?;
        Ok(n as i32)
    }

    fn response_send(
        &self,
        vm: u32,
        memory: &mut VmMemory<'_>,
        status: i32,
        ptr: u32,
        len: u32,
    ) -> Result<i32, HostStop> {
        if !(100..=599).contains(&status) {
            return Ok(-2);
        }
        // The limit first: the size is what the client needs to hear about.
        if len as usize > RESPONSE_LIMIT {
            return Ok(
                if self
                    .exchange
                    .answer(vm, HandlerReply::TooLarge(len as usize))
                {
                    -3
                } else {
                    -1
                },
            );
        }
        memory
            .check(ptr as u64, len as u64)
            .map_err(|_| HostStop::Trap(TrapKind::HostError))?;
        let body = memory
            .read(ptr as u64, len as usize)
            .map_err(|_| HostStop::Trap(TrapKind::HostError))?;
        let reply = HandlerReply::Response {
            status: status as u16,
            body,
        };
        Ok(if self.exchange.answer(vm, reply) {
            0
        } else {
            -1
        })
    }
}

fn arg(args: &[Value], i: usize) -> u32 {
    match args.get(i) {
        Some(Value::I32(v)) => *v as u32,
        _ => 0,
    }
}

impl HostExtension for GuestApi {
    fn module(&self) -> &str {
        MODULE
    }

    fn check(&self, name: &str, ty: &FuncType) -> Result<(), String> {
        let Some((_, params, results)) = FUNCTIONS.iter().find(|(n, _, _)| *n == name) else {
            let names: Vec<&str> = FUNCTIONS.iter().map(|(n, _, _)| *n).collect();
            return Err(format!(
                "not a function of the guest API ({})",
                names.join(", ")
            ));
        };
        if ty.params() != *params || ty.results() != *results {
            return Err(format!(
                "has type {ty}, the guest API's is {}",
                FuncType::new(params.iter().copied(), results.iter().copied())
            ));
        }
        Ok(())
    }

    fn starts_work(&self, name: &str) -> bool {
        name == "request_next"
    }

    fn call(
        &mut self,
        name: &str,
        memory: &mut VmMemory<'_>,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        let vm = self.vm.unwrap_or(memory.vm());
        let result = match name {
            "request_next" => self.request_next(vm)?,
            "request_read" => self.request_read(vm, memory, arg(args, 0), arg(args, 1))?,
            "response_send" => {
                self.response_send(vm, memory, arg(args, 0) as i32, arg(args, 1), arg(args, 2))?
            }
            _ => return Err(HostStop::Trap(TrapKind::HostError)),
        };
        Ok(vec![Value::I32(result)])
    }
}
