//! Direct calls (`CallMode::Direct`): on `cpu` imports served while the kernel waits and native
//! recursion with a stack floor; on `opencl` (PoCL: fine-grained SVM) and `cuda` (warpvisor's
//! CPU driver: mapped host memory, asynchronous launches) imports served while the kernel
//! waits, recursion still through continuations. Each test runs the same fleet with
//! continuations as well and wants the same outcomes, except where the modes' limits differ by
//! design.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::vmm::{
    Fleet, FleetConfig, HostFunctions, HostStop, Imports, Outcome, Program, TrapKind, Value,
    VmMemory,
};

fn fleet(
    (backend, calls): Mode,
    wat: &str,
    config: FleetConfig,
    host: Box<dyn HostFunctions>,
) -> Fleet {
    let options = KernelOptions {
        dialect: common::dialect(backend),
        calls,
        ..KernelOptions::default()
    };
    let program = Program::compile(wat.as_bytes(), &options, common::backend(backend).as_ref())
        .unwrap_or_else(|e| panic!("{backend}, {} calls: {e}", calls.name()));
    let imports = Imports {
        host,
        ..Imports::default()
    };
    Fleet::new(Arc::new(program), config, imports).unwrap_or_else(|e| panic!("{e}"))
}

/// A backend and a call mode.
type Mode = (&'static str, CallMode);

/// Every mode with imports served while the kernel waits, and the continuations they must
/// agree with: `cuda` where warpvisor's CPU driver and NVRTC are here (required in CI).
fn modes() -> Vec<Mode> {
    let mut modes = vec![
        ("cpu", CallMode::Continuations),
        ("cpu", CallMode::Direct),
        ("opencl", CallMode::Direct),
    ];
    if common::cuda_on_cpu_here() {
        modes.push(("cuda", CallMode::Direct));
    }
    modes
}

fn describe((backend, calls): Mode) -> String {
    format!("{backend}, {} calls", calls.name())
}

/// `swap(i64, f64) -> (f64, i64)` and `sum(ptr, len) -> i32`: the sum of its VM's bytes,
/// after it has written `len` at `ptr + len` (so the guest sees the host's write).
struct Host;

impl HostFunctions for Host {
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        match (import, args) {
            (0, [Value::I64(a), Value::F64(b)]) => Ok(vec![Value::F64(*b), Value::I64(*a)]),
            (1, [Value::I32(ptr), Value::I32(len)]) => {
                let (ptr, len) = (*ptr as u64, *len as u64);
                let bytes = memory
                    .read(ptr, len as usize)
                    .map_err(|_| HostStop::Trap(TrapKind::MemoryOutOfBounds))?;
                memory
                    .write(ptr + len, &[len as u8])
                    .map_err(|_| HostStop::Trap(TrapKind::MemoryOutOfBounds))?;
                Ok(vec![Value::I32(bytes.iter().map(|&b| b as i32).sum())])
            }
            _ => Err(HostStop::Trap(TrapKind::HostError)),
        }
    }
}

const IMPORTS: &str = r#"(module
  (import "env" "swap" (func $swap (param i64 f64) (result f64 i64)))
  (import "env" "sum" (func $sum (param i32 i32) (result i32)))
  (memory 1)
  (func $fill (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (local.get $i) (i32.add (local.get $i) (local.get $n)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
  ;; Recursion that makes a host call at the bottom: the call is deep in native frames.
  (func $down (param $d i32) (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $d))
      (then (call $sum (i32.const 0) (local.get $n)))
      (else (call $down (i32.sub (local.get $d) (i32.const 1)) (local.get $n)))))
  (func (export "run") (param $n i32) (result i64 f64 i32 i32)
    (local $x f64) (local $y i64)
    (call $fill (local.get $n))
    (call $swap (i64.extend_i32_u (local.get $n)) (f64.const 2.5))
    (local.set $y) (local.set $x)
    (i64.add (local.get $y) (i64.const 1))
    (local.get $x)
    (call $down (i32.const 50) (local.get $n))
    (i32.load8_u (local.get $n))))"#;

