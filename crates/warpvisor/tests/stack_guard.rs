//! The guarded native stack floor of direct calls with guard regions (`backend/cpu/stack.rs`):
//! recursive functions carry no stack check; the pages below the floor fault and the fault
//! becomes the running VM's `stack_overflow`. Outcomes are compared with explicit checks.

mod common;

use std::fmt::Write;
use std::sync::Arc;

use warpvisor::codegen::{CallMode, KernelOptions, MemoryChecks};
use warpvisor::vmm::{
    Fleet, FleetConfig, HostFunctions, HostStop, Imports, Outcome, Program, TrapKind, Value,
    VmMemory,
};

fn fleet(wat: &str, checks: MemoryChecks, num_vms: u32, stack_words: u32) -> Fleet {
    fleet_at(
        wat,
        checks,
        num_vms,
        stack_words,
        KernelOptions::default().opt_level,
    )
}

/// [`fleet`] with the kernel built at `opt_level`.
fn fleet_at(
    wat: &str,
    checks: MemoryChecks,
    num_vms: u32,
    stack_words: u32,
    opt_level: u8,
) -> Fleet {
    let options = KernelOptions {
        calls: CallMode::Direct,
        memory_checks: checks,
        opt_level,
        ..KernelOptions::default()
    };
    let program = Program::compile(wat.as_bytes(), &options, common::cpu().as_ref())
        .unwrap_or_else(|e| panic!("{e}"));
    let config = FleetConfig {
        num_vms,
        stack_words,
        ..FleetConfig::default()
    };
    let imports = Imports {
        host: Box::new(Answer),
        ..Imports::default()
    };
    Fleet::new(Arc::new(program), config, imports).unwrap_or_else(|e| panic!("{e}"))
}

/// Import 0 answers 42.
struct Answer;

impl HostFunctions for Answer {
    fn call(&mut self, _: &mut VmMemory<'_>, _: u32, _: &[Value]) -> Result<Vec<Value>, HostStop> {
        Ok(vec![Value::I32(42)])
    }
}

/// `run(n)`: recurses `n` levels (endlessly for n < 0), then calls the host at the bottom.
const DEEP_HOST_CALL: &str = r#"(module
  (import "env" "answer" (func $answer (result i32)))
  (func $down (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (call $answer))
      (else (i32.add (i32.const 1) (call $down (i32.sub (local.get $n) (i32.const 1)))))))
  (func (export "run") (param $n i32) (result i32) (call $down (local.get $n))))"#;

#[test]
fn endless_recursion_traps_only_its_vm_and_the_fleet_goes_on() {
    for checks in [MemoryChecks::Explicit, MemoryChecks::Guard] {
        let mut f = fleet(DEEP_HOST_CALL, checks, 64, 1 << 16);
        // Several launches: the guard is placed and removed for each.
        for round in 0..3 {
            let jobs: Vec<Vec<Value>> = (0..64)
                .map(|i| vec![Value::I32(if i % 3 == 0 { -1 } else { i })])
                .collect();
            let outcomes = f.invoke("run", &jobs).unwrap_or_else(|e| panic!("{e}"));
            for (i, o) in outcomes.iter().enumerate() {
                let expected = if i % 3 == 0 {
                    Outcome::Trapped(TrapKind::StackOverflow)
                } else {
                    Outcome::Returned(vec![Value::I32(42 + i as i32)])
                };
                assert_eq!(*o, expected, "{checks:?}, round {round}, job {i}");
            }
        }
    }
}

