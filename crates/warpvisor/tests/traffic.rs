//! What crosses between host and device: a fleet keeps its state on the device, and between
//! launches the host moves only control blocks and what hypercalls need (issue 13's
//! acceptance). The counts come from the backend's own storage (`DeviceFleet::traffic`), and
//! the fleet logic that decides what moves is the same for every backend. The `cuda` case runs
//! on a CUDA GPU where there is one, else on warpvisor's CUDA driver for the CPU.

mod common;

use std::sync::Arc;

use warpvisor::abi::VmControl;
use warpvisor::backend::cuda::CudaBackend;
use warpvisor::backend::Backend;
use warpvisor::codegen::{Dialect, KernelOptions};
use warpvisor::vmm::{
    Fleet, FleetConfig, HostFunctions, HostStop, Imports, Outcome, Program, Value, VmMemory,
};

const VMS: u32 = 4096;

/// `echo(a, b)`: reads 8 bytes of the VM's memory at 0, writes them at 8, returns `a + b`.
struct Echo;

impl HostFunctions for Echo {
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        _import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        let bytes = memory.read(0, 8).map_err(|_| HostStop::Exit(99))?;
        memory.write(8, &bytes).map_err(|_| HostStop::Exit(98))?;
        match args {
            [Value::I64(a), Value::I64(b)] => Ok(vec![Value::I64(a.wrapping_add(*b))]),
            _ => Err(HostStop::Exit(97)),
        }
    }
}

const MODULE: &str = r#"(module
  (import "env" "echo" (func $echo (param i64 i64) (result i64)))
  (memory 1)
  (func (export "run") (param $x i64) (result i64)
    (i64.store (i32.const 0) (local.get $x))
    (i64.add (call $echo (local.get $x) (i64.const 1)) (i64.load (i32.const 8)))))"#;

fn check_traffic(backend: &str) {
    let b = common::backend(backend);
    check_traffic_on(backend, common::dialect(backend), b.as_ref());
}

fn check_traffic_on(backend: &str, dialect: Dialect, b: &dyn Backend) {
    let options = KernelOptions {
        dialect,
        ..KernelOptions::default()
    };
    let program = Arc::new(Program::compile(MODULE.as_bytes(), &options, b).unwrap());
    let config = FleetConfig {
        num_vms: VMS,
        max_memory_pages: 1,
        stack_words: 64,
        ..FleetConfig::default()
    };
    let imports = Imports {
        host: Box::new(Echo),
        ..Imports::default()
    };
    let mut fleet = Fleet::new(program, config, imports).unwrap();
    let before = fleet.stats();
    let jobs: Vec<Vec<Value>> = (0..VMS).map(|vm| vec![Value::I64(vm as i64)]).collect();
    let outcomes = fleet.invoke("run", &jobs).unwrap();
    for (vm, o) in outcomes.iter().enumerate() {
        let x = vm as i64;
        assert_eq!(
            *o,
            Outcome::Returned(vec![Value::I64(x + 1 + x)]),
            "VM {vm}"
        );
    }
    let s = fleet.stats().since(&before);
    assert_eq!(s.launches, 2, "one launch to the hypercall, one to return");
    assert_eq!(s.hypercalls, VMS as u64);

    // Allowed: every control block down and up around each launch, plus the payloads per VM:
    // the entry argument (8 bytes), the hypercall's two arguments (16) and result (8), the
    // 8 bytes the host function reads and the 8 it writes, and the returned result (8).
    let controls = VMS as u64 * std::mem::size_of::<VmControl>() as u64;
    let payloads = VMS as u64 * (8 + 16 + 8 + 8 + 8 + 8);
    let moved = s.bytes_to_device + s.bytes_from_device;
    assert!(
        moved <= 2 * s.launches * controls + payloads,
        "{backend}: {moved} bytes moved for {} launches; allowed {}",
        s.launches,
        2 * s.launches * controls + payloads
    );
    // The memories alone are 256 MiB: a small fraction of them crossing would break the bound.
    assert!(moved < 2 << 20, "{backend}: {moved} bytes");
    // Control blocks, arguments and results move in gathered transfers, not one per VM; only
    // the host function's own accesses (one read and one write per call) are per VM.
    let per_vm = 2 * VMS as u64;
    assert!(
        s.transfers <= per_vm + 10,
        "{backend}: {} transfers for {VMS} VMs",
        s.transfers
    );
}

#[test]
fn a_hypercall_round_moves_only_control_blocks_and_payloads_on_cpu() {
    check_traffic("cpu");
}

#[test]
fn opencl_a_hypercall_round_moves_only_control_blocks_and_payloads() {
    check_traffic("opencl");
}

/// The resident CUDA fleet's own counters (`cuda/fleet.rs`): on a CUDA GPU where there is
/// one, else through warpvisor's CUDA driver for the CPU (issue 15), which runs the backend's
/// real allocations, copies and launches.
#[test]
fn cuda_a_hypercall_round_moves_only_control_blocks_and_payloads() {
    match CudaBackend::new(None) {
        Ok(b) => check_traffic_on("cuda", Dialect::Cuda, &b),
        Err(_) if common::cuda_on_cpu_here() => {
            check_traffic_on("cuda", Dialect::Cuda, common::cuda().as_ref())
        }
        Err(e) if std::env::var_os("WARPVISOR_REQUIRE_CUDA").is_some() => {
            panic!("WARPVISOR_REQUIRE_CUDA is set but {e}")
        }
        Err(e) => eprintln!("NOT RUN: {e}"),
    }
}
