//! Guard regions (`MemoryChecks::Guard`) on `cpu` and on PoCL (`opencl` on a CPU device):
//! accesses carry no bounds check; an access outside the VM's memory faults and the fault
//! becomes that VM's `memory_out_of_bounds` trap. Every outcome here is compared with explicit
//! checks (the mode the spec suite and the device backends run) or with wasmtime.

mod common;

use std::sync::Arc;

use warpvisor::backend::Backend;
use warpvisor::codegen::{CallMode, Dialect, DirtyPages, KernelOptions, MemoryChecks};
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, TrapKind, Value, VmmError};

/// A backend guard regions work on, with the calls they need there.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// Host C with direct calls.
    Cpu,
    /// OpenCL C with continuations on PoCL (the fault handler resumes the device thread at
    /// its trampoline's fault point).
    OpenCl,
}

const TARGETS: [Target; 2] = [Target::Cpu, Target::OpenCl];

impl Target {
    fn backend(self) -> Arc<dyn Backend> {
        match self {
            Target::Cpu => common::cpu(),
            Target::OpenCl => common::opencl(),
        }
    }

    fn options(self, memory_checks: MemoryChecks) -> KernelOptions {
        match self {
            Target::Cpu => options(memory_checks),
            Target::OpenCl => KernelOptions {
                dialect: Dialect::OpenCl,
                calls: CallMode::Continuations,
                memory_checks,
                ..KernelOptions::default()
            },
        }
    }
}

fn options(memory_checks: MemoryChecks) -> KernelOptions {
    KernelOptions {
        calls: CallMode::Direct,
        memory_checks,
        ..KernelOptions::default()
    }
}

fn fleet_on(
    target: Target,
    wat: &str,
    memory_checks: MemoryChecks,
    num_vms: u32,
) -> Result<Fleet, VmmError> {
    let program = Program::compile(
        wat.as_bytes(),
        &target.options(memory_checks),
        &*target.backend(),
    )?;
    let config = FleetConfig {
        num_vms,
        max_memory_pages: 4,
        ..FleetConfig::default()
    };
    Fleet::new(Arc::new(program), config, Imports::default())
}

fn fleet_with(wat: &str, memory_checks: MemoryChecks, num_vms: u32) -> Result<Fleet, VmmError> {
    fleet_on(Target::Cpu, wat, memory_checks, num_vms)
}

fn fleet_of(target: Target, wat: &str, memory_checks: MemoryChecks, num_vms: u32) -> Fleet {
    fleet_on(target, wat, memory_checks, num_vms).unwrap_or_else(|e| panic!("{target:?}: {e}"))
}

/// Loads and stores of every width, a load with a static offset beyond the guard, growth, and
/// a digest of the first page and the bytes around its end.
const ACCESS: &str = r#"(module
  (memory 1 4)
  (data (i32.const 65520) "0123456789abcdef")
  (func (export "load") (param $width i32) (param $at i32) (result i64)
    (block $w8 (block $w4 (block $w2 (block $w1
      (br_table $w1 $w2 $w4 $w8 (local.get $width)))
      (return (i64.load8_u (local.get $at))))
      (return (i64.load16_u (local.get $at))))
      (return (i64.load32_u (local.get $at))))
    (i64.load (local.get $at)))
  (func (export "store") (param $width i32) (param $at i32) (param $v i64)
    (block $w8 (block $w4 (block $w2 (block $w1
      (br_table $w1 $w2 $w4 $w8 (local.get $width)))
      (i64.store8 (local.get $at) (local.get $v)) (return))
      (i64.store16 (local.get $at) (local.get $v)) (return))
      (i64.store32 (local.get $at) (local.get $v)) (return))
    (i64.store (local.get $at) (local.get $v)))
  ;; A dead load must still trap.
  (func (export "dead_load") (param $at i32)
    (drop (i32.load (local.get $at))))
  (func (export "far") (param $at i32) (result i32)
    (i32.load offset=0x7ffffff0 (local.get $at)))
  (func (export "grow") (param $pages i32) (result i32)
    (memory.grow (local.get $pages)))
  (func (export "tail") (result i64)
    (i64.xor (i64.load (i32.const 65520)) (i64.load (i32.const 65528)))))"#;