#[test]
fn a_host_call_at_any_depth_is_served_or_a_stack_overflow() {
    // With 64 KiB of stack, host calls at the bottom of ever deeper recursion are served until
    // the VM is below its floor (guard regions: the host's 512 KiB room lies between floor and
    // guard, backend/cpu/stack.rs), then trap with stack_overflow, and never crash the host.
    for checks in [MemoryChecks::Explicit, MemoryChecks::Guard] {
        let mut small = fleet(DEEP_HOST_CALL, checks, 1, 1 << 10);
        let mut trapped_at = None;
        for k in 0..12 {
            let depth = 250 << k;
            let outcome = small
                .invoke("run", &[vec![Value::I32(depth)]])
                .unwrap_or_else(|e| panic!("{e}"))
                .remove(0);
            match (&outcome, trapped_at) {
                (Outcome::Returned(v), None) => assert_eq!(v, &[Value::I32(depth + 42)]),
                (Outcome::Trapped(TrapKind::StackOverflow), _) => {
                    trapped_at.get_or_insert(depth);
                }
                _ => panic!(
                    "{checks:?}: depth {depth} gave {outcome:?} (first overflow at {trapped_at:?})"
                ),
            }
        }
        let trapped_at =
            trapped_at.unwrap_or_else(|| panic!("{checks:?}: 512,000 levels fit in 64 KiB"));
        assert!(trapped_at > 250, "{checks:?}: 250 levels overflowed 64 KiB");
        // With 4 MiB the depth that overflowed is served.
        let mut large = fleet(DEEP_HOST_CALL, checks, 1, 1 << 16);
        let outcome = large
            .invoke("run", &[vec![Value::I32(trapped_at)]])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            outcome[0],
            Outcome::Returned(vec![Value::I32(trapped_at + 42)]),
            "{checks:?}"
        );
    }
}

/// A recursive function whose C frame is larger than the 64 KiB guard: 9,000 i64 values
/// loaded from memory before its call, which it and its callee then overwrite, and used after
/// it (so they live in the frame across the call). Without probes of every page of such a frame, a call
/// could step over the guard into the host's reserve.
fn big_frame_module() -> String {
    const LOCALS: usize = 9_000;
    let mut wat = String::from(
        "(module\n  (memory 2)\n  (func $big (param $n i32) (result i64)\n    (local $acc i64)\n",
    );
    let _ = writeln!(wat, "    (local {})", "i64 ".repeat(LOCALS));
    wat.push_str("    (if (i32.eqz (local.get $n)) (then (return (i64.const 0))))\n");
    for i in 0..LOCALS {
        let _ = writeln!(
            wat,
            "    (local.set {} (i64.load (i32.const {})))",
            i + 2,
            i * 8
        );
    }
    let _ = writeln!(
        wat,
        "    (memory.fill (i32.const 0) (local.get $n) (i32.const {}))",
        LOCALS * 8
    );
    wat.push_str("    (local.set $acc (call $big (i32.sub (local.get $n) (i32.const 1))))\n");
    for i in 0..LOCALS {
        let _ = writeln!(
            wat,
            "    (local.set $acc (i64.add (local.get $acc) (local.get {})))",
            i + 2
        );
    }
    wat.push_str("    (local.get $acc))\n");
    wat.push_str(
        "  (func (export \"run\") (param $n i32) (result i64) (call $big (local.get $n))))\n",
    );
    wat
}

#[test]
fn frames_larger_than_the_guard_still_overflow_into_it() {
    // Guard regions only: with explicit checks every frame compares its own stack pointer
    // with the floor. Built at -O0: GCC's -O2 of 9,000 locals in one function took 90 s of
    // CI; unoptimised, every local keeps its own slot, so the frame is at least as large.
    let wat = big_frame_module();
    // 1 MiB of native stack: a few levels of 72 KiB frames fit, a thousand do not.
    let mut f = fleet_at(&wat, MemoryChecks::Guard, 4, 1 << 14, 0);
    let jobs: Vec<Vec<Value>> = [3, 1_000, 2, 100_000]
        .iter()
        .map(|&n| vec![Value::I32(n)])
        .collect();
    let outcomes = f.invoke("run", &jobs).unwrap_or_else(|e| panic!("{e}"));
    // Level k < n adds the 9,000 words level k + 1 filled with the byte k + 1 (wrapping, as
    // i64.add does); level n read zeros.
    let word = |b: i64| b.wrapping_mul(0x0101_0101_0101_0101);
    let expect = |n: i64| -> i64 {
        (2..=n).fold(0i64, |acc, b| acc.wrapping_add(word(b).wrapping_mul(9_000)))
    };
    assert_eq!(outcomes[0], Outcome::Returned(vec![Value::I64(expect(3))]));
    assert_eq!(outcomes[1], Outcome::Trapped(TrapKind::StackOverflow));
    assert_eq!(outcomes[2], Outcome::Returned(vec![Value::I64(expect(2))]));
    assert_eq!(outcomes[3], Outcome::Trapped(TrapKind::StackOverflow));
}