#[test]
fn imports_with_memory_and_multiple_results_agree_between_the_modes() {
    let jobs: Vec<Vec<Value>> = (0..64).map(|i| vec![Value::I32(1 + i % 40)]).collect();
    let mut results = Vec::new();
    for mode in modes() {
        let config = FleetConfig {
            num_vms: 64,
            max_memory_pages: 1,
            ..FleetConfig::default()
        };
        let mut f = fleet(mode, IMPORTS, config, Box::new(Host));
        let outcomes = f.invoke("run", &jobs).unwrap();
        for (i, o) in outcomes.iter().enumerate() {
            let n = 1 + i as i64 % 40;
            let sum: i64 = (0..n).map(|k| (k + n) & 0xff).sum();
            let expected = Outcome::Returned(vec![
                Value::I64(n + 1),
                Value::F64(2.5f64.to_bits()),
                Value::I32(sum as i32),
                Value::I32(n as i32),
            ]);
            assert_eq!(*o, expected, "job {i}, {}", describe(mode));
        }
        results.push(outcomes);
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}

/// Hostile arguments to an import served while the kernel runs: a pointer past the end of
/// memory, a huge length, a range that wraps. The VM that passes them traps with
/// `memory_out_of_bounds` (the host's checked view of its memory refuses them) in every mode,
/// and the VMs beside it return their sums.
#[test]
fn hostile_import_arguments_trap_only_their_vm_in_every_mode() {
    let wat = r#"(module
        (import "env" "swap" (func (param i64 f64) (result f64 i64)))
        (import "env" "sum" (func $sum (param i32 i32) (result i32)))
        (memory 1)
        (func (export "run") (param $ptr i32) (param $len i32) (result i32)
          (call $sum (local.get $ptr) (local.get $len))))"#;
    let cases: [(i32, i32); 5] = [
        (0, 16),        // fine: 16 zero bytes, then 16 written at 16
        (65_536, 1),    // one past the end
        (65_520, 64),   // straddles the end
        (16, i32::MAX), // a huge length
        (-16, 32),      // 0xffff_fff0 + 32 wraps in 32 bits
    ];
    let jobs: Vec<Vec<Value>> = cases
        .iter()
        .map(|&(p, l)| vec![Value::I32(p), Value::I32(l)])
        .collect();
    for mode in modes() {
        let config = FleetConfig {
            num_vms: cases.len() as u32,
            max_memory_pages: 1,
            ..FleetConfig::default()
        };
        let mut f = fleet(mode, wat, config, Box::new(Host));
        let outcomes = f.invoke("run", &jobs).unwrap();
        assert_eq!(
            outcomes[0],
            Outcome::Returned(vec![Value::I32(0)]),
            "{}",
            describe(mode)
        );
        for (i, o) in outcomes.iter().enumerate().skip(1) {
            assert_eq!(
                *o,
                Outcome::Trapped(TrapKind::MemoryOutOfBounds),
                "job {i} {:?}, {}",
                cases[i],
                describe(mode)
            );
        }
    }
}

const RECURSE: &str = r#"(module
  (func $fib (export "fib") (param i32) (result i32)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
      (then (local.get 0))
      (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1)))
                     (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
  (func $forever (export "forever") (param i32) (result i32)
    (call $forever (local.get 0)))
  (func (export "either") (param i32) (result i32)
    (if (result i32) (i32.and (local.get 0) (i32.const 1))
      (then (call $forever (local.get 0)))
      (else (call $fib (i32.rem_u (local.get 0) (i32.const 20)))))))"#;