/// The addresses probed: inside, at the end, straddling it, far beyond, the top of the
/// 32-bit space.
fn probes() -> Vec<u32> {
    let mut at: Vec<u32> = (65520..65540).collect();
    at.extend([0, 131072 - 4, 131072, 1 << 31, u32::MAX - 3, u32::MAX]);
    at
}

/// Every (width, address) job for `load` or `store`.
fn jobs(store: bool) -> Vec<Vec<Value>> {
    let mut jobs = Vec::new();
    for width in 0..4 {
        for at in probes() {
            let mut job = vec![Value::I32(width), Value::I32(at as i32)];
            if store {
                job.push(Value::I64(0x0102_0304_0506_0708));
            }
            jobs.push(job);
        }
    }
    jobs
}

#[test]
fn out_of_bounds_accesses_trap_exactly_as_with_explicit_checks() {
    for target in TARGETS {
        for (export, store) in [("load", false), ("store", true)] {
            let jobs = jobs(store);
            let n = jobs.len() as u32;
            let mut outcomes = Vec::new();
            for checks in [MemoryChecks::Guard, MemoryChecks::Explicit] {
                let mut f = fleet_of(target, ACCESS, checks, n);
                let o = f.invoke(export, &jobs).unwrap();
                // A straddling store that traps writes nothing: the tail reads as instantiated.
                let tails = f.invoke("tail", &vec![Vec::new(); n as usize]).unwrap();
                outcomes.push((o, tails));
            }
            let (guard, explicit) = (&outcomes[0], &outcomes[1]);
            assert_eq!(guard, explicit, "{target:?} {export}: guard regions differ");
            let traps = guard
                .0
                .iter()
                .filter(|o| **o == Outcome::Trapped(TrapKind::MemoryOutOfBounds))
                .count();
            assert!(
                traps > jobs.len() / 3 && traps < jobs.len(),
                "{target:?} {export}: {traps} of {} trapped",
                jobs.len()
            );
        }
    }
}

#[test]
fn a_dead_load_and_a_load_beyond_the_guard_still_trap() {
    for target in TARGETS {
        let mut f = fleet_of(target, ACCESS, MemoryChecks::Guard, 4);
        let at = |a: u32| vec![Value::I32(a as i32)];
        let o = f
            .invoke("dead_load", &[at(0), at(65533), at(1 << 20), at(65532)])
            .unwrap();
        let oob = Outcome::Trapped(TrapKind::MemoryOutOfBounds);
        assert_eq!(
            o,
            vec![
                Outcome::Returned(vec![]),
                oob.clone(),
                oob.clone(),
                Outcome::Returned(vec![])
            ]
        );
        // offset 0x7ffffff0 is beyond the 32 MiB guard: the explicit check stays.
        let o = f.invoke("far", &[at(0), at(1 << 31)]).unwrap();
        assert_eq!(o, vec![oob.clone(), oob]);
    }
}

