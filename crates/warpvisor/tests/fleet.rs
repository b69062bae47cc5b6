//! Fleet behaviour: per-VM traps, memory isolation under every interleave, batches.

mod common;

use std::sync::Arc;

use warpvisor::codegen::{CallMode, DirtyPages, KernelOptions, MemoryChecks};
use warpvisor::vmm::{Fleet, FleetConfig, Imports, Outcome, Program, TrapKind, Value};

fn fleet(wat: &str, interleave: u32, num_vms: u32) -> Fleet {
    fleet_on("cpu", wat, interleave, num_vms)
}

fn fleet_on(backend: &str, wat: &str, interleave: u32, num_vms: u32) -> Fleet {
    let config = FleetConfig {
        num_vms,
        max_memory_pages: 4,
        ..FleetConfig::default()
    };
    common::fleet(backend, wat, interleave, config)
}

const DIV: &str = r#"(module
  (func (export "div") (param i32 i32) (result i32) (i32.div_s (local.get 0) (local.get 1))))"#;

#[test]
fn every_seventh_of_1000_vms_divides_by_zero_and_only_it_traps() {
    seventh_divides_by_zero("cpu");
}

#[test]
fn opencl_every_seventh_of_1000_vms_divides_by_zero_and_only_it_traps() {
    seventh_divides_by_zero("opencl");
}

fn seventh_divides_by_zero(backend: &str) {
    let mut f = fleet_on(backend, DIV, 4, 1000);
    // Divisors are never zero except for every 7th job; some are negative.
    let divisor = |i: i32| if i % 7 == 0 { 0 } else { i % 13 - 20 };
    let jobs: Vec<Vec<Value>> = (0..1000i32)
        .map(|i| vec![Value::I32(i * 1000 - 7), Value::I32(divisor(i))])
        .collect();
    let outcomes = f.invoke("div", &jobs).unwrap();
    assert_eq!(outcomes.len(), 1000);
    for (i, o) in outcomes.iter().enumerate() {
        let i = i as i32;
        let expected = match divisor(i) {
            0 => Outcome::Trapped(TrapKind::IntegerDivisionByZero),
            d => Outcome::Returned(vec![Value::I32((i * 1000 - 7) / d)]),
        };
        assert_eq!(*o, expected, "job {i}");
    }
}

#[test]
fn more_jobs_than_vms_run_in_batches_from_fresh_instances() {
    let wat = r#"(module (global $n (mut i32) (i32.const 0))
      (func (export "bump") (param i32) (result i32)
        (global.set $n (i32.add (global.get $n) (local.get 0))) (global.get $n)))"#;
    let mut f = fleet(wat, 4, 3);
    let jobs: Vec<Vec<Value>> = (1..=7).map(|i| vec![Value::I32(i)]).collect();
    let outcomes = f.invoke_batched("bump", &jobs).unwrap();
    // Each job sees a fresh global: its result is its own argument.
    let got: Vec<Outcome> = (1..=7)
        .map(|i| Outcome::Returned(vec![Value::I32(i)]))
        .collect();
    assert_eq!(outcomes, got);
}

const MEM: &str = r#"(module (memory 1 4)
  (func (export "fill") (param i32) (memory.fill (i32.const 0) (local.get 0) (i32.const 65536)))
  (func (export "poke") (param i32 i64) (i64.store (local.get 0) (local.get 1)))
  (func (export "poke8") (param i32 i32) (i32.store8 offset=0 (local.get 0) (local.get 1)))
  (func (export "grow") (result i32) (memory.grow (i32.const 1))))"#;

