//! Deep, non-tail recursion. Arguments: [depth=3000] [fib_n=20] [ack_n=6].
//! `black_box` keeps LLVM from turning the recursion into loops.
use std::hint::black_box;

fn chain(n: u64) -> u64 {
    if n == 0 {
        return 1;
    }
    let r = chain(black_box(n - 1));
    r.wrapping_mul(31).wrapping_add(n) ^ (r >> 7)
}

fn fib(n: u32) -> u64 {
    if n < 2 { n as u64 } else { fib(black_box(n - 1)) + fib(black_box(n - 2)) }
}

fn ackermann(m: u64, n: u64, calls: &mut u64, max_depth: &mut u64, depth: u64) -> u64 {
    *calls += 1;
    *max_depth = (*max_depth).max(depth);
    if m == 0 {
        n + 1
    } else if n == 0 {
        ackermann(m - 1, 1, calls, max_depth, depth + 1)
    } else {
        let inner = ackermann(m, n - 1, calls, max_depth, depth + 1);
        ackermann(m - 1, inner, calls, max_depth, depth + 1)
    }
}

fn is_even(n: u32) -> bool { if n == 0 { true } else { is_odd(black_box(n - 1)) } }
fn is_odd(n: u32) -> bool { if n == 0 { false } else { is_even(black_box(n - 1)) } }

fn main() {
    let arg = |i: usize, d: u64| std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (depth, fib_n, ack_n) = (arg(1, 3000), arg(2, 20), arg(3, 6));
    println!("chain({depth}) = {:016x}", chain(depth));
    println!("fib({fib_n}) = {}", fib(fib_n as u32));
    let (mut calls, mut max_depth) = (0, 0);
    let a = ackermann(2, ack_n, &mut calls, &mut max_depth, 0);
    println!("ackermann(2, {ack_n}) = {a} calls={calls} max_depth={max_depth}");
    let (mut calls, mut max_depth) = (0, 0);
    let a = ackermann(3, ack_n, &mut calls, &mut max_depth, 0);
    println!("ackermann(3, {ack_n}) = {a} calls={calls} max_depth={max_depth}");
    println!("is_even({depth}) = {} is_odd({}) = {}", is_even(depth as u32), depth + 1, is_odd(depth as u32 + 1));
}