#[test]
fn grown_pages_open_and_a_reset_closes_them_again() {
    for target in TARGETS {
        let mut f = fleet_of(target, ACCESS, MemoryChecks::Guard, 3);
        let oob = Outcome::Trapped(TrapKind::MemoryOutOfBounds);
        // VM 0 grows by 1 page, VM 1 by 3, VM 2 not at all; then each stores at 65536 + 100.
        let grown = f
            .invoke(
                "grow",
                &[
                    vec![Value::I32(1)],
                    vec![Value::I32(3)],
                    vec![Value::I32(0)],
                ],
            )
            .unwrap();
        assert_eq!(
            grown,
            vec![Outcome::Returned(vec![Value::I32(1)]); 3],
            "every grow returns the old size"
        );
        let store = |at: i32| vec![Value::I32(3), Value::I32(at), Value::I64(-1)];
        let o = f
            .invoke("store", &[store(65636), store(4 * 65536 - 8), store(65636)])
            .unwrap();
        assert_eq!(
            o,
            vec![
                Outcome::Returned(vec![]),
                Outcome::Returned(vec![]),
                oob.clone()
            ]
        );
        // Past the configured limit (4 pages) memory cannot grow: the next page stays closed.
        let o = f.invoke("grow", &[vec![Value::I32(3)]]).unwrap();
        assert_eq!(o, vec![Outcome::Returned(vec![Value::I32(-1)])]);
        f.reset().unwrap();
        let load = |at: i32| vec![Value::I32(0), Value::I32(at)];
        let o = f
            .invoke("load", &[load(65636), load(4 * 65536 - 8), load(100)])
            .unwrap();
        assert_eq!(
            o,
            vec![oob.clone(), oob, Outcome::Returned(vec![Value::I64(0)])]
        );
        // What the host reads past a VM's size is zeros, not a fault.
        assert_eq!(f.read_memory(1, 65536, 4096).unwrap(), vec![0u8; 4096]);
        assert_eq!(f.memory_pages(1), Some(1));
    }
}

#[test]
fn only_the_faulting_vm_traps_and_the_others_finish() {
    for target in TARGETS {
        let n = 64u32;
        let mut f = fleet_of(target, ACCESS, MemoryChecks::Guard, n);
        let jobs: Vec<Vec<Value>> = (0..n)
            .map(|vm| {
                let at = if vm % 5 == 3 { 65536 + vm } else { vm * 8 };
                vec![Value::I32(3), Value::I32(at as i32), Value::I64(vm as i64)]
            })
            .collect();
        let o = f.invoke("store", &jobs).unwrap();
        for (vm, o) in o.iter().enumerate() {
            let want = if vm % 5 == 3 {
                Outcome::Trapped(TrapKind::MemoryOutOfBounds)
            } else {
                Outcome::Returned(vec![])
            };
            assert_eq!(*o, want, "{target:?} VM {vm}");
        }
        let loads: Vec<Vec<Value>> = (0..n)
            .map(|vm| vec![Value::I32(3), Value::I32((vm * 8) as i32)])
            .collect();
        let o = f.invoke("load", &loads).unwrap();
        for (vm, o) in o.iter().enumerate() {
            let want = if vm % 5 == 3 { 0 } else { vm as i64 };
            assert_eq!(*o, Outcome::Returned(vec![Value::I64(want)]), "VM {vm}");
        }
    }
}

#[test]
fn wasmtime_and_guarded_fleets_take_their_own_faults_in_one_process() {
    for target in TARGETS {
        let wat = r#"(module (memory 1) (func (export "f") (param i32) (result i32) (i32.load (local.get 0))))"#;
        let engine = wasmtime::Engine::default();
        let module = wasmtime::Module::new(&engine, wat::parse_str(wat).unwrap()).unwrap();
        let wasmtime_traps = || {
            let mut store = wasmtime::Store::new(&engine, ());
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
            let f = instance
                .get_typed_func::<i32, i32>(&mut store, "f")
                .unwrap();
            let err = f.call(&mut store, 70000).unwrap_err();
            assert_eq!(
                err.downcast_ref::<wasmtime::Trap>(),
                Some(&wasmtime::Trap::MemoryOutOfBounds)
            );
            assert_eq!(f.call(&mut store, 8).unwrap(), 0);
        };
        // wasmtime's handler first, then ours on top of it, then both again.
        wasmtime_traps();
        for _ in 0..2 {
            let mut f = fleet_of(target, wat, MemoryChecks::Guard, 2);
            let o = f
                .invoke("f", &[vec![Value::I32(70000)], vec![Value::I32(8)]])
                .unwrap();
            assert_eq!(
                o,
                vec![
                    Outcome::Trapped(TrapKind::MemoryOutOfBounds),
                    Outcome::Returned(vec![Value::I32(0)])
                ]
            );
            wasmtime_traps();
        }
    }
}