fn check_isolation(backend: &str, interleave: u32) {
    let n = 8u32;
    let mut f = fleet_on(backend, MEM, interleave, n);
    let fills: Vec<Vec<Value>> = (0..n)
        .map(|vm| vec![Value::I32(0x10 + vm as i32)])
        .collect();
    assert!(f
        .invoke("fill", &fills)
        .unwrap()
        .iter()
        .all(|o| *o == Outcome::Returned(vec![])));
    // VM 3 stores at 0xFFFFFFF0, VM 5 straddles the end of its memory, the others store in bounds.
    let pokes: Vec<Vec<Value>> = (0..n)
        .map(|vm| {
            let addr = match vm {
                3 => 0xFFFF_FFF0u32 as i32,
                5 => 65536 - 4,
                _ => 8 * vm as i32,
            };
            vec![Value::I32(addr), Value::I64(-1)]
        })
        .collect();
    let outcomes = f.invoke("poke", &pokes).unwrap();
    for (vm, outcome) in outcomes.iter().enumerate() {
        let expected = if vm == 3 || vm == 5 {
            Outcome::Trapped(TrapKind::MemoryOutOfBounds)
        } else {
            Outcome::Returned(vec![])
        };
        assert_eq!(*outcome, expected, "interleave {interleave} vm {vm}");
    }
    // Every VM's memory: its own fill byte everywhere, except its own in-bounds store.
    for vm in 0..n {
        let bytes = f.read_memory(vm, 0, 65536).unwrap();
        for (off, b) in bytes.iter().enumerate() {
            let own_store =
                vm != 3 && vm != 5 && (8 * vm as usize..8 * vm as usize + 8).contains(&off);
            let expected = if own_store { 0xFF } else { 0x10 + vm as u8 };
            assert_eq!(
                *b, expected,
                "interleave {interleave}: vm {vm} byte {off} changed"
            );
        }
    }
    // The whole buffer (every VM's 4 reserved pages, which together are all of it) holds
    // nothing but VM bytes: nothing was written outside the fleet's cells.
    let total: usize = (0..n)
        .map(|vm| {
            let reserved = f.read_memory(vm, 0, 4 * 65536).unwrap();
            reserved.iter().filter(|b| **b != 0).count()
        })
        .sum();
    assert_eq!(
        total,
        n as usize * 65536,
        "interleave {interleave}: stray bytes in the memory buffer"
    );
}

#[test]
fn out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_0() {
    check_isolation("cpu", 0);
}

#[test]
fn opencl_out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_0() {
    check_isolation("opencl", 0);
}

#[test]
fn out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_4() {
    check_isolation("cpu", 4);
}

#[test]
fn opencl_out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_4() {
    check_isolation("opencl", 4);
}

#[test]
fn out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_8() {
    check_isolation("cpu", 8);
}

#[test]
fn opencl_out_of_bounds_stores_trap_and_touch_no_other_vm_interleave_8() {
    check_isolation("opencl", 8);
}

#[test]
fn memory_grows_only_to_the_configured_limit_and_grown_pages_are_isolated() {
    for interleave in [0, 4, 8] {
        let mut f = fleet(MEM, interleave, 4);
        let none: Vec<Vec<Value>> = vec![vec![]; 4];
        for expected in [1, 2, 3, -1] {
            let o = f.invoke("grow", &none).unwrap();
            assert!(o
                .iter()
                .all(|o| *o == Outcome::Returned(vec![Value::I32(expected)])));
        }
        // A store on a grown page of VM 2 lands only in VM 2.
        let pokes: Vec<Vec<Value>> = (0..4)
            .map(|vm| vec![Value::I32(3 * 65536 + 5), Value::I32(vm + 1)])
            .collect();
        f.invoke("poke8", &pokes).unwrap();
        for vm in 0..4u32 {
            assert_eq!(
                f.read_memory(vm, 3 * 65536 + 5, 1).unwrap(),
                vec![vm as u8 + 1]
            );
        }
    }
}

#[test]
fn deep_recursion_traps_with_stack_overflow_and_other_vms_finish() {
    let wat = r#"(module (func $r (export "r") (param i32) (result i32)
        (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 0))
          (else (i32.add (i32.const 1) (call $r (i32.sub (local.get 0) (i32.const 1))))))))"#;
    let mut f = fleet(wat, 8, 3);
    let o = f
        .invoke(
            "r",
            &[
                vec![Value::I32(100)],
                vec![Value::I32(1_000_000)],
                vec![Value::I32(5000)],
            ],
        )
        .unwrap();
    assert_eq!(o[0], Outcome::Returned(vec![Value::I32(100)]));
    assert_eq!(o[1], Outcome::Trapped(TrapKind::StackOverflow));
    assert_eq!(o[2], Outcome::Returned(vec![Value::I32(5000)]));
}

