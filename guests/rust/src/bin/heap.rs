//! Grows a Vec<u64> and a HashMap to several MiB (memory.grow), sorts and prints a digest.
//! Argument: element count (default 524288, i.e. 4 MiB of u64 plus sort scratch and the map).
use std::collections::HashMap;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 19).max(1);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v: Vec<u64> = Vec::new(); // grows by doubling: many reallocations
    for _ in 0..n {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        v.push(state >> 11);
    }
    let mut counts: HashMap<u64, u32> = HashMap::new();
    for &x in &v {
        *counts.entry(x % 4099).or_insert(0) += 1;
    }
    let strings: Vec<String> = v.iter().take(n / 8).map(|x| format!("{x:x}")).collect();
    v.sort(); // stable sort: allocates a scratch buffer
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in &v {
        digest = (digest ^ x).wrapping_mul(0x100_0000_01b3);
    }
    let sorted_ok = v.windows(2).all(|w| w[0] <= w[1]);
    println!("n={n} bytes={} sorted={sorted_ok}", n * 8);
    println!("min={} median={} max={}", v[0], v[n / 2], v[n - 1]);
    println!("digest={digest:016x}");
    let mut top: Vec<(u64, u32)> = counts.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    println!("buckets={} top5={:?}", top.len(), &top[..top.len().min(5)]);
    let total_len: usize = strings.iter().map(|s| s.len()).sum();
    println!("strings={} total_len={total_len} first={:?}", strings.len(), strings.first());
}
