//! A fuzz target for the WASI host's argument decoding: arbitrary calls, with arbitrary
//! arguments, against a guest memory of arbitrary bytes and a real preopened directory.
//! Every call must end as an errno, an exit, a park or a trap of the calling VM — never a
//! panic of the host (this test runs with debug assertions, so overflowing arithmetic on a
//! guest value panics here if the host forgets to check it) — and nothing outside the
//! directory may change.
//!
//! `fuzz_one` decodes one input the way a coverage-guided fuzzer would feed it; the test feeds
//! it inputs from a seeded generator (`WARPVISOR_FUZZ_ITERS` sets how many; default 3,000).

mod common;
#[path = "hostile/mod.rs"]
mod hostile;

use std::sync::{Arc, Mutex};

use arbitrary::Unstructured;
use hostile::Sandbox;
use warpvisor::vmm::{HostStop, TrapKind, Value, VmMemory};
use warpvisor::wasi::{link, WasiState, FUNCTIONS};

/// Pages of guest memory.
const PAGES: u32 = 2;

/// A guest importing every WASI function warpvisor serves (the signatures do not matter to
/// the host: it decodes whatever arguments arrive).
fn module_text() -> String {
    let imports: String = FUNCTIONS
        .iter()
        .map(|f| format!("(import \"wasi_snapshot_preview1\" \"{f}\" (func))\n"))
        .collect();
    format!("(module {imports} (memory 2))")
}

/// A guest value: edges (0, near the end of memory, near 2^32, misaligned) more often than
/// chance would give them.
fn value(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let end = PAGES * 65536;
    let v: u32 = match u.int_in_range(0..=7)? {
        0 => u.int_in_range(0..=16)?,
        1 => end - u.int_in_range(0..=64)?,
        2 => u32::MAX - u.int_in_range(0..=64)?,
        3 => u.int_in_range(0..=end / 8)? * 8,
        4 => u.int_in_range(0..=end)?,
        5 => u.int_in_range(0..=8)?,
        _ => u.arbitrary()?,
    };
    Ok(if u.ratio(1, 4)? {
        Value::I64(((u.arbitrary::<u32>()? as i64) << 32) | v as i64)
    } else {
        Value::I32(v as i32)
    })
}

/// Decodes `data` into a guest memory image and a sequence of calls, and makes them.
fn fuzz_one(data: &[u8], sandbox: &Sandbox) {
    let wasm = wat::parse_str(module_text()).unwrap();
    let module = warpvisor::frontend::load(&wasm).unwrap();
    let state = WasiState::new("fuzz.wasm", sandbox.preopens(), 1).unwrap();
    let imports = link(&module, Arc::new(Mutex::new(state)), false).unwrap();
    let mut host = imports.host;
    let mut memory = vec![0u8; PAGES as usize * 65536];
    let mut u = Unstructured::new(data);
    // The first part of the input is the guest's memory (paths, iovecs, subscriptions).
    let image_len = u.int_in_range(0..=4096usize).unwrap_or(0);
    let image = u.bytes(image_len.min(u.len())).unwrap_or_default().to_vec();
    for (i, chunk) in image.chunks(64).enumerate() {
        // Spread the bytes over the memory, the last page included.
        let at = (i as u64 * 2053) % (PAGES as u64 * 65536 - 64);
        memory[at as usize..at as usize + chunk.len()].copy_from_slice(chunk);
    }
    while !u.is_empty() {
        let Ok(import) = u.int_in_range(0..=FUNCTIONS.len() as u32 - 1) else {
            break;
        };
        let Ok(nargs) = u.int_in_range(0..=9usize) else {
            break;
        };
        let args: Vec<Value> = (0..nargs).map_while(|_| value(&mut u).ok()).collect();
        match host.call(&mut VmMemory::from_bytes(&mut memory), import, &args) {
            Ok(v) => assert!(matches!(v.as_slice(), [Value::I32(_)]), "{v:?}"),
            Err(HostStop::Trap(kind)) => assert_eq!(kind, TrapKind::HostError),
            Err(HostStop::Exit(_) | HostStop::Wait(_)) => {}
            // Only a supervisor wakes a parked VM; WASI never asks for it.
            Err(HostStop::Park) => panic!("a WASI call parked its VM"),
        }
    }
}

#[test]
fn arbitrary_wasi_calls_never_panic_the_host_or_leave_the_sandbox() {
    let iters: u64 = std::env::var("WARPVISOR_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let sandbox = Sandbox::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iters {
        let mut data = vec![0u8; 256 + (x % 2048) as usize];
        for b in data.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 24) as u8;
        }
        fuzz_one(&data, &sandbox);
        sandbox.assert_contained("fuzzed calls");
    }
}