#[test]
fn runaway_vm_stops_out_of_fuel_and_the_others_complete() {
    // Argument 0 loops forever; any other argument counts down from it.
    let wat = r#"(module (func (export "spin") (param i32) (result i32)
        (if (i32.eqz (local.get 0)) (then (loop $forever (br $forever))))
        (loop $down (local.set 0 (i32.sub (local.get 0) (i32.const 1))) (br_if $down (local.get 0)))
        (i32.const 7)))"#;
    let runs = [
        ("cpu", CallMode::Continuations),
        ("cpu", CallMode::Direct),
        ("opencl", CallMode::Continuations),
    ];
    for (backend, calls) in runs {
        let options = KernelOptions {
            dialect: common::dialect(backend),
            meter_fuel: true,
            calls,
            ..KernelOptions::default()
        };
        let b = common::backend(backend);
        let program = Arc::new(Program::compile(wat.as_bytes(), &options, b.as_ref()).unwrap());
        let config = FleetConfig {
            num_vms: 3,
            fuel: 1_000_000,
            ..FleetConfig::default()
        };
        let mut f = Fleet::new(program, config, Imports::default()).unwrap();
        let o = f
            .invoke(
                "spin",
                &[
                    vec![Value::I32(1000)],
                    vec![Value::I32(0)],
                    vec![Value::I32(5)],
                ],
            )
            .unwrap();
        let run = format!("{backend} ({})", calls.name());
        assert_eq!(o[0], Outcome::Returned(vec![Value::I32(7)]), "{run}");
        assert_eq!(o[1], Outcome::Trapped(TrapKind::OutOfFuel), "{run}");
        assert_eq!(o[2], Outcome::Returned(vec![Value::I32(7)]), "{run}");
    }
}

/// A host function that writes its VM's number at address 0, tries to write past the end of
/// its VM's memory (where, contiguously, the next VM's memory begins), and panics for VM 3.
struct Prober;

impl warpvisor::vmm::HostFunctions for Prober {
    fn call(
        &mut self,
        memory: &mut warpvisor::vmm::VmMemory<'_>,
        _import: u32,
        _args: &[Value],
    ) -> Result<Vec<Value>, warpvisor::vmm::HostStop> {
        let vm = memory.vm();
        if vm == 3 {
            panic!("a host function's own failure");
        }
        memory.write(0, &[vm as u8 + 1]).unwrap();
        let size = memory.size();
        // One byte past the end, and an offset that wraps: both refused (were either allowed,
        // this panics and the VM's outcome below is a trap).
        assert!(memory.write(size, &[0xEE]).is_err());
        assert!(memory.write(u64::MAX, &[0xEE]).is_err());
        assert!(memory.read(size - 1, 2).is_err());
        Ok(Vec::new())
    }
}

#[test]
fn a_host_function_sees_only_its_vm_and_its_failure_traps_only_that_vm() {
    let wat = r#"(module
      (import "env" "probe" (func $probe))
      (memory 1)
      (func (export "run") (result i32)
        (call $probe)
        (i32.add (i32.load8_u (i32.const 0)) (i32.load8_u (i32.const 65535)))))"#;
    // Direct calls serve the probe from the worker running the VM, over the running fleet's
    // memory (interleaved: the neighbours' cells are between this VM's).
    for calls in [CallMode::Continuations, CallMode::Direct] {
        for interleave in [0, 8] {
            let options = KernelOptions {
                interleave,
                calls,
                ..KernelOptions::default()
            };
            let program = Arc::new(
                Program::compile(wat.as_bytes(), &options, common::cpu().as_ref()).unwrap(),
            );
            let config = FleetConfig {
                num_vms: 8,
                max_memory_pages: 1,
                ..FleetConfig::default()
            };
            let imports = Imports {
                host: Box::new(Prober),
                ..Imports::default()
            };
            let mut f = Fleet::new(program, config, imports).unwrap();
            let outcomes = f.invoke("run", &vec![Vec::new(); 8]).unwrap();
            for (vm, o) in outcomes.iter().enumerate() {
                let expected = if vm == 3 {
                    Outcome::Trapped(TrapKind::HostError)
                } else {
                    // Its own byte, and no 0xEE at the end of its memory from the neighbour's
                    // probe.
                    Outcome::Returned(vec![Value::I32(vm as i32 + 1)])
                };
                assert_eq!(
                    *o,
                    expected,
                    "VM {vm}, {} calls, interleave {interleave}",
                    calls.name()
                );
            }
        }
    }
}