#[test]
fn endless_recursion_traps_only_its_vm_in_both_modes() {
    let fib = |n: u32| -> u32 {
        let (mut a, mut b) = (0u32, 1u32);
        for _ in 0..n {
            (a, b) = (b, a + b);
        }
        a
    };
    for mode in modes() {
        let config = FleetConfig {
            num_vms: 64,
            ..FleetConfig::default()
        };
        let mut f = fleet(mode, RECURSE, config, Box::new(warpvisor::vmm::NoHost));
        let jobs: Vec<Vec<Value>> = (0..64).map(|i| vec![Value::I32(i)]).collect();
        let outcomes = f.invoke("either", &jobs).unwrap();
        for (i, o) in outcomes.iter().enumerate() {
            let expected = if i % 2 == 1 {
                Outcome::Trapped(TrapKind::StackOverflow)
            } else {
                Outcome::Returned(vec![Value::I32(fib(i as u32 % 20) as i32)])
            };
            assert_eq!(*o, expected, "job {i}, {}", describe(mode));
        }
        // The fleet is still usable after the traps.
        let again = f.invoke("fib", &[vec![Value::I32(10)]]).unwrap();
        assert_eq!(again[0], Outcome::Returned(vec![Value::I32(55)]));
    }
}

#[test]
fn the_native_stack_follows_stack_words() {
    // A small budget traps where a large one does not: the floor is --stack-words × 64 bytes
    // below the launch (at most the worker's stack less the host's reserve), checked in every
    // recursive function (explicit checks) or guarded by inaccessible pages below it (guard
    // regions, 512 KiB further down: the host's room). GCC inlines the recursive function into
    // itself several levels deep, so a level can take only a few bytes: 300,000 levels
    // overflow 64 KiB (and the room below it) and fit in 56 MiB.
    let deep = r#"(module (func $d (export "deep") (param i32) (result i32)
        (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 0))
          (else (i32.add (i32.const 1) (call $d (i32.sub (local.get 0) (i32.const 1))))))))"#;
    for checks in [MemoryChecks::Explicit, MemoryChecks::Guard] {
        let run = |stack_words: u32| {
            let options = KernelOptions {
                calls: CallMode::Direct,
                memory_checks: checks,
                ..KernelOptions::default()
            };
            let program = Program::compile(deep.as_bytes(), &options, common::cpu().as_ref())
                .unwrap_or_else(|e| panic!("{e}"));
            let config = FleetConfig {
                num_vms: 2,
                stack_words,
                ..FleetConfig::default()
            };
            let mut f = Fleet::new(Arc::new(program), config, Imports::default())
                .unwrap_or_else(|e| panic!("{e}"));
            f.invoke("deep", &[vec![Value::I32(300_000)], vec![Value::I32(5)]])
                .unwrap()
        };
        let small = run(1 << 10); // 64 KiB
        assert_eq!(
            small[0],
            Outcome::Trapped(TrapKind::StackOverflow),
            "{checks:?}"
        );
        assert_eq!(
            small[1],
            Outcome::Returned(vec![Value::I32(5)]),
            "{checks:?}"
        );
        let large = run(1 << 20); // 64 MiB, capped at the worker's 56 MiB
        assert_eq!(
            large[0],
            Outcome::Returned(vec![Value::I32(300_000)]),
            "{checks:?}"
        );
    }
}

/// Waits far beyond the test's timeout on import 0 for odd VMs; returns at once for even ones.
struct Sleeper;

impl HostFunctions for Sleeper {
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        _: u32,
        _: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        if memory.vm() % 2 == 1 {
            return Err(HostStop::Wait(Instant::now() + Duration::from_secs(600)));
        }
        Ok(vec![Value::I32(7)])
    }
}

