//! Parking imports with direct calls (`KernelOptions::parking_imports`): a supervised fleet on
//! `cpu` whose VMs park at one import until the supervisor wakes them, while every other import
//! and all recursion stay direct. The same fleet with continuations must end the same way, and
//! a kernel without the parking import named traps a VM that parks (nothing could wake it).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::frontend::ImportName;
use warpvisor::vmm::{
    Fleet, FleetConfig, FleetStats, HostFunctions, HostStop, Imports, Outcome, Program, Supervised,
    Supervisor, TrapKind, Value, VmMemory,
};

/// `_start` loops: `wait()` parks until the host has a value for it (-1: stop), `deep(n)`
/// recurses n levels (native recursion with direct calls), `note(sum)` is a plain import; at
/// the end `note` gets the VM's total.
const HANDLER: &str = r#"(module
  (import "host" "wait" (func $wait (result i32)))
  (import "host" "note" (func $note (param i32)))
  (memory 1)
  (global $sum (mut i32) (i32.const 0))
  (func $deep (param i32) (result i32)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 0))
      (else (i32.add (i32.const 1) (call $deep (i32.sub (local.get 0) (i32.const 1)))))))
  (func $serve
    (local $v i32)
    (loop $next
      (local.set $v (call $wait))
      (if (i32.lt_s (local.get $v) (i32.const 0)) (then (return)))
      (global.set $sum (i32.add (global.get $sum) (call $deep (local.get $v))))
      (call $note (global.get $sum))
      (br $next)))
  (func (export "_start") (call $serve) (call $note (i32.mul (global.get $sum) (i32.const 1000)))))"#;

/// Takes one value, then loads past its memory in the continuation itself (VM 1 only).
const FAULTING: &str = r#"(module
  (import "host" "wait" (func $wait (result i32)))
  (import "host" "note" (func $note (param i32)))
  (memory 1)
  (func (export "_start")
    (local $v i32)
    (local.set $v (call $wait))
    (if (i32.eq (i32.rem_u (local.get $v) (i32.const 100)) (i32.const 1))
      (then (drop (i32.load (i32.const 65534)))))
    (call $note (local.get $v))))"#;

const VMS: u32 = 4;
/// Values each VM is handed, one per wake-up, then -1.
const ROUNDS: i32 = 5;

/// Per VM: whether it is parked waiting, whether the supervisor released its next value, how
/// many it took, what it noted.
#[derive(Default)]
struct Desk {
    waiting: Vec<bool>,
    released: Vec<bool>,
    taken: Vec<i32>,
    notes: Vec<Vec<i32>>,
    parks: u32,
}

struct Host(Arc<Mutex<Desk>>);

impl HostFunctions for Host {
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        let vm = memory.vm() as usize;
        let mut desk = self.0.lock().unwrap();
        match (import, args) {
            (0, []) => {
                if !desk.released[vm] {
                    desk.parks += 1;
                    desk.waiting[vm] = true;
                    return Err(HostStop::Park);
                }
                desk.released[vm] = false;
                desk.taken[vm] += 1;
                let n = desk.taken[vm];
                Ok(vec![Value::I32(if n > ROUNDS {
                    -1
                } else {
                    100 * n + vm as i32
                })])
            }
            (1, [Value::I32(v)]) => {
                desk.notes[vm].push(*v);
                Ok(Vec::new())
            }
            _ => Err(HostStop::Trap(TrapKind::HostError)),
        }
    }
}

/// Releases the next value of every VM parked waiting and wakes it; records how VMs end.
struct Releaser(Arc<Mutex<Desk>>, Vec<Option<Outcome>>);

impl Supervisor for Releaser {
    fn round(&mut self, fleet: &mut Supervised<'_>) {
        for (vm, outcome) in fleet.ended() {
            self.1[*vm as usize] = Some(outcome.clone());
        }
        let mut desk = self.0.lock().unwrap();
        for vm in 0..fleet.num_vms() {
            if std::mem::take(&mut desk.waiting[vm as usize]) {
                desk.released[vm as usize] = true;
                fleet.wake(vm);
            }
        }
    }

    fn idle(&mut self, _until: Option<Instant>) -> bool {
        true
    }
}