#[test]
fn a_reset_clears_the_memory_each_vm_grew_and_wrote() {
    // Run 1 grows VM i's memory by i + 1 pages and fills the last one; after a reset every
    // grown page reads zero again, whatever another VM grew to.
    let wat = r#"(module (memory 1)
      (func (export "grow_and_fill") (param $pages i32) (result i32) (local $at i32)
        (drop (memory.grow (local.get $pages)))
        (local.set $at (i32.shl (local.get $pages) (i32.const 16)))
        (memory.fill (local.get $at) (i32.const 0xab) (i32.const 65536))
        (i32.load8_u (local.get $at)))
      (func (export "grow_and_sum") (param $pages i32) (result i32) (local $i i32) (local $s i32)
        (drop (memory.grow (local.get $pages)))
        (block $done (loop $next
          (br_if $done (i32.ge_u (local.get $i) (i32.shl (i32.add (local.get $pages) (i32.const 1)) (i32.const 16))))
          (local.set $s (i32.add (local.get $s) (i32.load8_u (local.get $i))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $next)))
        (local.get $s)))"#;
    for (backend, interleave) in [("cpu", 0), ("cpu", 8), ("opencl", 4)] {
        let mut f = fleet_on(backend, wat, interleave, 3);
        let grow: Vec<Vec<Value>> = (0..3).map(|i| vec![Value::I32(i + 1)]).collect();
        let o = f.invoke("grow_and_fill", &grow).unwrap();
        assert!(o
            .iter()
            .all(|o| *o == Outcome::Returned(vec![Value::I32(0xab)])));
        f.reset().unwrap();
        let o = f
            .invoke("grow_and_sum", &vec![vec![Value::I32(3)]; 3])
            .unwrap();
        for (vm, o) in o.iter().enumerate() {
            assert_eq!(
                *o,
                Outcome::Returned(vec![Value::I32(0)]),
                "{backend}, interleave {interleave}, VM {vm}"
            );
        }
    }
}

/// A host function that writes `len` bytes of 0x5a at `at` in its VM's memory (args: at, len).
struct Writer;