#[test]
fn a_waiting_vm_times_out_and_the_others_complete_in_both_modes() {
    let wat = r#"(module (import "env" "wait" (func $wait (result i32)))
        (func (export "run") (result i32) (call $wait)))"#;
    for mode in modes() {
        let config = FleetConfig {
            num_vms: 4,
            timeout: Some(Duration::from_millis(300)),
            ..FleetConfig::default()
        };
        let mut f = fleet(mode, wat, config, Box::new(Sleeper));
        let start = Instant::now();
        let outcomes = f.invoke("run", &vec![Vec::new(); 4]).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}: the timeout did not stop the waiting VMs",
            describe(mode)
        );
        for (vm, o) in outcomes.iter().enumerate() {
            let expected = if vm % 2 == 1 {
                Outcome::Trapped(TrapKind::Timeout)
            } else {
                Outcome::Returned(vec![Value::I32(7)])
            };
            // By design on a CPU OpenCL device: the work-items of a work-group run one after
            // another, so a VM behind a waiting one in its work-group calls only after the
            // deadline, and times out too (docs/opencl.md, "Synchronous imports"). The same
            // holds for the threads of a CTA on warpvisor's CUDA driver for the CPU.
            let behind_a_waiter = matches!(mode.0, "opencl" | "cuda") && vm > 1;
            if behind_a_waiter && *o == Outcome::Trapped(TrapKind::Timeout) {
                continue;
            }
            assert_eq!(*o, expected, "VM {vm}, {}", describe(mode));
        }
    }
}

/// On OpenCL and CUDA with synchronous imports a VM's imports leave no kernel: one launch runs
/// the whole batch, where continuations launch again after every round of hypercalls;
/// recursion still goes through the trampoline.
#[test]
fn opencl_serves_imports_within_one_launch() {
    serves_imports_within_one_launch("opencl");
}

#[test]
fn cuda_serves_imports_within_one_launch() {
    if common::cuda_on_cpu_here() {
        serves_imports_within_one_launch("cuda");
    }
}

fn serves_imports_within_one_launch(backend: &'static str) {
    let wat = r#"(module
        (import "env" "swap" (func (param i64 f64) (result f64 i64)))
        (import "env" "sum" (func $sum (param i32 i32) (result i32)))
        (memory 1)
        (func $fib (param i32) (result i32)
          (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
            (then (local.get 0))
            (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1)))
                           (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
        (func (export "run") (param $n i32) (result i32) (local $i i32) (local $acc i32)
          (loop $next
            (local.set $acc (i32.add (local.get $acc) (call $sum (i32.const 0) (local.get $i))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $next (i32.lt_u (local.get $i) (local.get $n))))
          (i32.add (local.get $acc) (call $fib (i32.const 10)))))"#;
    let jobs: Vec<Vec<Value>> = (0..16).map(|i| vec![Value::I32(1 + i)]).collect();
    let mut runs = Vec::new();
    for calls in [CallMode::Continuations, CallMode::Direct] {
        let config = FleetConfig {
            num_vms: 16,
            max_memory_pages: 1,
            ..FleetConfig::default()
        };
        let mut f = fleet((backend, calls), wat, config, Box::new(Host));
        let outcomes = f.invoke("run", &jobs).unwrap();
        runs.push((outcomes, f.stats().launches));
    }
    let (continuations, direct) = (&runs[0], &runs[1]);
    assert_eq!(continuations.0, direct.0, "{backend}");
    // Every import a VM makes is served: `sum` writes len at ptr + len, so each sum also
    // counts what the calls before it wrote. Job j makes n = j + 1 calls.
    for (j, o) in direct.0.iter().enumerate() {
        let n = j as i32 + 1;
        let acc: i32 = (0..n).map(|i| (0..i).sum::<i32>()).sum();
        assert_eq!(
            *o,
            Outcome::Returned(vec![Value::I32(acc + 55)]),
            "job {j}, {backend}"
        );
    }
    assert_eq!(
        direct.1, 1,
        "{backend}, synchronous imports: one launch for the batch"
    );
    assert!(
        continuations.1 > 16,
        "continuations relaunch for every round of imports ({} launches)",
        continuations.1
    );
}
