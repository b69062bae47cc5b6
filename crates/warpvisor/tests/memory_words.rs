//! Guest words at every alignment and overlapping `memory.copy` in both directions, on every
//! kernel dialect's memory path (host C's unaligned words, OpenCL's vloadn/vstoren, cells of
//! an interleaved memory), against the same arithmetic done here.

mod common;

use warpvisor::vmm::{Fleet, FleetConfig, Outcome, Value};

const WAT: &str = r#"(module
  (memory 1)
  ;; Bytes 0..256 get the pattern i*7+1, then memory.copy(d, s, n); the result folds the 256
  ;; bytes into one hash.
  (func $fill (local $i i32)
    (loop $l
      (i32.store8 (local.get $i) (i32.add (i32.mul (local.get $i) (i32.const 7)) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 256)))))
  (func $hash (result i64) (local $i i32) (local $h i64)
    (loop $l
      (local.set $h (i64.add (i64.mul (local.get $h) (i64.const 31))
                             (i64.load8_u (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 256))))
    (local.get $h))
  (func (export "copy") (param $d i32) (param $s i32) (param $n i32) (result i64)
    (call $fill)
    (memory.copy (local.get $d) (local.get $s) (local.get $n))
    (call $hash))
  ;; Words of every width stored at `a`, read back at every width and sign.
  (func (export "words") (param $a i32) (param $v i64) (result i64) (local $h i64)
    (call $fill)
    (i64.store (local.get $a) (local.get $v))
    (local.set $h (i64.load (local.get $a)))
    (local.set $h (i64.xor (i64.rotl (local.get $h) (i64.const 7)) (i64.load32_s offset=1 (local.get $a))))
    (local.set $h (i64.xor (i64.rotl (local.get $h) (i64.const 7)) (i64.load16_u offset=3 (local.get $a))))
    (i32.store offset=9 (local.get $a) (i32.wrap_i64 (i64.shr_u (local.get $v) (i64.const 13))))
    (local.set $h (i64.xor (i64.rotl (local.get $h) (i64.const 7)) (i64.load offset=6 (local.get $a))))
    (i32.store16 offset=17 (local.get $a) (i32.wrap_i64 (local.get $v)))
    (local.set $h (i64.xor (i64.rotl (local.get $h) (i64.const 7))
                           (i64.extend_i32_s (i32.load16_s offset=16 (local.get $a)))))
    (local.set $h (i64.xor (i64.rotl (local.get $h) (i64.const 7))
                           (i64.extend_i32_u (i32.load offset=15 (local.get $a)))))
    (i64.add (local.get $h) (call $hash))))"#;

fn pattern() -> Vec<u8> {
    (0..256u32).map(|i| (i * 7 + 1) as u8).collect()
}

fn hash(m: &[u8]) -> i64 {
    m[..256]
        .iter()
        .fold(0i64, |h, &b| h.wrapping_mul(31).wrapping_add(b as i64))
}

fn expected_copy(d: usize, s: usize, n: usize) -> i64 {
    let mut m = pattern();
    m.resize(65536, 0);
    m.copy_within(s..s + n, d);
    hash(&m)
}

fn expected_words(a: usize, v: u64) -> i64 {
    let mut m = pattern();
    m.resize(65536, 0);
    let get = |m: &[u8], at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&m[at..at + n]);
        u64::from_le_bytes(b)
    };
    m[a..a + 8].copy_from_slice(&v.to_le_bytes());
    let mut h = get(&m, a, 8);
    h = h.rotate_left(7) ^ (get(&m, a + 1, 4) as u32 as i32 as i64 as u64);
    h = h.rotate_left(7) ^ get(&m, a + 3, 2);
    m[a + 9..a + 13].copy_from_slice(&((v >> 13) as u32).to_le_bytes());
    h = h.rotate_left(7) ^ get(&m, a + 6, 8);
    m[a + 17..a + 19].copy_from_slice(&(v as u16).to_le_bytes());
    h = h.rotate_left(7) ^ (get(&m, a + 16, 2) as u16 as i16 as i64 as u64);
    h = h.rotate_left(7) ^ get(&m, a + 15, 4);
    (h as i64).wrapping_add(hash(&m))
}

const VMS: usize = 64;

/// Runs `jobs` of `func` in batches of the fleet's size.
fn invoke_all(f: &mut Fleet, func: &str, jobs: &[Vec<Value>]) -> Vec<Outcome> {
    jobs.chunks(VMS)
        .flat_map(|batch| f.invoke(func, batch).unwrap())
        .collect()
}

fn check(backend: &str, interleave: u32) {
    // Copies: every distance from -20 to 20 bytes between source and destination, at several
    // alignments, of lengths across the 8-byte chunks (0 to 40), both directions.
    let mut copies = Vec::new();
    for n in [0usize, 1, 3, 7, 8, 9, 15, 16, 17, 31, 40] {
        for s in [64usize, 65, 67, 71] {
            for delta in -20i64..=20 {
                copies.push((((s as i64) + delta) as usize, s, n));
            }
        }
    }
    let config = FleetConfig {
        num_vms: VMS as u32,
        max_memory_pages: 1,
        ..FleetConfig::default()
    };
    let mut f = common::fleet(backend, WAT, interleave, config);
    let jobs: Vec<Vec<Value>> = copies
        .iter()
        .map(|&(d, s, n)| {
            vec![
                Value::I32(d as i32),
                Value::I32(s as i32),
                Value::I32(n as i32),
            ]
        })
        .collect();
    let outcomes = invoke_all(&mut f, "copy", &jobs);
    assert_eq!(outcomes.len(), copies.len());
    for (&(d, s, n), o) in copies.iter().zip(&outcomes) {
        let want = Outcome::Returned(vec![Value::I64(expected_copy(d, s, n))]);
        assert_eq!(
            *o, want,
            "{backend} interleave {interleave}: memory.copy({d}, {s}, {n})"
        );
    }
    // Words: every address 0..40 and a few near the end of the page.
    let addrs: Vec<usize> = (0..40).chain(65536 - 19 - 8..65536 - 19).collect();
    let jobs: Vec<Vec<Value>> = addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let v = 0x0123_4567_89ab_cdefu64.rotate_left(i as u32 * 5) ^ 0x8080_8080_8080_8080;
            vec![Value::I32(a as i32), Value::I64(v as i64)]
        })
        .collect();
    let outcomes = invoke_all(&mut f, "words", &jobs);
    assert_eq!(outcomes.len(), addrs.len());
    for ((&a, job), o) in addrs.iter().zip(&jobs).zip(&outcomes) {
        let Value::I64(v) = job[1] else {
            unreachable!()
        };
        let want = Outcome::Returned(vec![Value::I64(expected_words(a, v as u64))]);
        assert_eq!(*o, want, "{backend} interleave {interleave}: words at {a}");
    }
}

#[test]
fn words_and_copies_at_every_alignment_on_cpu() {
    check("cpu", 0);
    check("cpu", 4);
}

#[test]
fn words_and_copies_at_every_alignment_on_opencl() {
    check("opencl", 0);
    check("opencl", 4);
    check("opencl", 8);
}