impl warpvisor::vmm::HostFunctions for Writer {
    fn call(
        &mut self,
        memory: &mut warpvisor::vmm::VmMemory<'_>,
        _import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, warpvisor::vmm::HostStop> {
        let (Some(Value::I32(at)), Some(Value::I32(len))) = (args.first(), args.get(1)) else {
            return Err(warpvisor::vmm::HostStop::Trap(TrapKind::HostError));
        };
        memory
            .write(*at as u32 as u64, &vec![0x5a; *len as usize])
            .map_err(|_| warpvisor::vmm::HostStop::Trap(TrapKind::MemoryOutOfBounds))?;
        Ok(Vec::new())
    }
}

#[test]
fn a_reset_restores_every_byte_any_write_changed() {
    // With contiguous memories a reset restores only the pages a VM wrote (the dirty-page map,
    // on every backend): every kind of write must mark them — stores of each width, ones that
    // spill 7 bytes into the next page (over a data segment there), memory.fill/copy/init,
    // grown pages and host writes (through each backend's transfers on opencl and cuda).
    let wat = r#"(module
      (import "env" "write" (func $write (param i32 i32)))
      (memory 2 8)
      (data (i32.const 4090) "0123456789abcdefghij")
      (data (i32.const 8192) "XYZ")
      (data (i32.const 16384) "boundary")
      (data (i32.const 65530) "page-crossing segment")
      (data $passive "passive bytes")
      (func (export "scribble") (param $seed i32)
        ;; Each i64.store spills into a 4 KiB page nothing else writes: one holding segment
        ;; bytes, one starting with a segment, one of zeros, one across a 64 KiB boundary.
        (i64.store (i32.const 4095) (i64.extend_i32_u (local.get $seed)))
        (i64.store (i32.const 16380) (i64.const -1))
        (i64.store (i32.const 36861) (i64.const -1))
        (i64.store (i32.const 65532) (i64.extend_i32_u (local.get $seed)))
        (i32.store16 (i32.const 100) (local.get $seed))
        (i32.store8 (i32.const 8192) (local.get $seed))
        (memory.fill (i32.const 70000) (local.get $seed) (i32.const 9000))
        (memory.copy (i32.const 30000) (i32.const 4090) (i32.const 20))
        (memory.init $passive (i32.const 50000) (i32.const 0) (i32.const 13))
        (drop (memory.grow (i32.const 2)))
        (i64.store (i32.const 196600) (i64.const 0x0102030405060708))
        (call $write (i32.const 90000) (i32.const 5000))
        (call $write (i32.const 131070) (i32.const 4))
        ;; A page no earlier round wrote (10 + seed % 8): found only if the pages a reset
        ;; left clean are watched again.
        (i32.store (i32.add (i32.const 40960) (i32.shl (i32.and (local.get $seed) (i32.const 7)) (i32.const 12)))
                   (local.get $seed)))
      (func (export "digest") (result i64) (local $i i32) (local $h i64)
        (local.set $h (i64.const 0xcbf29ce484222325))
        (block $done (loop $next
          (br_if $done (i32.ge_u (local.get $i) (i32.shl (memory.size) (i32.const 16))))
          (local.set $h (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $i)))
                                 (i64.const 0x100000001b3)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $next)))
        (i64.xor (local.get $h) (i64.extend_i32_u (memory.size)))))"#;
    // Guard regions (direct calls, interleave 0) open and close pages on reset and growth,
    // and by default find the written pages through the MMU where the host allows
    // (`DirtyPages::Auto`), as OpenCL CPU devices (PoCL) at interleave 0 do; marks everywhere
    // else.
    let (auto, marks) = (DirtyPages::Auto, DirtyPages::Marks);
    let mut modes = vec![
        ("cpu", CallMode::Direct, 0, MemoryChecks::Guard, auto),
        ("cpu", CallMode::Direct, 0, MemoryChecks::Guard, marks),
        ("cpu", CallMode::Direct, 0, MemoryChecks::Explicit, auto),
        ("cpu", CallMode::Direct, 8, MemoryChecks::Explicit, auto),
        (
            "cpu",
            CallMode::Continuations,
            0,
            MemoryChecks::Explicit,
            auto,
        ),
        (
            "cpu",
            CallMode::Continuations,
            8,
            MemoryChecks::Explicit,
            auto,
        ),
        (
            "opencl",
            CallMode::Continuations,
            0,
            MemoryChecks::Explicit,
            auto,
        ),
        (
            "opencl",
            CallMode::Continuations,
            0,
            MemoryChecks::Explicit,
            marks,
        ),
    ];
    if common::cuda_on_cpu_here() {
        modes.push((
            "cuda",
            CallMode::Continuations,
            0,
            MemoryChecks::Explicit,
            auto,
        ));
    }
    for (backend, calls, interleave, memory_checks, dirty_pages) in modes {
        let options = KernelOptions {
            dialect: common::dialect(backend),
            interleave,
            calls,
            memory_checks,
            dirty_pages,
            ..KernelOptions::default()
        };
        let backend_ = common::backend(backend);
        let program =
            Arc::new(Program::compile(wat.as_bytes(), &options, backend_.as_ref()).unwrap());
        let config = FleetConfig {
            num_vms: 4,
            max_memory_pages: 8,
            ..FleetConfig::default()
        };
        let imports = Imports {
            host: Box::new(Writer),
            ..Imports::default()
        };
        let mut f = Fleet::new(program, config, imports).unwrap();
        let run = format!(
            "{backend}, {} calls, interleave {interleave}, {} checks, dirty pages {}",
            calls.name(),
            memory_checks.name(),
            dirty_pages.name()
        );
        let fresh = f.invoke("digest", &vec![Vec::new(); 4]).unwrap();
        for round in 1..=3 {
            let seeds: Vec<Vec<Value>> = (0..4)
                .map(|vm| vec![Value::I32(0x1234 + vm + round)])
                .collect();
            let o = f.invoke("scribble", &seeds).unwrap();
            assert!(
                o.iter().all(|o| *o == Outcome::Returned(Vec::new())),
                "{run}: {o:?}"
            );
            let dirty = f.invoke("digest", &vec![Vec::new(); 4]).unwrap();
            assert_ne!(dirty, fresh, "{run}: the writes changed nothing");
            f.reset().unwrap();
            let again = f.invoke("digest", &vec![Vec::new(); 4]).unwrap();
            assert_eq!(again, fresh, "{run}, round {round}");
        }
    }
}
