//! Integer and float formatting. Each argument is parsed as i64, else as f64; with no arguments
//! a fixed list is used. Only IEEE-exact operations (+ - * / sqrt, rounding) are used.
fn show_int(n: i64) {
    println!("int {n}: [{n:>8}] [{n:<8}] [{n:+}] [{n:08}] {n:#x} {n:#o} {n:#b}");
    let sq = n.wrapping_mul(n);
    let cube = n.checked_pow(3).map_or("overflow".to_string(), |c| c.to_string());
    println!("  sq={sq} cube={cube} /7={} %7={} rem_euclid7={}", n / 7, n % 7, n.rem_euclid(7));
    println!("  as_f64={:?} sqrt|n|={:.6} as_u8={} i128sq={}", n as f64, (n as f64).abs().sqrt(), n as u8, (n as i128) * (n as i128));
}

fn show_float(x: f64) {
    println!("float {x}: {x:?} {x:.6} {x:e} {x:.3e} [{x:>12.4}] [{x:<+10.2}] bits={:016x}", x.to_bits());
    println!("  sq={:?} /3={:.9} sqrt|x|={:.12} recip={:e}", x * x, x / 3.0, x.abs().sqrt(), 1.0 / x);
    println!("  round={} trunc={} floor={} ceil={} as_i32={} as_u64={} as_f32={:?}",
        x.round(), x.trunc(), x.floor(), x.ceil(), x as i32, x as u64, x as f32);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        args = ["42", "-7", "0", "9223372036854775807", "3.5", "-2.5", "0.1", "1e-3", "12345.678", "6.02214076e23"]
            .iter().map(|s| s.to_string()).collect();
    }
    for a in &args {
        if let Ok(n) = a.parse::<i64>() {
            show_int(n);
        } else if let Ok(x) = a.parse::<f64>() {
            show_float(x);
        } else {
            println!("not a number: {a:?}");
        }
    }
    let h: f64 = (1..=1000).map(|k| 1.0 / k as f64).sum();
    let mut fact: u128 = 1;
    for k in 1..=30u128 { fact *= k; }
    println!("0.1+0.2={:?} 1/3={:.17} third_f32={:?}", 0.1f64 + 0.2, 1.0f64 / 3.0, 1.0f32 / 3.0);
    println!("harmonic(1000)={h:.12} 30!={fact} 2^60={:e}", 2f64.powi(60));
    println!("max={:e} min_pos={:e} denorm={:e} neg_zero={:?} inf={} -inf={} nan={}",
        f64::MAX, f64::MIN_POSITIVE, 5e-324f64, -0.0f64, f64::INFINITY, f64::NEG_INFINITY, f64::NAN);
    println!("u64max={} i64min={} i32min_hex={:#x} f32max={:e}", u64::MAX, i64::MIN, i32::MIN, f32::MAX);
}