#[test]
fn guard_regions_are_refused_where_they_cannot_work() {
    let wat = r#"(module (memory 1))"#;
    for (what, options) in [
        (
            "continuations",
            KernelOptions {
                calls: CallMode::Continuations,
                ..options(MemoryChecks::Guard)
            },
        ),
        (
            "interleave",
            KernelOptions {
                interleave: 4,
                ..options(MemoryChecks::Guard)
            },
        ),
    ] {
        let err = Program::compile(wat.as_bytes(), &options, &*common::cpu())
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        let text = err.to_string();
        assert!(
            text.contains("guard regions need") && text.contains("--memory-checks explicit"),
            "{what}: {text}"
        );
    }
    // Past the address space a fleet may reserve: an error naming the way out, before any
    // allocation.
    let err = fleet_with(wat, MemoryChecks::Guard, 20_000)
        .err()
        .unwrap_or_else(|| panic!("20,000 guarded VMs accepted"));
    assert!(
        err.to_string().contains("--memory-checks explicit"),
        "{err}"
    );
    assert_eq!(
        MemoryChecks::default_for(&KernelOptions {
            calls: CallMode::Continuations,
            ..options(MemoryChecks::Explicit)
        }),
        MemoryChecks::Explicit
    );
    assert_eq!(
        MemoryChecks::default_for(&options(MemoryChecks::Explicit)),
        MemoryChecks::Guard
    );
}

/// Stores through one base local share their dirty-page marks (`codegen/function/marks.rs`):
/// the first marks the pages 2 KiB around it, the later ones within reach mark nothing. Each
/// page they write must still be restored by a reset, wherever the base falls in its page.
#[test]
fn stores_sharing_marks_are_all_restored_by_a_reset() {
    let wat = r#"(module (memory 4)
      (func (export "frame") (param $b i32)
        (i64.store offset=0 (local.get $b) (i64.const -1))
        (i64.store offset=2040 (local.get $b) (i64.const -1))
        (i32.store8 offset=1 (local.get $b) (i32.const 7))
        (i64.store offset=1024 (local.get $b) (i64.const -1))
        (i32.store16 offset=2046 (local.get $b) (i32.const -1))
        (i64.store offset=4 (local.get $b) (i64.const -1)))
      (func (export "digest") (result i64) (local $i i32) (local $h i64)
        (local.set $h (i64.const 0xcbf29ce484222325))
        (block $done (loop $next
          (br_if $done (i32.ge_u (local.get $i) (i32.const 262144)))
          (local.set $h (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $i)))
                                 (i64.const 0x100000001b3)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $next)))
        (local.get $h)))"#;
    // Bases at every distance from a page boundary that matters: the span's pages, the
    // page the last bytes of a covered store fall in, and the first page of memory.
    let bases: Vec<i32> = vec![
        0,
        2040,
        2048,
        4096 - 2048,
        4096 - 2047,
        4096 - 8,
        4096 - 1,
        8192 + 1000,
        12288 - 1024,
        65536 - 2045,
        131072 - 3000,
    ];
    let n = bases.len() as u32;
    // Marks are what shares them; the MMU (where the host offers it) must restore the same.
    for dirty_pages in [DirtyPages::Marks, DirtyPages::Auto] {
        let options = KernelOptions {
            dirty_pages,
            ..options(MemoryChecks::Guard)
        };
        let program = Program::compile(wat.as_bytes(), &options, &*common::cpu()).unwrap();
        let config = FleetConfig {
            num_vms: n,
            max_memory_pages: 4,
            ..FleetConfig::default()
        };
        let mut f = Fleet::new(Arc::new(program), config, Imports::default()).unwrap();
        let fresh = f.invoke("digest", &vec![Vec::new(); n as usize]).unwrap();
        for round in 0..3 {
            let jobs: Vec<Vec<Value>> = bases.iter().map(|&b| vec![Value::I32(b)]).collect();
            let o = f.invoke("frame", &jobs).unwrap();
            assert!(o.iter().all(|o| *o == Outcome::Returned(vec![])), "{o:?}");
            let dirty = f.invoke("digest", &vec![Vec::new(); n as usize]).unwrap();
            assert!(
                dirty.iter().zip(&fresh).all(|(d, f)| d != f),
                "round {round}"
            );
            f.reset().unwrap();
            let again = f.invoke("digest", &vec![Vec::new(); n as usize]).unwrap();
            assert_eq!(
                again,
                fresh,
                "{}, round {round}: a reset missed a page",
                dirty_pages.name()
            );
        }
    }
}