struct Run {
    outcomes: Vec<Option<Outcome>>,
    notes: Vec<Vec<i32>>,
    parks: u32,
    stats: FleetStats,
    kernel: String,
}

fn run(wat: &str, calls: CallMode, parking: bool, memory_checks: MemoryChecks) -> Run {
    run_on("cpu", wat, calls, parking, memory_checks)
}

/// [`run`] on backend `backend`.
fn run_on(
    backend: &str,
    wat: &str,
    calls: CallMode,
    parking: bool,
    memory_checks: MemoryChecks,
) -> Run {
    let mut options = KernelOptions {
        dialect: common::dialect(backend),
        calls,
        memory_checks,
        ..KernelOptions::default()
    };
    if parking {
        options.parking_imports = vec![ImportName {
            module: "host".into(),
            name: "wait".into(),
        }];
    }
    let backend = common::backend(backend);
    let bytes = wat::parse_str(wat).unwrap();
    let module = warpvisor::frontend::load(&bytes).unwrap();
    let kernel = warpvisor::codegen::emit(&module, &options)
        .unwrap_or_else(|e| panic!("{e}"))
        .partitions
        .remove(0);
    let program =
        Program::compile(&bytes, &options, backend.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let n = VMS as usize;
    let desk = Arc::new(Mutex::new(Desk {
        waiting: vec![false; n],
        released: vec![false; n],
        taken: vec![0; n],
        notes: vec![Vec::new(); n],
        parks: 0,
    }));
    let imports = Imports {
        host: Box::new(Host(desk.clone())),
        ..Imports::default()
    };
    let config = FleetConfig {
        num_vms: VMS,
        ..FleetConfig::default()
    };
    let mut fleet =
        Fleet::new(Arc::new(program), config, imports).unwrap_or_else(|e| panic!("{e}"));
    let mut releaser = Releaser(desk.clone(), vec![None; n]);
    fleet
        .run_supervised("_start", &mut releaser)
        .unwrap_or_else(|e| panic!("{e}"));
    let outcomes = releaser.1;
    let stats = fleet.stats();
    let desk = desk.lock().unwrap();
    Run {
        outcomes,
        notes: desk.notes.clone(),
        parks: desk.parks,
        stats,
        kernel,
    }
}

/// What every VM notes: its running sum after each value, then the total times 1000.
fn expected_notes(vm: i32) -> Vec<i32> {
    let mut sum = 0;
    let mut notes = Vec::new();
    for n in 1..=ROUNDS {
        sum += 100 * n + vm;
        notes.push(sum);
    }
    notes.push(sum * 1000);
    notes
}

/// Every VM of `r` returned from `_start` having noted what [`expected_notes`] says.
fn assert_every_vm_served(what: &str, r: &Run) {
    for vm in 0..VMS {
        assert_eq!(
            r.outcomes[vm as usize],
            Some(Outcome::Returned(Vec::new())),
            "{what}: VM {vm}"
        );
        assert_eq!(
            r.notes[vm as usize],
            expected_notes(vm as i32),
            "{what}: VM {vm}"
        );
    }
}

#[test]
fn vms_park_at_a_parking_import_and_run_everything_else_directly() {
    let direct = run(HANDLER, CallMode::Direct, true, MemoryChecks::Guard);
    let explicit = run(HANDLER, CallMode::Direct, true, MemoryChecks::Explicit);
    let continuations = run(
        HANDLER,
        CallMode::Continuations,
        false,
        MemoryChecks::Explicit,
    );
    for (name, r) in [
        ("direct", &direct),
        ("direct, explicit checks", &explicit),
        ("continuations", &continuations),
    ] {
        assert_every_vm_served(name, r);
        // Each VM parked before each of its values and before the final -1.
        assert!(
            r.parks >= VMS * (ROUNDS as u32 + 1),
            "{name}: {} parks",
            r.parks
        );
    }
    // With direct calls only `_start` and `$serve` reach `wait`; `$deep` (recursive) and the
    // import `note` are plain C functions, so the only slow calls are the continuations'.
    assert!(
        direct.kernel.contains("(2 continuation, 2 fastcall)"),
        "{}",
        direct.kernel.lines().next().unwrap_or("")
    );
    // Functions 0 and 1 are the imports, 2 is `$deep`, 3 `$serve`, 4 `_start`.
    assert!(
        !direct.kernel.contains("wv_k2("),
        "$deep is not a continuation"
    );
    assert!(direct.kernel.contains("wv_k3("), "$serve is a continuation");
    // With continuations `note` leaves the kernel too: a launch more for every value (7
    // launches against 13 here).
    assert!(
        direct.stats.launches + ROUNDS as u64 <= continuations.stats.launches,
        "launches: direct {}, continuations {}",
        direct.stats.launches,
        continuations.stats.launches
    );
}

#[test]
fn a_vm_that_parks_where_the_kernel_cannot_leave_traps_with_host_error() {
    let r = run(HANDLER, CallMode::Direct, false, MemoryChecks::Guard);
    for vm in 0..VMS {
        assert_eq!(
            r.outcomes[vm as usize],
            Some(Outcome::Trapped(TrapKind::HostError)),
            "VM {vm}"
        );
        assert!(r.notes[vm as usize].is_empty(), "VM {vm}");
    }
}

#[test]
fn a_fault_in_a_continuation_with_direct_calls_traps_only_its_vm() {
    for (calls, parking, checks) in [
        (CallMode::Direct, true, MemoryChecks::Guard),
        (CallMode::Direct, true, MemoryChecks::Explicit),
        (CallMode::Continuations, false, MemoryChecks::Explicit),
    ] {
        let what = format!("{} calls, {} checks", calls.name(), checks.name());
        let r = run(FAULTING, calls, parking, checks);
        for vm in 0..VMS as usize {
            if vm == 1 {
                assert_eq!(
                    r.outcomes[vm],
                    Some(Outcome::Trapped(TrapKind::MemoryOutOfBounds)),
                    "{what}"
                );
                assert!(r.notes[vm].is_empty(), "{what}");
            } else {
                assert_eq!(
                    r.outcomes[vm],
                    Some(Outcome::Returned(Vec::new())),
                    "{what}"
                );
                assert_eq!(r.notes[vm], vec![100 + vm as i32], "{what}");
            }
        }
    }
}

/// The same supervised fleet on OpenCL with synchronous imports (`--calls direct` on PoCL) and
/// on CUDA (warpvisor's CPU driver): `wait` parks and leaves the kernel, `note` is served while
/// the kernel runs, `$deep` recurses through continuations; it ends as with continuations, in
/// fewer launches. A kernel that cannot leave at `wait` traps the VMs that park.
#[test]
fn opencl_vms_park_at_a_parking_import_and_the_rest_is_served_in_the_kernel() {
    device_vms_park_and_the_rest_is_served_in_the_kernel("opencl");
}

#[test]
fn cuda_vms_park_at_a_parking_import_and_the_rest_is_served_in_the_kernel() {
    if common::cuda_on_cpu_here() {
        device_vms_park_and_the_rest_is_served_in_the_kernel("cuda");
    }
}

fn device_vms_park_and_the_rest_is_served_in_the_kernel(backend: &str) {
    let sync = run_on(
        backend,
        HANDLER,
        CallMode::Direct,
        true,
        MemoryChecks::Explicit,
    );
    let continuations = run_on(
        backend,
        HANDLER,
        CallMode::Continuations,
        false,
        MemoryChecks::Explicit,
    );
    for (name, r) in [("direct", &sync), ("continuations", &continuations)] {
        assert_every_vm_served(&format!("{backend}, {name}"), r);
    }
    assert!(
        sync.kernel.contains("wv_k2("),
        "$deep recurses: a continuation"
    );
    assert!(
        sync.stats.launches + ROUNDS as u64 <= continuations.stats.launches,
        "launches: direct {}, continuations {}",
        sync.stats.launches,
        continuations.stats.launches
    );
    let unparked = run_on(
        backend,
        HANDLER,
        CallMode::Direct,
        false,
        MemoryChecks::Explicit,
    );
    for vm in 0..VMS as usize {
        assert_eq!(
            unparked.outcomes[vm],
            Some(Outcome::Trapped(TrapKind::HostError)),
            "VM {vm}"
        );
    }
}