/// What a VM did before its faulting access stays done: a global set just before the access
/// that faults keeps its value, on a device too, where the trampoline's landing (not the
/// faulting function) writes the VM's globals back.
#[test]
fn globals_set_before_a_fault_are_kept() {
    let wat = r#"(module
      (memory 1)
      (global $g (mut i32) (i32.const 0))
      (func (export "walk") (param $a i32) (result i32) (local $sum i32)
        (loop $next
          (global.set $g (i32.add (global.get $g) (i32.const 1)))
          (local.set $sum (i32.add (local.get $sum) (i32.load (local.get $a))))
          (local.set $a (i32.add (local.get $a) (i32.const 4096)))
          (br_if $next (i32.lt_u (global.get $g) (i32.const 100))))
        (local.get $sum))
      (func (export "g") (result i32) (global.get $g)))"#;
    for target in TARGETS {
        let mut results = Vec::new();
        for checks in [MemoryChecks::Guard, MemoryChecks::Explicit] {
            let mut f = fleet_of(target, wat, checks, 3);
            let starts = [0, 8, 60000].map(|a| vec![Value::I32(a)]);
            let walked = f.invoke("walk", &starts).unwrap();
            let g = f.invoke("g", &vec![Vec::new(); 3]).unwrap();
            results.push((walked, g));
        }
        assert_eq!(results[0], results[1], "{target:?}");
        // 16 loads from 0 and from 8, two from 60000, then the fault.
        let g: Vec<Outcome> = [17, 17, 3]
            .map(|n| Outcome::Returned(vec![Value::I32(n)]))
            .into();
        assert_eq!(results[0].1, g, "{target:?}");
    }
}

/// `--memory-checks auto` (the CLI's and the bench's default) settles to guard regions on `cpu`
/// with direct calls, and to explicit checks where they cannot work and on PoCL.
#[test]
fn auto_settles_to_what_the_backend_allows() {
    let wat = r#"(module (memory 1) (func (export "f") (param i32) (result i32) (i32.load (local.get 0))))"#;
    let settled = |target: Target, options: KernelOptions| {
        Program::compile(wat.as_bytes(), &options, &*target.backend())
            .unwrap_or_else(|e| panic!("{target:?}: {e}"))
            .options
            .memory_checks
    };
    for target in TARGETS {
        assert_eq!(
            settled(target, target.options(MemoryChecks::Auto)),
            MemoryChecks::Guard,
            "{target:?}"
        );
        // PoCL builds guarded kernels more slowly than explicit ones at -O0.
        let unoptimised = KernelOptions {
            opt_level: 0,
            ..target.options(MemoryChecks::Auto)
        };
        let expected = match target {
            Target::Cpu => MemoryChecks::Guard,
            Target::OpenCl => MemoryChecks::Explicit,
        };
        assert_eq!(settled(target, unoptimised), expected, "{target:?}");
        let interleaved = KernelOptions {
            interleave: 4,
            ..target.options(MemoryChecks::Auto)
        };
        assert_eq!(
            settled(target, interleaved),
            MemoryChecks::Explicit,
            "{target:?}"
        );
    }
    let continuations = KernelOptions {
        calls: CallMode::Continuations,
        ..options(MemoryChecks::Auto)
    };
    assert_eq!(settled(Target::Cpu, continuations), MemoryChecks::Explicit);
}
